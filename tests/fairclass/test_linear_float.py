"""The linear CDP-Fair release holds as executed (issue 11): certified minimiser, lattice,
exact discrete Gaussian, and an accounting that adds up.

Adversary's view (THREATS.md rule 6): neighbours that differ in the last bits of one record
must not be separable through the low-order bits of the released θ̃. Under a common seed
the released noise is bit-identical, the only data-dependent part is the lattice point K,
and for last-bit neighbours K (hence θ̃) is identical.
"""

from __future__ import annotations

import math
import warnings
from decimal import Decimal, localcontext

import numpy as np
import pytest

from dpfair import UncertifiedFairnessWarning
from dpfair.fairclass import CDPFairClassifier
from dpfair.fairclass._linear import (
    _TANH_ULPS,
    FeatureMap,
    _Problem,
    design,
    fit_linear_release,
    plan_linear_s1,
)
from dpfair.mechanisms.gaussian_calibration import SMOOTHING_VARIANCE
from dpfair.mechanisms.lattice import snap_to_lattice
from dpfair.privacy import Budget
from dpfair.session import ReproducibleSeedWarning

BOUNDS = [(0.0, 10.0), (0.0, 1.0), None]
CATS = {2: ["red", "green", "blue"]}


def _raw(n: int, seed: int):
    rng = np.random.default_rng(seed)
    x1 = rng.uniform(0, 10, n)
    x2 = rng.uniform(0, 1, n)
    colour = rng.choice(["red", "green", "blue"], n)
    A = (rng.uniform(size=n) < 0.5).astype(np.int8)
    logit = 0.5 * (x1 - 5) + 2.0 * (x2 - 0.5) + np.where(colour == "red", 1.0, -0.5)
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-logit - 0.8 * (2 * A - 1)))).astype(np.int64)
    X = np.empty((n, 3), dtype=object)
    X[:, 0], X[:, 1], X[:, 2] = x1, x2, colour
    return X, y, A


def _design(X, A):
    fm = FeatureMap.build(BOUNDS, CATS, 3)
    return design(fm.transform(X), A, fm.norm_bound)


def _exact_gradient_norm(Phi, y, lam, b, theta) -> Decimal:
    """‖∇J_b(θ)‖₂ at the binary64 θ, in 60-digit decimal arithmetic (exact inputs)."""
    with localcontext() as ctx:
        ctx.prec = 60
        D = [[Decimal(float(v)) for v in row] for row in Phi]
        th = [Decimal(float(v)) for v in theta]
        g = [Decimal(float(lam)) * t + Decimal(float(bj)) for t, bj in zip(th, b, strict=True)]
        one = Decimal(1)
        for row, yi in zip(D, y, strict=True):
            s = Decimal(2 * int(yi) - 1)
            m = s * sum((a * t for a, t in zip(row, th, strict=True)), Decimal(0))
            sig = one / (one + m.exp())  # σ(−m) = −ℓ′
            for j, a in enumerate(row):
                g[j] -= a * s * sig
        return sum((v * v for v in g), Decimal(0)).sqrt()


@pytest.mark.parametrize(("eps", "seed"), [(0.3, 0), (1.0, 1), (6.0, 2)])
def test_stopping_rule_holds_in_exact_arithmetic(eps, seed):
    X, y, A = _raw(300, seed)
    Phi = _design(X, A)
    plan = plan_linear_s1(eps, 1e-6, n_rows=300, width=Phi.shape[1])
    rel = fit_linear_release(Phi, y, plan, np.random.default_rng(seed))
    exact = _exact_gradient_norm(Phi, y, plan.regulariser, rel.b, rel.theta_hat)
    # The certificate is a true upper bound of the exact gradient norm, and below γ.
    assert exact <= Decimal(rel.gradient_bound)
    assert rel.gradient_bound <= plan.tolerance
    # b is on its public lattice, and the release on 2^-k·ℤ.
    k_b = plan.b_bits
    np.testing.assert_array_equal(np.rint(rel.b * 2.0**k_b) / 2.0**k_b, rel.b)
    np.testing.assert_array_equal(rel.theta * 2.0**plan.lattice_bits,
                                  (rel.lattice + rel.noise).astype(np.float64))


