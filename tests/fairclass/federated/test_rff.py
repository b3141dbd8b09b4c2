"""FDP-Fair with random Fourier features (``estimator="rff"``): privacy as computed,
strict schemas, exact ledger, and a sane fit with d = 8 (numeric + categorical)."""

from __future__ import annotations

import math
import pickle
import warnings
from dataclasses import replace

import numpy as np
import pytest

from dpfair._errors import InvalidDataError, InvalidParameterError
from dpfair._warnings import UncertifiedFairnessWarning
from dpfair.fairclass import _rff
from dpfair.fairclass._rff import (
    MAX_FEATURES_DIM,
    RFF_LATTICE_BITS,
    release_rff_sums,
    rff_cell_sums,
    rff_frequencies,
    rff_lattice,
)
from dpfair.fairclass.federated import Centre, FDPFairClassifier, Site, make_protocol
from dpfair.fairclass.federated._keys import Signer
from dpfair.fairclass.federated._messages import ProtocolError, decode, encode
from dpfair.fairclass.federated._protocol import ProtocolConfig
from tests._stats import min_successes

_CATS = ["a", "b", "c", "d"]


def _design(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """d = 8: six numeric columns on [0, 10], one 4-category column, one 3-category column.

    η(x, a) = sigmoid(3(u₀ − ½) + 2(u₁ − ½) + 1{c = 'a'} − 1{c = 'd'} + 1.2(2a − 1)).
    """
    num = rng.uniform(0, 10, size=(n, 6))
    c1 = rng.choice(_CATS, size=n)
    c2 = rng.integers(0, 3, size=n)
    A = rng.integers(0, 2, size=n)
    logit = (
        3 * (num[:, 0] / 10 - 0.5)
        + 2 * (num[:, 1] / 10 - 0.5)
        + (c1 == "a")
        - (c1 == "d")
        + 1.2 * (2 * A - 1)
    )
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-logit))).astype(int)
    X = np.empty((n, 8), dtype=object)
    X[:, :6] = num
    X[:, 6] = c1
    X[:, 7] = c2
    return X, y, A


_BOUNDS = [(0, 10)] * 6 + [None, None]
_CATEGORIES = {6: _CATS, 7: [0, 1, 2]}


def _cfg(S: int = 3, n: int = 600, eps: float = 1.0, **kw):
    return make_protocol(
        [(f"h{i}", n, eps, 1e-6) for i in range(S)],
        feature_bounds=_BOUNDS,
        categories=_CATEGORIES,
        alpha=0.1,
        estimator="rff",
        features_dim=kw.pop("features_dim", 64),
        rff_seed=7,
        **kw,
    )


# ---------------------------------------------------------------------------- sensitivity
def _neighbour_gap(Q: np.ndarray, A, y, i: int, q_new: np.ndarray, a_new: int, y_new: int):
    """Exact squared L2 distance (Python ints) of the cell sums of two neighbours."""
    s1 = rff_cell_sums(Q, A, y)
    Q2, A2, y2 = Q.copy(), A.copy(), y.copy()
    Q2[i], A2[i], y2[i] = q_new, a_new, y_new
    s2 = rff_cell_sums(Q2, A2, y2)
    return sum(int(v) ** 2 for v in (s1.astype(object) - s2.astype(object)).ravel())


def test_quantized_sums_have_sensitivity_two_as_computed():
    """Computed (not real-number) sensitivity: every lattice row has integer norm ≤ 2^q and
    any replace-one neighbour moves the int64 cell sums by at most 2·2^q in L2."""
    rng = np.random.default_rng(0)
    W = rff_frequencies(10, 256, 0.3, seed=3)
    U = rng.uniform(size=(400, 10))
    U[:50] = np.round(U[:50])  # corners and one-hot-like rows
    Q = rff_lattice(U, W)
    norms = np.einsum("ij,ij->i", Q.astype(object), Q.astype(object))
    assert max(int(v) for v in norms) <= 4**RFF_LATTICE_BITS
    A = rng.integers(0, 2, 400).astype(np.int8)
    y = rng.integers(0, 2, 400).astype(np.int8)
    bound = (2 * 2**RFF_LATTICE_BITS) ** 2
    worst = 0
    for _t in range(60):
        i = int(rng.integers(0, 400))
        j = int(rng.integers(0, 400))
        # replacement: the antipode of row i in φ-space is the worst case; use −Q[i]
        # (norm-bounded, as any computed row) and a random other row, same or other cell
        for q_new in (-Q[i], Q[j]):
            for a_new, y_new in ((A[i], y[i]), (1 - A[i], y[i]), (A[i], 1 - y[i])):
                gap = _neighbour_gap(Q, A, y, i, q_new, int(a_new), int(y_new))
                worst = max(worst, gap)
                assert gap <= bound
    # the bound is attained (same cell, antipodal rows): Δ = 2 is needed, √2 would not hold
    assert worst > 2 * 4**RFF_LATTICE_BITS


