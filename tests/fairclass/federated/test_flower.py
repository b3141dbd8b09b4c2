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
from dpfair.fairclass.federated import FederatedModel, ProtocolError, SiteSpec
from dpfair.fairclass.federated._keys import load_signer
from dpfair.fairclass.federated._messages import decode, read_message
from dpfair.fairclass.federated.cli import _standalone
from dpfair.fairclass.federated.flower import SiteNode, centre_finalize, load_setup
from dpfair.fairclass.federated.flower.client_app import make_client_app
from dpfair.fairclass.federated.flower.server_app import GridExchange, run

from ._flower import (
    LocalGrid,
    core_reference,
    make_keys,
    node_config,
    same_message,
    signed_setup,
    task_identity,
    write_site,
)

S, N, EPS, DELTA = 3, 1000, 2.0, 1e-6
SITES = tuple(f"site-{s + 1}" for s in range(S))


@pytest.fixture
def keys(tmp_path: Path) -> dict:
    return make_keys(tmp_path, ("centre", *SITES))


@pytest.fixture
def sites(tmp_path: Path) -> list[tuple[str, Path, object]]:
    out = []
    for s, sid in enumerate(SITES):
        d = simulate(N, rng=500 + s)
        (tmp_path / sid).mkdir()
        out.append((sid, write_site(tmp_path / sid / "data.csv", d), d))
    return out


@pytest.fixture
def setup_file(tmp_path: Path, keys: dict) -> Path:
    return signed_setup(
        tmp_path / "setup.json",
        keys,
        sites=[SiteSpec(sid, N, EPS, DELTA) for sid in SITES],
        feature_bounds=[(0.0, 1.0), (0.0, 1.0)],
        alpha=0.2,
    )


def _conf(setup: Path, keys: dict, out: Path, **kw) -> dict:
    return {
        "setup": str(setup),
        "key": str(keys["centre"][0]),
        "out": str(out),
        "round-timeout": 5.0,
        **kw,
    }


def _grid(sites, keys, seeds=None, **kw) -> LocalGrid:
    configs = {}
    for i, (sid, path, _d) in enumerate(sites):
        extra = {} if seeds is None else {"seed": seeds[i]}
        configs[100 + i] = node_config(sid, path, keys, EPS, DELTA, **extra)
    return LocalGrid(make_client_app(), configs, **kw)


def test_flower_run_is_the_core_protocol(sites, keys, setup_file, tmp_path):
    """Seeded sites and centre: the Flower apps release the in-process Site/Centre's model
    (same content; each signature has its own nonce), so they predict the same."""
    out = tmp_path / "released.json"
    seeds = [11, 22, 33]
    with task_identity():
        grid = _grid(sites, keys, seeds)
        run(grid, _conf(setup_file, keys, out, seed=5))
    centre_pub = keys["centre"][2]
    flower = read_message(out, keys={"centre": centre_pub}, kind="released_model")
    final = core_reference(setup_file, keys, [d for _s, _p, d in sites], seeds, 5)
    same_message(flower, final)
    test = simulate(2000, rng=9)
    np.testing.assert_array_equal(
        FederatedModel.from_envelope(flower).predict(test.X, test.A),
        FederatedModel.from_envelope(final).predict(test.X, test.A),
    )
    # One round-1 and one round-2 message per site, nothing else.
    kinds = [m.metadata.message_type for m in grid.sent]
    assert kinds == ["train.fdp_round1"] * S + ["train.fdp_round2"] * S
    # Each site's own ledger recorded the run once (both rounds under single-use keys).
    for sid, path, _d in sites:
        assert (path.parent / f"{sid}.fdp-ledger").exists()


