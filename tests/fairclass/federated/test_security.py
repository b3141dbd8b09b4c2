"""FDP-Fair security properties at the unit level (the CLI attacks are in test_cli_e2e.py).

Randomness: a seed is mixed with site id, run id and stream; no seed → fresh noise.
Limits: the public resource limits refuse a setup before anything is allocated.
Plausibility: the k of the centre's check has the stated false-refusal probability.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from dpfair._errors import InvalidParameterError
from dpfair.fairclass.datasets import simulate
from dpfair.fairclass.federated import ProtocolError, Site, make_protocol
from dpfair.fairclass.federated._centre import plausibility_k
from dpfair.fairclass.federated._config import MAX_AXIS_NODES, MAX_DEPTH
from dpfair.fairclass.federated._keys import Signer
from dpfair.fairclass.federated._messages import decode, encode
from dpfair.fairclass.federated._protocol import ProtocolConfig
from dpfair.fairclass.federated._site import mixed_seed

N = 400


def _cfg(run: str = "run-1", **kw):
    specs = [("h1", N, 2.0, 1e-6), ("h2", N, 2.0, 1e-6)]
    kw.setdefault("grid_shape", (8, 8))
    return make_protocol(
        specs, feature_bounds=[(0, 1), (0, 1)], alpha=0.1, protocol_id=run, **kw
    )


def _round1_noise(site_id: str, cfg, seed) -> np.ndarray:
    d = simulate(N, rng=1)  # the same data at every site: only the noise differs
    s = Site(site_id, d.X, d.y, d.A, config=cfg, random_state=seed)
    n1, sums, _ = s._training_stats(0, cfg.grid())
    msg = s.round1()
    return np.concatenate([[msg.arrays["count"][0] - n1], (msg.arrays["sums"][0] - sums).ravel()])


def test_seed_is_mixed_with_site_run_and_round() -> None:
    cfg = _cfg()
    a = _round1_noise("h1", cfg, 7)
    assert np.array_equal(a, _round1_noise("h1", cfg, 7))  # reproducible for studies
    b = _round1_noise("h2", cfg, 7)
    c = _round1_noise("h1", _cfg("run-2"), 7)
    for other in (b, c):
        assert np.max(np.abs(a - other)) > 1e-3 and np.max(np.abs(a + other)) > 1e-3
    # Streams of one site differ by round; the spawn key is deterministic (not hash()).
    ss = np.random.SeedSequence(7)
    states = [mixed_seed(ss, "h1", "run-1", k).generate_state(4).tolist() for k in range(3)]
    assert len({tuple(s) for s in states}) == 3
    assert mixed_seed(ss, "h1", "run-1", 1).spawn_key == mixed_seed(ss, "h1", "run-1", 1).spawn_key


def test_without_seed_every_release_is_fresh() -> None:
    cfg = _cfg()
    d = simulate(N, rng=1)
    s1 = Site("h1", d.X, d.y, d.A, config=cfg)
    # The same split (as a round-2 process re-creates it) gives fresh noise, not round 1's.
    s2 = Site("h1", d.X, d.y, d.A, config=cfg, split_entropy=s1.split_entropy)
    assert all(np.array_equal(x, y) for x, y in zip(s1._halves, s2._halves, strict=True))
    r1, r2 = s1.round1(), s2.round1()
    assert not np.array_equal(r1.arrays["sums"], r2.arrays["sums"])
    with pytest.raises(InvalidParameterError, match="non-negative"):
        Site("h1", d.X, d.y, d.A, config=cfg, random_state=-5)


def test_public_limits_refuse_before_allocation() -> None:
    with pytest.raises(InvalidParameterError, match="bandwidth"):
        _cfg(bandwidth=1e-9)
    with pytest.raises(InvalidParameterError, match="grid_shape"):
        _cfg(grid_shape=(10**5, 10**5))
    with pytest.raises(InvalidParameterError, match="depth"):
        _cfg(depth=MAX_DEPTH + 1)
    # One feature and a tiny bandwidth: the default grid stops at the per-axis limit
    # (a 2^18-node axis would need a 512 GiB kernel matrix).
    one = make_protocol([("h1", N, 1.0, 1e-6)], feature_bounds=[(0, 1)], alpha=0.1,
                        bandwidth=1e-4)
    assert one.grid_shape == (MAX_AXIS_NODES,)
    with pytest.raises(InvalidParameterError, match="at most 1000"):
        make_protocol([(f"s{i}", N, 1.0, 1e-6) for i in range(1001)],
                      feature_bounds=[(0, 1)], alpha=0.1)
    with pytest.raises(InvalidParameterError, match="site id"):
        make_protocol([("centre", N, 1.0, 1e-6)], feature_bounds=[(0, 1)], alpha=0.1)


def test_received_setup_is_checked_like_a_built_one() -> None:
    centre = Signer.generate("centre")
    keys = {"centre": centre.public, "h1": Signer.generate("h1").public,
            "h2": Signer.generate("h2").public}
    cfg = _cfg(keys=keys)
    env = decode(encode(cfg.to_envelope(), centre), keys={"centre": centre.public})
    assert ProtocolConfig.from_envelope(env).keyring() == keys
    for name, value, match in (
        ("bandwidth", 1e-9, "bandwidth"),
        ("grid_shape", [10**5, 10**5], "grid_shape"),
        ("depth", 40, "depth"),
        ("keys", {"centre": centre.public}, "keys"),
    ):
        fields = dict(env.fields)
        fields[name] = value
        bad = type(env)(env.kind, env.protocol_id, env.sender, fields, {})
        with pytest.raises(ProtocolError, match=match):
            ProtocolConfig.from_envelope(bad)
    with pytest.raises(InvalidParameterError, match="share one public key"):
        _cfg(keys={"centre": centre.public, "h1": centre.public, "h2": keys["h2"]})


@pytest.mark.parametrize("m", [1, 10, 4 * 32 * 32 + 1, 2_000_000])
def test_plausibility_k_has_the_stated_false_refusal_probability(m: int) -> None:
    k = plausibility_k(m)
    # Union bound over m two-sided Gaussian tails: exactly 1e-9 at k.
    assert 2 * m * norm.sf(k) == pytest.approx(1e-9, rel=1e-6)
    assert 5.5 < k < 9.0 and math.isfinite(k)


@pytest.mark.parametrize("cross_fit", [False, True])
def test_site_ledger_charges_exactly_one_run(tmp_path, cross_fit: bool) -> None:
    """Round 1 charges the run's (ε_s, δ_s) — or μ*²/2 on a zCDP ledger — and round 2 is
    recorded at zero extra cost; each round once; round 2 needs round 1."""
    from dpfair._errors import BudgetExceededError, LedgerError, ReleaseReplayError
    from dpfair.fairclass.federated._site_budget import charge_round, preflight
    from dpfair.privacy import Budget, LedgerFile

    cfg = _cfg(cross_fit=cross_fit)
    data = tmp_path / "d.csv"
    data.write_text("x\n1\n")
    for cap, want in (
        (Budget.approx(5.0, 1e-5), (2.0, 1e-6)),
        (Budget.zcdp(100.0), cfg.plan("h1").mu_total ** 2 / 2),
    ):
        data = tmp_path / f"d-{cap.kind}.csv"  # one ledger per data set
        data.write_text(f"x\n1\n{cap.kind}\n")
        led = LedgerFile.create(tmp_path / f"{cap.kind}.ledger", cap, data=data)
        with pytest.raises(LedgerError, match="no round 1"):
            preflight(led, None, cfg, "h1", 2, data)
        cost = preflight(led, None, cfg, "h1", 1, data)
        charge_round(led, cfg, "h1", 1, cost)
        with pytest.raises(ReleaseReplayError):
            preflight(led, None, cfg, "h1", 1, data)
        charge_round(led, cfg, "h1", 2, preflight(led, None, cfg, "h1", 2, data))
        with pytest.raises(ReleaseReplayError):
            charge_round(led, cfg, "h1", 2, cost)
        spent = led.spent
        if cap.kind == "zcdp":
            assert spent.rho == want
        else:
            assert (spent.epsilon, spent.delta) == want
    with pytest.raises(BudgetExceededError, match="own cap"):
        preflight(led, Budget.approx(1.0, 1e-6), _cfg("run-9", cross_fit=cross_fit), "h1", 1,
                  data)