def test_norm_check_holds_when_the_float_features_overshoot(monkeypatch):
    """If cos/sin returned values whose norm exceeds 1 (another libm), the integer check
    still enforces ‖Q‖ ≤ 2^q for every row."""
    real = _rff.rff_features

    def inflated(U, W):
        return real(U, W) * (1 + 1e-3)

    monkeypatch.setattr(_rff, "rff_features", inflated)
    W = rff_frequencies(3, 32, 0.5, seed=1)
    U = np.random.default_rng(1).uniform(size=(200, 3))
    Q = rff_lattice(U, W)
    norms = np.einsum("ij,ij->i", Q, Q)
    assert np.all(norms <= 4**RFF_LATTICE_BITS)
    assert np.all(norms > 0)


def test_release_is_an_exact_translate_of_data_independent_noise():
    """The released value minus the exact sum is the same lattice noise for any data."""
    sums = np.random.default_rng(2).integers(-(2**30), 2**30, size=(16, 2, 2))
    r1 = release_rff_sums(sums, 1000, 3.0, np.random.default_rng(5))
    r0 = release_rff_sums(np.zeros_like(sums), 1000, 3.0, np.random.default_rng(5))
    scale = 2.0**RFF_LATTICE_BITS
    np.testing.assert_array_equal(r1 - sums / scale, r0)
    assert np.all(r1 * scale == np.rint(r1 * scale))  # on the public lattice
    assert np.std(r0) == pytest.approx(3.0, rel=0.5)


# ---------------------------------------------------------------------------- schema
def test_setup_refuses_oversized_or_odd_features_dim():
    for bad in (MAX_FEATURES_DIM + 2, 3, 0, True):
        with pytest.raises(InvalidParameterError, match="features_dim"):
            _cfg(features_dim=bad)
    # a signed setup carrying an oversized D is refused by every site before allocation
    cfg = _cfg()
    centre = Signer.generate("centre")
    keys = {"centre": centre.public, **{s: Signer.generate(s).public for s in cfg.site_ids}}
    cfg = replace(cfg, keys=tuple(sorted(keys.items())))
    env = cfg.to_envelope()
    env.fields["features_dim"] = MAX_FEATURES_DIM * 2**20
    got = decode(encode(env, centre), keys={"centre": centre.public}, kind="setup")
    with pytest.raises(ProtocolError, match="features_dim"):
        ProtocolConfig.from_envelope(got)
    # honest round trip keeps every RFF parameter
    env = cfg.to_envelope()
    back = ProtocolConfig.from_envelope(
        decode(encode(env, centre), keys={"centre": centre.public}, kind="setup")
    )
    assert back == cfg


def test_round1_with_wrong_D_is_refused_before_decoding():
    cfg = _cfg()
    signers = {p: Signer.generate(p) for p in ("centre", *cfg.site_ids)}
    cfg = replace(cfg, keys=tuple(sorted((p, s.public) for p, s in signers.items())))
    X, y, A = _design(600, np.random.default_rng(3))
    site = Site("h0", X, y, A, config=cfg, random_state=0)
    msg = site.round1()
    raw = encode(
        replace(msg, arrays={**msg.arrays, "sums": np.zeros((1, 4096, 2, 2))}), signers["h0"]
    )
    with pytest.raises(ProtocolError, match="shape"):
        decode(raw, keys=cfg.keyring(), kind="round1", shapes=cfg.message_shapes("round1"))


def test_centre_refuses_implausible_feature_sums():
    cfg = _cfg()
    rng = np.random.default_rng(4)
    sites = [Site(s, *_design(600, rng), config=cfg, random_state=i)
             for i, s in enumerate(cfg.site_ids)]
    msgs = [s.round1() for s in sites]
    bad = msgs[1].arrays["sums"].copy()
    bad[0, 3, 1, 0] += 600.0  # far beyond n/√m + k·σ
    msgs[1] = replace(msgs[1], arrays={**msgs[1].arrays, "sums": bad})
    with pytest.raises(ProtocolError, match="h1") as exc:
        Centre(cfg).aggregate(msgs)
    assert "implausible" in str(exc.value)


def test_bad_input_is_one_clear_error():
    cfg = _cfg()
    X, y, A = _design(600, np.random.default_rng(5))
    X[10, 6] = "zzz"
    with pytest.raises(InvalidDataError, match="zzz"):
        Site("h0", X, y, A, config=cfg)
    with pytest.raises(InvalidParameterError, match="feature_bounds"):
        make_protocol([("h0", 600, 1.0, 1e-6)], feature_bounds=[(0, 1), None], alpha=0.1,
                      estimator="rff")
    with pytest.raises(InvalidParameterError, match="categories"):
        make_protocol([("h0", 600, 1.0, 1e-6)], feature_bounds=[(0, 1)], alpha=0.1,
                      categories={0: ["x"]})