def test_messages_cross_between_transports(sites, keys, tmp_path):
    """The file CLI's centre takes a Flower site's round-1 message, the Flower site takes
    the CLI centre's model, and the Flower centre finalizes from the sites' round 2 exactly
    as the CLI centre does."""
    cli = CliRunner()
    app = _standalone()

    def fdp(*args: str) -> dict:
        res = cli.invoke(app, ["fdp", *args], catch_exceptions=False)
        assert res.exit_code == 0, res.output
        return json.loads(res.output[res.output.index("{") :])

    ck, cpub = str(keys["centre"][0]), str(keys["centre"][1])
    site_args = [a for sid in SITES for a in ("--site", f"{sid}:{N}:{EPS}:{DELTA}")]
    site_keys = [a for sid in SITES for a in ("--site-key", f"{sid}={keys[sid][1]}")]
    bounds = ["--bounds", "0", "--bounds", "1", "--bounds", "0", "--bounds", "1"]
    setup = tmp_path / "setup.json"
    fdp(
        "centre",
        "setup",
        *site_args,
        *site_keys,
        "--key",
        ck,
        *bounds,
        "--alpha",
        "0.2",
        "--out",
        str(setup),
    )
    common = [
        "--features",
        "x1,x2",
        "--target",
        "y",
        "--sensitive",
        "a",
        "--centre-key",
        cpub,
        "--max-epsilon",
        str(EPS),
        "--max-delta",
        str(DELTA),
    ]
    # site-1 speaks Flower; site-2 and site-3 exchange files.
    sid1, path1, _ = sites[0]
    from flwr.app import ConfigRecord, Context, Message, RecordDict

    ctx = Context(
        run_id=1,
        node_id=7,
        node_config=node_config(sid1, path1, keys, EPS, DELTA),
        state=RecordDict(),
        run_config={},
    )
    flower_site = make_client_app()

    def ask(kind: str, payload: dict) -> bytes:
        req = Message(
            RecordDict({"fdp": ConfigRecord(payload)}),
            dst_node_id=7,
            message_type=f"train.fdp_{kind}",
        )
        reply = flower_site(req, ctx)
        rec = reply.content["fdp"]
        assert rec["site-id"] == sid1 and "error" not in rec, rec.get("error")
        return rec["message"]

    def site_cli(rnd: int, sid: str, path: Path, *extra: str) -> None:
        fdp(
            "site",
            f"round{rnd}",
            str(path),
            "--setup",
            str(setup),
            "--site-id",
            sid,
            "--key",
            str(keys[sid][0]),
            *common,
            "--state",
            str(path.parent / "state.json"),
            "--out",
            str(tmp_path / f"{sid}.r{rnd}.json"),
            *extra,
        )

    with task_identity():
        (tmp_path / f"{sid1}.r1.json").write_bytes(ask("round1", {"setup": setup.read_bytes()}))
        for sid, path, _d in sites[1:]:
            site_cli(1, sid, path)
        model = tmp_path / "model.json"
        fdp(
            "centre",
            "aggregate",
            *[str(tmp_path / f"{s}.r1.json") for s in SITES],
            "--setup",
            str(setup),
            "--key",
            ck,
            "--out",
            str(model),
        )
        (tmp_path / f"{sid1}.r2.json").write_bytes(
            ask("round2", {"setup": setup.read_bytes(), "model": model.read_bytes()})
        )
    for sid, path, _d in sites[1:]:
        site_cli(2, sid, path, "--model", str(model))
    r2 = {s: tmp_path / f"{s}.r2.json" for s in SITES}
    cli_out = tmp_path / "released.cli.json"
    fdp(
        "centre",
        "finalize",
        *map(str, r2.values()),
        "--setup",
        str(setup),
        "--key",
        ck,
        "--model",
        str(model),
        "--out",
        str(cli_out),
        "--seed",
        "3",
    )
    signer = load_signer(keys["centre"][0], "centre")
    cfg = load_setup(setup.read_bytes(), signer.public)
    flower_out = centre_finalize(
        cfg, {s: p.read_bytes() for s, p in r2.items()}, model.read_bytes(), signer, seed=3
    )
    ring = {"centre": signer.public}
    same_message(decode(flower_out, keys=ring), read_message(cli_out, keys=ring))
    fdp(
        "predict",
        str(cli_out),
        str(path1),
        "--centre-key",
        cpub,
        "--features",
        "x1,x2",
        "--sensitive",
        "a",
    )


def test_site_cap_refuses_before_reading_data(sites, keys, setup_file, tmp_path):
    """A setup asking more than a site's cap is refused with the reason; no data read."""
    grid = _grid(sites, keys)
    grid.contexts[102].node_config.update(
        {"data": str(tmp_path / "does-not-exist.csv"), "max-epsilon": EPS / 2}
    )
    with task_identity(), pytest.raises(ProtocolError) as err:
        run(grid, _conf(setup_file, keys, tmp_path / "o.json"))
    msg = str(err.value)
    assert (
        "site 'site-3' refused round 1: BudgetExceededError: the setup asks this site for "
        "more than its own cap" in msg
    )
    assert not (tmp_path / "o.json").exists()


def test_data_error_text_stays_at_the_site(sites, keys, setup_file, tmp_path):
    """A data-dependent failure reaches the centre as its class only, never its text."""
    d = sites[1][2]
    A = np.zeros(N, dtype=np.int8)
    A[:1] = 1  # one row of group 1: the site cannot split it
    write_site(sites[1][1], dataclasses.replace(d, A=A))
    with task_identity(), pytest.raises(ProtocolError) as err:
        run(_grid(sites, keys), _conf(setup_file, keys, tmp_path / "o.json"))
    msg = str(err.value)
    assert "site 'site-2' refused round 1: InsufficientDataError (the site's operator" in msg
    assert "row" not in msg


