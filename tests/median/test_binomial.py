"""The NumPy binomial law (:mod:`dpfair.median._binomial`) against exact and SciPy references.

Three references, each where it is exact enough to judge a relative 1e-12:

* exact rational arithmetic (:class:`fractions.Fraction`; a binary64 p is a dyadic
  rational) for n ≤ 400;
* a 50-digit :mod:`decimal` evaluation (log-factorials by Stirling's series with ten
  Bernoulli terms, then the exact pmf recurrence outward from the mode) for n up to 2·10^7;
* ``scipy.stats.binom`` (Boost's incomplete beta) over a grid of n (1 … 2·10^7), p
  (extremes, 0.1, 0.5, 0.9, …) and k across the whole mass. ``scipy.special.bdtr``
  (Cephes), which the median's rank targets used before, is only a reference up to
  n = 10^5: beyond it its own error grows (1e-8 relative at n = 2·10^7 in the tails and
  6e-4 next to the median, see ``test_bdtr_is_the_less_accurate_one_for_large_n``).

Then the rank targets: the median's and the quantiles' targets, and seeded released
intervals, computed with the SciPy law the code used before (patched back in) equal the
ones computed now, over many (n, α, q, ε, C) cases.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator
from decimal import Decimal, localcontext
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from scipy import special, stats

import dpfair.median as median
import dpfair.quantiles as quantiles
from dpfair._errors import InsufficientDataError
from dpfair.median import _api, _binomial, _binsearch, _cdf, _expmech, _ranks
from dpfair.median._binomial import binom_cdf, binom_log_pmf, binom_sf
from dpfair.quantiles import _api as quantiles_api
from dpfair.quantiles import _methods as quantiles_methods

# ----------------------------------------------------------------------------- references


def _exact_law(n: int, p: float) -> list[Fraction]:
    pf = Fraction(p)
    qf = 1 - pf
    return [math.comb(n, k) * pf**k * qf ** (n - k) for k in range(n + 1)]


_BERNOULLI = [Fraction(1, 6), Fraction(-1, 30), Fraction(1, 42), Fraction(-1, 30),
              Fraction(5, 66), Fraction(-691, 2730), Fraction(7, 6), Fraction(-3617, 510),
              Fraction(43867, 798), Fraction(-174611, 330)]


def _ln_factorial(x: int) -> Decimal:
    if x < 60:
        return sum((Decimal(j).ln() for j in range(2, x + 1)), Decimal(0))
    big = Decimal(x)
    pi = Decimal("3.14159265358979323846264338327950288419716939937510582097494459")
    out = (big + Decimal("0.5")) * big.ln() - big + (2 * pi).ln() / 2
    for k, b in enumerate(_BERNOULLI, start=1):
        out += Decimal(b.numerator) / Decimal(b.denominator) / (2 * k * (2 * k - 1)
                                                                 * big ** (2 * k - 1))
    return out


@functools.lru_cache(maxsize=8)
def _decimal_cdf_table(n: int, p: float) -> tuple[int, tuple[Decimal, ...]]:
    """(lo, prefix sums) of the 50-digit pmf over every k where pmf ≥ 1e-340."""
    with localcontext() as ctx:
        ctx.prec = 50
        pd, qd = Decimal(p), 1 - Decimal(p)
        mode = min(n, max(0, math.floor((n + 1) * p)))
        log_mode = _ln_factorial(n) - _ln_factorial(mode) - _ln_factorial(n - mode)
        if mode:
            log_mode += mode * pd.ln()
        if n - mode:
            log_mode += (n - mode) * qd.ln()
        tiny = Decimal("1e-340")
        up, cur = [log_mode.exp()], log_mode.exp()
        for j in range(mode, n):
            cur = cur * (n - j) / (j + 1) * pd / qd
            if cur < tiny:
                break
            up.append(cur)
        down, cur = [], up[0]
        for j in range(mode, 0, -1):
            cur = cur * j / (n - j + 1) * qd / pd
            if cur < tiny:
                break
            down.append(cur)
        terms = down[::-1] + up
        prefix, total = [], Decimal(0)
        for t in terms:
            total += t
            prefix.append(total)
        return mode - len(down), tuple(prefix)


def _decimal_cdf(k: int, n: int, p: float) -> float:
    lo, prefix = _decimal_cdf_table(n, p)
    if k < lo:
        return 0.0
    return float(prefix[min(k - lo, len(prefix) - 1)])


def _rel(a: Any, b: Any, floor: float = 1e-300) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    keep = np.abs(b) > floor
    assert np.all(np.abs(a[~keep] - b[~keep]) <= 1e-290)
    return float(np.max(np.abs(a[keep] / b[keep] - 1.0), initial=0.0))


def _rel_log(a: Any, b: Any) -> float:
    """Largest |a/b − 1| / (1 + |ln b|) over b > 1e-300 (the error grows with |ln P|)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    keep = b > 1e-300
    assert np.all(np.abs(a[~keep] - b[~keep]) <= 1e-290)
    err = np.abs(a[keep] / b[keep] - 1.0) / (1.0 + np.abs(np.log(b[keep])))
    return float(np.max(err, initial=0.0))


