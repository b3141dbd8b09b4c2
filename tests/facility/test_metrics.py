"""Metrics: the definitions (Def. 2.6, 7.3, 7.4) equal the closed forms (Thms 4.1, 4.3)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpfair.facility import (
    crossed_agents,
    fair,
    is_ctm,
    loss_vector,
    optimal_location,
    percentile_loss,
    social_welfare,
    swdiff,
    utilities,
    widened_loss,
)
from dpfair.facility.bounds import swdiff_loss_bound
from tests.facility._helpers import DOMAIN, random_ctm

# Data on a 1/20 lattice in [0, 1] make ties (and locations on data points) common.
data = st.lists(st.integers(0, 20), min_size=1, max_size=25).map(
    lambda v: np.asarray(v, dtype=float) / 20.0
)
medians = st.sampled_from(["lower", "upper"])


def _locations(x: np.ndarray, extra: list[float]) -> np.ndarray:
    return np.unique(np.concatenate((x, np.asarray(extra, dtype=float), np.linspace(0, 1, 23))))


@settings(max_examples=200, deadline=None)
@given(x=data, extra=st.lists(st.floats(0, 1), max_size=5), median=medians)
def test_fair_closed_form_equals_definition(x, extra, median):
    locs = _locations(x, extra)
    closed = fair(x, locs, median=median)
    defn = fair(x, locs, median=median, method="definition")
    np.testing.assert_allclose(closed, defn, rtol=0, atol=1e-12)
    # FAIR is the largest entry of the loss vector
    assert fair(x, float(locs[1]), median=median) == pytest.approx(
        float(np.max(loss_vector(x, float(locs[1]), median=median))), abs=1e-12
    )


@settings(max_examples=200, deadline=None)
@given(x=data, extra=st.lists(st.floats(0, 1), max_size=5), median=medians)
def test_swdiff_closed_form_equals_definition(x, extra, median):
    locs = _locations(x, extra)
    closed = swdiff(x, locs, median=median)
    defn = swdiff(x, locs, median=median, method="definition")
    np.testing.assert_allclose(closed, defn, rtol=1e-12, atol=1e-12)


@settings(max_examples=100, deadline=None)
@given(x=data, ell=st.floats(0, 1), median=medians)
def test_swdiff_equals_thm_4_3_with_crossed_agents(x, ell, median):
    """SWDIFF = w·|T − ℓ| + 2 Σ_{j ∈ C} |x_j − ℓ| with C from :func:`crossed_agents`."""
    n = x.size
    k = (n + 1) // 2 if median == "lower" else n // 2 + 1
    t = optimal_location(x, median=median)
    w = n - 2 * k + 2 if ell < t else 2 * k - n
    c = crossed_agents(x, ell, median=median)
    expected = w * abs(t - ell) + 2 * np.sum(np.abs(x[c] - ell))
    assert swdiff(x, ell, median=median) == pytest.approx(expected, abs=1e-12)
    if n % 2 == 1:
        assert w == 1  # Thm 4.3 exactly, for odd n


@settings(max_examples=100, deadline=None)
@given(x=data, ell=st.floats(0, 1))
def test_swdiff_does_not_depend_on_which_median(x, ell):
    assert swdiff(x, ell, median="lower") == pytest.approx(
        swdiff(x, ell, median="upper"), abs=1e-12
    )


@settings(max_examples=200, deadline=None)
@given(x=data, extra=st.lists(st.floats(-0.2, 1.2), max_size=5), median=medians)
def test_percentile_loss_count_formula_equals_definition(x, extra, median):
    pts = np.unique(np.concatenate((x, x + 1e-9, x - 1e-9, np.asarray(extra, dtype=float),
                                    np.linspace(-0.1, 1.1, 25))))
    closed = percentile_loss(x, pts, median=median)
    defn = percentile_loss(x, pts, median=median, method="definition")
    np.testing.assert_array_equal(closed, defn)
    assert np.all(closed >= 0)
    assert percentile_loss(x, optimal_location(x, median=median), median=median) == 0


@settings(max_examples=150, deadline=None)
@given(x=data, alpha=st.sampled_from([0.0, 0.01, 0.05, 0.2, 0.7, 1.5]),
       extra=st.lists(st.floats(0, 1), max_size=5), median=medians)
def test_widened_loss_nearest_point_equals_definition(x, alpha, extra, median):
    locs = np.unique(np.concatenate((_locations(x, extra), np.clip(x + alpha, 0, 1),
                                     np.clip(x - alpha, 0, 1))))
    closed = widened_loss(x, locs, widening=alpha, domain=DOMAIN, median=median)
    defn = widened_loss(x, locs, widening=alpha, domain=DOMAIN, median=median,
                        method="definition")
    np.testing.assert_array_equal(closed, defn)


@settings(max_examples=100, deadline=None)
@given(x=data, ell=st.floats(0, 1), median=medians)
def test_optimum_maximises_welfare_and_loss_vector_by_definition(x, ell, median):
    t = optimal_location(x, median=median)
    assert social_welfare(x, t) >= social_welfare(x, ell) - 1e-12
    np.testing.assert_allclose(
        loss_vector(x, ell, median=median), utilities(x, t) - utilities(x, ell), atol=1e-15
    )
    assert swdiff(x, ell, method="definition") == pytest.approx(
        social_welfare(x, t) - social_welfare(x, ell), abs=1e-12
    )


def test_even_n_uses_lower_median_by_default():
    x = [0.1, 0.4, 0.6, 0.9]
    assert optimal_location(x) == 0.4
    assert optimal_location(x, median="upper") == 0.6
    assert optimal_location([0.3, 0.1, 0.2]) == 0.2
    # moving within the optimal interval costs no welfare but is unfair to some agents
    assert swdiff(x, 0.5) == pytest.approx(0.0, abs=1e-15)
    assert fair(x, 0.5) == pytest.approx(0.1)
    assert fair(x, 0.5, median="upper") == pytest.approx(0.1)


def test_vectorised_shapes_and_scalars():
    x = np.linspace(0, 1, 11)
    assert isinstance(fair(x, 0.3), float)
    assert fair(x, np.zeros((2, 3))).shape == (2, 3)
    assert swdiff(x, [0.1, 0.9]).shape == (2,)
    assert isinstance(social_welfare(x, 0.2), float)
    assert isinstance(percentile_loss(x, 0.2), int)


@settings(max_examples=150, deadline=None)
@given(x=data, alpha=st.sampled_from([0.0, 0.01, 0.05, 0.2]), median=medians)
def test_corrected_swdiff_bound_holds_on_any_data(x, alpha, median):
    """SWDIFF ≤ (w + 2(p−1)⁺)·FAIR + 2(N − (p−1)⁺)·αm for every ℓ (replaces the paper's (11))."""
    locs = _locations(x, [])
    p = widened_loss(x, locs, widening=alpha, domain=DOMAIN, median=median)
    f = fair(x, locs, median=median)
    s = swdiff(x, locs, median=median)
    t = optimal_location(x, median=median)
    left = swdiff_loss_bound(p, f, x.size, alpha, side="left", median=median)
    right = swdiff_loss_bound(p, f, x.size, alpha, side="right", median=median)
    bound = np.where(locs < t, left, right)
    assert np.all(s <= bound + 1e-12)


def test_paper_inequality_11_fails_with_widening_on_a_point_mass():
    """(11) SWDIFF ≤ (2p_α − 1)·FAIR is false: all agents at one point, ℓ inside the band."""
    x = np.full(101, 0.5)
    ell, alpha = 0.5 - 0.004, 0.01
    p = int(widened_loss(x, ell, widening=alpha, domain=DOMAIN))
    assert p == 0
    assert swdiff(x, ell) == pytest.approx(101 * 0.004)
    assert swdiff(x, ell) > (2 * p - 1) * fair(x, ell)


def test_inequality_7_on_random_ctm_data():
    """On CTM data FAIR ≤ p_α·m/K + αm (inequality (7) with Lemma 7.11), K = min(k−1, n−k)."""
    rng = np.random.default_rng(3)
    for _ in range(200):
        n = int(rng.integers(3, 40))
        x = random_ctm(rng, n)
        assert is_ctm(x)
        alpha = float(rng.uniform(0, 0.1))
        k = (n + 1) // 2
        big_k = min(k - 1, n - k)
        locs = np.linspace(0, 1, 301)
        p = widened_loss(x, locs, widening=alpha, domain=DOMAIN)
        ok = p < k  # (7) needs p_α < ⌈n/2⌉
        f = fair(x, locs)
        assert np.all(f[ok] <= p[ok] / big_k + alpha + 1e-12)