def test_silent_site_is_a_clear_error_within_the_timeout(sites, keys, setup_file, tmp_path):
    """A site whose node never replies (killed) ends the round, named, after the timeout."""
    grid = _grid(sites, keys, silent={102})
    t0 = time.monotonic()
    with task_identity(), pytest.raises(ProtocolError) as err:
        GridExchange(grid, timeout=0.5)("round1", SITES, {"setup": setup_file.read_bytes()})
    assert time.monotonic() - t0 < 5.0
    assert "site(s) ['site-3'] sent no round1 reply within round-timeout=0.5 s" in str(err.value)


def test_nodes_outside_the_setup_are_ignored_and_names_are_checked(
    sites, keys, setup_file, tmp_path
):
    # An extra node of another site id answers round 1 with a refusal: ignored.
    stranger = make_keys(tmp_path, ["site-9"])
    grid = _grid(sites, keys | stranger)
    from flwr.app import Context, RecordDict

    grid.contexts[109] = Context(
        run_id=1,
        node_id=109,
        state=RecordDict(),
        run_config={},
        node_config=node_config("site-9", sites[0][1], keys | stranger, EPS, DELTA),
    )
    with task_identity():
        run(grid, _conf(setup_file, keys, tmp_path / "o.json"))
    assert (tmp_path / "o.json").exists()
    # Registered names (SuperNode authentication): only those nodes are asked, and a node
    # answering as another site than its registered name is refused.
    grid = _grid(sites, keys, names={100: "site-1", 101: "site-3", 102: "site-2"})
    with (
        task_identity(),
        pytest.raises(
            ProtocolError, match=r"is registered as 'site-[23]' but answers as 'site-[23]'"
        ),
    ):
        GridExchange(grid, 2.0)("round1", SITES, {"setup": setup_file.read_bytes()})


def test_rounds_run_once(sites, keys, setup_file):
    """Round 1 twice in a run, or again in another run (the site's ledger), is refused."""
    from flwr.app import ConfigRecord, Context, Message, RecordDict

    sid, path, _d = sites[0]
    app = make_client_app()

    def round1(ctx):
        req = Message(
            RecordDict({"fdp": ConfigRecord({"setup": setup_file.read_bytes()})}),
            dst_node_id=7,
            message_type="train.fdp_round1",
        )
        return app(req, ctx).content["fdp"]

    def ctx():
        return Context(
            run_id=1,
            node_id=7,
            node_config=node_config(sid, path, keys, EPS, DELTA),
            state=RecordDict(),
            run_config={},
        )

    with task_identity():
        first = ctx()
        assert "message" in round1(first)
        assert "ProtocolError in field 'round'" in round1(first)["error"]
        assert "ReleaseReplayError" in round1(ctx())["error"]  # a new run, same setup


def test_node_config_errors_name_the_key():
    base = {"site-id": "h", "data": "d.csv", "features": "x", "target": "y", "sensitive": "a"}
    with pytest.raises(InvalidParameterError, match=r"missing \['key', 'centre-key'\]"):
        SiteNode.from_config(base)
    base |= {"key": "h.key", "centre-key": "c.pub"}
    with pytest.raises(InvalidParameterError, match="give the site's own budget"):
        SiteNode.from_config(base)
    with pytest.raises(InvalidParameterError, match="max-epsilon='lots'"):
        SiteNode.from_config(base | {"max-epsilon": "lots", "max-delta": 1e-6})
    with pytest.raises(InvalidParameterError, match="aggregate='x'"):
        SiteNode.from_config(base | {"ledger": "l", "aggregate": "x"})
    node = SiteNode.from_config(base | {"max-epsilon": 1.0, "max-delta": 1e-6})
    assert node.state_dir == Path(".") and node.max_delta == 1e-6


@pytest.mark.parametrize("radius", [1.0, "auto"])
def test_flower_run_with_the_linear_estimator(sites, keys, tmp_path, radius):
    """estimator="linear" over Flower: the new round-1 blocks (cells, moments; with
    radius="auto" each site's released radius) and the coefficient model (with the common
    radius) cross the transport unchanged — the released model is the core's — and each
    site's ledger recorded the run once."""
    setup = signed_setup(
        tmp_path / "setup-linear.json", keys,
        sites=[SiteSpec(sid, N, EPS, DELTA) for sid in SITES],
        feature_bounds=[(0.0, 1.0), (0.0, 1.0)], alpha=0.2, estimator="linear", radius=radius,
    )
    out = tmp_path / "released-linear.json"
    seeds = [4, 5, 6]
    with task_identity():
        run(_grid(sites, keys, seeds), _conf(setup, keys, out, seed=2))
    flower = read_message(out, keys={"centre": keys["centre"][2]}, kind="released_model")
    assert flower.fields["estimator"] == "linear" and "theta" in flower.arrays
    assert ("radius" in flower.arrays) == (radius == "auto")
    same_message(flower, core_reference(setup, keys, [d for _s, _p, d in sites], seeds, 2))
    for sid, path, _d in sites:
        assert (path.parent / f"{sid}.fdp-ledger").exists()