def _ks(n: int, p: float) -> np.ndarray:
    """Points across the whole mass, both tails and both ends (and just outside)."""
    sd = math.sqrt(n * p * (1 - p))
    body = np.linspace(n * p - 45 * sd - 3, n * p + 45 * sd + 3, 1501)
    ends = np.concatenate((np.arange(-2, 40), n - np.arange(-2, 40)))
    return np.unique(np.clip(np.round(np.concatenate((body, ends))), -3, n + 3))


PS = [1e-12, 1e-6, 1e-3, 0.05, 0.1, 0.3, 0.5, 0.7, 0.9, 0.999, 1 - 1e-9]

# ----------------------------------------------------------------------------- the law


@pytest.mark.parametrize("n", [0, 1, 2, 3, 7, 16, 35, 36, 81, 200, 400])
@pytest.mark.parametrize("p", [0.5, 0.1, 0.9, 1e-3, 0.999, 0.3, 1e-9])
def test_pmf_cdf_sf_match_exact_rational_arithmetic(n: int, p: float) -> None:
    law = _exact_law(n, p)
    ks = np.arange(-2, n + 3)
    pmf = np.exp(binom_log_pmf(ks, n, p))
    exact_pmf = [float(law[k]) if 0 <= k <= n else 0.0 for k in ks]
    # Relative error ≤ 45·2^-53·(1 + |ln P|): 1e-14 at the α/2 levels, 7e-12 at 1e-300.
    assert _rel_log(pmf, exact_pmf) < 1e-14
    cum = np.cumsum([Fraction(0), *law])  # cum[k + 1] = P(B ≤ k)
    exact_cdf = [0.0 if k < 0 else 1.0 if k >= n else float(cum[k + 1]) for k in ks]
    exact_sf = [1.0 if k < 0 else 0.0 if k >= n else float(1 - cum[k + 1]) for k in ks]
    assert _rel_log(binom_cdf(ks, n, p), exact_cdf) < 1e-14
    assert _rel_log(binom_sf(ks, n, p), exact_sf) < 1e-14


@pytest.mark.parametrize("n", [1000, 48842, 10**6, 2 * 10**7])
def test_cdf_matches_a_50_digit_reference_for_large_n(n: int) -> None:
    for p in PS:
        ks = _ks(n, p)
        ref = [_decimal_cdf(int(k), n, p) if k >= 0 else 0.0 for k in ks]
        # Measured ≤ 6.2e-14: the rounding of n·p moves the far tails by ~|k − np|·2^-53
        # (the problem's own conditioning at a binary64 p); 0 error at p = 1/2.
        assert _rel_log(binom_cdf(ks, n, p), ref) < 2e-13, p


@pytest.mark.parametrize("n", [1, 2, 5, 10, 17, 40, 100, 1000, 4097, 48842, 10**5, 10**6,
                               4 * 10**6, 2 * 10**7])
def test_cdf_and_sf_match_scipy_stats_over_a_grid(n: int) -> None:
    # 1e-9 (the targets' rounding margin): SciPy's own error reaches 6e-10 in corners
    # (p = 1e-6 at n = 2·10^7, p = 1 − 1e-9 near 1e-300), where the exact references above
    # side with this module (test_scipy_is_the_less_accurate_one_in_corners).
    for p in PS:
        ks = _ks(n, p)
        assert _rel(binom_cdf(ks, n, p), stats.binom.cdf(ks, n, p)) < 1e-9, p
        assert _rel(binom_sf(ks, n, p), stats.binom.sf(ks, n, p)) < 1e-9, p
        on = (ks >= 0) & (ks <= n)
        lp, ref = binom_log_pmf(ks[on], n, p), stats.binom.logpmf(ks[on], n, p)
        fine = ref > -700
        # scipy's logpmf loses ~|log n!|·2^-53 (gammaln differences): compare at that scale.
        assert np.max(np.abs(lp[fine] - ref[fine])) < 1e-9 + 4e-16 * n * math.log(n + 1)


