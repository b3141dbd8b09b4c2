"""Attacks on the localised ExpMech quantile intervals: padded cells, split ranges, K_E.

The change under attack (``dpfair.quantiles._api._localized``, method ``"expmech"``):
the exponential mechanism on ranks gets Q extra output cells beyond each end of its grid
(tail constant C = K_E/2), a charged split search (5 % of ρ) brackets rank n·q, the lower
end's draw runs on [L₁, v_hi] and the upper end's on [v_lo, U₁], and K_E comes from a
public width model. Claims attacked here, each by an independent computation:

* **Coverage of the worst population, exactly.** The stage-2 claim is: conditionally on
  the sample and on ANY stage-1 range / split, P(L > x_q) ≤ h(B − k_L), so
  P(stage 2 misses) ≤ E h(B − k_L) ≤ a₂ (the level the ranks were computed at). The
  two-atom gap population attains the worst case: P(X = 0.2) = q, P(X = 0.8) = 1 − q has
  x_q = 0.2 and B = #{x_i ≤ x_q} ~ Bin(n, q) exactly, and the sample given B is fixed
  (B records on the atom, n − B on the far atom). For every B we compute the EXACT output
  law of the executed padded cell mechanism (:func:`cell_order_statistic_law`) on the
  data clipped into adversarial ranges (the atom exactly on the range's bottom edge, a
  split top that clips the far atom into the last cell, the whole public range, a range
  one ulp below the atom, ...), take the worst range for each B, and sum against the
  binomial pmf. The upper end mirrors it with the limit population P(0.2) = q⁻,
  P(0.8) = 1 − q⁺ (x_q = 0.8, #{x_i < x_q} ~ Bin(n, q) in the limit). K_E, the target
  ranks, ε and a₂ are read from the API's own diagnostics (the choices the release made).
  A correct design gives ≤ a₂; power: the worst case comes within a few per cent of a₂
  (the bound is nearly attained), and moving the lower rank up by one is caught.
* **The whole pipeline, exactly (stage 1 included).** For the same populations the
  stage-1 NoisyBinSearch's miss P(l₁ > x_q | B) is computed exactly from the exact
  discrete Gaussian law of its noise (:class:`LatticeNoise`: N_ℤ(0, S) on 2^-bits·ℤ; only
  the one search node that straddles x_q's grid cell is uncertain at each step, so the law
  costs O(D₁)); it is checked against a Monte Carlo of the real search below. Then
  P(L > x_q) ≤ Σ_B P(B)·min(1, P(l₁ > x_q | B) + max_range P(stage 2 misses | B)), a
  bound on the executed release (L₁ = min(l₁, u₁), widened down, is ≤ l₁). It must be
  ≤ α/(2K) per end (what a per-end α/2 reading needs) and ≤ the end's own share
  α₁ + a₂ (what the union bound of ``_localized`` claims).
* **Unchanged paths.** The median API, ``localize=False``, an explicit granularity and
  the other localised methods give bit-identical output to the tree before the change
  (commit 60580c4^, values recorded from that tree with the same seeds).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import stats

import dpfair
from dpfair.mechanisms import GaussianMechanism
from dpfair.median._expmech import CellGrid, cell_order_statistic_law
from dpfair.quantiles._methods import _query_noise, grid_point

BOUNDS = (-5.0, 15.0)


def _choices(n: int, qs: list[float], rho: float, alpha: float = 0.05) -> list[dict]:
    """K_E, ranks, ε and levels the API uses (public, so any data of size n will do)."""
    x = np.linspace(BOUNDS[0], BOUNDS[1], n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = dpfair.quantiles.confidence_intervals(x, qs, rho=rho, bounds=BOUNDS,
                                                    alpha=alpha, method="expmech", rng=0)
    k = len(qs)
    frac1 = res.diagnostics["localize"]["alpha"] / alpha
    a1 = frac1 * alpha / 2.0 / k
    a2 = (1.0 - frac1) * alpha / 2.0 / k
    out = []
    for iv in res.intervals:
        d = iv.diagnostics
        none1 = sum(t is None for t in d["stage1"]["target_ranks"])
        out.append({"steps": d["steps"], "ranks": d["target_ranks"],
                    "eps": d["epsilon_per_draw"], "c": d["tail_constant"],
                    "a1": a1, "a2q": a2 + a1 * none1 / 2.0})
    return out


def _law(x: np.ndarray, k: int, eps: float, steps: int, sub: tuple[float, float]):
    lo, hi = sub
    grid = CellGrid.for_bounds(sub, (hi - lo) / steps)
    assert grid.padded_tail_constant <= steps / 2.0  # the public C bounds this grid
    law = cell_order_statistic_law(np.sort(np.clip(x, lo, hi)), k, eps, grid, padded=True)
    q = grid.per_theta
    m = np.arange(-q, grid.n_cells + q)
    lows = np.minimum(np.maximum(lo, grid.low + (m - q - 1) * grid.cell), hi)
    highs = np.maximum(np.minimum(hi, grid.low + (m + q + 2) * grid.cell), lo)
    return law, lows, highs


def _lower_ranges(xi: float, far: float) -> list[tuple[float, float]]:
    return ([(xi, xi + w) for w in (0.01, 0.1, 0.3, 0.6, 0.9)]  # atom on the bottom edge
            + [(xi - 0.05, xi + 0.05), (float(np.nextafter(xi, -1.0)), 0.5),
               BOUNDS, (xi - 1e-9, far)])


def _upper_ranges(xi: float, near: float) -> list[tuple[float, float]]:
    return ([(xi - w, xi) for w in (0.01, 0.1, 0.3, 0.5, 0.7)]  # atom on the top edge
            + [(xi - 0.05, xi + 0.05), (0.5, float(np.nextafter(xi, 2.0))),
               BOUNDS, (near, xi + 1e-9)])


def exact_worst_miss(n: int, p: float, k: int, eps: float, steps: int, side: str) -> float:
    """Σ_B P(B) · max over adversarial ranges of the exact miss probability given B."""
    ms = np.arange(n + 1)
    pmf = stats.binom.pmf(ms, n, p)
    keep = pmf > 1e-18
    total = float(pmf[~keep].sum())  # the rest bounded by 1
    for b in ms[keep]:
        if side == "low":  # gap population: x_q = 0.2, B = #{x ≤ 0.2}
            x = np.r_[np.full(b, 0.2), np.full(n - b, 0.8)]
            worst = max(float(law[lows > 0.2].sum())
                        for law, lows, _ in (_law(x, k, eps, steps, r)
                                             for r in _lower_ranges(0.2, 0.8)))
        else:  # limit population: x_q = 0.8, B = #{x < 0.8}
            x = np.r_[np.full(b, 0.2), np.full(n - b, 0.8)]
            worst = max(float(law[highs < 0.8].sum())
                        for law, _, highs in (_law(x, k, eps, steps, r)
                                              for r in _upper_ranges(0.8, 0.2)))
        total += float(pmf[b]) * worst
    return total


FAST = [(50, [0.3], 0.5), (51, [0.5], 50.0), (1000, [0.01], 50.0), (1000, [0.5], 0.5),
        (50, [0.1, 0.5, 0.9], 0.5)]
FULL = [(n, qs, rho) for n in (2, 50, 51, 1000)
        for qs in ([0.01], [0.3], [0.5], [0.99], [0.1, 0.5, 0.9])
        for rho in (1e-4, 0.5, 50.0)]


def _check(n: int, qs: list[float], rho: float) -> list[float]:
    ratios = []
    for p, c in zip(qs, _choices(n, qs, rho), strict=True):
        k_low, k_high = c["ranks"]
        assert c["c"] == c["steps"] / 2.0
        for side, k in (("low", k_low), ("high", k_high)):
            if k is None:  # the end is L₁ / U₁ (or the public bound): stage 1's α₁ only
                continue
            miss = exact_worst_miss(n, p, k, c["eps"], c["steps"], side)
            assert miss <= c["a2q"] * (1.0 + 1e-9), (n, p, rho, side, k, miss, c)
            ratios.append(miss / c["a2q"])
    return ratios


@pytest.mark.parametrize(("n", "qs", "rho"), FAST)
def test_exact_worst_population_stage2_miss_within_level(n, qs, rho):
    ratios = _check(n, qs, rho)
    assert ratios and max(ratios) > 0.4  # power: the worst case comes near a₂ (0.45–0.999)


@pytest.mark.slow
@pytest.mark.parametrize(("n", "qs", "rho"), FULL)
def test_exact_worst_population_stage2_miss_within_level_full(n, qs, rho):
    _check(n, qs, rho)


def test_exact_harness_catches_a_rank_one_too_high():
    # Control of the harness: the same computation with k_L + 1 exceeds the level.
    n, p, rho = 1000, 0.5, 50.0
    c = _choices(n, [p], rho)[0]
    k_low = c["ranks"][0]
    assert exact_worst_miss(n, p, k_low + 1, c["eps"], c["steps"], "low") > c["a2q"]


class _DiscreteGaussian:
    """Exact law of the stage-1 query noise Z·2^-bits, Z ~ N_ℤ(0, S) (LatticeNoise)."""

    def __init__(self, n: int, sigma: float) -> None:
        noise = _query_noise(n, sigma)
        self.s, self.step = int(noise.variance), float(noise.step)
        self.k = int(40 * math.sqrt(self.s)) + 2  # beyond 40 sd: e^-800
        j = np.arange(-self.k, self.k + 1, dtype=np.float64)
        w = np.exp(-j * j / (2.0 * self.s))
        self.cdf = np.cumsum(w) / w.sum()

    def at_most(self, t: float) -> float:  # P(Z·step ≤ t)
        i = math.floor(t / self.step) + self.k
        return 0.0 if i < 0 else 1.0 if i >= self.cdf.size else float(self.cdf[i])

    def at_least(self, t: float) -> float:  # P(Z·step ≥ t)
        i = math.ceil(t / self.step) - 1 + self.k
        return 1.0 if i < 0 else 0.0 if i >= self.cdf.size else float(1.0 - self.cdf[i])


def _last_index(bounds, depth, pred) -> int:
    lo, hi = 0, 1 << depth
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if pred(grid_point(bounds, depth, mid)) else (lo, mid)
    return lo


def stage1_lower_miss(count, target, bounds, depth, xi, noise) -> float:
    """Exact P(g_lo > xi) of binsearch_quantile's lower search (noisy ≤ target: lo = mid)."""
    j_star = _last_index(bounds, depth, lambda g: g <= xi)
    miss, p, lo, hi = 0.0, 1.0, 0, 1 << depth
    while True:
        if lo > j_star:
            return miss + p
        if hi - 1 <= j_star:
            return miss
        mid = (lo + hi) // 2
        right = noise.at_most(target - count(mid))
        if mid > j_star:
            miss, p, hi = miss + p * right, p * (1.0 - right), mid
        else:
            p, lo = p * right, mid


