"""CDP-Fair's certified threshold rule: margin, accounting, warning, population guarantee.

The statistical tests use a design the project never tuned to (issue 12): two uniform
features, A ~ Bern(0.5), η = sigmoid(4(x₁ − ½) + 1.5(2a − 1)), N = 6000; the population
disparity of every fitted model is measured on 10^5 fresh draws. A correct implementation
keeps P(|DD| > α and certified) ≤ β = 0.05; the count of repetitions that violate it is
compared with an exact binomial bound at false-alarm probability 1e-6 (tests/_stats.py).
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
from scipy import stats

import dpfair
from dpfair import UncertifiedFairnessWarning
from dpfair.fairclass import CDPFairClassifier, UncertifiedFairnessError
from dpfair.fairclass._certify import (
    TIE_SLACK,
    _tail,
    aim_slack,
    certification_margin,
    laplace_sum_sf,
    normal_laplace_cdf,
)
from tests._stats import min_successes

BOUNDS = [(0.0, 1.0), (0.0, 1.0)]


def unseen(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    X = rng.uniform(size=(n, 2))
    A = (rng.uniform(size=n) < 0.5).astype(np.int8)
    eta = 1.0 / (1.0 + np.exp(-(4.0 * (X[:, 0] - 0.5) + 1.5 * (2.0 * A - 1.0))))
    y = (rng.uniform(size=n) < eta).astype(np.int64)
    return X, y, A


_POP = unseen(100_000, np.random.default_rng(424_242))


def _population_dd(clf: CDPFairClassifier) -> float:
    X, _, A = _POP
    p = clf.predict_proba(X, sensitive_features=A)[:, 1]
    return float(p[A == 1].mean() - p[A == 0].mean())


def _run(eps: float, alpha: float, rep: int, **kw: float) -> tuple[float, bool]:
    X, y, A = unseen(6000, np.random.default_rng(77_000 + rep))
    clf = CDPFairClassifier(
        epsilon=eps, delta=3000.0**-2, alpha=alpha, feature_bounds=BOUNDS, random_state=rep,
        **kw,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UncertifiedFairnessWarning)
        clf.fit(X, y, sensitive_features=A)
    assert clf.certified_ is not None
    return _population_dd(clf), bool(clf.certified_)


# ---------------------------------------------------------------------------- margin
def test_normal_laplace_cdf_matches_monte_carlo():
    rng = np.random.default_rng(1)
    s, b = 0.02, 0.01
    x = s * rng.standard_normal(400_000) + rng.laplace(0.0, b, 400_000)
    for q in (-0.06, -0.02, 0.0, 0.03):
        # 400,000 draws: binomial sd of the share ≤ 0.0008; 6 sd.
        assert normal_laplace_cdf(q, s, b) == pytest.approx(np.mean(x <= q), abs=0.005)


def test_margin_solves_its_tail_equation_and_shrinks_with_budget():
    margins = []
    for eps in (0.5, 1.0, 4.0, 50.0):
        t = certification_margin(
            1500.0, 1500.0, epsilon_count=0.25 * eps, epsilon_check=0.35 * eps,
            fail_prob_side=0.025,
        )
        margins.append(t)
    assert all(a > b for a, b in itertools.pairwise(margins))
    # ε → ∞: only the sampling part, z_{0.02475} · sqrt((1/1500 + 1/1500)/4) ≈ 0.0360.
    assert margins[-1] == pytest.approx(1.964 * 0.5 * np.sqrt(2 / 1500), rel=0.03)
    s = 0.5 * np.sqrt(2 / 1500)
    assert _tail(0.04, s, 0.0, 0.0) == pytest.approx(float(stats.norm.cdf(-0.04 / s)), rel=1e-9)


def test_margin_tail_includes_denominator_noise_monte_carlo():
    rng = np.random.default_rng(2)
    s, bw, bv = 0.018, 0.004, 0.005
    n = 400_000
    x = s * rng.standard_normal(n) + rng.laplace(0.0, bw, n) - bv * np.maximum(
        rng.laplace(0.0, 1.0, n), 0.0
    )
    for t in (0.02, 0.04):
        assert _tail(t, s, bw, bv) == pytest.approx(np.mean(x <= -t), abs=0.004)


@pytest.mark.parametrize(("c1", "c0"), [(0.015, 0.003), (0.004, 0.004), (0.02, 1e-7)])
def test_two_count_tail_monte_carlo(c1, c0):
    """Equal opportunity's denominator term V = c₁X₁ + c₀X₀ (X_a = L_a⁺ / L_a⁻ of two
    independent Laplace(1) counts): the tail and P(V ≥ t) against 400,000 draws."""
    from dpfair.fairclass._certify import _tail_two, _two_sf

    rng = np.random.default_rng(5)
    n = 400_000
    s, bw = 0.024, 0.005
    v = c1 * np.maximum(rng.laplace(0.0, 1.0, n), 0.0) + c0 * np.maximum(
        -rng.laplace(0.0, 1.0, n), 0.0)
    x = s * rng.standard_normal(n) + rng.laplace(0.0, bw, n) - v
    for t in (0.03, 0.06):
        # binomial sd of a share ≤ 0.0008 at 400,000 draws: 5 sd
        assert _tail_two(t, s, bw, c1, c0) == pytest.approx(np.mean(x <= -t), abs=0.004)
        assert _two_sf(t, c1, c0) == pytest.approx(np.mean(v >= t), abs=0.004)
    # the two-count bound is below the previous Δ·Exp(b_c) one (same b_c: c_a = b_c/m_a)
    m1, m0 = 500.0, 2800.0
    b_c = 8.0
    assert _tail_two(0.05, s, bw, b_c / m1, b_c / m0) <= _tail(
        0.05, s, bw, b_c * (1 / m1 + 1 / m0), 0.0)


@pytest.mark.parametrize("p_zero", [0.5, 0.0])
@pytest.mark.parametrize("bv", [3e-3, 1e-4, 1e-5, 1e-7, 1e-9])
def test_margin_tail_integral_small_count_noise(bv, p_zero):
    """Regression: the count-noise integral of the margin was lost when b_v ≪ s.

    Integrated in u = b_v·E over [0, ∞), quad never sampled the kernel below b_v ≈ 1e-5 (large
    n or ε) and returned ≈ 0: the tail came out halved and the margin z_{2β}·s, so the failure
    probability was twice β_side. The tail must equal the integral in E on a fixed grid.
    """
    s, bw, t = 0.0163, 0.003, 0.035
    e = np.linspace(0.0, 60.0, 600_001)
    g = np.array([normal_laplace_cdf(-t + bv * v, s, bw) for v in e[::1000]])
    # the integrand is within 1e-9 of its value at E = 0 over [0, 60] for b_v ≤ 1e-7, and
    # smooth otherwise: a Riemann sum on 601 nodes (weight e^-E) is accurate to 1e-4.
    w = np.exp(-e[::1000])
    ref_int = float(np.sum(g * w) * 0.1 - 0.05 * (g[0] * w[0] + g[-1] * w[-1]))
    ref = p_zero * normal_laplace_cdf(-t, s, bw) + (1 - p_zero) * ref_int
    assert _tail(t, s, bw, bv, p_zero) == pytest.approx(ref, rel=2e-3)


@pytest.mark.parametrize("n_cal", [3000, 100_000, 1_000_000, 10_000_000])
@pytest.mark.parametrize("eps", [1.0, 4.0, 16.0])
def test_margin_never_below_the_sampling_quantile(n_cal, eps):
    """Large n and ε: t stays ≥ z_{0.99·β_side}·s (it was z_{2β_side}·s below b_v ≈ 1e-5)."""
    m1, m0 = 0.3 * n_cal, 0.7 * n_cal
    t = certification_margin(m1, m0, epsilon_count=0.25 * eps, epsilon_check=0.35 * eps,
                             fail_prob_side=0.025)
    s = 0.5 * np.sqrt(1 / m1 + 1 / m0)
    assert t >= float(stats.norm.isf(0.99 * 0.025)) * s


def _exact_tail(n1, n0, p1, p0, t, bw):
    """P(T₁/n₁ − T₀/n₀ − (p₁ − p₀) + W ≤ −t) exactly, T_a ~ Bin(n_a, p_a), W ~ Laplace(bw)."""
    k1, k0 = np.arange(n1 + 1), np.arange(n0 + 1)
    f = stats.binom.pmf(k1, n1, p1)[:, None] * stats.binom.pmf(k0, n0, p0)[None, :]
    x = -t - ((k1[:, None] / n1 - k0[None, :] / n0) - (p1 - p0))
    lap = np.where(x < 0, 0.5 * np.exp(np.minimum(x, 0) / bw),
                   1 - 0.5 * np.exp(-np.maximum(x, 0) / bw))
    return float((f * lap).sum())


@pytest.mark.parametrize(("n1", "n0"), [(30, 40), (100, 100), (200, 300)])
@pytest.mark.parametrize("eps_check", [0.35, 1e4])
def test_margin_dominates_exact_binomial(n1, n0, eps_check):
    """The margin's normal sampling term plus the lattice shift covers the exact binomial
    difference (worst case over a grid of rates), with and without check noise."""
    t = certification_margin(float(n1), float(n0), epsilon_count=1e7, epsilon_check=eps_check,
                             fail_prob_side=0.025)
    bw = (1 / n1 + 1 / n0) / eps_check
    grid = np.concatenate([np.linspace(0.02, 0.98, 13), np.linspace(0.46, 0.54, 9)])
    worst = max(_exact_tail(n1, n0, p1, p0, t, bw) for p1 in grid for p0 in grid)
    assert worst <= 0.025


# ---------------------------------------------------------------------------- API
def test_warning_class_is_exported_user_warning():
    assert issubclass(dpfair.UncertifiedFairnessWarning, UserWarning)
    assert "UncertifiedFairnessWarning" in dpfair.__all__


def test_uncertified_fit_warns_and_says_so():
    X, y, A = unseen(2000, np.random.default_rng(3))
    clf = CDPFairClassifier(epsilon=0.5, delta=1e-6, alpha=0.02, feature_bounds=BOUNDS,
                            random_state=0)
    with pytest.warns(UncertifiedFairnessWarning, match="NOT certified"):
        clf.fit(X, y, sensitive_features=A)
    assert clf.certified_ is False
    (cert,) = clf.certificates_
    assert not cert.certified and cert.margin > 0.02
    out = clf.export_released_model()
    assert out["certified"] is False and out["certificates"][0]["margin"] == cert.margin


def test_certified_fit_no_warning_and_ledger_has_the_check():
    X, y, A = unseen(6000, np.random.default_rng(4))
    # A fixed seed whose fit certifies (about 9 in 10 seeds do here: 18 of seeds 0–19 after
    # the exact samplers of issue 11 changed the draw streams; the certification *rate* is
    # tested with exact binomial bounds elsewhere in this file).
    clf = CDPFairClassifier(epsilon=4.0, delta=1e-6, alpha=0.2, feature_bounds=BOUNDS,
                            random_state=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UncertifiedFairnessWarning)
        clf.fit(X, y, sensitive_features=A)
    assert clf.certified_ is True
    assert clf.tau_.size == 1  # default: no cross-fitting under the certified rule
    plan = clf.budget_plan_
    assert plan.epsilon_check == pytest.approx(0.35 * 4.0)
    assert plan.epsilon_count + plan.epsilon_threshold + plan.epsilon_check == pytest.approx(4.0)
    labels = [r.label for r in clf.privacy_ledger_.records]
    assert any("certificate" in lab for lab in labels)
    assert clf.privacy_spent_.epsilon == pytest.approx(4.0)
    by_rows = clf.privacy_ledger_.spent_by_rows
    assert by_rows["half B"].epsilon == pytest.approx(4.0)


def test_certified_with_cross_fit_splits_budget_and_beta():
    X, y, A = unseen(6000, np.random.default_rng(5))
    clf = CDPFairClassifier(epsilon=2.0, delta=1e-6, alpha=0.2, feature_bounds=BOUNDS,
                            cross_fit=True, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UncertifiedFairnessWarning)
        clf.fit(X, y, sensitive_features=A)
    assert len(clf.certificates_) == 2
    assert all(c.fail_prob == pytest.approx(0.025) for c in clf.certificates_)
    assert clf.privacy_spent_.epsilon == pytest.approx(2.0)


def test_target_rule_is_the_previous_behaviour():
    X, y, A = unseen(3000, np.random.default_rng(6))
    clf = CDPFairClassifier(epsilon=1.0, delta=1e-6, alpha=0.1, feature_bounds=BOUNDS,
                            threshold_rule="target", random_state=0)
    clf.fit(X, y, sensitive_features=A)
    assert clf.certified_ is None and clf.certificates_ is None
    assert clf.tau_.size == 2  # cross-fitting stays the default of the target rule
    assert clf.budget_plan_.epsilon_check == 0.0


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"threshold_rule": "paper"}, "threshold_rule"),
        ({"fail_prob": 0.7}, "fail_prob"),
        ({"fail_prob": 0.0}, "fail_prob"),
        ({"check_share": 0.8}, "check_share"),
    ],
)
def test_bad_certification_parameters(kw, match):
    X, y, A = unseen(500, np.random.default_rng(7))
    clf = CDPFairClassifier(feature_bounds=BOUNDS, random_state=0, **kw)
    with pytest.raises(dpfair.InvalidParameterError, match=match):
        clf.fit(X, y, sensitive_features=A)
    assert not hasattr(clf, "folds_")


# ---------------------------------------------------------------------------- guarantee
def test_certified_cap_holds_in_population_unseen_design():
    """30 reps at ε = 1, α = 0.1 on the unseen design (issue 12).

    Success = population |DD| ≤ α or not certified; by the guarantee its probability is
    ≥ 0.95. Measured (benchmarks/fairclass_certified_study.py, 30 reps): 0% above α,
    97% certified; the target rule had 40% above α.
    """
    res = [_run(1.0, 0.1, r) for r in range(30)]
    ok = sum((abs(d) <= 0.1) or not c for d, c in res)
    assert ok >= min_successes(30, 0.95)
    # Most fits are certified here, so the cap holds for the released models as a whole.
    assert sum(abs(d) <= 0.1 for d, _ in res) >= min_successes(30, 0.9)
    assert sum(c for _, c in res) >= min_successes(30, 0.8)


@pytest.mark.slow
@pytest.mark.parametrize("eps", [1.0, 4.0])
@pytest.mark.parametrize("alpha", [0.05, 0.1])
def test_certified_cap_sweep_unseen_design(eps, alpha):
    """Slow: 200 reps per cell; P(|DD| > α and certified) ≤ 0.05 (exact 1e-6 bound)."""
    res = [_run(eps, alpha, 1000 + r) for r in range(200)]
    ok = sum((abs(d) <= alpha) or not c for d, c in res)
    assert ok >= min_successes(200, 0.95)


def test_certified_cap_holds_with_a_larger_calibration_share():
    """calibration_share=0.7 at ε = 1, α = 0.05 (where halves certify ~60%): 30 reps.

    Success = population |DD| ≤ α or not certified (probability ≥ 0.95 by the guarantee,
    whatever the share: the theorem conditions on S1 and the calibration sizes are public).
    """
    res = [_run(1.0, 0.05, 500 + r, calibration_share=0.7) for r in range(30)]
    ok = sum((abs(d) <= 0.05) or not c for d, c in res)
    assert ok >= min_successes(30, 0.95)
    assert sum(c for _, c in res) >= min_successes(30, 0.7)


@pytest.mark.slow
@pytest.mark.parametrize("eps", [0.5, 1.0, 4.0])
@pytest.mark.parametrize("alpha", [0.02, 0.05])
def test_certified_cap_sweep_calibration_share(eps, alpha):
    """Slow: 200 reps per cell at calibration_share=0.7; P(|DD| > α and certified) ≤ 0.05."""
    res = [_run(eps, alpha, 3000 + r, calibration_share=0.7) for r in range(200)]
    ok = sum((abs(d) <= alpha) or not c for d, c in res)
    assert ok >= min_successes(200, 0.95)


# ---------------------------------------------------------------------------- issue 20
def test_on_uncertified_raise_returns_nothing_but_spends_the_budget():
    X, y, A = unseen(2000, np.random.default_rng(3))
    clf = CDPFairClassifier(epsilon=0.5, delta=1e-6, alpha=0.02, feature_bounds=BOUNDS,
                            random_state=0, on_uncertified="raise")
    with pytest.raises(UncertifiedFairnessError, match="NOT certified") as info:
        clf.fit(X, y, sensitive_features=A)
    assert not hasattr(clf, "folds_") and not hasattr(clf, "certified_")
    err = info.value
    assert err.privacy_spent.epsilon == pytest.approx(0.5)
    labels = [r.label for r in err.privacy_ledger.records]
    assert any("certificate" in lab for lab in labels)
    assert any("threshold tau" in lab for lab in labels)
    assert err.privacy_ledger.total.epsilon == pytest.approx(0.5)
    assert err.certificates and not err.certificates[0].certified
    # The same fit with "warn" releases the model (same seed: same draws).
    warn = CDPFairClassifier(epsilon=0.5, delta=1e-6, alpha=0.02, feature_bounds=BOUNDS,
                             random_state=0)
    with pytest.warns(UncertifiedFairnessWarning):
        warn.fit(X, y, sensitive_features=A)
    assert warn.certificates_[0].released_dd == err.certificates[0].released_dd


def test_on_uncertified_raise_keeps_a_certified_model():
    X, y, A = unseen(6000, np.random.default_rng(4))
    clf = CDPFairClassifier(epsilon=4.0, delta=1e-6, alpha=0.2, feature_bounds=BOUNDS,
                            random_state=1, on_uncertified="raise")
    clf.fit(X, y, sensitive_features=A)
    assert clf.certified_ is True


@pytest.mark.parametrize(("kw", "match"), [({"on_uncertified": "ignore"}, "on_uncertified"),
                                           ({"constraints": "parity"}, "constraints")])
def test_bad_issue20_parameters(kw, match):
    X, y, A = unseen(500, np.random.default_rng(7))
    clf = CDPFairClassifier(feature_bounds=BOUNDS, random_state=0, **kw)
    with pytest.raises(dpfair.InvalidParameterError, match=match):
        clf.fit(X, y, sensitive_features=A)


def test_aim_slack_is_the_laplace_sum_quantile_with_a_floor():
    b_v, b_w = 0.006, 0.003
    g = aim_slack(b_v, b_w, aim_fail=0.03, floor=0.0)
    rng = np.random.default_rng(9)
    s = rng.laplace(0, b_v, 400_000) + rng.laplace(0, b_w, 400_000)
    # 400,000 draws: binomial sd of the share ≈ 0.00027; 6 sd.
    assert np.mean(s > g) == pytest.approx(0.03, abs=0.0017)
    assert laplace_sum_sf(0.0, b_v, b_w) == pytest.approx(0.5)
    assert laplace_sum_sf(0.01, b_v, b_v) == pytest.approx(
        np.mean(rng.laplace(0, b_v, 400_000) + rng.laplace(0, b_v, 400_000) > 0.01), abs=0.0017)
    assert aim_slack(1e-5, 1e-5, floor=TIE_SLACK) == TIE_SLACK
    # The slack never falls below the floor, and falls with the noise above it: the aim
    # approaches α − t as ε grows, but never closer than the floor.
    gaps = [aim_slack(b / e, b / (2 * e)) for b in (0.01,) for e in (0.5, 1, 2, 4, 16)]
    assert all(a >= b for a, b in itertools.pairwise(gaps)) and min(gaps) == TIE_SLACK


def _cat(n, rng):
    c1, c2, x = rng.integers(0, 4, n), rng.integers(0, 3, n), rng.integers(0, 11, n)
    A = (rng.uniform(size=n) < 0.4).astype(np.int8)
    lin = (np.array([-1.0, 0.0, 0.5, 1.2])[c1] + np.array([0.3, -0.4, 0.0])[c2]
           + 0.25 * (x - 5) + (2 * A - 1))
    y = (rng.uniform(size=n) < 1.0 / (1.0 + np.exp(-lin))).astype(np.int64)
    return np.column_stack([c1, c2, x]).astype(float), y, A


def _cat_rate(eps, reps, seed0):
    hits = 0
    for r in range(reps):
        X, y, A = _cat(6000, np.random.default_rng(seed0 + r))
        clf = CDPFairClassifier(
            epsilon=eps, delta=3000.0**-2, alpha=0.1, estimator="linear",
            categories={0: [0.0, 1.0, 2.0, 3.0], 1: [0.0, 1.0, 2.0]},
            feature_bounds=[None, None, (0.0, 10.0)], random_state=seed0 + r)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UncertifiedFairnessWarning)
            clf.fit(X, y, sensitive_features=A)
        hits += bool(clf.certified_)
    return hits


def test_certification_does_not_fall_as_epsilon_grows_categorical():
    """The audit's case (issue 20): a linear model with categorical columns, α = 0.1.

    Before: 29/30 certified at ε = 0.5, 19/30 at ε = 4 (the aim's slack shrank below one step
    of the tied calibration curve). Now the slack has a floor and the threshold's loss a
    window on the feasible side. Exact bounds: if the rate at ε = 4 is ≥ 0.9, 30 fits give
    at least ``min_successes(30, 0.9)``; and X₄ ≥ X₀.₅ − k where k bounds the difference of
    two binomials of equal rate (the worst case p = ½) at 1e-6.
    """
    reps = 30
    low, high = _cat_rate(0.5, reps, 500), _cat_rate(4.0, reps, 900)
    assert high >= min_successes(reps, 0.9)
    # The smallest k with P(Bin(30, p) − Bin(30, p) > k) ≤ 1e-6 on a grid of p (exact).
    def diff_tail(k, p):
        pmf = stats.binom.pmf(np.arange(reps + 1), reps, p)
        return float(sum(pmf[i] * pmf[j] for i in range(reps + 1) for j in range(i - k)))

    k = next(k for k in range(reps) if max(diff_tail(k, p) for p in (0.3, 0.5, 0.7)) <= 1e-6)
    assert high >= low - k


def test_certified_rate_and_conditional_cap_paper_design():
    """The issue's targets at ε = 1 on the paper's design (N = 9000): ≥ 95% certified at
    α = 0.1, ≥ 85% at α = 0.05 (exact 1e-6 lower bounds on 30 fits each), and among certified
    fits the population share above α stays ≤ β = 0.05 (exact 1e-6 upper bound)."""
    from dpfair.fairclass.datasets import simulate

    big = simulate(100_000, rng=31_337)
    for alpha, target in ((0.1, 0.95), (0.05, 0.85)):
        cert = above = 0
        for r in range(30):
            d = simulate(9000, rng=60_000 + r)
            clf = CDPFairClassifier(epsilon=1.0, delta=4500.0**-2, alpha=alpha,
                                    feature_bounds=d.feature_bounds, random_state=r)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UncertifiedFairnessWarning)
                clf.fit(d.X, d.y, sensitive_features=d.A)
            if clf.certified_:
                cert += 1
                p = clf.predict_proba(big.X, sensitive_features=big.A)[:, 1]
                above += abs(p[big.A == 1].mean() - p[big.A == 0].mean()) > alpha
        assert cert >= min_successes(30, target)
        assert cert - above >= min_successes(cert, 0.95)