def test_scipy_is_the_less_accurate_one_in_corners() -> None:
    n, p = 2 * 10**7, 1e-6
    ref = _decimal_cdf(5, n, p)
    assert abs(binom_cdf(5, n, p) / ref - 1) < 1e-14
    assert abs(stats.binom.cdf(5, n, p) / ref - 1) > 1e-10  # 5.8e-10
    n, p = 40, 1 - 1e-9
    exact = float(sum(_exact_law(n, p)[:7]))
    assert abs(binom_cdf(6, n, p) / exact - 1) < 1e-13
    assert abs(stats.binom.cdf(6, n, p) / exact - 1) > 1e-10  # 2.8e-10


@pytest.mark.parametrize("n", [1, 2, 5, 10, 17, 40, 100, 1000, 48842, 10**5])
def test_cdf_and_sf_match_scipy_bdtr_up_to_1e5(n: int) -> None:
    for p in PS:
        ks = _ks(n, p)
        inside = np.clip(ks, 0, n)
        ref_cdf = np.where(ks < 0, 0.0, np.where(ks >= n, 1.0, special.bdtr(inside, n, p)))
        ref_sf = np.where(ks < 0, 1.0, np.where(ks >= n, 0.0, special.bdtrc(inside, n, p)))
        assert _rel(binom_cdf(ks, n, p), ref_cdf) < 1e-9, p
        assert _rel(binom_sf(ks, n, p), ref_sf) < 1e-9, p


def test_bdtr_is_the_less_accurate_one_for_large_n() -> None:
    n, p = 2 * 10**7, 0.5
    ks = [9_995_617, 9_999_776]  # the 0.05-level rank target and a point next to the median
    ref = np.array([_decimal_cdf(k, n, p) for k in ks])
    ours = binom_cdf(np.array(ks), n, p)
    old = special.bdtr(ks, n, p)
    assert np.all(np.abs(ours / ref - 1) < 1e-13)
    assert np.max(np.abs(old / ref - 1)) > 1e-6  # bdtr: 1.6e-8 and 6.4e-4


def test_edges_scalars_and_degenerate_laws() -> None:
    assert binom_cdf(-1, 10, 0.3) == 0.0 and binom_cdf(10, 10, 0.3) == 1.0
    assert binom_sf(-1, 10, 0.3) == 1.0 and binom_sf(10, 10, 0.3) == 0.0
    assert isinstance(binom_cdf(3, 10, 0.3), float)
    assert binom_cdf(3.7, 10, 0.3) == binom_cdf(3, 10, 0.3)  # ⌊k⌋, like scipy
    assert binom_cdf(np.array([[1, 2]]), 10, 0.3).shape == (1, 2)
    for n, p, point in [(0, 0.3, 0), (5, 0.0, 0), (5, 1.0, 5)]:
        ks = np.arange(-1, 7)
        assert np.array_equal(binom_cdf(ks, n, p), (ks >= point).astype(float))
        assert np.array_equal(binom_sf(ks, n, p), (ks < point).astype(float))
        assert np.array_equal(np.exp(binom_log_pmf(ks, n, p)), (ks == point).astype(float))
    assert binom_log_pmf(2.5, 10, 0.3) == -np.inf
    with pytest.raises(ValueError, match="n="):
        binom_cdf(1, -3, 0.5)
    with pytest.raises(ValueError, match="p="):
        binom_cdf(1, 3, 1.5)


def test_the_mass_outside_the_table_rounds_to_zero() -> None:
    # The table keeps every pmf ≥ e^-800; what it drops is < n·e^-800, below 2^-1075.
    for n, p in [(10**6, 0.5), (2 * 10**7, 1e-3), (500, 1e-9)]:
        lo, low, high = _binomial._tails(n, p)
        hi = lo + low.size - 1
        assert math.log(n) - 800.0 < -1075 * math.log(2.0)
        assert binom_log_pmf(lo - 1, n, p) < -800 if lo > 0 else True
        assert binom_log_pmf(hi + 1, n, p) < -800 if hi < n else True
        assert abs(low[-1] - 1.0) < 1e-12 and abs(high[0] - 1.0) < 1e-12


# ----------------------------------------------------------------------------- the targets


def _old_cdf(k: Any, n: int, p: float = 0.5) -> Any:
    kk = np.asarray(k, dtype=np.float64)
    out = special.bdtr(np.clip(kk, 0, n), n, p)
    return np.where(kk < 0, 0.0, np.where(kk >= n, 1.0, out))


