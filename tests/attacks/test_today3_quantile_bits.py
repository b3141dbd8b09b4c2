"""Attacks on the byte-identity claims of the issue-22 item-8 speed work (branch h-q3).

The claims: the one-point ``binom_log_pmf`` path, the in-place binomial windows
(``_window_pmf``, ``_binomial_support``, ``_binomial_suffix``, ``_window_pmf_core`` /
``_window_sums``), the one-point ``mixture_sf`` path and the bounded ``_exact_sum`` all
return the bytes of the code before the branch (commit a9411e1, equal in these files to
main at 548b023) or of the general path / ``math.fsum``.

The reference is the code of commit a9411e1 itself, extracted with ``git archive`` and run
in a subprocess (no stash, no checkout), on adversarial inputs the author's tests do not
use: the window-cut boundary n ≈ 400, p within an ulp of 1/2, p = 1e-300 and 1 − 2^-53,
modes at 0 and n, the deviance series boundary |v| = 1/2, σ subnormal or huge, c on the
closed-form reach boundary, non-finite c.
"""

from __future__ import annotations

import hashlib
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from dpfair.median import _cdf
from dpfair.median._binomial import binom_log_pmf
from dpfair.median._cdf import _exact_sum, mixture_sf
from dpfair.quantiles import _methods
from tests._quantile_reference import extract_reference, run_reference


