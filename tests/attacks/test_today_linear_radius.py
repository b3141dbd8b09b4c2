"""Attacks on the CDP-Fair linear score's centred, clipped design and its private radius.

Adversary (THREATS.md, analyst row; rules 1 and 6): picks the data and every parameter, reads
the whole ledger and every released double. Claims under attack:

* the radius ladder is public (a function of the feature map only, never of the data);
* ``radius="auto"`` is charged exactly once per fit, in its own pure measure, and is paid
  out of S1's ε (the fit's total is the same as with the public ``radius="box"``);
* every computed row φ(x, a) has exact Euclidean norm ≤ 1 after clipping, whatever the row
  (exactly on the radius, one ulp above it, the box's corners, one-hot + numeric at max):
  that is the sensitivity the objective perturbation is calibrated to;
* non-finite inputs are refused before anything is released, with a message that names the
  column and not the value;
* prediction (``predict_eta``, ``decision_function``) is post-processing: deterministic, no
  noise drawn, no training rows kept on the fitted estimator.
"""

from __future__ import annotations

import math
import warnings
from fractions import Fraction

import numpy as np
import pytest

from dpfair.fairclass import CDPFairClassifier
from dpfair.fairclass._linear import RADIUS_SHARE, FeatureMap, LinearDesign, radius_ladder

D = 4
BOX = [(-1.0, 1.0)] * D


def _data(n: int, seed: int, scale: float = 1.0):
    rng = np.random.default_rng(seed)
    X = np.clip(rng.normal(scale=scale, size=(n, D)), -1.0, 1.0)
    A = (rng.uniform(size=n) < 0.5).astype(np.int8)
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-X.sum(axis=1)))).astype(np.int64)
    return X, y, A


def _fit(X, y, A, radius, seed=1, cross_fit=False):
    clf = CDPFairClassifier(epsilon=1.0, delta=1e-7, alpha=0.1, feature_bounds=BOX,
                            estimator="linear", radius=radius, random_state=seed,
                            cross_fit=cross_fit)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf.fit(X, y, sensitive_features=A)
    return clf


@pytest.mark.parametrize("cross_fit", [False, True])
def test_today_auto_radius_charged_once_per_fit_and_inside_s1(cross_fit):
    X, y, A = _data(1500, 0)
    auto = _fit(X, y, A, "auto", cross_fit=cross_fit)
    box = _fit(X, y, A, "box", cross_fit=cross_fit)
    fits = 2 if cross_fit else 1
    labels = [r.label for r in auto.privacy_ledger_.records]
    radius = [r for r in auto.privacy_ledger_.records if "row radius" in r.label]
    assert len(radius) == fits, labels
    assert len({r.label for r in radius}) == fits  # one per fit, never twice for one fit
    for r in radius:
        assert r.budget.kind == "pure"
    assert not any("row radius" in r.label for r in box.privacy_ledger_.records)
    # Paid out of S1's ε: the per-fit S1 sum, and the whole fit's guarantee, are unchanged.
    def s1_eps(clf, fit_no):
        return math.fsum(float(r.budget.epsilon or 0.0) for r in clf.privacy_ledger_.records
                         if r.label.startswith(f"fit {fit_no} / S1"))
    for f in range(1, fits + 1):
        assert s1_eps(auto, f) == pytest.approx(s1_eps(box, f), rel=1e-12)
        assert s1_eps(auto, f) <= 1.0 + 1e-12
        (rad,) = [r for r in radius if r.label.startswith(f"fit {f} /")]
        assert rad.budget.epsilon == pytest.approx(RADIUS_SHARE * s1_eps(box, f), rel=1e-12)
    assert auto.privacy_spent_ == box.privacy_spent_


def test_today_radius_ladder_is_public():
    """The released radius lies on a ladder fixed by the feature map; the data only pick."""
    fmap = FeatureMap.build(BOX, None, D)
    ladder = radius_ladder(LinearDesign.for_map(fmap, 1.0).box_radius)
    np.testing.assert_array_equal(ladder, radius_ladder(math.sqrt(D)))
    seen = set()
    for seed, scale in ((0, 0.05), (1, 0.3), (2, 3.0)):
        X, y, A = _data(1200, seed, scale)
        clf = _fit(X, y, A, "auto", seed=seed)
        r = clf.folds_[0].design_map.radius
        assert r in set(ladder.tolist())
        seen.add(r)
        # the ladder the fit used is the same whatever the data (bounds-only function)
        assert clf.folds_[0].design_map.box_radius == math.sqrt(D)
    assert len(seen) >= 2  # power: the data do move the (private) choice