def _old_sf(k: Any, n: int, p: float = 0.5) -> Any:
    kk = np.asarray(k, dtype=np.float64)
    out = special.bdtrc(np.clip(kk, 0, n), n, p)
    return np.where(kk < 0, 1.0, np.where(kk >= n, 0.0, out))


def _old_log_pmf(m: Any, n: int, p: float = 0.5) -> Any:
    mm = np.asarray(m, dtype=np.float64)
    k = np.floor(mm)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = (special.gammaln(n + 1) - (special.gammaln(k + 1) + special.gammaln(n - k + 1))
               + special.xlogy(k, p) + special.xlog1py(n - k, -p))
    ok = (k >= 0) & (k <= n) & (k == mm)
    return np.asarray(np.where(ok, out, -np.inf), dtype=np.float64)


def _clear_caches() -> None:
    for module in (_ranks, _binomial, _binsearch, _cdf, _expmech, _api, quantiles_api,
                   quantiles_methods):
        for value in vars(module).values():
            if callable(getattr(value, "cache_clear", None)):
                value.cache_clear()


@pytest.fixture
def old_law(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[], None]]:
    """Call the returned function to put back the SciPy law the code used before."""

    def install() -> None:
        monkeypatch.setattr(_ranks, "_binom_cdf", _old_cdf)
        monkeypatch.setattr(_ranks, "_binom_sf", _old_sf)
        monkeypatch.setattr(_ranks, "_log_pmf", _old_log_pmf)
        monkeypatch.setattr(quantiles_api, "binom_cdf", lambda k, n, p: stats.binom.cdf(k, n, p))
        monkeypatch.setattr(quantiles_api, "binom_sf", lambda k, n, p: stats.binom.sf(k, n, p))
        _clear_caches()

    _clear_caches()
    yield install
    _clear_caches()


NS = [1, 2, 3, 5, 8, 13, 20, 31, 50, 77, 100, 150, 333, 1000, 4097, 10**4, 48842, 10**5,
      333_333, 10**6, 4 * 10**6, 2 * 10**7]
ALPHAS = [0.5, 0.2, 0.1, 0.05, 0.01, 1e-3, 1e-6, 1e-12, 1e-40]
QS = [0.001, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99]


def _targets() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for n in NS:
        for a in ALPHAS:
            try:
                out[f"median {n} {a}"] = _ranks.nonprivate_ranks(n, a)
            except InsufficientDataError:
                out[f"median {n} {a}"] = "InsufficientDataError"
            if n <= 10**5:
                for q in QS:
                    out[f"quantile {n} {q} {a}"] = quantiles_api.nonprivate_ranks(n, q, a)
        for a in ALPHAS[:7]:
            for eps in (0.01, 0.1, 1.0, 5.0):
                for c in (0.5, 40.0, 3937.46, 1e6):
                    for p in (0.5, 0.1, 0.9, 0.01):
                        out[f"expmech {n} {a} {eps} {c} {p}"] = _ranks.expmech_lower_target(
                            n, eps, c, a / 2, p)
    for n in NS[:-4]:
        for a in (0.1, 0.05, 1e-3):
            for sigma in (0.5, 3.0, 30.0):
                for depth in (8, 20):
                    try:
                        out[f"binsearch {n} {a} {sigma} {depth}"] = (
                            _binsearch.binsearch_target_ranks(n, sigma, depth, a))
                    except InsufficientDataError:
                        out[f"binsearch {n} {a} {sigma} {depth}"] = "InsufficientDataError"
    return out


@pytest.mark.slow
def test_rank_targets_are_identical_to_the_scipy_ones(old_law: Callable[[], None]) -> None:
    new = _targets()
    old_law()
    old = _targets()
    assert len(new) > 10_000
    assert {k: (old[k], new[k]) for k in new if old[k] != new[k]} == {}


def test_rank_targets_are_identical_to_the_scipy_ones_sample(
    old_law: Callable[[], None],
) -> None:
    def targets() -> list[Any]:
        out: list[Any] = []
        for n in (1, 7, 50, 1000, 48842, 10**6, 2 * 10**7):
            for a in (0.1, 0.05, 1e-3, 1e-12):
                try:
                    out.append(_ranks.nonprivate_ranks(n, a))
                except InsufficientDataError:
                    out.append(None)
                for eps, c, p in [(0.1, 3937.46, 0.5), (1.0, 40.0, 0.1), (5.0, 1e6, 0.9)]:
                    out.append(_ranks.expmech_lower_target(n, eps, c, a / 2, p))
                if n <= 10**5:
                    out.extend(quantiles_api.nonprivate_ranks(n, q, a) for q in (0.01, 0.5, 0.9))
        return out

    new = targets()
    old_law()
    assert targets() == new