def test_platform_tanh_within_the_assumed_ulps():
    """The one floating-point assumption of the certificate: numpy's tanh ≤ T ulps."""
    rng = np.random.default_rng(7)
    x = np.concatenate([rng.normal(0, 1, 400), rng.normal(0, 10, 300),
                        rng.uniform(-1e-6, 1e-6, 100), rng.uniform(-25, 25, 200)])
    got = np.tanh(x)
    worst = 0.0
    with localcontext() as ctx:
        ctx.prec = 50
        for xi, gi in zip(x.tolist(), got.tolist(), strict=True):
            e2 = (2 * Decimal(xi)).exp()
            exact = (e2 - 1) / (e2 + 1)
            ulp = float(np.spacing(abs(float(exact)))) if exact != 0 else 5e-324
            worst = max(worst, float(abs(Decimal(gi) - exact)) / ulp)
    assert worst <= _TANH_ULPS


def _fit_pair(X, Xp, y, A, seed, plan):
    r1 = fit_linear_release(_design(X, A), y, plan, np.random.default_rng(seed))
    r2 = fit_linear_release(_design(Xp, A), y, plan, np.random.default_rng(seed))
    return r1, r2


def test_last_bit_neighbours_release_identical_outputs_under_a_common_seed():
    n = 400
    X, y, A = _raw(n, 3)
    plan = plan_linear_s1(1.0, 1e-6, n_rows=n, width=_design(X, A).shape[1])
    moved_hat = 0
    for seed in range(12):
        Xp = X.copy()
        i = seed * 7 % n
        Xp[i, 0] = float(np.nextafter(float(X[i, 0]), 11.0))  # the last bit of one value
        Xp[i, 1] = float(np.nextafter(float(X[i, 1]), -1.0))
        r1, r2 = _fit_pair(X, Xp, y, A, seed, plan)
        # The noise is drawn from the seed only: bit-identical across neighbours.
        np.testing.assert_array_equal(r1.b, r2.b)
        np.testing.assert_array_equal(r1.noise, r2.noise)
        np.testing.assert_array_equal(
            r1.theta - r1.lattice * 2.0**-plan.lattice_bits,
            r2.theta - r2.lattice * 2.0**-plan.lattice_bits,
        )
        # The data enter only through K: identical for last-bit neighbours, so the released
        # vectors are bit-identical (no reachable output separates D from D′) ...
        np.testing.assert_array_equal(r1.lattice, r2.lattice)
        np.testing.assert_array_equal(r1.theta, r2.theta)
        # ... although the binary64 minimiser itself does move in its low-order bits (the
        # channel the old release exposed).
        moved_hat += int(not np.array_equal(r1.theta_hat, r2.theta_hat))
    assert moved_hat >= 1


def _lattice_at(Phi, y, plan, theta):
    """g(D, θ): the code path run on b = b_D(θ) = −∇L_D(θ) − Λθ (θ the exact minimiser)."""
    lam = plan.regulariser
    zero = _Problem.build(Phi, y, lam, np.zeros(Phi.shape[1]))
    b = snap_to_lattice(-zero.gradient(theta, zero.sigmoid(theta)), plan.b_bits)
    prob = _Problem.build(Phi, y, lam, b)
    th, bound = prob.minimise(1e-9 * (Phi.shape[0] + lam), plan.tolerance)
    assert bound <= plan.tolerance
    k = plan.lattice_bits
    return th, np.rint(np.clip(th, -plan.box, plan.box) * 2.0**k).astype(np.int64)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_second_step_sensitivity_holds_for_far_neighbours(seed):
    """Step 2 of the proof: for a fixed θ (the exact minimiser under both D and D′, with
    their own b), the computed lattice points differ by at most Δ lattice units."""
    n = 400
    X, y, A = _raw(n, 10 + seed)
    Phi = _design(X, A)
    plan = plan_linear_s1(1.0, 1e-6, n_rows=n, width=Phi.shape[1])
    theta = fit_linear_release(Phi, y, plan, np.random.default_rng(seed)).theta_hat
    theta = theta + np.random.default_rng(seed).normal(0, 0.3, theta.size)  # any θ
    Xp, yp, Ap = X.copy(), y.copy(), A.copy()
    Xp[seed] = [10.0, 0.0, "blue"]
    yp[seed], Ap[seed] = 1 - y[seed], 1 - A[seed]
    th1, k1 = _lattice_at(Phi, y, plan, theta)
    th2, k2 = _lattice_at(_design(Xp, Ap), yp, plan, theta)
    assert np.linalg.norm(th1 - theta) <= plan.radius
    assert np.linalg.norm(th2 - theta) <= plan.radius
    assert np.linalg.norm((k1 - k2).astype(np.float64)) <= plan.output_sensitivity


