"""DPExpMed.loss_pmf is the law of p_α(D, L) at the *released* location L (issue 11).

The release is a uniform point of the public cell (2^-44 of the domain) of the mechanism's
draw ℓ, so its law is the cell-averaged law ``distribution(x).law``. A loss piece narrower
than a cell makes the two loss laws differ by a large relative amount; the reference below
integrates the released law over every interval on which the loss is constant, evaluating
the loss independently (``DPExpMed.loss`` at the interval's midpoint) and the mass as the
released density times the interval's length.
"""

from __future__ import annotations

import numpy as np
import pytest

from dpfair.facility import DPExpMed
from dpfair.facility._mechanism import _law_from_sorted
from dpfair.facility._metrics import median_index

DOMAIN = (0.0, 1.0)


def _reference_pmf(mech: DPExpMed, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(released loss law by direct integration, the draw ℓ's loss law)."""
    xs = np.sort(x)
    d = mech.distribution(xs)
    k = median_index(xs.size, mech.median)
    alpha = mech.widening_for(xs.size)
    raw = _law_from_sorted(xs, k, alpha * 1.0, mech.epsilon, *DOMAIN)
    cuts = np.unique(np.concatenate((raw.edges, d.law.edges)))
    a, b = cuts[:-1], cuts[1:]
    keep = b > a
    a, b = a[keep], b[keep]
    mid = 0.5 * (a + b)
    mass = np.exp(d.law.logpdf(mid)) * (b - a)  # each interval lies in one averaged piece
    loss = mech.loss(xs, mid)
    released = np.bincount(loss, weights=mass)
    mids = 0.5 * (raw.edges[:-1] + raw.edges[1:])
    draw = np.bincount(mech.loss(xs, mids), weights=raw.piece_probabilities)
    return released, draw


@pytest.mark.parametrize("seed", range(3))
def test_loss_pmf_is_the_law_at_the_released_point_sub_cell_band(seed):
    """Loss-0 band 2^-46 wide (a quarter cell): the released P(loss = 0) is the cell's mass
    times 1/4, far below the draw's; loss_pmf matches the released law, not the draw's."""
    rng = np.random.default_rng(seed)
    x = np.concatenate((np.full(10, 0.5), rng.uniform(0.0, 1.0, 11)))
    mech = DPExpMed(1.0, DOMAIN, widening=2.0**-47)
    pmf = mech.distribution(x).loss_pmf()
    released, draw = _reference_pmf(mech, x)
    m = min(pmf.size, released.size)
    np.testing.assert_allclose(pmf[:m], released[:m], rtol=1e-9, atol=1e-300)
    assert pmf[m:].sum() == released[m:].sum() == 0.0 or m == pmf.size == released.size
    assert pmf.sum() == pytest.approx(1.0, abs=1e-12)
    # the draw's law differs visibly at loss 0 (the band is a quarter of its cell)
    assert abs(pmf[0] / draw[0] - 1.0) > 0.05


def test_loss_pmf_matches_released_law_on_ordinary_data():
    """Ordinary data (pieces ≫ cells): released and draw laws agree to ~1e-12, and loss_pmf
    agrees with the direct integration of the released law."""
    x = np.random.default_rng(9).uniform(0, 1, 41)
    mech = DPExpMed(2.0, DOMAIN)
    pmf = mech.distribution(x).loss_pmf()
    released, draw = _reference_pmf(mech, x)
    m = min(pmf.size, released.size)
    np.testing.assert_allclose(pmf[:m], released[:m], rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(pmf[:m], draw[:m], rtol=1e-6, atol=1e-12)
