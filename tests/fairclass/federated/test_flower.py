"""FDP-Fair on Flower, in process: the Flower apps against the file CLI and the core.

The ClientApp is called with real Flower ``Message``/``Context`` objects through an
in-process grid (``_flower.LocalGrid``); the Flower runtimes themselves are exercised in
``test_flower_runtime.py`` (simulation) and ``test_flower_deploy.py`` (SuperLink/SuperNodes).
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("flwr")

from typer.testing import CliRunner

from dpfair._errors import InvalidParameterError
from dpfair.fairclass.datasets import simulate
from dpfair.fairclass.federated import (
    FederatedModel,
    ProtocolError,
    SiteSpec,
    decode,
    encode,
    make_protocol,
    read_message,
    write_message,
)
from dpfair.fairclass.federated.cli import _standalone
from dpfair.fairclass.federated.flower import SiteNode
from dpfair.fairclass.federated.flower.client_app import make_client_app
from dpfair.fairclass.federated.flower.server_app import (
    GridExchange,
    discover_sites,
    run,
)

from ._flower import LocalGrid, core_reference, node_config, task_identity, write_site

S, N, EPS, DELTA = 3, 1000, 2.0, 1e-6


@pytest.fixture
def sites(tmp_path: Path) -> list[tuple[str, Path, object]]:
    out = []
    for s in range(S):
        d = simulate(N, rng=500 + s)
        out.append((f"site-{s + 1}", write_site(tmp_path / f"s{s + 1}.csv", d), d))
    return out


@pytest.fixture
def setup_file(tmp_path: Path) -> Path:
    cfg = make_protocol(
        [SiteSpec(f"site-{s + 1}", N, EPS, DELTA) for s in range(S)],
        feature_bounds=[(0.0, 1.0), (0.0, 1.0)],
        alpha=0.2,
    )
    return write_message(tmp_path / "setup.json", cfg.to_envelope())


def _grid(sites, **kw) -> LocalGrid:
    configs = {
        100 + i: node_config(sid, path, EPS, DELTA, seed=11 * (i + 1))
        for i, (sid, path, _d) in enumerate(sites)
    }
    return LocalGrid(make_client_app(), configs, **kw)


def test_flower_run_is_the_core_protocol_byte_for_byte(sites, setup_file, tmp_path):
    """Seeded sites and centre: the released model of the Flower apps is the one the
    in-process Site/Centre produce with the same seeds (same bytes, same predictions)."""
    out = tmp_path / "released.json"
    with task_identity():
        grid = _grid(sites)
        run(
            grid,
            {"setup": str(setup_file), "out": str(out), "seed": 5, "connect-timeout": 5.0}
            | {"round-timeout": 5.0},
        )
    final = core_reference(
        setup_file, [d for _s, _p, d in sites], [11 * (i + 1) for i in range(S)], 5
    )
    assert out.read_bytes() == encode(final)
    test = simulate(2000, rng=9)
    flower_model = FederatedModel.from_envelope(read_message(out, kind="released_model"))
    np.testing.assert_array_equal(
        flower_model.predict(test.X, test.A),
        FederatedModel.from_envelope(final).predict(test.X, test.A),
    )
    # Discovery (one query per node), then one round-1 and one round-2 message per site.
    kinds = [m.metadata.message_type for m in grid.sent]
    assert kinds == ["query.fdp_hello"] * S + ["train.fdp_round1"] * S + ["train.fdp_round2"] * S


def test_messages_cross_between_transports(sites, tmp_path):
    """The file CLI's centre takes a Flower site's round-1 message, the Flower site takes
    the CLI centre's model, and the Flower centre finalizes from CLI sites' round 2 — and
    the result is the CLI centre's own finalize, byte for byte."""
    cli = CliRunner()
    app = _standalone()

    def fdp(*args: str) -> dict:
        res = cli.invoke(app, ["fdp", *args], catch_exceptions=False)
        assert res.exit_code == 0, res.output
        return json.loads(res.output)

    site_args = [a for sid, _p, _d in sites for a in ("--site", f"{sid}:{N}:{EPS}:{DELTA}")]
    bounds = ["--bounds", "0", "--bounds", "1", "--bounds", "0", "--bounds", "1"]
    setup = tmp_path / "setup.json"
    fdp("centre", "setup", *site_args, *bounds, "--alpha", "0.2", "--out", str(setup))
    common = ["--features", "x1,x2", "--target", "y", "--sensitive", "a"]
    # site-1 speaks Flower; site-2 and site-3 exchange files.
    sid1, path1, _ = sites[0]
    node = node_config(sid1, path1, EPS, DELTA)
    from flwr.app import ConfigRecord, Context, Message, RecordDict

    ctx = Context(run_id=1, node_id=7, node_config=node, state=RecordDict(), run_config={})
    flower_site = make_client_app()
    with task_identity():
        req = Message(
            RecordDict({"fdp": ConfigRecord({"setup": setup.read_bytes()})}),
            dst_node_id=7,
            message_type="train.fdp_round1",
        )
        reply = flower_site(req, ctx)
        assert not reply.has_error(), reply.error.reason
        (tmp_path / f"{sid1}.r1.json").write_bytes(reply.content["fdp"]["message"])
        for i, (sid, path, _d) in enumerate(sites[1:], start=2):
            fdp(
                "site",
                "round1",
                str(path),
                "--setup",
                str(setup),
                "--site-id",
                sid,
                *common,
                "--state",
                str(tmp_path / f"{sid}.state"),
                "--out",
                str(tmp_path / f"{sid}.r1.json"),
                "--seed",
                str(i),
            )
        r1 = [str(tmp_path / f"{sid}.r1.json") for sid, _p, _d in sites]
        model = tmp_path / "model.json"
        fdp("centre", "aggregate", *r1, "--setup", str(setup), "--out", str(model))
        req = Message(
            RecordDict(
                {"fdp": ConfigRecord({"setup": setup.read_bytes(), "model": model.read_bytes()})}
            ),
            dst_node_id=7,
            message_type="train.fdp_round2",
        )
        reply = flower_site(req, ctx)
        assert not reply.has_error(), reply.error.reason
    (tmp_path / f"{sid1}.r2.json").write_bytes(reply.content["fdp"]["message"])
    for sid, path, _d in sites[1:]:
        fdp(
            "site",
            "round2",
            str(path),
            "--setup",
            str(setup),
            "--site-id",
            sid,
            *common,
            "--state",
            str(tmp_path / f"{sid}.state"),
            "--model",
            str(model),
            "--out",
            str(tmp_path / f"{sid}.r2.json"),
        )
    r2 = [str(tmp_path / f"{sid}.r2.json") for sid, _p, _d in sites]
    cli_out = tmp_path / "released.cli.json"
    fdp(
        "centre",
        "finalize",
        *r2,
        "--setup",
        str(setup),
        "--model",
        str(model),
        "--out",
        str(cli_out),
        "--seed",
        "3",
    )
    # The Flower centre's finalize on the same bytes.
    from dpfair.fairclass.federated.flower import centre_finalize, load_setup

    cfg = load_setup(setup.read_bytes())
    flower_out = centre_finalize(
        cfg,
        {sid: Path(p).read_bytes() for (sid, _x, _d), p in zip(sites, r2, strict=True)},
        model.read_bytes(),
        seed=3,
    )
    assert flower_out == cli_out.read_bytes()
    assert decode(flower_out).fields["site_privacy"][sid1]["spent"]


