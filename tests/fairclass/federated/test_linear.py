"""FDP-Fair's linear estimator (``estimator="linear"``, ``federated/_linear.py``).

Privacy as computed (exact integer sensitivities of the lattice statistics, the release an
exact translate of data-independent noise), the per-site ledger exact over both rounds,
strict message checks (wrong estimator, missing or poisoned blocks, replay and relabel),
a sane fit with numeric and categorical columns, and the disparity cap on fresh
population draws (exact binomial bounds).
"""

from __future__ import annotations

import json
import math
import pickle
import warnings
from dataclasses import replace

import numpy as np
import pytest

from dpfair._warnings import UncertifiedFairnessWarning
from dpfair.fairclass.federated import Centre, FDPFairClassifier, Site, make_protocol
from dpfair.fairclass.federated._keys import Signer
from dpfair.fairclass.federated._linear import (
    LINEAR_LATTICE_BITS,
    MAX_LINEAR_WIDTH,
    RADIUS_SHARE,
    SHARES,
    fit_theta,
    js_factor,
    lattice_rows,
    linear_cell_stats,
    linear_sigmas,
    numeric_mask,
    release_linear_stats,
    row_map,
)
from dpfair.fairclass.federated._messages import ProtocolError, canonical, decode, encode
from dpfair.fairclass.federated._protocol import ProtocolConfig
from tests._stats import min_successes

_CATS = ["a", "b", "c", "d"]
_BOUNDS = [(0, 10)] * 6 + [None, None]
_CATEGORIES = {6: _CATS, 7: [0, 1, 2]}
Q = LINEAR_LATTICE_BITS


def _design(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """d = 8: six numeric columns on [0, 10], a 4-category and a 3-category column;
    η linear in (u, one-hot, a)."""
    num = rng.uniform(0, 10, size=(n, 6))
    c1 = rng.choice(_CATS, size=n)
    c2 = rng.integers(0, 3, size=n)
    A = rng.integers(0, 2, size=n)
    logit = (3 * (num[:, 0] / 10 - 0.5) + 2 * (num[:, 1] / 10 - 0.5) + (c1 == "a")
             - (c1 == "d") + 1.2 * (2 * A - 1))
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-logit))).astype(int)
    X = np.empty((n, 8), dtype=object)
    X[:, :6] = num
    X[:, 6] = c1
    X[:, 7] = c2
    return X, y, A


def _cfg(S: int = 3, n: int = 600, eps: float = 1.0, **kw) -> ProtocolConfig:
    return make_protocol(
        [(f"h{i}", n, eps, 1e-6) for i in range(S)], feature_bounds=_BOUNDS,
        categories=_CATEGORIES, alpha=0.1, estimator="linear", **kw,
    )


