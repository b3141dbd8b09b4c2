"""FDP-Fair on a real Flower deployment on localhost (slow: ~10 Python processes each).

A SuperLink and three SuperNodes, each its own process group with its own data file; the
app is started with ``flwr run flower_app``. Flower starts the ServerApp (the centre) under
the SuperLink and one ClientApp process per message under each SuperNode.

1. Seeded sites and centre: the released model is byte-for-byte the in-process core's, so
   it predicts exactly like it (the same apps with fresh noise are compared with
   ``FDPFairClassifier`` in law in ``test_flower_runtime.py``).
2. A SuperNode killed while round 1 is under way: the centre ends the run with an error
   naming the site within its round timeout (plus process start-up), not a hang.
3. The README's secure deployment: TLS (private CA) and SuperNode authentication, each
   site's node key registered under its site id.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("flwr")

from dpfair.fairclass.datasets import simulate
from dpfair.fairclass.federated import FederatedModel, SiteSpec
from dpfair.fairclass.federated._messages import read_message

from ._deploy import Deployment, make_tls
from ._flower import core_reference, make_keys, node_config, same_message, signed_setup, write_site

pytestmark = pytest.mark.slow

S, N, EPS, DELTA, ALPHA = 3, 1000, 2.0, 1e-6, 0.2


SITES = tuple(f"site-{s + 1}" for s in range(S))


def _setup(path: Path, keys: dict) -> Path:
    return signed_setup(
        path,
        keys,
        sites=[SiteSpec(sid, N, EPS, DELTA) for sid in SITES],
        feature_bounds=[(0.0, 1.0), (0.0, 1.0)],
        alpha=ALPHA,
    )


def _site_file(tmp_path: Path, s: int, d) -> Path:
    (tmp_path / SITES[s]).mkdir()
    return write_site(tmp_path / SITES[s] / "data.csv", d)


@pytest.fixture
def deployment(tmp_path: Path):
    dep = Deployment(tmp_path)
    try:
        yield dep
    finally:
        dep.stop()


def _finish(proc: subprocess.Popen[str], timeout: float) -> str:
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        raise AssertionError(f"flwr run did not end within {timeout} s:\n{out[-4000:]}") from None
    return out


def test_superlink_and_three_supernodes_release_the_core_model(deployment, tmp_path):
    keys = make_keys(tmp_path, ("centre", *SITES))
    data = [simulate(N, rng=600 + s) for s in range(S)]
    seeds = [41, 42, 43]
    setup = _setup(tmp_path / "setup.json", keys)
    deployment.start_superlink()
    for s, d in enumerate(data):
        cfg = node_config(SITES[s], _site_file(tmp_path, s, d), keys, EPS, DELTA, seed=seeds[s])
        deployment.start_supernode(f"node{s + 1}", cfg)
    out = tmp_path / "released.json"
    conf = {"setup": str(setup), "key": str(keys["centre"][0]), "out": str(out), "seed": 9}
    run = deployment.flwr_run(conf | {"round-timeout": 300.0}, timeout=600)
    log = _finish(run, 600.0)
    assert out.exists(), log[-4000:] + deployment.log("superlink")[-4000:]
    assert "released model written" in log
    released = read_message(out, keys={"centre": keys["centre"][2]}, kind="released_model")
    final = core_reference(setup, keys, data, seeds, 9)
    same_message(released, final)
    test = simulate(2000, rng=5)
    np.testing.assert_array_equal(
        FederatedModel.from_envelope(released).predict(test.X, test.A),
        FederatedModel.from_envelope(final).predict(test.X, test.A),
    )
    # Each site read only its own file: its node log names only its own site.
    for s in range(S):
        log_s = deployment.log(f"node{s + 1}")
        assert f"site 'site-{s + 1}': round 2 released" in log_s
        assert all(f"site 'site-{o + 1}'" not in log_s for o in range(S) if o != s)
        assert (tmp_path / SITES[s] / f"{SITES[s]}.fdp-ledger").exists()  # its own ledger


def test_killed_site_is_a_clear_error_at_the_centre(deployment, tmp_path):
    keys = make_keys(tmp_path, ("centre", *SITES))
    setup = _setup(tmp_path / "setup.json", keys)
    deployment.start_superlink()
    for s in range(S):
        path = _site_file(tmp_path, s, simulate(N, rng=650 + s))
        deployment.start_supernode(f"node{s + 1}", node_config(SITES[s], path, keys, EPS, DELTA))
    out = tmp_path / "released.json"
    round_timeout = 60.0
    conf = {"setup": str(setup), "key": str(keys["centre"][0]), "out": str(out)}
    run = deployment.flwr_run(conf | {"round-timeout": round_timeout}, timeout=600)
    # Kill site-3's SuperNode (and its ClientApp) as soon as round 1 reaches it.
    deployment.wait_for("node3", "train.fdp_round1", 300.0)
    t_kill = time.monotonic()
    deployment.kill("node3")
    log = _finish(run, round_timeout + 240.0)
    elapsed = time.monotonic() - t_kill
    assert not out.exists()
    assert "FDP-Fair run failed" in log, log[-4000:]
    assert "site-3" in log.split("FDP-Fair run failed", 1)[1]
    assert elapsed < round_timeout + 240.0


@pytest.mark.skipif(
    shutil.which("openssl") is None or shutil.which("ssh-keygen") is None,
    reason="needs openssl and ssh-keygen",
)
def test_tls_and_supernode_authentication(tmp_path):
    keys = make_keys(tmp_path, ("centre", *SITES))
    data = [simulate(N, rng=620 + s) for s in range(S)]
    seeds = [51, 52, 53]
    setup = _setup(tmp_path / "setup.json", keys)
    dep = Deployment(tmp_path, tls=make_tls(tmp_path / "tls"))
    try:
        dep.start_superlink()
        for s, d in enumerate(data):
            node_key = tmp_path / SITES[s] / "node_key"
            path = _site_file(tmp_path, s, d)
            subprocess.run(
                ["ssh-keygen", "-t", "ecdsa", "-b", "384", "-N", "", "-q", "-f", str(node_key)],
                check=True,
            )
            dep.register(node_key.with_suffix(".pub"), SITES[s])
            cfg = node_config(SITES[s], path, keys, EPS, DELTA, seed=seeds[s])
            dep.start_supernode(f"node{s + 1}", cfg, auth_key=node_key)
        out = tmp_path / "released.json"
        conf = {"setup": str(setup), "key": str(keys["centre"][0]), "out": str(out), "seed": 4}
        log = _finish(dep.flwr_run(conf | {"round-timeout": 300.0}, timeout=600), 600.0)
        assert out.exists(), log[-4000:] + dep.log("superlink")[-4000:]
        released = read_message(out, keys={"centre": keys["centre"][2]}, kind="released_model")
        same_message(released, core_reference(setup, keys, data, seeds, 4))
        assert "SSL" not in dep.log("superlink")  # no TLS handshake failure on the way
    finally:
        dep.stop()
