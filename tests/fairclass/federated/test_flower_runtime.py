"""FDP-Fair in Flower's simulation runtime (Ray backend, the production apps).

* Seeded sites and centre: the simulation releases exactly the in-process core's model
  (byte for byte), so it predicts exactly like it.
* Fresh noise (slow, statistical): the released models behave like the in-process
  ``FDPFairClassifier`` on the same data, compared in law. One simulation (3 virtual
  SuperNodes running the production ``ClientApp``) hosts R protocol runs, each with its own
  setup (its own protocol id), driven by the production centre code (``server_app.run``).
  The R (error, |DD|) pairs on a common test set are compared with K in-process fits by
  two-sample Kolmogorov–Smirnov tests: under the null (same law) the p-value is uniform —
  conservative for these discrete metrics — so a correct implementation fails each test
  with probability ≤ 5e-7 (≤ 1e-6 for both).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats

pytest.importorskip("flwr")
pytest.importorskip("ray")

from dpfair.fairclass.datasets import simulate
from dpfair.fairclass.federated import FDPFairClassifier, FederatedModel, SiteSpec
from dpfair.fairclass.federated._messages import read_message
from dpfair.fairclass.metrics import demographic_disparity, misclassification_error
from dpfair.privacy import Budget, LedgerFile

from ._flower import core_reference, make_keys, node_config, same_message, signed_setup, write_site

S, N, EPS, DELTA, ALPHA = 3, 1000, 1.0, 1e-6, 0.2
BOUNDS = [(0.0, 1.0), (0.0, 1.0)]
R_FLOWER, K_INPROC = 16, 40
P_MIN = 5e-7  # per KS test; two tests


def _simulate(server_app: Any, configs: dict[int, dict]) -> None:
    from flwr.simulation import run_simulation

    from dpfair.fairclass.federated.flower.client_app import make_client_app

    run_simulation(
        server_app=server_app,
        client_app=make_client_app(configs),
        num_supernodes=len(configs),
        backend_config={"client_resources": {"num_cpus": 1}, "init_args": {"num_cpus": 2}},
    )


SITES = tuple(f"site-{s + 1}" for s in range(S))


def _setup(path: Path, keys: dict) -> Path:
    return signed_setup(
        path,
        keys,
        sites=[SiteSpec(sid, N, EPS, DELTA) for sid in SITES],
        feature_bounds=BOUNDS,
        alpha=ALPHA,
    )


def test_simulation_runtime_releases_the_core_model(tmp_path: Path) -> None:
    from dpfair.fairclass.federated.flower.server_app import make_server_app

    keys = make_keys(tmp_path, ("centre", *SITES))
    data = [simulate(N, rng=700 + s) for s in range(S)]
    seeds = [31, 32, 33]
    configs = {}
    for s, d in enumerate(data):
        (tmp_path / SITES[s]).mkdir()
        path = write_site(tmp_path / SITES[s] / "data.csv", d)
        configs[s] = node_config(SITES[s], path, keys, EPS, DELTA, seed=seeds[s])
    setup = _setup(tmp_path / "setup.json", keys)
    out = tmp_path / "released.json"
    conf = {"setup": str(setup), "key": str(keys["centre"][0]), "out": str(out), "seed": 8}
    _simulate(make_server_app(conf), configs)
    released = read_message(out, keys={"centre": keys["centre"][2]}, kind="released_model")
    final = core_reference(setup, keys, data, seeds, 8)
    same_message(released, final)
    test = simulate(2000, rng=3)
    np.testing.assert_array_equal(
        FederatedModel.from_envelope(released).predict(test.X, test.A),
        FederatedModel.from_envelope(final).predict(test.X, test.A),
    )


def _metrics(predict: Any, test: Any) -> tuple[float, float]:
    pred = predict(test.X, test.A)
    return misclassification_error(test.y, pred), abs(demographic_disparity(pred, test.A))


@pytest.mark.slow
@pytest.mark.statistical
def test_simulation_runtime_predicts_like_inprocess(tmp_path: Path) -> None:
    from flwr.app import Context
    from flwr.serverapp import Grid, ServerApp

    from dpfair.fairclass.federated.flower.server_app import run

    keys = make_keys(tmp_path, ("centre", *SITES))
    data = [simulate(N, rng=900 + s) for s in range(S)]
    test = simulate(4000, rng=999)
    configs = {}
    for s, d in enumerate(data):
        (tmp_path / SITES[s]).mkdir()
        path = write_site(tmp_path / SITES[s] / "data.csv", d)
        # Each run charges (EPS, DELTA) to the site's own ledger: its total cap allows R runs
        # (basic composition), the per-run cap stays (EPS, DELTA).
        ledger = tmp_path / SITES[s] / "site.ledger"
        LedgerFile.create(ledger, Budget.approx(R_FLOWER * EPS, R_FLOWER * DELTA), data=path)
        configs[s] = node_config(SITES[s], path, keys, EPS, DELTA, ledger=str(ledger))
    setups = [_setup(tmp_path / f"setup{r}.json", keys) for r in range(R_FLOWER)]
    server = ServerApp()

    @server.main()
    def main(grid: Grid, context: Context) -> None:
        for r, setup in enumerate(setups):
            out = str(tmp_path / f"released{r}.json")
            conf = {"setup": str(setup), "key": str(keys["centre"][0]), "out": out}
            run(grid, conf | {"round-timeout": 120.0, "seed": -1})

    _simulate(server, configs)
    flower = []
    ring = {"centre": keys["centre"][2]}
    for r in range(R_FLOWER):
        env = read_message(tmp_path / f"released{r}.json", keys=ring, kind="released_model")
        assert env.protocol_id == read_message(setups[r], keys=ring).protocol_id
        assert sorted(env.fields["site_privacy"]) == ["site-1", "site-2", "site-3"]
        flower.append(_metrics(FederatedModel.from_envelope(env).predict, test))

    inproc = []
    for k in range(K_INPROC):
        clf = FDPFairClassifier(
            epsilon=EPS, delta=DELTA, alpha=ALPHA, feature_bounds=BOUNDS, random_state=k
        ).fit([d.X for d in data], [d.y for d in data], sensitive_features=[d.A for d in data])
        if k == 0:  # the same public protocol as the Flower runs' setups (but the keys)
            a = clf.protocol_.to_envelope().fields
            b = read_message(setups[0], keys=ring).fields
            assert {k: v for k, v in a.items() if k != "keys"} == {
                k: v for k, v in b.items() if k != "keys"
            }
        inproc.append(_metrics(lambda X, A, c=clf: c.predict(X, sensitive_features=A), test))
    fl, ip = np.array(flower), np.array(inproc)
    for j, name in enumerate(("error", "|DD|")):
        p = stats.ks_2samp(fl[:, j], ip[:, j]).pvalue
        assert p > P_MIN, (name, p, fl[:, j], ip[:, j])