def _released() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for n in (50, 1000, 48842):
        x = np.random.default_rng(n).normal(40, 12, n)
        for method in ("expmech", "cdf", "binsearch", "binsearch_cdf"):
            for a in (0.1, 0.05):
                r = median.confidence_interval(x, 0.5, (0, 120), alpha=a, method=method, rng=3)
                out[f"median {n} {method} {a}"] = (r.low, r.high)
                rs = quantiles.confidence_intervals(x, [0.1, 0.5, 0.9], rho=0.5, bounds=(0, 120),
                                                    alpha=a, method=method, rng=3)
                out[f"quantiles {n} {method} {a}"] = [(v.low, v.high) for v in rs.intervals]
    return out


@pytest.mark.filterwarnings("ignore")
def test_seeded_released_intervals_are_identical(old_law: Callable[[], None]) -> None:
    new = _released()
    old_law()
    old = _released()
    assert old == new


# ----------------------------------------------------------------------------- validity


@pytest.mark.parametrize("alpha", [0.5, 0.1, 0.05, 0.01, 1e-3, 1e-6, 1e-12])
def test_classical_median_ranks_are_valid_and_tight_in_exact_arithmetic(alpha: float) -> None:
    # The guarantee the rank targets exist for: P(B ≤ kL − 1) ≤ α/2 in exact arithmetic
    # (coverage), and kL + 1 would break it (no rank wasted), n = 1..300 and large n.
    half = Fraction(alpha) / 2
    for n in [*range(1, 120), 150, 199, 256, 300]:
        try:
            k_low, _ = _ranks.nonprivate_ranks(n, alpha)
        except InsufficientDataError:
            assert Fraction(1, 2**n) > half  # even k = 1 fails: P(B ≤ 0) = 2^-n
            continue
        cdf = Fraction(sum(math.comb(n, j) for j in range(k_low)), 2**n)  # P(B ≤ kL − 1)
        nxt = cdf + Fraction(math.comb(n, k_low), 2**n)  # P(B ≤ kL)
        assert cdf <= half, (n, alpha)
        assert nxt > half * (1 - Fraction(1, 10**9)), (n, alpha)
    for n in (48842, 10**6, 2 * 10**7):
        k_low, _ = _ranks.nonprivate_ranks(n, alpha)
        assert _decimal_cdf(k_low - 1, n, 0.5) <= alpha / 2, (n, alpha)
        assert _decimal_cdf(k_low, n, 0.5) > alpha / 2 * (1 - 1e-9), (n, alpha)


def _one_point_cases() -> list[tuple[int, int, float]]:
    rng = np.random.default_rng(20260)
    out = []
    for n in [*range(1, 40), 100, 333, 1000, 10**4, 10**5, 10**6 + 17, 2 * 10**7, 10**9]:
        for p in (0.5, 0.1, 0.9, 0.01, 0.37, 1e-6, 1 - 1e-6, float(rng.random())):
            mode = min(n, max(0, math.floor((n + 1) * p)))
            ks = {0, n, 1, n - 1, mode, mode - 1, mode + 1}
            ks |= {int(v) for v in rng.integers(0, n + 1, 8)}
            ks |= {b for e in (15, 16, 35, 36, 80, 81, 500, 501) for b in (e, n - e)}
            out += [(k, n, p) for k in sorted(ks) if 0 <= k <= n]
    return out


def test_one_point_log_pmf_is_the_array_value_bit_for_bit():
    """binom_log_pmf of ONE point takes a scalar path (no NumPy call overhead); it must
    return the array path's value exactly (same operations, same order, same ufunc logs):
    the windows' mode values, hence every pmf window and rank target, are unchanged."""
    cases = _one_point_cases()
    assert len(cases) > 3000
    for k, n, p in cases:
        one = binom_log_pmf(np.array([float(k)]), n, p)
        two = binom_log_pmf(np.array([float(k), float(k)]), n, p)  # the array path
        assert one.shape == (1,)
        assert float(one[0]).hex() == float(two[0]).hex(), (k, n, p)
    assert binom_log_pmf(5.0, 10, 0.5).shape == ()  # the input's shape is kept
    assert binom_log_pmf(np.array([[5.0]]), 10, 0.5).shape == (1, 1)
    assert binom_log_pmf(np.array([2.5]), 10, 0.5)[0] == -np.inf  # off the lattice
