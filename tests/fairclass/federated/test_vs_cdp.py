"""S = 1: FDP-Fair's round 1 is CDP-Fair's S1 in distribution; S2 differs by design.

What agrees (cross_fit=False, same bandwidth): the noise scales of π̃ and of the kernel
sums are identical (both give S1 the full (ε, δ) as one Gaussian mechanism), η̃ is the same
ratio estimator (FDP normalises by ñ_a, which cancels with its matching ridge), so π̃ and η̃
have the same law. What differs: S2 — CDP-Fair draws τ̂ with the exponential mechanism on
the exact DD step function; FDP-Fair searches a 2^M grid on noisy tree counts with the band
ρ — so errors and disparities are "comparable", not equal in law.
"""

from __future__ import annotations

import pytest
from scipy import stats

from dpfair.fairclass import CDPFairClassifier
from dpfair.fairclass.datasets import simulate
from dpfair.fairclass.federated import FDPFairClassifier


def test_s1_noise_scales_identical():
    d = simulate(2000, rng=0)
    kw = dict(
        epsilon=1.0,
        delta=1e-6,
        alpha=0.1,
        feature_bounds=d.feature_bounds,
        bandwidth=0.15,
        cross_fit=False,
        random_state=0,
    )
    cdp = CDPFairClassifier(**kw).fit(d.X, d.y, sensitive_features=d.A)
    fdp = FDPFairClassifier(**kw).fit([d.X], [d.y], sensitive_features=[d.A])
    plan = fdp.protocol_.plan("site-1")
    assert plan.sigma_count == pytest.approx(cdp.budget_plan_.sigma_count, rel=1e-9)
    assert plan.sigma_function == pytest.approx(cdp.budget_plan_.sigma_function, rel=1e-9)
    assert fdp.model_.grid.shape == cdp.grid_.shape


def test_pi_same_law():
    d = simulate(2000, rng=1)
    kw = dict(
        epsilon=0.5,
        delta=1e-6,
        alpha=0.1,
        feature_bounds=d.feature_bounds,
        bandwidth=0.2,
        cross_fit=False,
    )
    a = [
        CDPFairClassifier(random_state=r, **kw).fit(d.X, d.y, sensitive_features=d.A).pi_[0, 1]
        for r in range(40)
    ]
    b = [
        FDPFairClassifier(random_state=100 + r, **kw)
        .fit([d.X], [d.y], sensitive_features=[d.A])
        .pi_[0, 1]
        for r in range(40)
    ]
    # Same law ⇒ the two-sample KS p-value is uniform: P(p < 1e-6) = 1e-6.
    assert stats.ks_2samp(a, b).pvalue > 1e-6