def test_site_cap_refuses_before_reading_data(sites, setup_file, tmp_path):
    """A setup asking more than a site's cap is refused with the reason; no data read."""
    configs = {
        100 + i: node_config(sid, path, EPS, DELTA) for i, (sid, path, _d) in enumerate(sites)
    }
    configs[102] = node_config("site-3", tmp_path / "does-not-exist.csv", EPS / 2, DELTA)
    with task_identity(), pytest.raises(ProtocolError) as err:
        run(
            LocalGrid(make_client_app(), configs),
            {
                "setup": str(setup_file),
                "out": str(tmp_path / "o.json"),
                "connect-timeout": 5.0,
                "round-timeout": 5.0,
            },
        )
    msg = str(err.value)
    assert "site-3" in msg and "BudgetExceededError" in msg and "max-epsilon=1" in msg
    assert not (tmp_path / "o.json").exists()


def test_data_error_text_stays_at_the_site(tmp_path, setup_file, sites):
    """A data-dependent failure reaches the centre as its class only, never its text."""
    d = simulate(N, rng=1)
    A = np.zeros(N, dtype=int)
    A[:1] = 1  # one row of group 1: the site cannot split it
    bad = write_site(tmp_path / "bad.csv", dataclasses.replace(d, A=A))
    configs = {
        100 + i: node_config(sid, path, EPS, DELTA) for i, (sid, path, _d) in enumerate(sites)
    }
    configs[101] = node_config("site-2", bad, EPS, DELTA)
    with task_identity(), pytest.raises(ProtocolError) as err:
        run(
            LocalGrid(make_client_app(), configs),
            {
                "setup": str(setup_file),
                "out": str(tmp_path / "o.json"),
                "connect-timeout": 5.0,
                "round-timeout": 5.0,
            },
        )
    msg = str(err.value)
    assert "site-2" in msg and "InsufficientDataError" in msg
    assert "row" not in msg.split("InsufficientDataError")[1].split("(the site")[0]


