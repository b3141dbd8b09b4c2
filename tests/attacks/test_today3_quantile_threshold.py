"""Attacks on the envelope thresholds found by safeguarded Newton steps (branch h-q3).

Claims under attack (commits 8a14838, 884ef7c, a54a2b0): every threshold a returned by
``median._cdf._envelope_threshold`` satisfies E_B[q_env(B, a)] ≤ level (it is checked
with ``mixture_sf`` and stepped up otherwise), it lies within the former bracketing
search's tolerance of the former threshold, the search never hangs, and a level below the
binomial window's dropped mass (< 4e-22) gives ``inf`` (never reject: a valid end at the
range's edge).

Validity is checked here by an INDEPENDENT computation: the binomial pmf in 40-digit
decimal arithmetic (Stirling series for log m!, exact ratios from the mode) over a window
wider than the code's (n·p ± (8√n + 40), the rest bounded by Hoeffding, 2e^-128), times
Φ̄ from ``math.erfc`` (no SciPy), at adversarial public inputs: n from 1 to 10^7, levels
from 1e-300 to 0.49999 and next to the dropped mass, σ_min = σ_max and σ_min ≪ σ_max,
σ from 1e-3 to 10^3, p = 1e-6 and 1 − 1e-6. The comparison with the former search uses
the code of commit a9411e1 in a subprocess.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal, localcontext
from pathlib import Path

import numpy as np
import pytest

from dpfair.median import _cdf
from dpfair.median._cdf import _binomial_support, mixture_sf
from tests._quantile_reference import bracketing_threshold, extract_reference

DROPPED = 2.0 * math.exp(-50.0)  # the mass a cut window adds to every tail
_PI = Decimal("3.14159265358979323846264338327950288419716939937510")


@contextmanager
def deadline(seconds: int) -> Iterator[None]:
    """Fail (instead of hanging the run) if the block takes longer than ``seconds``."""

    def _raise(signum: int, frame: object) -> None:
        raise TimeoutError(f"no answer within {seconds} s")

    old = signal.signal(signal.SIGALRM, _raise)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _ln_factorial(m: int) -> Decimal:
    if m < 30:
        return Decimal(math.factorial(m)).ln()
    x = Decimal(m)
    return (x * x.ln() - x + (2 * _PI * x).ln() / 2 + 1 / (12 * x) - 1 / (360 * x**3)
            + 1 / (1260 * x**5) - 1 / (1680 * x**7) + 1 / (1188 * x**9))


def independent_envelope_sf(a: float, n: int, p: float, s_min: float, s_max: float) -> float:
    """E_B[q_env(B, a)] = Σ_k P(B = k)·Φ̄((a − k)/σ(k)), σ = σ_max for k ≤ a, σ_min above.

    40-digit pmf, Φ̄ from math.erfc (a few ulps; Φ̄ := 1 below −9.5σ, an upper bound, and
    0 beyond +40σ, < 1e-350), the binomial mass beyond n·p ± (8√n + 40) added as its
    Hoeffding bound. An upper bound on the true value up to ~1e-13 relative.
    """
    if not math.isfinite(a):
        return 0.0 if a > 0 else 1.0
    with localcontext() as ctx:
        ctx.prec = 40
        big_p = Decimal(p)
        big_q = 1 - big_p
        half = 8.0 * math.sqrt(n) + 40.0
        lo, hi = max(0, math.floor(n * p - half)), min(n, math.ceil(n * p + half))
        mode = min(hi, max(lo, math.floor((n + 1) * p)))
        log_mode = (_ln_factorial(n) - _ln_factorial(mode) - _ln_factorial(n - mode)
                    + mode * big_p.ln() + (n - mode) * big_q.ln())
        pmf = {mode: log_mode.exp()}
        odds = big_p / big_q
        v = pmf[mode]
        for k in range(mode, hi):
            v = v * (n - k) / (k + 1) * odds
            pmf[k + 1] = v
        v = pmf[mode]
        for k in range(mode, lo, -1):
            v = v * k / ((n - k + 1) * odds)
            pmf[k - 1] = v
        total = Decimal(0)
        for k in range(lo, hi + 1):
            z = (a - k) / (s_max if k <= a else s_min)
            if z < -9.5:
                total += pmf[k]
            elif z <= 40.0:
                total += pmf[k] * Decimal(0.5 * math.erfc(z / math.sqrt(2.0)))
        outside = 0.0 if (lo == 0 and hi == n) else 2.0 * math.exp(-2.0 * half * half / n)
        return float(total) + outside


def _threshold(n: int, s_min: float, s_max: float, level: float, p: float) -> float:
    return _cdf._envelope_threshold.__wrapped__(n, s_min, s_max, level, p)


VALIDITY_CASES = [
    (n, s, level, p)
    for n in (1, 2, 3, 10, 37, 401, 4096, 100_003, 10**7)
    for s in ((1e-3, 1e-3), (0.01, 50.0), (1.0, 1.0), (30.0, 300.0), (1e3, 1e3))
    for level in (0.49999, 0.05, 1e-8, 1e-20, DROPPED * (1.0 + 1e-9), 1e-300)
    for p in (0.5, 1e-6, 1.0 - 1e-6, 0.9)
]


@pytest.mark.parametrize("n", sorted({c[0] for c in VALIDITY_CASES}))
def test_thresholds_keep_their_level_by_an_independent_sum(n):
    """Every returned threshold is finite (or inf exactly when the level is below the
    dropped mass), found within 30 s, and the independent 40-digit E_B[q_env(B, a)] at it
    is ≤ level (relative slack 1e-11 for erfc's ulps). Held at all 1080 cases."""
    checked = 0
    for nn, (s_min, s_max), level, p in VALIDITY_CASES:
        if nn != n:
            continue
        with deadline(30):
            a = _threshold(n, s_min, s_max, level, p)
        dropped = _binomial_support(n, p)[2]
        if dropped > level:
            assert a == math.inf, (n, s_min, s_max, level, p)
            continue
        assert math.isfinite(a), (n, s_min, s_max, level, p, a)
        value = independent_envelope_sf(a, n, p, s_min, s_max)
        assert value <= level * (1.0 + 1e-11), (n, s_min, s_max, level, p, a, value)
        checked += 1
    assert checked >= 60


@pytest.mark.parametrize(("n", "s_min", "s_max", "level", "p"), [
    (10**7, 1e-3, 1e-3, math.nextafter(DROPPED, 1.0), 0.5),  # flat G, next to the mass
    (10**7, 1e-3, 1e3, DROPPED, 1.0 - 1e-6),  # level exactly the dropped mass
    (401, 0.01, 100.0, DROPPED * (1 + 2.0**-52), 1e-6),
    (1, 1e6, 1e6, 1e-300, 0.5),  # σ ≫ n, full window, the deepest level
    (1, 1e-6, 1e-6, 0.49999999999, 0.5),
    (2, 1e-9, 1e-9, 0.25, 0.5),  # the level exactly a plateau P(B > 1) of a lattice law
    (10, 1e-9, 1e-9, 1e-300, 1e-6),
    (10**7, 5.0, 5.0, 0.4999999999999, 1e-6),
    (3_000_017, 0.3, 3e4, 1e-21, 0.9),
])
def test_no_hang_and_valid_at_nasty_levels(n, s_min, s_max, level, p):
    """Levels on the dropped mass, exactly on a plateau of a near-lattice law, 1e-300,
    σ_max/σ_min = 10^5: an answer within 30 s, valid by the independent sum. Held."""
    with deadline(30):
        a = _threshold(n, s_min, s_max, level, p)
    assert not math.isnan(a)
    if math.isfinite(a):
        assert independent_envelope_sf(a, n, p, s_min, s_max) <= level * (1.0 + 1e-11)
    else:
        assert _binomial_support(n, p)[2] > level


def test_inf_exactly_below_the_dropped_mass():
    """inf for a level one ulp below the dropped mass, finite (and valid) on it and one
    ulp above; a full window (dropped = 0) never gives inf. Held."""
    for n, p in ((401, 0.5), (10**6, 1e-6), (10**6, 1.0 - 1e-6)):
        assert _binomial_support(n, p)[2] == DROPPED
        assert _threshold(n, 1.0, 2.0, math.nextafter(DROPPED, 0.0), p) == math.inf
        for level in (DROPPED, math.nextafter(DROPPED, 1.0)):
            with deadline(30):
                a = _threshold(n, 1.0, 2.0, level, p)
            assert math.isfinite(a)
            assert float(mixture_sf(np.array([a]), 2.0, n, sigma_above=1.0, p=p)[0]) <= level
    assert _binomial_support(100, 0.5)[2] == 0.0
    assert math.isfinite(_threshold(100, 1.0, 2.0, 1e-300, 0.5))


# ------------------------------------------------ against the former bracketing search
REFERENCE_CODE = """
import json, math, sys
from dpfair.median._cdf import _envelope_threshold, _binomial_support
out = []
for n, s_min, s_max, level, p in json.load(sys.stdin):
    if _binomial_support(n, p)[2] > level:
        out.append(None)  # the old search steps up forever there
    else:
        out.append(_envelope_threshold(n, s_min, s_max, level, p))
print(json.dumps(out))
"""


def _comparison_cases() -> list[tuple[int, float, float, float, float]]:
    rng = np.random.default_rng(20261201)
    cases = []
    for _ in range(900):
        n = max(1, round(10 ** rng.uniform(0, 7)))
        s_min = float(10 ** rng.uniform(-3, 3))
        s_max = s_min * float(10 ** rng.uniform(0, 4)) if rng.random() < 0.7 else s_min
        r = rng.random()
        if r < 0.15:
            level = float(0.5 - 10 ** rng.uniform(-12, -1))
        elif r < 0.25:
            level = DROPPED * (1 + float(10 ** rng.uniform(-4, 0)))
        else:
            level = float(10 ** rng.uniform(-21, math.log10(0.5)))
        r = rng.random()
        p = (0.5 if r < 0.2 else float(10 ** rng.uniform(-7, -1)) if r < 0.35 else
             1 - float(10 ** rng.uniform(-7, -1)) if r < 0.5 else float(rng.uniform(0.01, 0.99)))
        cases.append((n, s_min, s_max, level, p))
    return cases


@pytest.fixture(scope="module")
def reference_src(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """src/ of the code before the speed work (:data:`REFERENCE_COMMIT`)."""
    return extract_reference(tmp_path_factory)


def test_newton_thresholds_within_the_former_tolerance(reference_src):
    """900 random public inputs (n ≤ 10^7, σ_max/σ_min ≤ 10^4, levels 1e-21..0.5 and
    up to twice the dropped mass, p from 1e-7 to 1 − 1e-7) against the former search run
    on the code of a9411e1: never below it by more than its tolerance 1e-10 + 1e-14|a|
    (held), and never above it by more than a few ulps + 5 % of that tolerance outside the
    ill-conditioned band level < 1.0001·dropped (held; inside it see the xfail below)."""
    cases = _comparison_cases()
    env = dict(os.environ)
    env["PYTHONPATH"] = str(reference_src)
    r = subprocess.run([sys.executable, "-c", REFERENCE_CODE], input=json.dumps(cases),
                       text=True, capture_output=True, env=env, timeout=600, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    ref = json.loads(r.stdout)
    below, above = [], []
    for case, old in zip(cases, ref, strict=True):
        new = _threshold(*case)
        if old is None:
            assert new == math.inf, case
            continue
        tol = 1e-10 + 1e-14 * abs(old)
        ulp = math.ulp(old)
        if new < old - tol - 2 * ulp:
            below.append((case, new, old))
        if case[3] > DROPPED * 1.0001 and new > old + 0.05 * tol + 4 * ulp:
            above.append((case, new, old))
    assert not below, below[:5]
    assert not above, above[:5]


@pytest.mark.parametrize(("n", "s_min", "s_max", "p", "level"), [
    (10**6, 0.01, 100.0, 1e-6, DROPPED),
    (19, 0.05, 0.05, 0.5, None),  # None: the windowed plateau P(B >= 17)
])
def test_newton_is_not_conservative_where_the_gap_rounds_to_zero(n, s_min, s_max, p, level):
    if level is None:
        level = float(_cdf._binomial_suffix(n, p)[17])
    new = _threshold(n, s_min, s_max, level, p)
    old = bracketing_threshold(n, s_min, s_max, level, p)
    assert float(mixture_sf(np.array([old]), s_max, n, sigma_above=s_min, p=p)[0]) <= level
    assert new <= old + 1e-6, (new, old)


@pytest.mark.parametrize(("n", "s_min", "s_max", "level", "p"), [
    (10_000, 2.0, 3.0, 0.025, 0.5), (37, 0.01, 50.0, 1e-8, 0.9),
    (100_003, 1.0, 1.0, 1e-20, 1e-6), (4096, 30.0, 300.0, 0.05, 1.0 - 1e-6),
])
def test_the_independent_sum_is_sharp(n, s_min, s_max, level, p):
    """The reference itself: it agrees with mixture_sf (less its dropped-mass bound) to
    1e-11 relative near the threshold and flags a threshold moved down by 1e-4 of its
    noise scale (against the level less the dropped mass), so the validity test above
    can fail."""
    a = _threshold(n, s_min, s_max, level, p)
    for x in (a, a - 1.0, a + 0.5 * s_min):
        mine = independent_envelope_sf(x, n, p, s_min, s_max)
        code = float(mixture_sf(np.array([x]), s_max, n, sigma_above=s_min, p=p)[0])
        code -= _binomial_support(n, p)[2]  # the code adds the dropped mass (< 4e-22)
        assert abs(mine - code) <= 1e-11 * code + 1e-40, (x, mine, code)
    moved = independent_envelope_sf(a - 1e-4 * s_min, n, p, s_min, s_max)
    assert moved > level - _binomial_support(n, p)[2]


def test_extreme_noise_scales_answer_and_keep_the_level():
    """σ from 1e-12 to 1e15 (σ_max/σ_min up to 1e27), n from 1 to 10^7, levels 0.4, 1e-10,
    1e-300: each threshold within 20 s, finite, and meeting its level as mixture_sf
    evaluates it (the check the release relies on). Held (slowest 0.15 s)."""
    import itertools

    for n, s_min, s_max, level, p in itertools.product(
            [1, 3, 1000, 10**7], [1e-12, 1e-8, 1e6, 1e9], [1e-12, 1e-6, 1e3, 1e9, 1e15],
            [0.4, 1e-10, 1e-300], [0.5, 1e-6]):
        if s_max < s_min or _binomial_support(n, p)[2] > level:
            continue
        with deadline(20):
            a = _threshold(n, s_min, s_max, level, p)
        assert math.isfinite(a), (n, s_min, s_max, level, p)
        value = float(mixture_sf(np.array([a]), s_max, n, sigma_above=s_min, p=p)[0])
        assert value <= level, (n, s_min, s_max, level, p, a)