def _exact_sq_norm(row: np.ndarray) -> Fraction:
    return sum((Fraction(float(v)) ** 2 for v in row), Fraction(0))


def test_today_clipped_rows_have_exact_norm_at_most_one():
    """Exact rational ‖φ‖₂² ≤ 1 for adversarial rows at every ladder radius."""
    fmap = FeatureMap.build([*BOX, None, None], {D: ["a", "b", "c"], D + 1: [0, 1]}, D + 2)
    k = D
    raw = []
    # box corners and numeric max (u = 1 → v = 1) with each one-hot choice
    for corner in ((1.0,) * k, (-1.0,) * k, (1.0, -1.0) * (k // 2)):
        for c1 in ("a", "b", "c"):
            for c2 in (0, 1):
                raw.append([*corner, c1, c2])
    U = fmap.transform(np.array(raw, dtype=object))
    assert np.array_equal(fmap.numeric_positions, np.arange(k))
    base = LinearDesign.for_map(fmap, 1.0)
    ladder = radius_ladder(base.box_radius)
    extra = []
    for r in ladder[::7]:
        # a row exactly on the sphere of radius r (as computed) and one ulp above / below
        v = np.zeros(fmap.width)
        v[: k] = r / math.sqrt(k)
        u_num = (v[:k] + 1.0) / 2.0
        for eps_dir in (-1.0, 0.0, 1.0):
            u = u_num.copy()
            if eps_dir:
                u = np.nextafter(u, u + eps_dir)
            extra.append(np.concatenate([u, np.zeros(fmap.width - k)]))
    U = np.vstack([U, np.array(extra)])
    A = np.resize(np.array([0, 1], dtype=np.int8), U.shape[0])
    worst = Fraction(0)
    for r in ladder:
        dmap = LinearDesign.for_map(fmap, float(r))
        phi = dmap.rows(U, A)
        for row in phi:
            sq = _exact_sq_norm(row)
            assert sq <= 1, (r, row)
            worst = max(worst, sq)
        # logits without forming φ agree with φ·θ up to rounding
        theta = np.linspace(-1.0, 1.0, dmap.width)
        np.testing.assert_allclose(dmap.logits(U, A, theta), phi @ theta, rtol=1e-12,
                                   atol=1e-12)
    assert worst > Fraction(999, 1000)  # power: rows do reach the sphere


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf, 1e308])
def test_today_non_finite_or_huge_record_is_refused_without_its_value(bad):
    X, y, A = _data(400, 3)
    X[17, 2] = bad
    clf = CDPFairClassifier(epsilon=1.0, delta=1e-7, alpha=0.1, feature_bounds=BOX,
                            estimator="linear", radius="auto", random_state=0)
    with pytest.raises(Exception) as info:
        clf.fit(X, y, sensitive_features=A)
    msg = str(info.value)
    assert "1e+308" not in msg and "17" not in msg
    assert not hasattr(clf, "folds_")


def test_today_prediction_is_post_processing(monkeypatch):
    X, y, A = _data(1500, 4)
    clf = _fit(X, y, A, "auto")
    for name, value in vars(clf).items():  # no training rows kept on the estimator
        if isinstance(value, np.ndarray):
            assert value.size < 100, name
    Xt, _, At = _data(300, 5)

    def no_randomness(*args, **kwargs):
        raise AssertionError("prediction asked for randomness")

    # no generator, no entropy: prediction must be a fixed function of the release
    monkeypatch.setattr(np.random, "default_rng", no_randomness)
    monkeypatch.setattr(np.random, "SeedSequence", no_randomness)
    monkeypatch.setattr("os.urandom", no_randomness)
    monkeypatch.setattr("secrets.randbits", no_randomness)
    e1 = clf.predict_eta(Xt, sensitive_features=At)
    d1 = clf.decision_function(Xt, sensitive_features=At)
    p1 = clf.predict(Xt, sensitive_features=At)
    e2 = clf.predict_eta(Xt, sensitive_features=At)
    d2 = clf.decision_function(Xt, sensitive_features=At)
    p2 = clf.predict(Xt, sensitive_features=At)
    assert all(np.array_equal(a, b) for a, b in ((e1, e2), (d1, d2), (p1, p2)))
    # scores of one test row do not depend on the other test rows (no data-wide step)
    np.testing.assert_array_equal(clf.decision_function(Xt[:1], sensitive_features=At[:1]),
                                  d1[:1])