def test_silent_site_is_a_clear_error_within_the_timeout(sites, setup_file, tmp_path):
    """A site that never replies (killed) ends the run with its name after round-timeout."""
    grid = _grid(sites)
    nodes = {sid: 100 + i for i, (sid, _p, _d) in enumerate(sites)}
    grid.silent = {102}
    t0 = time.monotonic()
    with task_identity(), pytest.raises(ProtocolError) as err:
        GridExchange(grid, nodes, timeout=0.3)(
            "round1", {s: {"setup": setup_file.read_bytes()} for s in nodes}
        )
    assert time.monotonic() - t0 < 5.0
    assert "['site-3'] sent no reply within round-timeout=0.3 s" in str(err.value)


def test_discovery_names_the_missing_site_and_checks_registered_names(sites):
    grid = _grid(sites[:2])
    with task_identity(), pytest.raises(ProtocolError, match=r"\['site-3'\] of the setup"):
        discover_sites(grid, ("site-1", "site-2", "site-3"), timeout=0.3)
    # Registered names (SuperNode authentication) are used as they are: no query sent.
    grid = _grid(sites, names={100: "site-1", 101: "site-2", 102: "site-3"})
    with task_identity():
        assert discover_sites(grid, ("site-1", "site-2", "site-3"), 1.0) == {
            "site-1": 100,
            "site-2": 101,
            "site-3": 102,
        }
    assert grid.sent == []
    # A node whose config claims another site than its registered name is refused.
    grid = _grid(sites, names={100: "site-2"})
    with task_identity(), pytest.raises(ProtocolError, match="registered as 'site-2'"):
        discover_sites(grid, ("site-1", "site-2", "site-3"), 1.0)


def test_rounds_run_once_per_run(sites, setup_file):
    from flwr.app import ConfigRecord, Context, Message, RecordDict

    sid, path, _d = sites[0]
    ctx = Context(
        run_id=1,
        node_id=7,
        node_config=node_config(sid, path, EPS, DELTA),
        state=RecordDict(),
        run_config={},
    )
    app = make_client_app()
    with task_identity():
        req = Message(
            RecordDict({"fdp": ConfigRecord({"setup": setup_file.read_bytes()})}),
            dst_node_id=7,
            message_type="train.fdp_round1",
        )
        assert not app(req, ctx).has_error()
        again = app(req, ctx)
    assert again.has_error() and "ProtocolError in field 'round'" in again.error.reason


def test_node_config_errors_name_the_key():
    with pytest.raises(InvalidParameterError, match="missing \\['max-epsilon', 'max-delta'\\]"):
        SiteNode.from_config(
            {"site-id": "h", "data": "d.csv", "features": "x", "target": "y", "sensitive": "a"}
        )
    good = {
        "site-id": "h",
        "data": "d.csv",
        "features": "x",
        "target": "y",
        "sensitive": "a",
        "max-epsilon": 1.0,
        "max-delta": 1e-6,
    }
    with pytest.raises(InvalidParameterError, match="max-epsilon='lots'"):
        SiteNode.from_config(good | {"max-epsilon": "lots"})
    with pytest.raises(InvalidParameterError, match="aggregate='x'"):
        SiteNode.from_config(good | {"aggregate": "x"})
    assert SiteNode.from_config(good).max_delta == 1e-6