def stage1_upper_miss(count, target, bounds, depth, xi, noise) -> float:
    """Exact P(g_hi < xi) of the upper search (noisy ≥ target: hi = mid)."""
    j_star = _last_index(bounds, depth, lambda g: g < xi)
    miss, p, lo, hi = 0.0, 1.0, 0, 1 << depth
    while True:
        if hi <= j_star:
            return miss + p
        if lo >= j_star:
            return miss
        mid = (lo + hi) // 2
        left = noise.at_least(target - count(mid))
        if mid <= j_star:
            miss, p, lo = miss + p * left, p * (1.0 - left), mid
        else:
            p, hi = p * left, mid


def _stage2_worst(x, k, eps, steps, side) -> float:
    if k is None:
        return 0.0
    if side == "low":
        return max(float(law[lows > 0.2].sum())
                   for law, lows, _ in (_law(x, k, eps, steps, r) for r in _lower_ranges(0.2, 0.8)))
    return max(float(law[highs < 0.8].sum())
               for law, _, highs in (_law(x, k, eps, steps, r) for r in _upper_ranges(0.8, 0.2)))


def pipeline_end_bounds(n: int, qs: list[float], rho: float, alpha: float = 0.05):
    """[(q, side, bound on P(end misses), the end's share α₁ + a₂)] for the gap populations."""
    x0 = np.linspace(BOUNDS[0], BOUNDS[1], n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = dpfair.quantiles.confidence_intervals(x0, qs, rho=rho, bounds=BOUNDS,
                                                    alpha=alpha, method="expmech", rng=0)
    k = len(qs)
    loc = res.diagnostics["localize"]
    frac1, d1 = loc["alpha"] / alpha, loc["depth"]
    a1, a2 = frac1 * alpha / 2.0 / k, (1.0 - frac1) * alpha / 2.0 / k
    sigma = GaussianMechanism.for_zcdp(0.1 * rho / k / (2.0 * d1), l2_sensitivity=1.0).sigma
    noise = _DiscreteGaussian(n, sigma)
    out = []
    for p, iv in zip(qs, res.intervals, strict=True):
        d = iv.diagnostics
        st = d["stage1"]["target_ranks"]
        searched = sum(t is not None for t in st)  # each searched end: D₁ queries at σ
        assert d["stage1"]["rho"] == pytest.approx(0.1 * rho / k * searched / 2.0, rel=1e-12)
        a2q = a2 + a1 * sum(t is None for t in st) / 2.0
        ms = np.arange(n + 1)
        pmf = stats.binom.pmf(ms, n, p)
        keep = pmf > 1e-16
        for e, side in enumerate(("low", "high")):
            k1, k2 = st[e], d["target_ranks"][e]
            if k1 is None and k2 is None:
                continue
            total = float(pmf[~keep].sum())
            for b in ms[keep]:
                def count(j, b=b):
                    g = grid_point(BOUNDS, d1, j)
                    return 0 if g < 0.2 else (b if g < 0.8 else n)
                x = np.r_[np.full(b, 0.2), np.full(n - b, 0.8)]
                search = stage1_lower_miss if side == "low" else stage1_upper_miss
                p1 = 0.0 if k1 is None else search(count, k1, BOUNDS, d1,
                                                    0.2 if side == "low" else 0.8, noise)
                p2 = _stage2_worst(x, k2, d["epsilon_per_draw"], d["steps"], side)
                total += float(pmf[b]) * min(1.0, p1 + p2)
            out.append((p, side, total, (a1 if k1 is not None else 0.0) + a2q, alpha / 2 / k))
    return out


def test_exact_stage1_law_matches_the_real_search():
    # The exact-law harness against the executed search (same noise sampler, same rule).
    n, b, depth, rho_q = 50, 20, 14, 2.0
    sigma = GaussianMechanism.for_zcdp(rho_q / (2.0 * depth), l2_sensitivity=1.0).sigma
    noise = _DiscreteGaussian(n, sigma)

    def count(j):
        if j >= 1 << depth:
            return n
        g = grid_point(BOUNDS, depth, j)
        return 0 if g < 0.2 else (b if g < 0.8 else n)
    reps = 4000
    z = _query_noise(n, sigma).sample((reps, depth), np.random.default_rng(1))
    for target in (15, 18, 21):
        exact_low = stage1_lower_miss(count, target, BOUNDS, depth, 0.2, noise)
        exact_high = stage1_upper_miss(count, target + 6, BOUNDS, depth, 0.8, noise)
        hit_low = hit_high = 0
        for r in range(reps):
            lo, hi = 0, 1 << depth
            for s_ in range(depth):
                mid = (lo + hi) // 2
                lo, hi = (mid, hi) if count(mid) + z[r, s_] <= target else (lo, mid)
            hit_low += grid_point(BOUNDS, depth, lo) > 0.2
            lo, hi = 0, 1 << depth
            for s_ in range(depth):
                mid = (lo + hi) // 2
                lo, hi = (lo, mid) if count(mid) + z[r, s_] >= target + 6 else (mid, hi)
            hit_high += grid_point(BOUNDS, depth, hi) < 0.8
        for exact, hits in ((exact_low, hit_low), (exact_high, hit_high)):
            lo_p, hi_p = stats.binomtest(hits, reps).proportion_ci(1 - 1e-6, method="exact")
            assert lo_p <= exact <= hi_p, (target, exact, hits)


PIPE_FAST = [(50, [0.5], 50.0), (300, [0.3], 0.5), (1000, [0.99], 50.0),
             (300, [0.1, 0.5, 0.9], 0.5)]
PIPE_FULL = [(n, qs, rho) for n in (50, 51, 300, 1000)
             for qs in ([0.01], [0.3], [0.5], [0.99], [0.1, 0.5, 0.9])
             for rho in (1e-4, 0.5, 50.0)]


def _check_pipeline(n, qs, rho):
    for p, side, total, share, half in pipeline_end_bounds(n, qs, rho):
        assert total <= share * (1 + 1e-9), (n, p, rho, side, total, share)
        assert total <= half, (n, p, rho, side, total, half)


@pytest.mark.parametrize(("n", "qs", "rho"), PIPE_FAST)
def test_exact_pipeline_miss_per_end(n, qs, rho):
    _check_pipeline(n, qs, rho)


@pytest.mark.slow
@pytest.mark.parametrize(("n", "qs", "rho"), PIPE_FULL)
def test_exact_pipeline_miss_per_end_full(n, qs, rho):
    _check_pipeline(n, qs, rho)


# Values printed by the tree BEFORE the change (commit 60580c4^) for the same calls.
PINS = [
    ('median', 1, 1.07421875, 1.67390625),
    ('median_atoms', 1, 0.0, 1.0),
    ('q_noloc', 0.01, 1, -5.0, 0.41695312500000004, 0.25000000000000006),
    ('q_gran', 0.01, 1, -5.0, 0.46718750000000053, 0.25000000000000006),
    ('q_noloc', 0.3, 1, 0.594765625, 1.0872656250000006, 0.5000000000000001),
    ('q_gran', 0.3, 1, 0.59375, 1.16796875, 0.5000000000000001),
    ('q_noloc', 0.5, 1, 1.07421875, 1.67390625, 0.5000000000000001),
    ('q_gran', 0.5, 1, 1.0718750000000004, 1.74609375, 0.5000000000000001),
    ('q_noloc', 0.99, 1, 6.24234375, 15.0, 0.25000000000000006),
    ('q_gran', 0.99, 1, 7.221093750000001, 15.0, 0.25000000000000006),
    ('loc_cdf', 1, 0.6360149383544922, 1.0206222534179688, 0.49999999999999994),
    ('loc_binsearch', 1, 0.6146478652954102, 1.0313057899475098, 0.5),
    ('loc_binsearch_cdf', 1, 0.6360149383544922, 1.0206222534179688, 0.49999999999999994),
    ('median', 2, 1.0648437500000005, 1.6754687500000003),
    ('median_atoms', 2, 0.0, 1.0),
    ('q_noloc', 0.01, 2, -5.0, 0.3979687500000004, 0.25000000000000006),
    ('q_gran', 0.01, 2, -5.0, 0.3976562500000007, 0.25000000000000006),
    ('q_noloc', 0.3, 2, 0.5863281250000005, 1.094765625, 0.5000000000000001),
    ('q_gran', 0.3, 2, 0.515625, 1.0992187500000004, 0.5000000000000001),
    ('q_noloc', 0.5, 2, 1.0648437500000005, 1.6754687500000003, 0.5000000000000001),
    ('q_gran', 0.5, 2, 1.00390625, 1.6742187500000005, 0.5000000000000001),
    ('q_noloc', 0.99, 2, 5.763984375, 15.0, 0.25000000000000006),
    ('q_gran', 0.99, 2, 6.330468750000001, 15.0, 0.25000000000000006),
    ('loc_cdf', 2, 0.6623411178588867, 1.0504674911499023, 0.49999999999999994),
    ('loc_binsearch', 2, 0.6299972534179688, 1.0747253894805908, 0.5),
    ('loc_binsearch_cdf', 2, 0.6623411178588867, 1.0504674911499023, 0.49999999999999994),
    ('median', 3, 1.0658593750000005, 1.6753125000000004),
    ('median_atoms', 3, 0.0, 1.0),
    ('q_noloc', 0.01, 3, -5.0, 0.3860937499999997, 0.25000000000000006),
    ('q_gran', 0.01, 3, -5.0, 0.35312500000000036, 0.25000000000000006),
    ('q_noloc', 0.3, 3, 0.580078125, 1.0939843749999998, 0.5000000000000001),
    ('q_gran', 0.3, 3, 0.5242187500000002, 1.0921875000000005, 0.5000000000000001),
    ('q_noloc', 0.5, 3, 1.0658593750000005, 1.6753125000000004, 0.5000000000000001),
    ('q_gran', 0.5, 3, 1.01171875, 1.6671875000000007, 0.5000000000000001),
    ('q_noloc', 0.99, 3, 5.775078125, 15.0, 0.25000000000000006),
    ('q_gran', 0.99, 3, 6.3765625, 15.0, 0.25000000000000006),
    ('loc_cdf', 3, 0.6295299530029297, 1.013941764831543, 0.49999999999999994),
    ('loc_binsearch', 3, 0.639646053314209, 1.0645222663879395, 0.5),
    ('loc_binsearch_cdf', 3, 0.6295299530029297, 1.013941764831543, 0.49999999999999994),
]


def _pin_calls() -> list[tuple]:
    out: list[tuple] = []
    x = np.random.default_rng(5).lognormal(0.4, 1.0, 301)
    xa = np.r_[np.zeros(20), np.ones(31)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for seed in (1, 2, 3):
            m = dpfair.median.confidence_interval(x, rho=0.5, bounds=BOUNDS, method="expmech",
                                                  rng=seed)
            out.append(("median", seed, m.low, m.high))
            m = dpfair.median.confidence_interval(xa, rho=0.3, bounds=(0.0, 1.0),
                                                  method="expmech", rng=seed)
            out.append(("median_atoms", seed, m.low, m.high))
            for q in (0.01, 0.3, 0.5, 0.99):
                r = dpfair.quantiles.confidence_interval(x, q, rho=0.5, bounds=BOUNDS,
                                                         method="expmech", localize=False,
                                                         rng=seed)
                out.append(("q_noloc", q, seed, r.low, r.high, r.privacy.rho))
                r = dpfair.quantiles.confidence_interval(x, q, rho=0.5, bounds=BOUNDS,
                                                         method="expmech", granularity=0.05,
                                                         rng=seed)
                out.append(("q_gran", q, seed, r.low, r.high, r.privacy.rho))
            for meth in ("cdf", "binsearch", "binsearch_cdf"):
                r = dpfair.quantiles.confidence_interval(x, 0.3, rho=0.5, bounds=BOUNDS,
                                                         method=meth, rng=seed)
                out.append(("loc_" + meth, seed, r.low, r.high, r.privacy.rho))
    return out


def test_non_localised_and_other_methods_unchanged_by_the_expmech_change():
    assert _pin_calls() == PINS
