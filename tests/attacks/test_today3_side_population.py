"""Attack: the side allocation on fresh population draws, where it is most fragile.

Through the actual S2 code (``s2_threshold``: exact discrete-Laplace count, windowed
exponential mechanism, lattice check) and through ``CDPFairClassifier.fit``:

* heavy count noise (small n_C, small ε: m̃ off by ≈ 5%, the fixed-point step of the proof
  then leans on its Δ·L⁺ term) with κ *forced* to the most one-sided share 0.05 — the
  proof allows any κ ≤ ½ fixed given S1, so forcing it is a valid (and the harshest)
  instance;
* an adversarial π̃ (S1 claims balanced groups, the truth is 10% / 90%) that makes the rule
  pick κ = 0.05 for group sizes where it would not;
* both signs of the bad side (D ≡ ±(α + δ));
* the real fit on a two-point design whose population DD is exact (the released rule on the
  support), with and without cross-fitting (β/2 per fold).

Each count of bad certified folds is compared with the exact binomial bound at β (a correct
implementation exceeds it with probability < 1e-6).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import stats

from dpfair import UncertifiedFairnessWarning
from dpfair.fairclass import CDPFairClassifier
from dpfair.fairclass import _pipeline as pipeline
from dpfair.fairclass._budget import plan_budget
from dpfair.fairclass._certify import SIDE_SHARES, choose_side_share
from dpfair.fairclass._pipeline import CalibrationScores, s2_threshold
from tests._stats import FAIL_PROB

BETA = 0.05


def max_failures(n_trials: int, p: float, fail_prob: float = FAIL_PROB) -> int:
    """Smallest k with P[Binomial(n_trials, p) > k] ≤ fail_prob."""
    return int(stats.binom.isf(fail_prob, n_trials, p)) + 1


def _flat(n: int, share1: float, level: float, rng: np.random.Generator):
    """Scores at ±0.9 only (outside τ̂'s range [−r, r], r ≤ ½): D(τ) ≡ level there."""
    a = (rng.uniform(size=n) < share1).astype(np.int8)
    u = rng.uniform(size=n)
    p1, p0 = 0.5 + level / 2, 0.5 - level / 2
    z = np.where(a == 1, np.where(u < p1, 0.9, -0.9), np.where(u < p0, -0.9, 0.9))
    return z, a


def _forced(kappa: float):
    def choose(*args, **kwargs):
        kwargs["shares"] = (kappa,)
        return choose_side_share(*args, **kwargs)
    return choose


# CI size 150 fits, the full 600 with -m slow (the seed does not depend on ``reps``: the
# CI run is the first 150 fits of the full one); the bound is recomputed for the size.
@pytest.mark.parametrize("reps", [150, pytest.param(600, marks=pytest.mark.slow)])
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_heavy_count_noise_forced_one_sided_share(monkeypatch, sign, reps):
    """n_C = 600, ε = 0.5 (ε_c = 0.125: m̃ ± 8 on ≈ 240), α = 0.5, D ≡ ±(α + 0.005),
    κ = 0.05 forced: bad certified ≤ the 1e-6 bound at β. Measured (300 reps, +): 5
    certified (1.7%), all bad; the bound is 24 at 150 reps, 59 at 600."""
    monkeypatch.setattr(pipeline, "choose_side_share", _forced(0.05))
    alpha, n = 0.5, 600
    plan = plan_budget(0.5, 1e-6, cross_fit=False, has_s2=True, check_share=0.35)
    rng = np.random.default_rng(31 + int(sign))
    pi = np.array([0.6, 0.4])
    bad = 0
    sides = []
    for _ in range(reps):
        z, a = _flat(n, 0.4, sign * (alpha + 0.005), rng)
        _tau, cert = s2_threshold(CalibrationScores(z, a), pi, (alpha, 0.0), plan, rng, BETA)
        assert cert is not None and cert.side_share == 0.05
        sides.append(cert.side)
        bad += cert.certified  # every τ̂ in [−r, r] has |D| = α + 0.005 > α
    assert bad <= max_failures(reps, BETA)
    # τ̂ points to the bad side in most fits: the small margin is really exercised
    assert np.mean(np.array(sides) == int(sign)) > 0.5


# CI size 150 fits (the first 150 of the full run), the full 600 with -m slow; the bound
# is recomputed for the size (24 at 150, 59 at 600).
@pytest.mark.parametrize("reps", [150, pytest.param(600, marks=pytest.mark.slow)])
def test_adversarial_pi_picks_the_one_sided_share_for_a_small_group(reps):
    """S1's π̃ claims (½, ½); the calibration half has 10% group 1 (n₁ ≈ 150 of 1500).
    κ = 0.05 is chosen for the claimed sizes; the margins use the released m̃ — the
    guarantee must hold anyway (ε = 1, α = 0.3, D ≡ α + 0.005)."""
    alpha, n = 0.3, 1500
    plan = plan_budget(1.0, 1e-6, cross_fit=False, has_s2=True, check_share=0.35)
    rng = np.random.default_rng(41)
    pi = np.array([0.5, 0.5])
    bad = 0
    kappas = set()
    for _ in range(reps):
        z, a = _flat(n, 0.1, alpha + 0.005, rng)
        _tau, cert = s2_threshold(CalibrationScores(z, a), pi, (alpha, 0.0), plan, rng, BETA)
        assert cert is not None
        kappas.add(cert.side_share)
        bad += cert.certified
    assert kappas == {min(SIDE_SHARES)}
    assert bad <= max_failures(reps, BETA)


# --------------------------------------------------------------------- the real fit
SUPPORT_X = np.array([[0.1], [0.9], [0.1], [0.9]])
SUPPORT_A = np.array([0, 0, 1, 1], dtype=np.int8)


def _two_point(n: int, level: float, rng: np.random.Generator):
    """x ∈ {0.1, 0.9}, η(0.9) = 0.999, η(0.1) = 0.001 in both groups; P(x = 0.9 | A = 1)
    − P(x = 0.9 | A = 0) = level: the population DD of the plug-in rule is ``level`` for
    every τ̂ between the two groups' score atoms (flat), far from it otherwise."""
    A = (rng.uniform(size=n) < 0.4).astype(np.int8)
    p_hi = np.where(A == 1, 0.5 + level / 2, 0.5 - level / 2)
    x = np.where(rng.uniform(size=n) < p_hi, 0.9, 0.1)
    y = (rng.uniform(size=n) < np.where(x > 0.5, 0.999, 0.001)).astype(np.int8)
    return x[:, None], y, A


def _population_dd(clf: CDPFairClassifier, level: float) -> float:
    """Exact population DD of the released (randomised, cross-fitted) classifier."""
    p = clf.predict_proba(SUPPORT_X, sensitive_features=SUPPORT_A)[:, 1]
    h1, h0 = 0.5 + level / 2, 0.5 - level / 2
    return float((1 - h1) * p[2] + h1 * p[3] - ((1 - h0) * p[0] + h0 * p[1]))


# CI size 50 fits, the full 200 with -m slow (fit r is seeded by r alone: the CI run is the
# first 50 fits of the full one); the bound is recomputed for the size (13 at 50, 28 at 200).
@pytest.mark.parametrize("reps", [50, pytest.param(200, marks=pytest.mark.slow)])
@pytest.mark.parametrize(("cross_fit", "alpha"), [(False, 0.15), (True, 0.25)])
def test_real_fit_two_point_design(cross_fit, alpha, reps):
    """ε = 1, n = 6000, α where the fit chooses κ = 0.05 (cross-fitting: β/2 per fold, so a
    larger α), D = α + 0.005 on the flat part: bad certified fits ≤ the 1e-6 bound at β.
    Measured (200 fits): no cross-fit 4 certified, 4 bad (bound 28); cross-fit 0 certified
    (both folds must pass on a sharp design, so that case only checks that no false
    certificate appears; the per-fold split β/2 is checked on every certificate)."""
    level = alpha + 0.005
    bad = cert_n = 0
    kappas = set()
    for rep in range(reps):
        X, y, A = _two_point(6000, level, np.random.default_rng(90_000 + rep))
        clf = CDPFairClassifier(epsilon=1.0, delta=1e-6, alpha=alpha,
                                feature_bounds=[(0.0, 1.0)], random_state=rep,
                                cross_fit=cross_fit, fail_prob=BETA)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UncertifiedFairnessWarning)
            clf.fit(X, y, sensitive_features=A)
        for c in clf.certificates_:
            assert c.fail_prob == pytest.approx(BETA / len(clf.folds_))
            kappas.add(c.side_share)
        cert_n += bool(clf.certified_)
        bad += bool(clf.certified_) and abs(_population_dd(clf, level)) > alpha
    assert min(SIDE_SHARES) in kappas
    assert bad <= max_failures(reps, BETA), (bad, cert_n)
