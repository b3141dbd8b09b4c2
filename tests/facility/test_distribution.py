"""The exact laws: density = exp(−ε p_α/2)/Z by definition, and exact FAIR/SWDIFF laws."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import integrate

from dpfair.facility import (
    DPExpMed,
    GridExpMed,
    LaplaceMedian,
    fair,
    impossibility_pair,
    swdiff,
    widened_loss,
)
from tests.facility._helpers import DOMAIN


def _cases():
    rng = np.random.default_rng(11)
    yield np.round(rng.uniform(0, 1, 9), 1), 0.8, 0.03, "lower"
    yield np.round(rng.uniform(0, 1, 10), 1), 0.8, 0.03, "lower"
    yield np.round(rng.uniform(0, 1, 10), 1), 1.5, 0.0, "upper"
    yield np.array([0.0, 0.0, 1.0]), 0.5, None, "lower"
    yield np.array([0.42]), 2.0, None, "lower"
    yield impossibility_pair(6, DOMAIN).second, 1.0, 0.1, "lower"
    yield np.full(7, 1.0), 3.0, 0.05, "upper"


CASES = list(_cases())


@pytest.mark.parametrize(("x", "eps", "w", "median"), CASES)
def test_density_is_exp_of_widened_loss_by_definition(x, eps, w, median):
    mech = DPExpMed(eps, DOMAIN, widening=w, median=median)
    d = mech.distribution(x)
    t = np.unique(np.concatenate((np.linspace(0, 1, 301), d.edges)))
    wide = np.diff(t) > 1e-9  # skip slivers where x ± αm and ℓ ∓ αm round differently
    t = 0.5 * (t[1:] + t[:-1])[wide]  # interiors of pieces: the definition is unambiguous
    p = widened_loss(x, t, widening=d.widening, domain=DOMAIN, median=median,
                     method="definition")
    logf = -0.5 * eps * p
    diff = d.logpdf(t) - logf
    assert np.ptp(diff) < 1e-10  # proportional, with one normalising constant
    assert d.cdf(1.0) == 1.0 and d.cdf(0.0) == 0.0
    np.testing.assert_allclose(d.loss_pmf().sum(), 1.0, atol=1e-14)


@pytest.mark.parametrize(("x", "eps", "w", "median"), CASES)
def test_exact_expectations_match_quadrature(x, eps, w, median):
    mech = DPExpMed(eps, DOMAIN, widening=w, median=median)
    d = mech.distribution(x)
    pts = np.unique(np.concatenate((d.edges, x, [0.0, 1.0])))
    ef = es = 0.0
    for a, b in itertools.pairwise(pts):
        if b <= a:
            continue
        ef += integrate.quad(lambda u: float(d.pdf(u)) * abs(u - d.optimum), a, b,
                             epsabs=1e-14)[0]
        es += integrate.quad(
            lambda u: float(d.pdf(u)) * float(swdiff(x, u, method="definition")), a, b,
            epsabs=1e-14)[0]
    assert d.expected_fair() == pytest.approx(ef, rel=1e-9, abs=1e-14)
    assert d.expected_swdiff() == pytest.approx(es, rel=1e-9, abs=1e-14)


@pytest.mark.parametrize(("x", "eps", "w", "median"), CASES)
def test_metric_tails_and_quantiles_are_consistent(x, eps, w, median):
    d = DPExpMed(eps, DOMAIN, widening=w, median=median).distribution(x)
    # P(FAIR > r) from the location law, on a fine grid
    grid = np.linspace(0, 1, 20001)
    dens = d.pdf(0.5 * (grid[1:] + grid[:-1])) * np.diff(grid)
    mids = 0.5 * (grid[1:] + grid[:-1])
    for r in (0.0, 0.01, 0.1, 0.3):
        approx = float(np.sum(dens[np.abs(mids - d.optimum) > r]))
        assert d.fair_sf(r) == pytest.approx(approx, abs=2e-3)
    sw = swdiff(x, mids, median=median)
    for s in (0.0, 0.05, 0.5):
        approx = float(np.sum(dens[sw > s]))
        assert d.swdiff_sf(s) == pytest.approx(approx, abs=2e-3)
    for level in (0.5, 0.9, 0.99):
        qf = d.fair_quantile(level)
        assert d.fair_cdf(qf) >= level - 1e-12
        assert d.fair_cdf(qf * (1 - 1e-9) - 1e-300) <= level + 1e-12 or qf == 0
        qs = d.swdiff_quantile(level)
        assert d.swdiff_cdf(qs) >= level - 1e-12
    assert d.fair_sf(-1.0) == 1.0 and d.swdiff_sf(-1.0) == 1.0
    assert d.fair_sf(2.0) == 0.0


def test_loss_pmf_matches_sampled_losses_by_definition():
    x = np.round(np.random.default_rng(3).uniform(0, 1, 31), 2)
    mech = DPExpMed(0.7, DOMAIN, widening=0.02)
    d = mech.distribution(x)
    draws = d.sample(size=20_000, rng=1)
    p = widened_loss(x, draws, widening=0.02, domain=DOMAIN)
    pmf = d.loss_pmf()
    for v in range(4):
        assert np.mean(p == v) == pytest.approx(pmf[v], abs=0.015)
    assert d.loss_sf(-1) == 1.0 and d.loss_sf(len(pmf)) == 0.0


def test_summary_and_to_dict_are_json_ready():
    import json

    x = np.linspace(0, 1, 101)
    d = DPExpMed(1.0, DOMAIN).distribution(x)
    s = d.summary(0.95)
    assert s.to_dict()["level"] == 0.95
    out = json.loads(json.dumps(d.to_dict()))
    assert out["n"] == 101 and out["widening"] == pytest.approx(1 / 101)


def test_presorted_and_unsorted_agree():
    x = np.random.default_rng(5).uniform(0, 1, 200)
    mech = DPExpMed(1.0, DOMAIN)
    a = mech.distribution(x)
    b = mech.distribution(np.sort(x), presorted=True)
    np.testing.assert_array_equal(a.edges, b.edges)
    assert a.expected_swdiff() == b.expected_swdiff()


class _ClippedLaplace:
    """The continuous law clip(t + Laplace(b), 0, 1) for 0 ≤ t ≤ 1, in closed form."""

    def __init__(self, t: float, b: float) -> None:
        self.t, self.b = t, b
        self.atom_lo = 0.5 * math.exp(-t / b)  # P(t + L ≤ 0)
        self.atom_hi = 0.5 * math.exp(-(1.0 - t) / b)  # P(t + L ≥ 1)

    def pdf(self, u: float) -> float:
        return math.exp(-abs(u - self.t) / self.b) / (2.0 * self.b)


# --------------------------------------------------------------------------- baselines
@pytest.mark.parametrize("x", [np.round(np.random.default_rng(2).uniform(0, 1, 12), 1),
                               np.array([0.0, 0.0, 1.0]), np.array([1.0])])
def test_laplace_baseline_exact_metrics_match_quadrature(x):
    """The executed (gridded discrete) law: exact metrics equal sums over every atom of a
    coarse grid, and on the default grid (2^32 steps) match the continuous
    clip(T + Laplace(m/ε)) law by quadrature to 1e-7 relative."""
    coarse = LaplaceMedian(0.9, DOMAIN, grid_bits=10).distribution(x)
    j = np.arange(2**10 + 1)
    g, p = coarse.law.location(j), coarse.law.pmf_index(j)
    assert p.sum() == pytest.approx(1.0, abs=1e-12)
    assert coarse.expected_fair() == pytest.approx(float(np.dot(p, fair(x, g))), rel=1e-9)
    assert coarse.expected_swdiff() == pytest.approx(float(np.dot(p, swdiff(x, g))), rel=1e-9)
    for r in (0.0, 0.1, 0.37):
        assert coarse.fair_sf(r) == pytest.approx(
            float(p[np.abs(g - coarse.optimum) > r].sum()), abs=1e-12)
    d = LaplaceMedian(0.9, DOMAIN).distribution(x)
    t = d.optimum
    cont = _ClippedLaplace(t, 1.0 / 0.9)  # clip(t + Laplace(b), 0, 1), t ∈ [0, 1]
    atoms = cont.atom_lo * abs(0 - t) + cont.atom_hi * abs(1 - t)
    pts = np.unique(np.concatenate((x, [0.0, 1.0, t])))
    ef = atoms
    es = cont.atom_lo * float(swdiff(x, 0.0)) + cont.atom_hi * float(swdiff(x, 1.0))
    for a, b in itertools.pairwise(pts):
        ef += integrate.quad(lambda u: float(cont.pdf(u)) * abs(u - t), a, b, epsabs=1e-14)[0]
        es += integrate.quad(lambda u: float(cont.pdf(u)) * float(swdiff(x, u)), a, b,
                             epsabs=1e-14)[0]
    assert d.expected_fair() == pytest.approx(ef, rel=1e-7)
    assert d.expected_swdiff() == pytest.approx(es, rel=1e-7)
    assert d.law.atom_lo == pytest.approx(cont.atom_lo, rel=1e-7)
    draws = d.sample(size=40_000, rng=0)
    assert np.mean(np.abs(draws - t) >= 0.5) == pytest.approx(
        d.fair_sf(0.5, inclusive=True), abs=0.01
    )
    assert d.fair_sf(0.0, inclusive=True) == 1.0


def test_grid_baseline_exact_metrics_are_sums_over_atoms():
    x = np.round(np.random.default_rng(4).uniform(0, 1, 15), 2)
    mech = GridExpMed(0.8, DOMAIN, grid_size=51)
    d = mech.distribution(x)
    g, p = d.law.support, d.law.probabilities
    assert d.expected_fair() == pytest.approx(float(np.dot(p, fair(x, g))), rel=1e-12)
    assert d.expected_swdiff() == pytest.approx(float(np.dot(p, swdiff(x, g))), rel=1e-12)
    for r in (0.0, 0.1, 0.4):
        assert d.fair_sf(r) == pytest.approx(float(p[np.abs(g - d.optimum) > r].sum()),
                                             abs=1e-14)
        assert d.fair_sf(r, inclusive=True) == pytest.approx(
            float(p[np.abs(g - d.optimum) >= r].sum()) if r > 0 else 1.0, abs=1e-14)
    for s in (0.0, 0.2, 1.0):
        assert d.swdiff_sf(s) == pytest.approx(float(p[swdiff(x, g) > s].sum()), abs=1e-12)
    q = d.fair_quantile(0.9)
    assert float(p[np.abs(g - d.optimum) <= q].sum()) >= 0.9 - 1e-12
    draws = mech.sample(x, rng=0, size=5)
    assert set(np.round(draws, 12)) <= set(np.round(g, 12))


def test_unwidened_mechanism_on_a_point_mass_is_uniform_and_finite():
    """α = 0 with every agent at T: the loss-0 band has width 0 (its level would overflow)."""
    d = DPExpMed(2.0, DOMAIN, widening=0.0).distribution(np.full(10_001, 0.5))
    assert d.expected_fair() == pytest.approx(0.25, rel=1e-12)  # uniform on [0, 1]
    assert d.expected_swdiff() == pytest.approx(10_001 * 0.25, rel=1e-12)
    assert d.fair_quantile(0.95) == pytest.approx(0.475, rel=1e-9)
    assert np.isfinite(d.swdiff_quantile(0.9))


def test_results_and_laws_pickle():
    import pickle

    from dpfair.facility import (
        impossibility_pair,
        spm_lambda,
        triangular_law,
        truncated_normal_law,
    )
    from dpfair.facility.bounds import ctm_bounds, table1

    x = np.linspace(0.1, 0.9, 21)
    mech = DPExpMed(1.0, DOMAIN)
    d = mech.distribution(x)
    d.expected_fair()  # populate caches
    objs = [mech, d, LaplaceMedian(1.0, DOMAIN).distribution(x),
            GridExpMed(1.0, DOMAIN, grid_size=11).distribution(x), impossibility_pair(5, DOMAIN),
            spm_lambda(x, DOMAIN, peaks=[0.5]), table1(10, 1.0, 1.0, 0.1, 0.1),
            ctm_bounds(11, 1.0, 1.0, 0.1), d.summary(), triangular_law(DOMAIN),
            truncated_normal_law(DOMAIN)]
    for obj in objs:
        clone = pickle.loads(pickle.dumps(obj))
        assert type(clone) is type(obj)
    clone = pickle.loads(pickle.dumps(d))
    assert clone.expected_swdiff() == d.expected_swdiff()
    law = pickle.loads(pickle.dumps(truncated_normal_law(DOMAIN, peak=0.3)))
    assert law.cdf(0.3) == pytest.approx(0.5)