def test_accounting_adds_up_and_session_charges_the_same():
    pd = pytest.importorskip("pandas")
    from dpfair.session import Session

    X, y, A = _raw(3000, 5)
    X = X[:, :2].astype(np.float64)  # the Session reads numeric columns
    eps, delta = 1.0, 1e-6
    kw = dict(epsilon=eps, delta=delta, alpha=0.1, feature_bounds=BOUNDS[:2],
              estimator="linear", random_state=0, cross_fit=True)
    clf = CDPFairClassifier(**kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UncertifiedFairnessWarning)
        clf.fit(X, y, sensitive_features=A)
    ledger = clf.privacy_ledger_
    charged = [r for r in ledger.records if not r.part_of]
    labels = [r.label for r in charged]
    assert sum("lattice release of the certified minimiser" in lab for lab in labels) == 2
    # Each half: its charged records compose (basic) to its total; the fit's total is the
    # parallel composition of the halves, and equals privacy_spent_.
    for rows, spent in ledger.spent_by_rows.items():
        mine = [r.budget for r in charged if r.rows == rows]
        assert spent.epsilon == pytest.approx(sum(b.epsilon for b in mine), rel=1e-12)
        assert spent.delta == pytest.approx(sum(b.delta for b in mine), rel=1e-12)
    total = clf.privacy_spent_
    assert total.epsilon == pytest.approx(max(s.epsilon for s in ledger.spent_by_rows.values()))
    assert total.epsilon <= eps * (1 + 1e-9) and total.delta <= delta * (1 + 1e-9)
    assert total.epsilon == pytest.approx(eps) and total.delta == pytest.approx(delta)
    assert clf.path_privacy_spent_.epsilon == pytest.approx(total.epsilon)
    assert clf.path_privacy_spent_.delta == pytest.approx(total.delta)
    # The S1 pieces of one fit add up to S1's (ε₁, δ) of the plan, the new piece included.
    s1 = [r.budget for r in charged if r.label.startswith("fit 1 / S1")]
    assert len(s1) == 4  # group count, row radius, objective perturbation, lattice release
    assert sum(b.epsilon for b in s1) == pytest.approx(clf.budget_plan_.s1.epsilon)
    assert sum(b.delta for b in s1) == pytest.approx(clf.budget_plan_.s1.delta)
    # The Session charges exactly privacy_spent_.
    frame = pd.DataFrame({"x1": X[:, 0], "x2": X[:, 1], "y": y, "a": A})
    sess = Session(frame, budget=Budget.approx(2.0, 1e-5), reproducible_seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UncertifiedFairnessWarning)
        warnings.simplefilter("ignore", ReproducibleSeedWarning)
        model = sess.fit_fair_classifier(
            features=["x1", "x2"], target="y", sensitive="a", epsilon=eps, delta=delta,
            alpha=0.1, feature_bounds=BOUNDS[:2], estimator="linear", cross_fit=True,
        )
    assert model.estimator_ == "linear"
    assert sess.spent.epsilon == pytest.approx(model.privacy_spent_.epsilon, rel=1e-12)
    assert sess.spent.delta == pytest.approx(model.privacy_spent_.delta, rel=1e-12)
    assert model.privacy_spent_.epsilon == pytest.approx(total.epsilon, rel=1e-12)


def test_plan_output_noise_is_calibrated_to_its_share():
    from dpfair.mechanisms import analytic_gaussian_delta

    plan = plan_linear_s1(0.75, 1e-9, n_rows=34_189, width=60)
    k = plan.lattice_bits
    # Δ covers 2r (two certified θ̂ around one θ*) plus the rounding of p coordinates.
    assert plan.output_sensitivity >= 2.0 ** (k + 1) * plan.radius + math.sqrt(60)
    assert plan.radius * plan.regulariser >= plan.tolerance
    # The continuous part of the variance alone meets (ε_out, δ_out) at sensitivity Δ.
    sigma_c = math.sqrt(plan.output_variance - SMOOTHING_VARIANCE)
    assert analytic_gaussian_delta(sigma_c, plan.output_sensitivity, plan.epsilon_output) \
        <= plan.delta_output
    # Negligible next to the objective perturbation: σ_out ≈ 10^-5 in θ units.
    assert plan.sigma_output < 1e-4
