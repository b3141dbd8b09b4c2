"""The released classifier decides on the score lattice S2 certified (issue 20 attack review).

S2 rounds every calibration score to the public lattice (2/B)·ℤ (:func:`snap_scores`) before
it builds the disparity curve, draws τ̂ and checks it. The released classifier must threshold
the score rounded the same way: on the raw score its population curve differs from the
certified one by the mass within half a cell of τ̂ — where the certified rule's windowed aim
puts τ̂ (``tests/attacks/test_today3_side_lattice.py`` measured 13% bad certified folds at
β = 0.05 with a raw atom just above a lattice point).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpfair import UncertifiedFairnessWarning
from dpfair.fairclass import CDPFairClassifier, fit_cdp_fair_from_file
from dpfair.fairclass._threshold import SCORE_LATTICE_BINS, snap_scores
from dpfair.fairclass.datasets import simulate


def _quiet(fit: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UncertifiedFairnessWarning)
        return fit()


def _decisions(clf: CDPFairClassifier, X, A, bins: int | None) -> np.ndarray:
    """Mean over folds of 1{Z ≥ τ} (group 1) / 1{Z ≤ τ} (group 0), Z rounded to B bins."""
    U, A8 = clf._prepare_predict(X, A)
    votes = np.zeros(len(A8))
    for fold in clf.folds_:
        z = fold.scores(clf.grid_, U, A8)
        if bins is not None:
            z = snap_scores(z, bins)
        votes += np.where(A8 == 1, z >= fold.tau, z <= fold.tau)
    return votes / len(clf.folds_)


def _tau_between_lattice_and_scores(clf: CDPFairClassifier, X, A, bins: int) -> None:
    """Move each fold's τ̂ just above the lattice point below a median raw score, so that
    raw scores in (b, b + ½ cell) exist: there the raw and the rounded decisions differ."""
    U, A8 = clf._prepare_predict(X, A)
    for fold in clf.folds_:
        z = fold.scores(clf.grid_, U, A8)
        half = 1.0 / bins
        # the raw scores that round down onto their lattice point b (z in (b, b + ½ cell))
        below = z[(z - snap_scores(z, bins) > 0) & (z - snap_scores(z, bins) < half)]
        assert below.size > 0
        b = float(snap_scores(np.sort(below)[below.size // 2 : below.size // 2 + 1], bins)[0])
        # just above b: every raw score of (b, b + ½ cell) lies above it (folds are frozen)
        object.__setattr__(fold, "tau", float(np.nextafter(b, 1.0)))


@pytest.mark.parametrize("constraints", ["demographic_parity", "equal_opportunity"])
def test_predict_thresholds_the_rounded_score(constraints) -> None:
    data, rows = simulate(3000, rng=1), simulate(4000, rng=2)
    clf = _quiet(lambda: CDPFairClassifier(
        epsilon=1.0, delta=1e-6, alpha=0.1, random_state=3, constraints=constraints,
        feature_bounds=data.feature_bounds).fit(data.X, data.y, sensitive_features=data.A))
    _tau_between_lattice_and_scores(clf, rows.X, rows.A, SCORE_LATTICE_BINS)
    got = clf.predict_proba(rows.X, sensitive_features=rows.A)[:, 1]
    snapped = _decisions(clf, rows.X, rows.A, SCORE_LATTICE_BINS)
    raw = _decisions(clf, rows.X, rows.A, None)
    np.testing.assert_array_equal(got, snapped)
    assert np.any(snapped != raw)  # the test can tell the two rules apart


def test_out_of_core_decides_on_its_own_score_bins(tmp_path: Path) -> None:
    """A file fit with score_bins = 2^8 certifies on that lattice; predict follows it."""
    data, rows = simulate(3000, rng=4), simulate(4000, rng=5)
    path = tmp_path / "train.parquet"
    pd.DataFrame({"x1": data.X[:, 0], "x2": data.X[:, 1], "y": data.y.astype(np.int64),
                  "a": data.A.astype(np.int64)}).to_parquet(path, index=False)
    est = CDPFairClassifier(epsilon=1.0, delta=1e-6, alpha=0.1, random_state=3,
                            cross_fit=False, feature_bounds=data.feature_bounds)
    clf = _quiet(lambda: fit_cdp_fair_from_file(path, est, features=["x1", "x2"], target="y",
                                                sensitive="a", score_bins=2**8))
    assert clf._score_lattice() == 2**8
    _tau_between_lattice_and_scores(clf, rows.X, rows.A, 2**8)
    got = clf.predict_proba(rows.X, sensitive_features=rows.A)[:, 1]
    np.testing.assert_array_equal(got, _decisions(clf, rows.X, rows.A, 2**8))
    assert np.any(got != _decisions(clf, rows.X, rows.A, SCORE_LATTICE_BINS))


def test_released_rule_decides_like_the_calibration_curve() -> None:
    """On the calibration half itself, the released fold's group positive rates are the
    rounded-score counts S2 used: DD of the decisions = the curve at τ̂ (raw scores would
    differ where τ̂ sits next to a lattice point)."""
    from dpfair.fairclass._threshold import dd_steps

    rng = np.random.default_rng(0)
    z = rng.uniform(-0.3, 0.3, size=4000)
    A = (rng.uniform(size=4000) < 0.5).astype(np.int8)
    zs = snap_scores(z)
    steps = dd_steps(zs[A == 1], zs[A == 0])
    for tau in rng.uniform(-0.3, 0.3, size=50):
        d = np.where(A == 1, zs >= tau, zs <= tau)
        dd = d[A == 1].mean() - d[A == 0].mean()
        assert dd == pytest.approx(steps.at(float(tau)), abs=1e-12)
