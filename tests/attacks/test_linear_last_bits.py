"""Floating-point attack on the centred linear score (THREATS.md rule 6, issue 19).

Adversary: two data sets that differ in the last bits of one record (every numeric value of
one row moved by one ulp). Everything the fit publishes — the row radius, θ̃ of the
objective perturbation's lattice release, π̃, τ̂, the certificate — must not separate them.
Under a common seed every random draw is a function of the seed alone (the radius is an
exact exponential mechanism on integer scores, b and the output noise are drawn from the
seed), so the data reach the outputs only through integers (the radius scores, the lattice
point K, the calibration counts); for last-bit neighbours those integers, hence the whole
release, are bit-identical. Power: the binary64 minimiser θ̂ itself (never published) does
move in its low-order bits.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from dpfair import UncertifiedFairnessWarning
from dpfair.fairclass import CDPFairClassifier
from dpfair.fairclass._linear import (
    FeatureMap,
    LinearDesign,
    fit_linear_release,
    plan_linear_s1,
    radius_ladder,
    radius_scores,
)

D = 12
BOX = [(-4.0, 4.0)] * D


def _data(n: int, seed: int):
    rng = np.random.default_rng(seed)
    A = (rng.uniform(size=n) < 0.5).astype(np.int8)
    X = np.clip(rng.normal(size=(n, D)) + 0.4 * (2 * A[:, None] - 1) * (np.arange(D) < 2),
                -4, 4)
    eta = 1 / (1 + np.exp(-(X.sum(axis=1) / math.sqrt(D) + 0.5 * (2 * A - 1))))
    y = (rng.uniform(size=n) < eta).astype(np.int64)
    return X, y, A


def _last_bits(X: np.ndarray, row: int) -> np.ndarray:
    Xp = X.copy()
    Xp[row] = np.nextafter(X[row], np.where(np.arange(D) % 2 == 0, 5.0, -5.0))
    return Xp


def _release(clf: CDPFairClassifier) -> list:
    out = clf.export_released_model()
    return [out["folds"], out["certified"], out["certificates"], out["tie_seed"]]


@pytest.mark.parametrize("radius", ["auto", 1.1])
def test_last_bit_neighbours_publish_identical_models(radius):
    n = 3000
    X, y, A = _data(n, 1)
    for seed in range(4):
        Xp = _last_bits(X, (97 * seed) % n)
        assert not np.array_equal(X, Xp)
        models = []
        for data in (X, Xp):
            clf = CDPFairClassifier(epsilon=1.0, delta=1e-7, alpha=0.1, feature_bounds=BOX,
                                    estimator="linear", radius=radius, random_state=seed,
                                    cross_fit=seed % 2 == 1)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UncertifiedFairnessWarning)
                clf.fit(data, y, sensitive_features=A)
            models.append(clf)
        assert _release(models[0]) == _release(models[1])
        for f0, f1 in zip(models[0].folds_, models[1].folds_, strict=True):
            np.testing.assert_array_equal(f0.theta, f1.theta)
            assert f0.design_map == f1.design_map


def test_the_unpublished_minimiser_moves_in_its_low_bits():
    """Power: the channel exists below the lattice (θ̂ differs), the release hides it."""
    n = 2000
    X, y, A = _data(n, 2)
    fm = FeatureMap.build(BOX, None, D)
    dm = LinearDesign.for_map(fm, 1.0)
    plan = plan_linear_s1(1.0, 1e-7, n_rows=n, width=dm.width)
    moved = 0
    for seed in range(8):
        Xp = _last_bits(X, 13 * seed)
        r1 = fit_linear_release(dm.rows(fm.transform(X), A), y, plan,
                                np.random.default_rng(seed))
        r2 = fit_linear_release(dm.rows(fm.transform(Xp), A), y, plan,
                                np.random.default_rng(seed))
        np.testing.assert_array_equal(r1.b, r2.b)
        np.testing.assert_array_equal(r1.noise, r2.noise)
        np.testing.assert_array_equal(r1.lattice, r2.lattice)
        np.testing.assert_array_equal(r1.theta, r2.theta)
        moved += int(not np.array_equal(r1.theta_hat, r2.theta_hat))
    assert moved >= 1


def test_radius_scores_ignore_last_bits_and_move_by_at_most_one_for_any_neighbour():
    n = 2000
    X, _, _ = _data(n, 3)
    fm = FeatureMap.build(BOX, None, D)
    dm = LinearDesign.for_map(fm, 1.0)
    ladder = radius_ladder(dm.box_radius)
    d = radius_scores(dm.row_norms(fm.transform(X)), ladder)
    for row in range(0, n, 181):
        dl = radius_scores(dm.row_norms(fm.transform(_last_bits(X, row))), ladder)
        np.testing.assert_array_equal(d, dl)
        far = X.copy()
        far[row] = 4.0  # the box corner: the longest possible row
        df = radius_scores(dm.row_norms(fm.transform(far)), ladder)
        assert int(np.max(np.abs(df - d))) <= 1
