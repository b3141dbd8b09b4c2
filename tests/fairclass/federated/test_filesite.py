"""FileSite: an FDP-Fair site reading a file out of core sends the in-memory site's messages.

What is compared. A :class:`FileSite` and an in-memory :class:`Site` built from the same
seed draw the same round-1 and round-2 noise and split their rows by the same position hash
(the same halves). Then, with the same broadcast model:

* round 1: kind, protocol id, sender, every field (``n_train``, σ_c, σ_f) and the noisy
  counts are *equal*; the noisy kernel sums agree to 1e-12 (the aggregated binning weights
  are summed in another order by DuckDB);
* round 2: every field (``n_cal``, depth, σ_t, the site's privacy ledger) and the noisy
  trees are *equal* (leaf counts are integers summed over batches; same noise).
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from dpfair.fairclass.datasets import simulate
from dpfair.fairclass.federated import Centre, Site, make_protocol
from dpfair.fairclass.federated._filesite import FileSite
from dpfair.fairclass.federated._messages import Envelope, read_message
from dpfair.fairclass.federated._protocol import ProtocolConfig
from dpfair.fairclass.federated.cli import _standalone

N = 1200


def _cfg(cross_fit: bool, constraints: str = "demographic_parity") -> ProtocolConfig:
    specs = [("site-1", N, 2.0, 1e-6), ("site-2", N, 2.0, 1e-6)]
    return make_protocol(
        specs, feature_bounds=[(0, 1), (0, 1)], alpha=0.1, cross_fit=cross_fit,
        constraints=constraints,
    )


def _write_parquet(path: Path, d: Any) -> None:
    table = pa.table(
        {
            "x1": d.X[:, 0],
            "x2": d.X[:, 1],
            "a": np.asarray(d.A, dtype=np.int64),
            "y": np.asarray(d.y, dtype=np.int64),
        }
    )
    pq.write_table(table, path, row_group_size=500)


def _assert_same(file_msg: Envelope, mem_msg: Envelope, approx: tuple[str, ...] = ()) -> None:
    assert file_msg.kind == mem_msg.kind
    assert file_msg.protocol_id == mem_msg.protocol_id
    assert file_msg.sender == mem_msg.sender
    assert file_msg.fields == mem_msg.fields
    assert set(file_msg.arrays) == set(mem_msg.arrays)
    for name in file_msg.arrays:
        got, want = file_msg.array(name), mem_msg.array(name)
        if name in approx:
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-12 * max(1.0, np.abs(want).max()))
        else:
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("constraints", ["demographic_parity", "equal_opportunity"])
@pytest.mark.parametrize("cross_fit", [False, True])
def test_file_site_messages_equal_in_memory(tmp_path: Path, cross_fit: bool,
                                            constraints: str) -> None:
    cfg = _cfg(cross_fit, constraints)
    d = simulate(N, rng=3)
    path = tmp_path / "site.parquet"
    _write_parquet(path, d)
    with FileSite(
        "site-1", path, features=["x1", "x2"], target="y", sensitive="a",
        config=cfg, random_state=11, batch_rows=97,
    ) as fs:
        mem = Site("site-1", d.X, d.y, d.A, config=cfg, random_state=11)
        halves = fs.halves_in_memory()
        assert (halves[0].size, halves[1].size) == fs.half_sizes
        assert sorted(np.concatenate(halves).tolist()) == list(range(N))
        # one split for both readers: the same seed gives the in-memory site the same halves
        assert mem.split == fs.split and mem.split_entropy == fs.split_entropy
        for got, want in zip(mem._halves, halves, strict=True):
            np.testing.assert_array_equal(got, want)

        r1f, r1m = fs.round1(), mem.round1()
        _assert_same(r1f, r1m, approx=("sums",))
        folds = (0, 1) if cross_fit else (0,)
        assert r1f.fields["n_train"] == [fs.half_sizes[tr] for tr in folds]

        o = simulate(N, rng=4)
        other = Site("site-2", o.X, o.y, o.A, config=cfg, random_state=5)
        model = Centre(cfg, random_state=0).aggregate([r1f, other.round1()])
        r2f, r2m = fs.round2(model), mem.round2(model)
        _assert_same(r2f, r2m)
        # The centre accepts the file site's (position-hash) half sizes.
        Centre(cfg, random_state=0).finalize([r2f, other.round2(model)], model)
        assert fs.ledger.to_dict() == mem.ledger.to_dict()


def test_csv_file_site_equals_parquet_file_site(tmp_path: Path) -> None:
    cfg = _cfg(False)
    d = simulate(N, rng=3)
    _write_parquet(tmp_path / "s.parquet", d)
    np.savetxt(tmp_path / "s.csv", np.column_stack([d.X, d.A, d.y]), delimiter=",",
               header="x1,x2,a,y", comments="", fmt="%.17g")
    kw: dict[str, Any] = dict(
        features=["x1", "x2"], target="y", sensitive="a", config=cfg, random_state=2
    )
    with FileSite("site-1", tmp_path / "s.parquet", **kw) as a, \
            FileSite("site-1", tmp_path / "s.csv", **kw) as b:
        assert b.converted_csv and not a.converted_csv
        _assert_same(b.round1(), a.round1(), approx=("sums",))


def test_file_site_checks_public_size(tmp_path: Path) -> None:
    cfg = _cfg(False)
    d = simulate(N - 1, rng=3)
    _write_parquet(tmp_path / "s.parquet", d)
    with pytest.raises(Exception, match="N_s = 1200"):
        FileSite("site-1", tmp_path / "s.parquet", features=["x1", "x2"], target="y",
                 sensitive="a", config=cfg, random_state=0)


def test_cli_aggregate_flag(tmp_path: Path) -> None:
    from dpfair.fairclass.federated._keys import generate_keypair, load_signer
    from dpfair.fairclass.federated._messages import write_message

    pubs = {}
    for party in ("centre", "site-1", "site-2"):
        _, _, pubs[party] = generate_keypair(tmp_path / party)
    specs = [("site-1", N, 2.0, 1e-6), ("site-2", N, 2.0, 1e-6)]
    cfg = make_protocol(specs, feature_bounds=[(0, 1), (0, 1)], alpha=0.1, keys=pubs)
    write_message(
        tmp_path / "setup.json", cfg.to_envelope(), load_signer(tmp_path / "centre.key", "centre")
    )
    _write_parquet(tmp_path / "s1.parquet", simulate(N, rng=3))
    _write_parquet(tmp_path / "s2.parquet", simulate(N, rng=4))
    app, runner = _standalone(), CliRunner()

    def run(*args: str) -> tuple[int, str]:
        res = runner.invoke(app, ["fdp", *args])
        return res.exit_code, res.output

    common = ["--setup", str(tmp_path / "setup.json"), "--features", "x1,x2",
              "--target", "y", "--sensitive", "a", "--centre-key",
              str(tmp_path / "centre.pub"), "--max-epsilon", "2", "--max-delta", "1e-6"]
    for i, agg in ((1, "always"), (2, "auto")):  # auto: small file → in memory
        code, out = run("site", "round1", str(tmp_path / f"s{i}.parquet"), *common,
                        "--site-id", f"site-{i}", "--key", str(tmp_path / f"site-{i}.key"),
                        "--state", str(tmp_path / f"{i}.state"),
                        "--out", str(tmp_path / f"{i}.r1"), "--aggregate", agg)
        assert code == 0, out
        assert json.loads(out)["aggregated"] is (agg == "always")
    assert json.loads((tmp_path / "1.state").read_text())["split"] == "position"
    code, out = run("centre", "aggregate", str(tmp_path / "1.r1"), str(tmp_path / "2.r1"),
                    "--setup", str(tmp_path / "setup.json"), "--key",
                    str(tmp_path / "centre.key"), "--out", str(tmp_path / "m"))
    assert code == 0, out
    r2 = ["site", "round2", str(tmp_path / "s1.parquet"), *common, "--site-id", "site-1",
          "--key", str(tmp_path / "site-1.key"),
          "--state", str(tmp_path / "1.state"), "--model", str(tmp_path / "m"),
          "--out", str(tmp_path / "1.r2")]
    code, out = run(*r2, "--aggregate", "never")  # would change the split: refused
    assert code == 2 and "same" in out
    code, out = run(*r2, "--aggregate", "bogus")
    assert code == 2
    code, out = run(*r2)  # auto follows round 1
    assert code == 0, out
    assert json.loads(out)["aggregated"] is True
    msg = read_message(tmp_path / "1.r2", keys=cfg.keyring(), kind="round2")
    r1 = read_message(tmp_path / "1.r1", keys=cfg.keyring(), kind="round1")
    assert msg.fields["n_cal"] == [N - r1.fields["n_train"][0]]


def test_file_site_names_a_missing_or_non_numeric_column(tmp_path: Path) -> None:
    from dpfair._errors import InvalidDataError, InvalidParameterError

    cfg = _cfg(False)
    csv = tmp_path / "s.csv"
    csv.write_text("x1,x2,a,y\n" + "0.5,zz,0,1\n" * N)
    kw: dict[str, Any] = dict(target="y", sensitive="a", config=cfg, random_state=0)
    bad = (InvalidParameterError, InvalidDataError)  # a data error comes as ProtocolError
    with pytest.raises(bad, match=re.escape("'x3': not found in 's.csv'")):
        FileSite("site-1", csv, features=["x1", "x3"], **kw)
    with pytest.raises(bad, match=re.escape("'x2' of 's.csv' is VARCHAR")):
        FileSite("site-1", csv, features=["x1", "x2"], **kw)


@pytest.mark.parametrize("flip", ["label", "group"])
def test_attack_file_site_round2_label_flip_moves_one_positive_count(
    tmp_path: Path, flip: str
) -> None:
    """Attacker (equal opportunity): two site files differing in one calibration record's
    label (y flips 1 -> 0) or group. Round 2's input — the leaf counts of the positive-label
    rows — changes by exactly one unit in one leaf of one tree for a label flip, and by one
    unit in each tree for a group flip (squared node change <= M + 1 resp. 2(M + 1), the
    stated sensitivity); exact integers, read through the file path."""
    from dpfair.fairclass.federated._site import model_folds
    from dpfair.mechanisms.tree import node_counts

    cfg = _cfg(False, "equal_opportunity")
    d = simulate(N, rng=3)
    path = tmp_path / "site.parquet"
    _write_parquet(path, d)
    with FileSite("site-1", path, features=["x1", "x2"], target="y", sensitive="a",
                  config=cfg, random_state=11, batch_rows=97) as fs:
        r1 = fs.round1()
        o = simulate(N, rng=4)
        model = Centre(cfg, random_state=0).aggregate(
            [r1, Site("site-2", o.X, o.y, o.A, config=cfg, random_state=5).round1()])
        fold = model_folds(model, cfg)[0]
        cal = fs.halves_in_memory()[1]
        base = fs._calibration_leaves([(1, fold)], cfg.grid())[0]
    i = int(cal[np.flatnonzero(d.y[cal] == 1)[0]])
    y2, A2 = d.y.copy(), d.A.copy()
    if flip == "label":
        y2[i] = 0
    else:
        A2[i] = 1 - A2[i]
    d2 = dataclasses.replace(d, y=y2, A=A2)
    path2 = tmp_path / "neighbour.parquet"
    _write_parquet(path2, d2)
    with FileSite("site-1", path2, features=["x1", "x2"], target="y", sensitive="a",
                  config=cfg, random_state=11, batch_rows=97) as fs2:
        fs2.round1()
        got = fs2._calibration_leaves([(1, fold)], cfg.grid())[0]
    assert got[1] == base[1]  # n_cal: public, unchanged
    diff = [np.asarray(g, dtype=np.int64) - np.asarray(b, dtype=np.int64)
            for g, b in zip(got[0], base[0], strict=True)]
    l1 = sum(int(np.abs(x).sum()) for x in diff)
    assert l1 == (1 if flip == "label" else 2)
    sq = sum(float(np.sum((np.concatenate(node_counts(g)) - np.concatenate(node_counts(b)))
                          .astype(float) ** 2)) for g, b in zip(got[0], base[0], strict=True))
    M = cfg.depth
    assert sq == (M + 1 if flip == "label" else 2 * (M + 1))