# ---------------------------------------------------------------------------- sensitivity
def _gaps(Q1, A1, y1, Q2, A2, y2) -> tuple[int, int, int]:
    """Exact squared gaps (Python ints) of sums, cells and moments (off-diagonal twice:
    the Frobenius norm the noise is calibrated to) between two data sets."""
    s1, c1, m1 = (x.astype(object) for x in linear_cell_stats(Q1, A1, y1))
    s2, c2, m2 = (x.astype(object) for x in linear_cell_stats(Q2, A2, y2))
    p = Q1.shape[1]
    diag = np.zeros(p * (p + 1) // 2, dtype=bool)
    j = np.arange(p)
    diag[j * p - j * (j - 1) // 2] = True
    dm = m1 - m2
    mom = sum(int(v) ** 2 for v in dm[diag]) + 2 * sum(int(v) ** 2 for v in dm[~diag])
    return (sum(int(v) ** 2 for v in (s1 - s2).ravel()),
            sum(int(v) ** 2 for v in (c1 - c2).ravel()), mom)


def test_lattice_rows_have_norm_at_most_one_exactly_even_if_floats_overshoot():
    """Rows whose floating-point norm exceeds 1 by rounding (or by far) still come out
    with Σ Q² ≤ 4^q in exact integer arithmetic."""
    rng = np.random.default_rng(0)
    V = rng.standard_normal((500, 9))
    V /= np.linalg.norm(V, axis=1, keepdims=True)
    V[:250] = np.nextafter(V[:250], np.sign(V[:250]) * 2.0)  # one ulp outward
    V[0] = 1.5 / 3.0  # ‖·‖ = 1.5: halved until it passes
    Qr = lattice_rows(V)
    for row in Qr:
        assert sum(int(v) ** 2 for v in row) <= 4**Q


@pytest.mark.parametrize("seed", range(4))
def test_statistics_have_the_stated_sensitivity_as_computed(seed):
    """Replace one record — by an extreme one, by another cell, or by the same record with
    its last bits changed (floating-point neighbours) — the exact integer gaps are within
    8·4^q for the sums, 2 for the cells and 2·16^q for the moments."""
    cfg = _cfg(radius="box")
    rng = np.random.default_rng(seed)
    X, y, A = _design(200, rng)
    fmap = cfg.feature_map()
    mask = numeric_mask(fmap)

    def rows(Xa):
        return lattice_rows(row_map(fmap.transform(Xa), mask, cfg.radius))

    Q1 = rows(X)
    for trial in range(30):
        i = int(rng.integers(200))
        X2, y2, A2 = X.copy(), y.copy(), A.copy()
        kind = trial % 3
        if kind == 0:  # an extreme record (box corner), maybe another cell
            X2[i, :6] = rng.choice([0.0, 10.0], size=6)
            y2[i], A2[i] = 1 - y[i], int(rng.integers(2))
        elif kind == 1:  # same values, other cell
            y2[i] = 1 - y[i]
        else:  # last bits of every numeric value
            X2[i, :6] = [np.nextafter(float(v), 11.0 if v < 10 else 0.0) for v in X[i, :6]]
        gs, gc, gm = _gaps(Q1, A, y, rows(X2), A2, y2)
        assert gs <= 8 * 4**Q and gc <= 2 and gm <= 2 * 16**Q


def test_sums_sensitivity_is_attained_and_holds_in_every_case_exactly():
    """The ``sums`` block (G_0, G_1, V) in exact Python integers: the gap is ≤ 8·4^q for
    every kind of replacement — same cell (attained exactly by Q′ = −Q on the radius), label
    change (≤ 4·4^q), group change (≤ 6·4^q), both — including rows on the radius up to
    an ulp and last-bit neighbours; and the released layout has no a × y interaction."""
    rng = np.random.default_rng(11)
    p = 7
    V = rng.standard_normal((40, p))
    V /= np.linalg.norm(V, axis=1, keepdims=True)  # on the radius (up to rounding)
    V[::2] = np.nextafter(V[::2], np.sign(V[::2]) * 2.0)  # one ulp outward
    Q0 = lattice_rows(V)
    A = np.tile([0, 1], 20)
    y = np.repeat([0, 1], 20)
    worst = {"cell": 0, "label": 0, "group": 0, "both": 0}
    for i in range(40):
        for kind in worst:
            for target in (-Q0[i], Q0[(i + 7) % 40], lattice_rows(-V[i : i + 1])[0]):
                Q2, A2, y2 = Q0.copy(), A.copy(), y.copy()
                Q2[i] = target
                if kind in ("label", "both"):
                    y2[i] = 1 - y[i]
                if kind in ("group", "both"):
                    A2[i] = 1 - A[i]
                gs, gc, gm = _gaps(Q0, A, y, Q2, A2, y2)
                worst[kind] = max(worst[kind], gs)
                assert gs <= 8 * 4**Q and gc <= 2 and gm <= 2 * 16**Q
    assert worst["label"] <= 4 * 4**Q and worst["group"] <= 6 * 4**Q
    # the bound is tight: an axis row (exactly on the radius) replaced by its negative
    e = np.zeros((2, p), dtype=np.int64)
    e[0, 0] = 2**Q
    e2 = e.copy()
    e2[0] = -e[0]
    A1, y1 = np.array([1, 0]), np.array([1, 0])
    assert _gaps(e, A1, y1, e2, A1, y1)[0] == 8 * 4**Q
    sums, _c, _m = linear_cell_stats(Q0, A, y)
    assert sums.shape == (p, 3)
    sign = 2 * y - 1
    exact = [[sum(int(Q0[r, j]) for r in range(40) if A[r] == 0) for j in range(p)],
             [sum(int(Q0[r, j]) for r in range(40) if A[r] == 1) for j in range(p)],
             [sum(int(sign[r]) * int(Q0[r, j]) for r in range(40)) for j in range(p)]]
    assert sums.T.tolist() == exact


def test_fit_theta_is_least_squares_without_noise_and_shrinks_with_it():
    """Without noise (κ = 1, Λ → 0) the Schur-form solution is exactly 4M⁻¹g of the full
    system ψ = (1, a, w); the Stein factor is 1 for a noiseless off-diagonal, 0 when its
    energy is at the noise level, and in [0, 1] always."""
    rng = np.random.default_rng(5)
    n, p = 4000, 5
    W = rng.uniform(-1, 1, size=(n, p)) / math.sqrt(p)
    W[:, 1] += 0.5 * W[:, 0]
    A = (rng.uniform(size=n) < 0.4).astype(int)
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-(W @ np.arange(1, p + 1) + A)))).astype(int)
    sums = np.stack([W[A == 0].sum(0), W[A == 1].sum(0), ((2 * y - 1)[:, None] * W).sum(0)],
                    axis=1)
    cells = np.array([[np.sum((A == a) & (y == v)) for v in (0, 1)] for a in (0, 1)], float)
    mom = (W.T @ W)[np.triu_indices(p)]
    theta = fit_theta(sums, cells, mom, n, int(A.sum()), 1e-12)
    Psi = np.column_stack([np.ones(n), A, W])
    ref = 4.0 * np.linalg.solve(Psi.T @ Psi, Psi.T @ (y - 0.5))
    np.testing.assert_allclose(theta, ref, rtol=1e-7, atol=1e-9)
    off = rng.standard_normal(1000)
    assert js_factor(off, 1000, 0.0) == 1.0
    assert js_factor(off, 1000, float(off @ off) / 1000) == 0.0
    assert js_factor(np.zeros(3), 3, 1.0) == 0.0
    assert 0.0 < js_factor(off + 3.0, 1000, 1.0) < 1.0