# ---------------------------------------------------------------------------- ledger
@pytest.mark.parametrize("cross_fit", [True, False])
def test_rff_site_ledger_spends_exactly_the_budget(cross_fit):
    cfg = _cfg(S=2, eps=1.5, cross_fit=cross_fit)
    rng = np.random.default_rng(6)
    sites = [Site(s, *_design(600, rng), config=cfg, random_state=i)
             for i, s in enumerate(cfg.site_ids)]
    centre = Centre(cfg, random_state=0)
    model = centre.aggregate([s.round1() for s in sites])
    centre.finalize([s.round2(model) for s in sites])
    for s in sites:
        spent = s.ledger.spent
        assert spent.epsilon == pytest.approx(1.5, rel=1e-6) and spent.delta == 1e-6
        plan = s.plan
        # round 1: μ₁² = 1/σ_c² + Δ²/σ_f² with Δ = 2 for the φ sums
        assert math.hypot(1 / plan.sigma_count, 2 / plan.sigma_function) == pytest.approx(
            plan.mu_round1, rel=1e-12
        )
        expected = plan.mu_total if cross_fit else plan.mu_round1
        assert all(m == pytest.approx(expected, rel=1e-9) for m in s.ledger.mu_by_rows().values())


# ---------------------------------------------------------------------------- classifier
def _population(n: int = 100_000):
    return _design(n, np.random.default_rng(12345))


_POP = None


def _fit_rff(eps: float, alpha: float, seed: int) -> tuple[float, float, FDPFairClassifier]:
    global _POP
    if _POP is None:
        _POP = _population()
    rng = np.random.default_rng(seed)
    data = [_design(2000, rng) for _ in range(3)]
    clf = FDPFairClassifier(
        epsilon=eps, delta=1e-6, alpha=alpha, feature_bounds=_BOUNDS, categories=_CATEGORIES,
        estimator="rff", features_dim=256, random_state=seed,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UncertifiedFairnessWarning)
        clf.fit([d[0] for d in data], [d[1] for d in data],
                sensitive_features=[d[2] for d in data])
    Xp, yp, Ap = _POP
    pred = clf.predict(Xp, sensitive_features=Ap)
    dd = float(pred[Ap == 1].mean() - pred[Ap == 0].mean())
    return dd, float(np.mean(pred != yp)), clf


def test_rff_fit_s3_d8_single_fit_sanity():
    """S = 3, d = 8 (6 numeric + 2 categorical), ε = 4, α = 0.1: the population disparity
    is within α, the error well below the trivial classifier's, predict is deterministic
    post-processing (also after pickling)."""
    dd, err, clf = _fit_rff(4.0, 0.1, 0)
    assert clf.estimator_ == "rff"
    assert abs(dd) <= 0.1
    Xp, yp, Ap = _POP
    base = min(yp.mean(), 1 - yp.mean())
    assert err < base - 0.05, (err, base)
    p1 = clf.predict(Xp[:3000], sensitive_features=Ap[:3000])
    np.testing.assert_array_equal(p1, clf.predict(Xp[:3000], sensitive_features=Ap[:3000]))
    clone = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(clone.predict(Xp[:3000], sensitive_features=Ap[:3000]), p1)
    assert clf.privacy_spent_.epsilon == pytest.approx(4.0, rel=1e-6)


def test_auto_keeps_kernel_for_small_numeric_d():
    rng = np.random.default_rng(8)
    data = []
    for _ in range(2):
        X = rng.uniform(size=(500, 2))
        A = rng.integers(0, 2, 500)
        y = (rng.uniform(size=500) < 0.3 + 0.4 * X[:, 0]).astype(int)
        data.append((X, y, A))
    clf = FDPFairClassifier(epsilon=4.0, alpha=0.2, feature_bounds=[(0, 1)] * 2, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UncertifiedFairnessWarning)
        clf.fit([d[0] for d in data], [d[1] for d in data],
                sensitive_features=[d[2] for d in data])
    assert clf.estimator_ == "kernel" and "coef" not in clf.released_model_.arrays
    with pytest.raises(InvalidParameterError, match="categories"):
        FDPFairClassifier(estimator="kernel", categories={0: [1]}).fit(
            [d[0] for d in data], [d[1] for d in data], sensitive_features=[d[2] for d in data]
        )