@pytest.fixture(scope="module")
def reference_src(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """src/ of the code before the speed work (:data:`REFERENCE_COMMIT`)."""
    return extract_reference(tmp_path_factory)


def _log_pmf_cases() -> list[tuple[float, int, float]]:
    rng = np.random.default_rng(31)
    ps = [0.5, math.nextafter(0.5, 0.0), math.nextafter(0.5, 1.0), 1e-300, 5e-324,
          1.0 - 2.0**-53, 2.0**-53, 1e-6, 1.0 - 1e-6, 1.0 / 3.0, 0.999, 0.001]
    ps += [float(v) for v in rng.random(6)]
    ns = [*range(1, 25), 399, 400, 401, 402, 2**31 - 1, 10**9 + 7, 2**53 - 1, 2**53 + 2,
          10**15 + 3]
    out = []
    for n in ns:
        for p in ps:
            mean = n * p
            ks = {1, 2, n - 1, n - 2, math.floor(mean), math.ceil(mean),
                  math.floor(mean / 3.0), math.ceil(mean / 3.0), math.floor(3.0 * mean),
                  math.ceil(3.0 * mean), math.floor(n - (n - mean) / 3.0)}
            ks |= {int(v) for v in rng.integers(1, max(2, n), 4)}
            ks |= {e + d for e in (15, 35, 80, 500) for d in (0, 1)}
            out += [(float(k), n, p) for k in sorted(ks) if 0 < k < n]
    return out


LOG_PMF_CODE = """
import json, sys
import numpy as np
from dpfair.median._binomial import binom_log_pmf
cases = json.load(sys.stdin)
print(json.dumps([float(binom_log_pmf(np.array([k]), n, p)[0]).hex() for k, n, p in cases]))
"""


def test_one_point_log_pmf_equals_the_reference_on_adversarial_points(reference_src):
    """The scalar one-point path against the OLD code's array path (run in a subprocess):
    series boundaries, deviance series boundary |v| = 1/2, p within an ulp of 1/2, p
    subnormal or 1 − 2^-53, n beyond 2^53. Held: every value equal (nan/inf included)."""
    cases = _log_pmf_cases()
    assert len(cases) > 2000
    ref = run_reference(reference_src, LOG_PMF_CODE, cases)
    with np.errstate(all="ignore"):
        mine = [float(binom_log_pmf(np.array([k]), n, p)[0]).hex() for k, n, p in cases]
    bad = [(c, a, b) for c, a, b in zip(cases, mine, ref, strict=True) if a != b]
    assert not bad, bad[:5]
    # and the same module's two paths agree (a two-element input takes the array path)
    with np.errstate(all="ignore"):
        for k, n, p in cases[::7]:
            one = binom_log_pmf(k, n, p)
            assert one.shape == ()
            two = binom_log_pmf(np.array([k, k]), n, p)[0]
            assert float(one).hex() == float(two).hex(), (k, n, p)


# ----------------------------------------------------------------- binomial windows
def _window_cases() -> list[tuple[int, float]]:
    ps = [0.5, math.nextafter(0.5, 0.0), math.nextafter(0.5, 1.0), 1e-300, 1e-12,
          1.0 - 1e-12, 1e-6, 1.0 - 1e-6, 0.999, 0.001, 1.0 / 3.0, 0.7071]
    ns = [1, 2, 3, 4, 5, 9, 17, 37, 99, 100, 101, 160, 399, 400, 401, 402, 403, 1025,
          77_777, 3_000_017]
    return [(n, p) for n in ns for p in ps]


WINDOW_CODE = """
import hashlib, json, sys
from dpfair.median import _cdf
from dpfair.quantiles import _methods
cases, halves = json.load(sys.stdin)
out = []
for n, p in cases:
    k, pmf, dropped = _cdf._binomial_support.__wrapped__(n, p)
    h = hashlib.sha256(k.tobytes() + pmf.tobytes() + float(dropped).hex().encode()
                       + _cdf._binomial_suffix.__wrapped__(n, p).tobytes())
    for half in halves:
        lo, hi, wp, cdf, outside = _methods._window_sums.__wrapped__(n, p, half)
        h.update(repr((lo, hi, float(outside).hex())).encode() + wp.tobytes() + cdf.tobytes())
    out.append(h.hexdigest())
print(json.dumps(out))
"""
HALVES = [0, 1, 2, 7, 64, 1500]


def _window_digest(n: int, p: float) -> str:
    k, pmf, dropped = _cdf._binomial_support.__wrapped__(n, p)
    h = hashlib.sha256(k.tobytes() + pmf.tobytes() + float(dropped).hex().encode()
                       + _cdf._binomial_suffix.__wrapped__(n, p).tobytes())
    for half in HALVES:
        lo, hi, wp, cdf, outside = _methods._window_sums.__wrapped__(n, p, half)
        h.update(repr((lo, hi, float(outside).hex())).encode() + wp.tobytes() + cdf.tobytes())
    return h.hexdigest()


def test_binomial_windows_equal_the_reference_at_adversarial_n_and_p(reference_src):
    """In-place windows (support, pmf, suffix, certified-search windows and sums) against
    the old code: the window-cut boundary n ≈ 400, modes at 0 and n (p = 1e-300,
    1 − 1e-12), p one ulp off 1/2 (the centre n/2 vs n·p switch), half widths 0..1500.
    Held: every digest equal."""
    cases = _window_cases()
    ref = run_reference(reference_src, WINDOW_CODE, [cases, HALVES])
    mine = [_window_digest(n, p) for n, p in cases]
    bad = [c for c, a, b in zip(cases, mine, ref, strict=True) if a != b]
    assert not bad, bad[:10]


# --------------------------------------------------------------- one-point mixture_sf
def _mixture_cases() -> list[tuple[float, float, float | None, int, float]]:
    rng = np.random.default_rng(77)
    out: list[tuple[float, float, float | None, int, float]] = []
    sigmas = [5e-324, 1e-300, 1e-3, 0.3, 1.0, 7.5, 300.0, 1e6, 1e300]
    for n in (1, 2, 5, 40, 401, 4099, 250_001):
        for p in (0.5, 1e-6, 1.0 - 1e-6, 0.3):
            k, _, _ = _cdf._binomial_support(n, p)
            k0, k1 = float(k[0]), float(k[-1])
            for _ in range(14):
                s = float(rng.choice(sigmas))
                up = None if rng.random() < 0.3 else float(rng.choice(sigmas))
                reach = 40.0 * max(s, s if up is None else up)
                cs = [k0 - reach, math.nextafter(k0 - reach, -math.inf),
                      k1 + reach, math.nextafter(k1 + reach, math.inf),
                      float(rng.integers(int(k0), int(k1) + 1)),  # c on a binomial value
                      float(rng.uniform(k0 - 3.0, k1 + 3.0)),
                      math.inf, -math.inf, 0.0, -0.0]
                out += [(c, s, up, n, p) for c in cs if math.isfinite(c) or rng.random() < 0.5]
    return out


MIXTURE_CODE = """
import json, math, sys
import numpy as np
from dpfair.median._cdf import mixture_sf
out = []
for c, s, up, n, p in json.load(sys.stdin):
    out.append(mixture_sf(np.array([c]), s, n, sigma_above=up, p=p).tobytes().hex())
print(json.dumps(out))
"""


def test_one_point_mixture_sf_equals_the_reference_general_path(reference_src):
    """The one-point short path against the OLD mixture_sf (which had only the general
    path): c on the closed-form reach boundary and one ulp beyond, c on a binomial value
    (diff = 0: which σ), c = ±0, ±inf, σ subnormal / 1e300. Held: all bytes equal."""
    cases = _mixture_cases()
    ref = run_reference(reference_src, MIXTURE_CODE, cases)  # JSON keeps ±inf and -0.0
    with np.errstate(all="ignore"):
        mine = [mixture_sf(np.array([c]), s, n, sigma_above=up, p=p).tobytes().hex()
                for c, s, up, n, p in cases]
    bad = [c for c, a, b in zip(cases, mine, ref, strict=True) if a != b]
    assert not bad, bad[:10]


# fixed (was a strict xfail of the attack review)
def test_one_point_mixture_sf_with_nan_sigma_above_is_the_general_path():
    c = np.array([-100.0])
    fast = mixture_sf(c, 1.0, 10, sigma_above=math.nan)
    with np.errstate(all="ignore"):
        general = mixture_sf(c, np.array([1.0]), 10, sigma_above=np.array([math.nan]))
    assert fast.tobytes() == general.tobytes()  # fast is [1.0], general is [nan]


# ------------------------------------------------------------------------ _exact_sum
def _same_as_fsum(v: np.ndarray) -> None:
    assert float(_exact_sum(v)).hex() == math.fsum(v.tolist()).hex(), v[:8]


def test_exact_sum_bounded_path_against_fsum_adversarial():
    """The bounded path (bins > 90 binary orders below the top bounded, not summed)
    against math.fsum: many tiny bins that together decide a half-ulp tie, subnormal
    tails (2^-1074), results in the subnormal range, exact cancellation of the top, the
    top a power of two (the ulp halves below it). Held on all of them."""
    rng = np.random.default_rng(4242)
    tiny = 2.0**-1074
    fixed = [
        [1.0, 2.0**-53, *([2.0**-100] * 5000)],  # a tie, broken by 5000 tiny terms
        [1.0, 2.0**-53, *([-(2.0**-100)] * 5000)],
        [1.0, -(2.0**-54), 2.0**-200],  # just below a power of two: finer ulp
        [1.0, -(2.0**-54), -(2.0**-200)],
        [1.0, -(2.0**-54)],
        [2.0**-1000, 2.0**-1053, tiny],  # subnormal tie breaker
        [2.0**-1000, 2.0**-1053, -tiny],
        [2.0**-1020, tiny, tiny, tiny],  # result in the normal range, tail subnormal
        [2.0**-1030, 2.0**-1074 * 3, -(2.0**-1030)],  # top cancels: full path
        [1e-310, 1e-320, tiny, -tiny],  # subnormal result, bounded tail
        [1.0, -1.0, 1.0, 2.0**-300],
        [1.0, *([2.0**-91] * 2**16)],  # the bound's own size 2^16·2^-91 < half ulp
        [1.0, 2.0**-53, *([2.0**-91] * 2**16), -(2.0**-91) * 2**16],  # sums to a tie
    ]
    for case in fixed:
        _same_as_fsum(np.array(case, dtype=np.float64))
    for _ in range(400):
        k = int(rng.integers(2, 3000))
        top_exp = int(rng.choice([0, -500, -1000, -1021, 900]))
        a = np.ldexp(rng.random(k) + 0.5, top_exp - rng.integers(0, 300, k))
        if rng.random() < 0.5:
            a *= rng.choice([-1.0, 1.0], k)
        if rng.random() < 0.4:  # plant a half-ulp tie on the current partial total
            t = math.fsum(a.tolist())
            if t != 0.0 and math.isfinite(t):
                a = np.r_[a, math.ulp(t) / 2.0]
        if rng.random() < 0.2:
            a = np.r_[a, tiny, -tiny, tiny]
        _same_as_fsum(a)


# fixed (was a strict xfail of the attack review)
def test_exact_sum_near_the_overflow_threshold_is_fsum():
    top = sys.float_info.max
    # T = 2^1024 − 2^970 − 2^917 + 2^900 + 2^-100: below the midpoint 2^1024 − 2^970
    # between DBL_MAX and 2^1024, so it rounds to DBL_MAX; the bound on the two small
    # terms (bins > 90 orders down) is ≈ 2^933 > 2^917, so T + B is past the midpoint.
    v = np.array([top, 2.0**970 - 2.0**917, 2.0**900, 2.0**-100])
    assert math.fsum(v.tolist()) == top
    assert _exact_sum(v) == top