def test_centre_refuses_the_old_cell_sums_layout():
    """A round-1 message with the four (a, y) cell sums (p, 2, 2) instead of (G_0, G_1, V)
    is refused by its shape, at decoding and at the centre."""
    cfg = _cfg()
    r1 = _round1(cfg)
    p = cfg.linear_width
    old = dict(r1[0].arrays, sums=np.zeros((1, p, 2, 2)))
    with pytest.raises(ProtocolError, match="sums"):
        Centre(cfg).aggregate([replace(r1[0], arrays=old), *r1[1:]])
    signer = Signer.generate("h0")
    raw = encode(replace(r1[0], arrays=old), signer)
    with pytest.raises(ProtocolError, match="shape"):
        decode(raw, keys={"h0": signer.public}, shapes=cfg.message_shapes("round1"))


def test_release_is_an_exact_translate_of_data_independent_noise():
    """Same noise stream, two different data sets: released − exact statistics agree to the
    bit (the noise does not depend on the data; the scaling to w units is exact)."""
    cfg = _cfg(radius="box")
    fmap = cfg.feature_map()
    sig = linear_sigmas(cfg.plan("h0").sigma_function)
    out = []
    for seed in (1, 2):
        X, y, A = _design(300, np.random.default_rng(seed))
        Qr = lattice_rows(row_map(fmap.transform(X), numeric_mask(fmap), cfg.radius))
        stats = linear_cell_stats(Qr, A, y)
        rel = release_linear_stats(*stats, 300, sig, np.random.default_rng(99))
        exact = (stats[0] / 2.0**Q, stats[1].astype(float), stats[2] / 4.0**Q)
        out.append([r - e for r, e in zip(rel, exact, strict=True)])
    for a, b in zip(*out, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("radius", ["box", "auto"])
def test_the_three_blocks_spend_exactly_round_one_after_the_count(radius):
    """μ₁² = 1/σ_c² + [2/σ_r²] + 8/σ_S² + 2/σ_n² + 2/σ_M², in the public shares: with
    ``radius="auto"`` the radius histogram (Δ = √2) takes radius_share·μ₁² and the three
    blocks split the rest; with a public radius nothing is spent on it."""
    for cross_fit in (False, True):
        for share in ((0.04, 0.1) if radius == "auto" else (None,)):
            cfg = _cfg(cross_fit=cross_fit, radius=radius, radius_share=share)
            plan = cfg.plan("h1")
            sig = cfg.linear_sigmas("h1")
            assert math.hypot(1 / plan.sigma_count, sig.mu) == pytest.approx(
                plan.mu_round1, rel=1e-12)
            assert math.hypot(1 / plan.sigma_count, sig.mu) <= plan.mu_round1
            mu_r2 = 2 / sig.radius**2 if sig.radius else 0.0
            assert mu_r2 == pytest.approx((share or 0.0) * plan.mu_round1**2, rel=1e-12)
            mu2 = sig.mu_stats**2
            for part, s in zip((8 / sig.sums**2, 2 / sig.cells**2, 2 / sig.moments**2),
                               SHARES, strict=True):
                assert part == pytest.approx(s * mu2, rel=1e-12)
            if radius == "box":  # the public-radius sds are those of the plan alone
                assert sig == linear_sigmas(plan.sigma_function)


# ---------------------------------------------------------------------------- ledger
@pytest.mark.parametrize("radius", ["auto", 1.0])
@pytest.mark.parametrize("cross_fit", [True, False])
def test_linear_site_ledger_spends_exactly_the_budget(cross_fit, radius):
    """Each site spends exactly (ε_s, δ_s) over both rounds; with ``radius="auto"`` the
    radius release is its own record per fold (μ_r² = radius_share·μ₁² on the training
    half) and, composed with the statistics and round 2, still exactly the budget."""
    cfg = _cfg(S=2, eps=1.5, cross_fit=cross_fit, radius=radius)
    rng = np.random.default_rng(6)
    sites = [Site(s, *_design(600, rng), config=cfg, random_state=i)
             for i, s in enumerate(cfg.site_ids)]
    centre = Centre(cfg, random_state=0)
    model = centre.aggregate([s.round1() for s in sites])
    centre.finalize([s.round2(model) for s in sites])
    auto = radius == "auto"
    for s in sites:
        spent = s.ledger.spent
        assert spent.epsilon == pytest.approx(1.5, rel=1e-6) and spent.delta == 1e-6
        records = s.ledger.to_dict()["records"]
        labels = [r["label"] for r in records]
        assert sum("round 1" in x for x in labels) == cfg.n_folds * (2 if auto else 1)
        assert sum("round 2" in x for x in labels) == cfg.n_folds
        stats = [r for r in records if "linear sufficient statistics" in r["label"]]
        radii = [r for r in records if "clip radius" in r["label"]]
        assert len(stats) == cfg.n_folds and len(radii) == (cfg.n_folds if auto else 0)
        mu1 = s.plan.mu_round1
        for r in radii:  # ρ = μ²/2 per record
            assert r["rho"] == pytest.approx(RADIUS_SHARE * mu1**2 / 2, rel=1e-9)
        for r in stats:
            assert r["rho"] == pytest.approx((1 - (RADIUS_SHARE if auto else 0)) * mu1**2 / 2,
                                             rel=1e-9)
        expected = s.plan.mu_total if cross_fit else s.plan.mu_round1
        assert all(m == pytest.approx(expected, rel=1e-9) and m <= expected * (1 + 1e-12)
                   for m in s.ledger.mu_by_rows().values())


# ---------------------------------------------------------------------------- protocol
def _round1(cfg, seed=3):
    rng = np.random.default_rng(seed)
    return [Site(s, *_design(600, rng), config=cfg, random_state=i).round1()
            for i, s in enumerate(cfg.site_ids)]


def test_setup_fields_and_limits():
    keys = {p: Signer.generate(p).public for p in ("centre", "h0", "h1", "h2")}
    cfg = _cfg(keys=keys)
    env = cfg.to_envelope()
    assert env.fields["estimator"] == "linear" and env.fields["radius"] == cfg.radius
    assert ProtocolConfig.from_envelope(env) == cfg
    for name, value in (("features_dim", 64), ("rff_seed", 1)):
        bad = replace(env, fields={**env.fields, name: value})
        with pytest.raises(ProtocolError, match=name):
            ProtocolConfig.from_envelope(bad)
    kern = make_protocol([("h0", 600, 1.0, 1e-6)], feature_bounds=[(0, 1)], alpha=0.1,
                         keys=None).to_envelope()
    with pytest.raises(ProtocolError, match="radius"):
        ProtocolConfig.from_envelope(replace(kern, fields={**kern.fields, "radius": 1.0}))
    assert cfg.linear_width == 6 + 4 + 3
    assert cfg.message_shapes("round1")["moments"] == (1, 13 * 14 // 2)
    with pytest.raises(Exception, match="radius"):
        _cfg(radius=-1.0)
    many = {j: [f"c{k}" for k in range(MAX_LINEAR_WIDTH)] for j in (6,)}
    with pytest.raises(Exception, match="public limit"):
        make_protocol([("h0", 600, 1.0, 1e-6)], feature_bounds=_BOUNDS[:7],
                      categories=many, alpha=0.1, estimator="linear")


def test_centre_refuses_wrong_missing_or_poisoned_linear_blocks():
    cfg = _cfg()
    r1 = _round1(cfg)
    centre = Centre(cfg)
    bad = replace(r1[0], arrays={k: v for k, v in r1[0].arrays.items() if k != "moments"})
    with pytest.raises(ProtocolError, match="expected count, sums"):
        centre.aggregate([bad, *r1[1:]])
    poisoned = dict(r1[1].arrays)
    poisoned["moments"] = poisoned["moments"].copy()
    poisoned["moments"][0, 1] += 1e6
    with pytest.raises(ProtocolError, match="implausible"):
        centre.aggregate([r1[0], replace(r1[1], arrays=poisoned), r1[2]])
    fields = dict(r1[2].fields, sigma_moments=r1[2].fields["sigma_moments"] * 0.5)
    with pytest.raises(ProtocolError, match="sigma_moments"):
        centre.aggregate([r1[0], r1[1], replace(r1[2], fields=fields)])
    # a kernel-run round-1 message (count, sums only) is refused by the linear centre, and
    # a linear round-1 message by a kernel centre
    kern = make_protocol([(f"h{i}", 600, 1.0, 1e-6) for i in range(3)],
                         feature_bounds=[(0, 1)] * 2, alpha=0.1, protocol_id=cfg.protocol_id)
    with pytest.raises(ProtocolError, match="expected count and sums"):
        Centre(kern).aggregate(r1)
    model = centre.aggregate(r1)
    assert set(model.arrays) == {"theta", "pi", "radius"}  # radius="auto": the common r̄
    assert model.arrays["theta"].shape == (1, cfg.linear_width + 2)
    public = _cfg(radius=1.0)
    assert set(Centre(public).aggregate(_round1(public)).arrays) == {"theta", "pi"}


def test_sites_refuse_a_model_of_another_estimator():
    cfg = _cfg()
    rng = np.random.default_rng(9)
    site = Site("h0", *_design(600, rng), config=cfg, random_state=0)
    site.round1()
    model = Centre(cfg).aggregate(_round1(cfg))
    for arrays in ({"eta": np.full((1, 5, 2), 0.5), "pi": model.arrays["pi"]},
                   {"coef": np.zeros((1, 8, 2, 2)), "ridge": np.ones((1, 2)),
                    "pi": model.arrays["pi"]},
                   {"theta": np.zeros((1, 3)), "pi": model.arrays["pi"]}):
        with pytest.raises(ProtocolError):
            site.round2(replace(model, arrays=arrays))
    kern = make_protocol([(f"h{i}", 600, 1.0, 1e-6) for i in range(3)],
                         feature_bounds=[(0, 1)] * 2, alpha=0.1)
    ksite = Site("h0", rng.uniform(size=(600, 2)), rng.integers(0, 2, 600),
                 rng.integers(0, 2, 600), config=kern, random_state=0)
    ksite.round1()
    with pytest.raises(ProtocolError, match="expected eta and pi"):
        ksite.round2(replace(model, protocol_id=kern.protocol_id))


def test_linear_messages_refuse_replay_and_relabel():
    """A linear round-1 message replayed in another run, relabelled as another site (with
    or without re-signing), or replayed as another kind is refused at decoding."""
    signers = {p: Signer.generate(p) for p in ("centre", "h0", "h1", "h2")}
    cfg = replace(_cfg(), keys=tuple(sorted((p, s.public) for p, s in signers.items())))
    ring = cfg.keyring()
    r1 = _round1(cfg)
    raw = encode(r1[0], signers["h0"])
    shapes = cfg.message_shapes("round1")
    ok = decode(raw, keys=ring, kind="round1", protocol_id=cfg.protocol_id, shapes=shapes,
                max_bytes=cfg.message_limit("round1"))
    assert set(ok.arrays) == {"count", "sums", "cells", "moments"}
    with pytest.raises(ProtocolError, match="another run"):
        decode(raw, keys=ring, kind="round1", protocol_id="other-run")
    doc = json.loads(raw)
    doc["body"]["sender"] = "h1"
    with pytest.raises(ProtocolError, match="signature"):
        decode(canonical(doc), keys=ring)
    doc["signature"]["value"] = signers["h0"].sign(canonical(doc["body"]))
    with pytest.raises(ProtocolError, match="signature"):
        decode(canonical(doc), keys=ring)
    with pytest.raises(ProtocolError):
        decode(raw, keys=ring, kind="model")
    # a shape the setup does not imply is refused before the arrays are decoded
    wide = replace(cfg, categories=((6, tuple(_CATS)), (7, (0, 1, 2, 3))))
    with pytest.raises(ProtocolError, match="shape"):
        decode(raw, keys=ring, shapes=wide.message_shapes("round1"))


# ---------------------------------------------------------------------------- classifier
_POP = None


def _population():
    global _POP
    if _POP is None:
        _POP = _design(100_000, np.random.default_rng(12345))
    return _POP


def _fit(eps: float, alpha: float, seed: int, **kw) -> tuple[float, float, FDPFairClassifier]:
    rng = np.random.default_rng(seed)
    data = [_design(n, rng) for n in (800, 1500, 3000)]
    clf = FDPFairClassifier(epsilon=eps, delta=1e-6, alpha=alpha, feature_bounds=_BOUNDS,
                            categories=_CATEGORIES, estimator="linear", random_state=seed, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UncertifiedFairnessWarning)
        clf.fit([d[0] for d in data], [d[1] for d in data],
                sensitive_features=[d[2] for d in data])
    Xp, yp, Ap = _population()
    pred = clf.predict(Xp, sensitive_features=Ap)
    dd = float(pred[Ap == 1].mean() - pred[Ap == 0].mean())
    return dd, float(np.mean(pred != yp)), clf


def test_linear_fit_sanity_and_post_processing():
    """S = 3 unequal sites, 6 numeric + 2 categorical columns, ε = 1: |DD| ≤ α in the
    population, error well below the trivial classifier's, deterministic predictions (also
    after pickling) and the released score exposed as post-processing."""
    dd, err, clf = _fit(1.0, 0.1, 0)
    assert clf.estimator_ == "linear" and "theta" in clf.released_model_.arrays
    Xp, yp, Ap = _population()
    assert abs(dd) <= 0.1
    assert err < min(yp.mean(), 1 - yp.mean()) - 0.05
    p1 = clf.predict(Xp[:3000], sensitive_features=Ap[:3000])
    clone = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(clone.predict(Xp[:3000], sensitive_features=Ap[:3000]), p1)
    score = clf.decision_function(Xp[:3000], sensitive_features=Ap[:3000])
    assert score.shape == (3000,) and np.all(np.isfinite(score))
    np.testing.assert_array_equal(score, clf.model_.decision_function(Xp[:3000], Ap[:3000]))
    assert clf.privacy_spent_.epsilon == pytest.approx(1.0, rel=1e-6)


def _cap_check(reps: int, eps: float) -> None:
    """Population |DD| ≤ α with probability ≥ 1 − β (β = 0.05) per certified release;
    every rep draws fresh site data; exact binomial bound with false alarm < 1e-6. The
    default radius is each site's private one (``radius="auto"``)."""
    res = [_fit(eps, 0.1, 1000 + r) for r in range(reps)]
    certified = [abs(dd) for dd, _e, clf in res if clf.certified_]
    ok = sum(v <= 0.1 for v in certified)
    assert ok >= min_successes(len(certified), 0.95)


def test_linear_holds_cap_on_fresh_draws():
    """CI size: 12 releases on fresh draws."""
    _cap_check(12, 1.0)


@pytest.mark.slow
@pytest.mark.parametrize("eps", [1.0, 4.0])
def test_linear_holds_cap_on_fresh_draws_full(eps):
    """Slow: 120 releases per ε on fresh draws."""
    _cap_check(120, eps)


# ---------------------------------------------------------------------------- CLI
def _cli(*args: str, cwd, code: int = 0) -> dict:
    """One ``dpfair fdp …`` command in process (the same code as the console script)."""
    import os

    from typer.testing import CliRunner

    from dpfair.fairclass.federated.cli import _standalone

    old = os.getcwd()
    os.chdir(cwd)
    try:
        res = CliRunner().invoke(_standalone(), ["fdp", *args], catch_exceptions=False)
    finally:
        os.chdir(old)
    assert res.exit_code == code, res.output
    return json.loads(res.stdout) if code == 0 else {"error": res.output}


def test_cli_file_exchange_with_linear_and_categories(tmp_path):
    """keygen → setup --estimator linear --categories → round 1 → aggregate → round 2 →
    finalize → predict through the command line's code; a categorical column is read as
    text and one-hot encoded over its public list; each site's ledger holds exactly ε_s."""
    from dpfair.privacy import Budget, LedgerFile

    t = tmp_path
    sites, n, eps, delta = ("h1", "h2"), 1500, 2.0, 1e-6
    rng = np.random.default_rng(5)

    def write(path, m):
        x = rng.uniform(0, 1, size=(m, 2))
        c = rng.choice(["lo", "mid", "hi"], size=m)
        a = rng.integers(0, 2, m)
        logit = 2 * x[:, 0] - 1 + (c == "hi") - (c == "lo") + 0.8 * (2 * a - 1)
        y = (rng.uniform(size=m) < 1 / (1 + np.exp(-logit))).astype(int)
        lines = ["x1,x2,c,a,y"] + [f"{x[i, 0]:.17g},{x[i, 1]:.17g},{c[i]},{a[i]},{y[i]}"
                                   for i in range(m)]
        path.write_text("\n".join(lines) + "\n")

    for sid in sites:
        (t / sid).mkdir()
        write(t / sid / "data.csv", n)
        LedgerFile.create(t / sid / f"{sid}.fdp-ledger", Budget.approx(3 * eps, 3 * delta),
                          data=t / sid / "data.csv")
    write(t / "test.csv", 3000)
    (t / "keys").mkdir()
    for party in ("centre", *sites):
        _cli("keygen", "--out", f"keys/{party}", cwd=t)
    setup = ["centre", "setup", "--key", "keys/centre.key",
             *[a for s in sites for a in ("--site", f"{s}:{n}:{eps}:{delta}")],
             *[a for s in sites for a in ("--site-key", f"{s}=keys/{s}.pub")],
             "--bounds", "0", "--bounds", "1", "--bounds", "0", "--bounds", "1",
             "--alpha", "0.2", "--estimator", "linear"]
    _cli(*setup, "--categories", "5=lo,mid", "--out", "bad.json", cwd=t, code=2)
    info = _cli(*setup, "--categories", "2=lo,mid,hi", "--radius", "1.5", "--out",
                "setup.json", cwd=t)
    assert info["estimator"] == "linear" and info["width"] == 5 and info["radius"] == 1.5

    def site_args(sid, k):
        return ["site", f"round{k}", f"{sid}/data.csv", "--setup", "setup.json", "--site-id",
                sid, "--key", f"keys/{sid}.key", "--centre-key", "keys/centre.pub",
                "--ledger", f"{sid}/{sid}.fdp-ledger", "--features", "x1,x2,c", "--target", "y",
                "--sensitive", "a", "--state", f"{sid}/state.json", "--out",
                f"{sid}.r{k}.json"]

    for sid in sites:
        _cli(*site_args(sid, 1), cwd=t)
    _cli("centre", "aggregate", "h1.r1.json", "h2.r1.json", "--setup", "setup.json", "--key",
         "keys/centre.key", "--out", "model.json", cwd=t)
    for sid in sites:
        _cli(*site_args(sid, 2), "--model", "model.json", cwd=t)
    _cli("centre", "finalize", "h1.r2.json", "h2.r2.json", "--setup", "setup.json", "--key",
         "keys/centre.key", "--model", "model.json", "--out", "released.json", "--seed", "0",
         cwd=t)
    res = _cli("predict", "released.json", "test.csv", "--centre-key", "keys/centre.pub",
               "--features", "x1,x2,c", "--sensitive", "a", "--target", "y", cwd=t)
    assert res["error"] <= 0.4 and 0.0 <= res["abs_dd"] <= 1.0
    for sid in sites:
        led = LedgerFile.open(t / sid / f"{sid}.fdp-ledger")
        assert led.spent.epsilon == eps and led.spent.delta == delta