@pytest.mark.slow
@pytest.mark.parametrize("eps", [1.0, 4.0])
def test_rff_holds_cap_sweep(eps):
    """Slow: 60 reps at α = 0.1; share with population |DD| ≤ α at least 0.9 (exact binomial
    bound, false alarm 1e-6); mean error below the trivial classifier's."""
    res = [_fit_rff(eps, 0.1, 100 + r)[:2] for r in range(60)]
    ok = sum(abs(d) <= 0.1 for d, _ in res)
    assert ok >= min_successes(60, 0.9)
    yp = _POP[1]
    assert np.mean([e for _, e in res]) < min(yp.mean(), 1 - yp.mean())


# ---------------------------------------------------------------------------- CLI
@pytest.mark.slow
def test_cli_file_exchange_with_rff(tmp_path):
    """Slow (seven CLI processes, ~25–55 s): keygen → setup --estimator rff
    --features-dim 64 → round 1 → aggregate → round 2 → finalize → predict, every party a
    separate process; each ledger holds exactly ε_s."""
    from dpfair.fairclass.datasets import simulate
    from dpfair.privacy import Budget, LedgerFile
    from tests.fairclass.federated import test_cli_e2e as e2e

    t = tmp_path
    (t / "keys").mkdir()
    for i, sid in enumerate(e2e.SITES):
        (t / sid).mkdir()
        e2e._write_csv(t / sid / "data.csv", simulate(e2e.N, rng=50 + i))
    e2e._write_csv(t / "test.csv", simulate(3000, rng=77))
    LedgerFile.create(t / "h2/h2.fdp-ledger", Budget.approx(3 * e2e.EPS, 3 * e2e.DELTA),
                      data=t / "h2/data.csv")
    for party in ("centre", *e2e.SITES):
        e2e._ok("keygen", "--out", f"keys/{party}", cwd=t)
    specs = [a for sid in e2e.SITES for a in ("--site", f"{sid}:{e2e.N}:{e2e.EPS}:{e2e.DELTA}")]
    keys = [a for sid in e2e.SITES for a in ("--site-key", f"{sid}=keys/{sid}.pub")]
    bounds = ["--bounds", "0", "--bounds", "1", "--bounds", "0", "--bounds", "1"]
    setup = ["centre", "setup", "--key", "keys/centre.key", *specs, *keys, *bounds,
             "--alpha", str(e2e.ALPHA), "--estimator", "rff"]
    e2e._refused(*setup, "--features-dim", str(MAX_FEATURES_DIM + 2), "--out", "big.json",
                 cwd=t, match="features_dim")
    info = e2e._ok(*setup, "--features-dim", "64", "--out", "setup.json", cwd=t)
    assert info["estimator"] == "rff" and info["features_dim"] == 64
    e2e._parallel([e2e._site_args(sid, 1) for sid in e2e.SITES], t)
    e2e._ok("centre", "aggregate", "h1.r1.json", "h2.r1.json", "--setup", "setup.json",
            "--key", "keys/centre.key", "--out", "model.json", cwd=t)
    e2e._parallel([[*e2e._site_args(sid, 2), "--model", "model.json"] for sid in e2e.SITES], t)
    e2e._ok("centre", "finalize", "h1.r2.json", "h2.r2.json", "--setup", "setup.json",
            "--key", "keys/centre.key", "--model", "model.json", "--out", "released.json",
            "--seed", "0", cwd=t)
    res = e2e._ok("predict", "released.json", "test.csv", "--centre-key", "keys/centre.pub",
                  "--features", "x1,x2", "--sensitive", "a", "--target", "y", cwd=t)
    assert res["error"] <= 0.35 and 0.0 <= res["abs_dd"] <= 1.0
    led = LedgerFile.open(t / "h2" / "h2.fdp-ledger")
    assert led.spent.epsilon == e2e.EPS and led.spent.delta == e2e.DELTA


def test_model_of_the_other_estimator_is_refused():
    """A site of an rff run refuses a grid model and vice versa (arrays checked exactly)."""
    from dpfair.fairclass.datasets import simulate

    cfg = _cfg()
    rng = np.random.default_rng(9)
    site = Site("h0", *_design(600, rng), config=cfg, random_state=0)
    site.round1()
    rff_model = Centre(cfg).aggregate(
        [Site(s, *_design(600, rng), config=cfg).round1() for s in cfg.site_ids]
    )
    forged = replace(rff_model, arrays={"eta": np.full((1, 5, 2), 0.5),
                                        "pi": rff_model.arrays["pi"]})
    with pytest.raises(ProtocolError, match="coef"):
        site.round2(forged)
    kcfg = make_protocol([("h0", 600, 1.0, 1e-6)], feature_bounds=[(0, 1), (0, 1)], alpha=0.1)
    d = simulate(600, rng=1)
    ksite = Site("h0", d.X, d.y, d.A, config=kcfg, random_state=0)
    ksite.round1()
    rff_like = replace(rff_model, protocol_id=kcfg.protocol_id)
    with pytest.raises(ProtocolError, match="eta"):
        ksite.round2(rff_like)
