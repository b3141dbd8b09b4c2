r"""Exact discrete Laplace sampling and the law of a clipped discrete-Laplace grid release.

Floating-point model (``docs/floating_point.md``). Continuous Laplace noise added in
binary64 to a data value with arbitrary low-order bits leaks those bits (Mironov 2012).
Here everything private is an *integer*: a statistic K ∈ {0, …, N} (any function of the
data with values in that range has sensitivity ≤ N), noise Z from the discrete Laplace
law P(Z = z) ∝ exp(−|z|/t) with an integer scale t, drawn by the exact sampler of
Canonne, Kamath & Steinke (2020, Algorithms 1 and 2) from uniform integers only (no
floating point at all), and the release clip(K + Z, 0, N), mapped to a public grid point
by public arithmetic (post-processing).

Privacy: for neighbours with |K − K'| ≤ N the pmf ratio at every j is
exp((|j − K'| − |j − K|)/t) ≤ exp(N/t) ≤ e^ε when t = ⌈N/ε⌉ (ε read as the exact
rational value of its binary64), so the integer release is ε-DP exactly — assuming only
that the generator's integers are uniform. Clipping and the map to locations are
post-processing.

:func:`lattice_laplace` is the same mechanism for any integer statistic on a public lattice
2^-k·ℤ (CDP-Fair's Laplace count and certificate check): (S + Z)·2^-k, t = ⌈Δ_L/ε⌉.

Timing: the sampler is a rejection loop whose number of rounds depends on the noise only
(uniform draws), never on K or the data.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpfair._errors import InvalidParameterError
from dpfair._rng import RandomLike, as_generator

__all__ = [
    "SAFE_SCALE",
    "ClippedDiscreteLaplaceLaw",
    "bernoulli_exp",
    "discrete_laplace_scale",
    "lattice_laplace",
    "sample_discrete_laplace",
]

#: Largest integer scale t the vectorised sampler accepts (keeps u + t·v in int64).
MAX_SCALE = 2**52
#: Largest scale accepted without an explicit ``cap``: the int64 guard clips |Z| at
#: MAX_SCALE = 2^52 ≥ 2^19·t, an event of probability ≤ e^{−2^19} (a δ below 10^-227000),
#: so the uncapped law is exact up to that. Larger scales must pass a ``cap`` whose
#: clipping the caller's release absorbs (e.g. clip(K + Z, 0, N) with cap = N).
SAFE_SCALE = 2**33


#: Outputs per batch: keeps the working arrays cache-sized (2× faster at 10^5 draws than
#: one batch; the batching never changes the law, only how the uniforms are grouped).
_CHUNK = 16384

#: Below 2^63: k·den fits the int64 bound of one uniform draw (Bernoulli(num/(k·den))).
_INT64_BOUND = 2**63 - 1

#: N of the one-draw Bernoulli(e^{-1}) (12! < 2^29): thresholds N!/j!, j = N, …, 1.
_FACT_N = 12
_FACT_THRESHOLDS = np.array(
    [math.factorial(_FACT_N) // math.factorial(j) for j in range(_FACT_N, 0, -1)],
    dtype=np.int64,
)


def _bernoulli_exp_ratio(
    a: NDArray[np.int64], d: int, gen: np.random.Generator
) -> NDArray[np.bool_]:
    """Bernoulli(exp(−a/d)) for 0 ≤ a ≤ d (CKS Alg. 1), one uniform integer per round.

    Round k draws A_k ~ Bernoulli(a/(k·d)) as [W < a], W uniform on {0, …, k·d − 1} (exactly
    the product Bernoulli(a/d)·Bernoulli(1/k) of Alg. 1, in one draw while k·d < 2^63,
    else as that product); the result is 1 iff the first k with A_k = 0 is odd.
    """
    n = a.size
    hit = gen.integers(0, d, size=n) < a  # k = 1
    out = ~hit  # stopped at k = 1 (odd): 1; the others stay 0 unless they stop at odd k
    idx = np.flatnonzero(hit)
    alive = a[idx]
    k = 2
    while idx.size:
        if k * d <= _INT64_BOUND:
            hit = gen.integers(0, k * d, size=idx.size) < alive
        else:
            hit = (gen.integers(0, d, size=idx.size) < alive) & (
                gen.integers(0, k, size=idx.size) == 0
            )
        if k % 2 == 1:
            out[idx[np.flatnonzero(~hit)]] = True
        go = np.flatnonzero(hit)  # index arrays: much faster than boolean masks here
        idx = idx[go]
        alive = alive[go]
        k += 1
    return out


def _bernoulli_exp_one(size: int, gen: np.random.Generator) -> NDArray[np.bool_]:
    """Bernoulli(e^{−1}) with one uniform integer each (CKS Alg. 1 at γ = 1, exactly).

    Alg. 1 at γ = 1 stops at the first k with A_k = 0, A_k ~ Bernoulli(1/k) independent, and
    returns 1 iff k is odd; the stopping index K has P(K > j) = 1/j!. With R uniform on
    {0, …, N! − 1}, the nested events {R < N!/j!} (integers) have exactly these
    probabilities for j ≤ N, so K = 1 + #{j ≤ N : R < N!/j!} for K ≤ N; R = 0
    (probability 1/N!) means K > N and the loop continues from k = N + 1 with fresh draws.
    """
    # R = ⌊W/2^32⌋ with W uniform on {0, …, N!·2^32 − 1} (numpy's 64-bit path is faster here).
    r = gen.integers(0, math.factorial(_FACT_N) << 32, size=size) >> 32
    # K = 2 iff R ≥ N!/2, K = 3 iff N!/6 ≤ R < N!/2; the rest (probability 1/6) exactly below.
    out = (r < _FACT_THRESHOLDS[-2]) & (r >= _FACT_THRESHOLDS[-3])
    deep = np.flatnonzero(r < _FACT_THRESHOLDS[-3])
    # #{j : N!/j! ≤ R}; K = N + 1 − that count.
    stop = _FACT_N + 1 - np.searchsorted(_FACT_THRESHOLDS, r[deep], side="right")
    for i in np.flatnonzero(stop > _FACT_N):  # R = 0, K > N: continue Alg. 1 (p = 2e-9)
        k = _FACT_N + 1
        while int(gen.integers(0, k)) == 0:
            k += 1
        stop[i] = k
    out[deep] = stop % 2 == 1
    return out


def _geometric_e(size: int, gen: np.random.Generator, cap: int) -> NDArray[np.int64]:
    """min(V, cap), V ~ Geometric(1 − e^{−1}) on {0, 1, …} (Bernoulli(e^{−1}) successes
    before a failure, counted up to ``cap``: the later trials cannot change the minimum)."""
    if cap < 1 or size == 0:
        return np.zeros(size, dtype=np.int64)
    first = _bernoulli_exp_one(size, gen)
    v = first.astype(np.int64)
    idx = np.flatnonzero(first)
    for _ in range(cap - 1):
        if not idx.size:
            break
        idx = idx[np.flatnonzero(_bernoulli_exp_one(idx.size, gen))]
        v[idx] += 1
    return v


def bernoulli_exp(num: ArrayLike, den: int, rng: RandomLike = None) -> NDArray[np.bool_]:
    """Exact Bernoulli(exp(−num/den)) draws for integers 0 ≤ num ≤ den (CKS 2020, Alg. 1).

    Loop k = 1, 2, …: draw A ~ Bernoulli(γ/k) with γ = num/den, stop at the first A = 0
    and return 1 iff the stopping k is odd; P(return 1) = Σ_k (−γ)^k / k! = e^{−γ}.
    Bernoulli(γ/k) = Bernoulli(num/(k·den)) is one uniform integer on {0, …, k·den − 1}
    compared with num (the product Bernoulli(num/den)·Bernoulli(1/k) once k·den ≥ 2^63),
    so no number is ever rounded. Vectorised over ``num``.
    """
    gen = as_generator(rng)
    a = np.asarray(num, dtype=np.int64)
    d = int(den)
    if d < 1 or d > 2**62 or np.any(a < 0) or np.any(a > d):
        raise InvalidParameterError(f"bernoulli_exp: need 0 <= num <= den <= 2^62 (den={den!r}).")
    return _bernoulli_exp_ratio(a.ravel(), d, gen).reshape(a.shape)


def discrete_laplace_scale(sensitivity: int, epsilon: float) -> int:
    """The integer scale t = ⌈Δ/ε⌉ (exact rational arithmetic): Δ/t ≤ ε."""
    t = math.ceil(Fraction(int(sensitivity)) / Fraction(float(epsilon)))
    return max(int(t), 1)


def sample_discrete_laplace(
    scale: int, size: int, rng: RandomLike = None, *, cap: int | None = None
) -> NDArray[np.int64]:
    """Exact draws of Z with P(Z = z) ∝ exp(−|z|/t), t = ``scale`` (CKS 2020, Alg. 2, s = 1).

    Each candidate: W uniform on {0, …, 2t − 1} gives U = ⌊W/2⌋ uniform on {0, …, t − 1} and
    an independent fair sign B = W mod 2; U is kept with probability exp(−U/t)
    (:func:`bernoulli_exp`'s rounds, one uniform integer each); for kept candidates
    V ~ Geometric(1 − e^{−1}) (successes of Bernoulli(e^{−1}), each from one uniform
    integer on {0, …, 12! − 1}); X = U + tV is then geometric with P(X = x) ∝ e^{−x/t};
    rejecting (B = 1, X = 0) so that 0 is not counted twice gives Z = (1 − 2B)X.

    Candidates are drawn in batches (≤ 16384 outputs each) sized from the expected
    acceptance rate; the accepted ones, in candidate order, are i.i.d. with the exact law,
    and the first ``size`` are returned (the batch size changes only how many uniforms are
    consumed, never the law).
    How many rounds run depends on the uniform draws alone.

    ``cap``: return clip(Z, −cap, cap) (exactly; V is capped at ⌊cap/t⌋ + 1 before forming
    X, so nothing overflows and no Bernoulli(e^{−1}) trial is drawn beyond that count). Used
    when only clip(K + Z, 0, N) is released, with cap = N.
    """
    gen = as_generator(rng)
    t = int(scale)
    if t < 1 or t > MAX_SCALE:
        raise InvalidParameterError(f"scale={scale!r}: expected an integer in [1, 2^52].")
    if cap is None and t > SAFE_SCALE:
        raise InvalidParameterError(
            f"scale={scale!r}: above 2^33 without a cap the int64 range would clip the noise "
            "with non-negligible probability; use a coarser lattice or pass cap."
        )
    c = MAX_SCALE if cap is None else int(cap)
    if c < 0 or c > MAX_SCALE:
        raise InvalidParameterError(f"cap={cap!r}: expected an integer in [0, 2^52].")
    v_cap = c // t + 1  # X ≥ t·v_cap > c once V reaches v_cap
    total = int(size)
    out = np.empty(total, dtype=np.int64)
    # P(keep) = E[e^{−U/t}] = (1 − e^{−1}) / (t (1 − e^{−1/t})): only sizes the batches.
    p_keep = -math.expm1(-1.0) / (-t * math.expm1(-1.0 / t))
    filled = 0
    while filled < total:
        need = min(total - filled, _CHUNK)
        m = int(need / p_keep * 1.02 + 4.0 * math.sqrt(need) + 8)
        w = gen.integers(0, 2 * t, size=m)
        w = w[np.flatnonzero(_bernoulli_exp_ratio(w >> 1, t, gen))]
        x = (w >> 1) + t * _geometric_e(w.size, gen, v_cap)
        sign = w & 1  # B
        ok = np.flatnonzero((sign == 0) | (x != 0))[:need]
        z = np.minimum(x[ok], c)
        b = sign[ok]
        z = (z ^ -b) + b  # two's complement: −z where B = 1
        out[filled:filled + z.size] = z
        filled += z.size
    return out


def lattice_laplace(
    statistic: int, sensitivity: int, epsilon: float, bits: int, rng: RandomLike = None
) -> float:
    """The discrete Laplace mechanism in units of a public lattice 2^-k·ℤ: (S + Z)·2^-k.

    Parameters
    ----------
    statistic : int
        S, the statistic in lattice units (e.g. a count times 2^k, or a snapped ratio).
    sensitivity : int
        Δ_L ≥ 1 with |S(D) − S(D′)| ≤ Δ_L for neighbours (lattice units).
    epsilon : float
        ε > 0.
    bits : int
        k of the public lattice.
    rng : RandomLike

    Returns
    -------
    float
        (S + Z)·2^-k with P(Z = z) ∝ exp(−|z|/t), t = ⌈Δ_L/ε⌉ (exact rationals,
        :func:`discrete_laplace_scale`), drawn by :func:`sample_discrete_laplace`.

    Notes
    -----
    Privacy, exactly as executed: S + Z is an integer whose pmf ratio between neighbours is
    exp((|j − S′| − |j − S|)/t) ≤ exp(Δ_L/t) ≤ e^ε; scaling by 2^-k (exact below 2^53,
    correctly rounded above) is post-processing. Accuracy: Z·2^-k is within 2^-k of a
    continuous Laplace(t·2^-k) under the quantile coupling (P(Z ≥ z) = q^z/(1 + q) for
    z ≥ 1, q = e^{−1/t}, puts each quantile of Z within one unit of the continuous one),
    and t·2^-k ≤ Δ_L·2^-k/ε + 2^-k: essentially the continuous Laplace(Δ/ε) noise.
    """
    if int(sensitivity) < 1:
        raise InvalidParameterError(f"sensitivity={sensitivity!r}: expected an integer >= 1.")
    t = discrete_laplace_scale(int(sensitivity), epsilon)
    z = int(sample_discrete_laplace(t, 1, rng)[0])
    return math.ldexp(float(int(statistic) + z), -int(bits))


@dataclass(frozen=True, slots=True)
class ClippedDiscreteLaplaceLaw:
    r"""Law of L = x_J, J = clip(K + Z, 0, N), Z discrete Laplace of integer scale t.

    The support is the public grid x_j = lo + j·h (j < N), x_N = hi, h = (hi − lo)/N.

    Parameters
    ----------
    center : int
        K ∈ {0, …, N}, the integer statistic.
    scale : int
        t ≥ 1; P(Z = z) = c₀ q^{|z|}, q = e^{−1/t}, c₀ = (1 − q)/(1 + q).
    steps : int
        N ≥ 1 (a power of two keeps h exact).
    lo, hi : float
        The grid's ends, lo < hi.

    Notes
    -----
    Closed forms (d = j − K): P(K + Z ≤ j) = q^{−d}/(1 + q) for d < 0 and
    1 − q^{d+1}/(1 + q) otherwise; each tail is evaluated from its own side. The atoms
    are P(J = 0) = q^K/(1 + q) and P(J = N) = q^{N−K}/(1 + q). Segment sums use
    Σ_{i≥d} c₀ q^i = q^d/(1 + q) and Σ_{i≥d} c₀ i q^i = q^d (d + r)/(1 + q), r = q/(1 − q).
    """

    center: int
    scale: int
    steps: int
    lo: float
    hi: float

    def __post_init__(self) -> None:
        if not (1 <= int(self.steps) <= MAX_SCALE and 0 <= int(self.center) <= int(self.steps)):
            raise InvalidParameterError(
                f"need 1 <= steps <= 2^52 and 0 <= center <= steps (got {self.center!r}, "
                f"{self.steps!r})."
            )
        if not 1 <= int(self.scale) <= MAX_SCALE:
            raise InvalidParameterError(f"scale={self.scale!r}: expected an integer in [1, 2^52].")
        if not (math.isfinite(self.lo) and math.isfinite(self.hi) and self.lo < self.hi):
            raise InvalidParameterError(f"(lo, hi)=({self.lo!r}, {self.hi!r}): need lo < hi.")

    # ------------------------------------------------------------------ grid
    @property
    def spacing(self) -> float:
        """h = (hi − lo)/N."""
        return (self.hi - self.lo) / self.steps

    def location(self, j: ArrayLike) -> NDArray[np.float64]:
        """Grid point x_j (public arithmetic on the integer j)."""
        jj = np.asarray(j, dtype=np.int64)
        return np.where(jj >= self.steps, self.hi, self.lo + jj.astype(np.float64) * self.spacing)

    def _index(self, t: ArrayLike, strict: bool) -> NDArray[np.int64]:
        """Largest j with x_j ≤ t (x_j < t if ``strict``), −1 if none."""
        arr = np.asarray(t, dtype=np.float64)
        with np.errstate(invalid="ignore"):
            guess = np.floor(np.clip((arr - self.lo) / self.spacing, -1.0, float(self.steps)))
        j = np.nan_to_num(guess, nan=-1.0).astype(np.int64)
        n = self.steps

        def ok(i: NDArray[np.int64]) -> NDArray[np.bool_]:
            x = self.location(np.clip(i, 0, n))
            return np.asarray((x < arr) if strict else (x <= arr))

        for _ in range(2):  # the float guess is off by at most one step
            j = np.where((j + 1 <= n) & ok(j + 1), j + 1, j)
            j = np.where((j >= 0) & ~ok(j), j - 1, j)
        return j

    # ------------------------------------------------------------------ integer law
    @property
    def _q(self) -> float:
        return math.exp(-1.0 / self.scale)

    def _pow(self, k: NDArray[np.int64]) -> NDArray[np.float64]:
        return np.exp(-np.asarray(k, dtype=np.float64) / self.scale)

    def _cdf_j(self, j: NDArray[np.int64]) -> NDArray[np.float64]:
        """P(J ≤ j)."""
        jj = np.asarray(j, dtype=np.int64)
        d = jj - self.center
        one_q = 1.0 + self._q
        val = np.where(d < 0, self._pow(np.maximum(-d, 0)) / one_q,
                       1.0 - self._pow(np.maximum(d + 1, 0)) / one_q)
        return np.where(jj < 0, 0.0, np.where(jj >= self.steps, 1.0, val))

    def _sf_j(self, j: NDArray[np.int64]) -> NDArray[np.float64]:
        """P(J > j)."""
        jj = np.asarray(j, dtype=np.int64)
        d = jj - self.center
        one_q = 1.0 + self._q
        val = np.where(d >= 0, self._pow(np.maximum(d + 1, 0)) / one_q,
                       1.0 - self._pow(np.maximum(-d, 0)) / one_q)
        return np.where(jj < 0, 1.0, np.where(jj >= self.steps, 0.0, val))

    def pmf_index(self, j: ArrayLike) -> NDArray[np.float64]:
        """P(J = j)."""
        return np.exp(self.logpmf_index(j))

    def logpmf_index(self, j: ArrayLike) -> NDArray[np.float64]:
        """log P(J = j) (``-inf`` off {0, …, N})."""
        jj = np.asarray(j, dtype=np.int64)
        log_one_q = math.log1p(self._q)
        log_c0 = math.log(-math.expm1(-1.0 / self.scale)) - log_one_q
        inner = log_c0 - np.abs(jj - self.center) / self.scale
        at_lo = -self.center / self.scale - log_one_q
        at_hi = -(self.steps - self.center) / self.scale - log_one_q
        out = np.where(jj == 0, at_lo, np.where(jj == self.steps, at_hi, inner))
        return np.where((jj < 0) | (jj > self.steps), -np.inf, out)

    # ------------------------------------------------------------------ location law
    @property
    def atom_lo(self) -> float:
        """P(L = lo)."""
        return float(self.pmf_index(0))

    @property
    def atom_hi(self) -> float:
        """P(L = hi)."""
        return float(self.pmf_index(self.steps))

    def logpmf(self, t: ArrayLike) -> NDArray[np.float64]:
        """log P(L = t) (``-inf`` off the grid)."""
        arr = np.asarray(t, dtype=np.float64)
        j = self._index(arr, strict=False)
        on = (j >= 0) & (self.location(np.clip(j, 0, self.steps)) == arr)
        return np.where(on, self.logpmf_index(np.clip(j, 0, self.steps)), -np.inf)

    def pmf(self, t: ArrayLike) -> NDArray[np.float64]:
        """P(L = t)."""
        return np.exp(self.logpmf(t))

    def cdf(self, t: ArrayLike) -> NDArray[np.float64]:
        """P(L ≤ t)."""
        return self._cdf_j(self._index(t, strict=False))

    def prob_below(self, t: ArrayLike) -> NDArray[np.float64]:
        """P(L < t)."""
        return self._cdf_j(self._index(t, strict=True))

    def sf(self, t: ArrayLike) -> NDArray[np.float64]:
        """P(L > t)."""
        return self._sf_j(self._index(t, strict=False))

    def prob_above(self, t: ArrayLike) -> NDArray[np.float64]:
        """P(L ≥ t)."""
        return self._sf_j(self._index(t, strict=True))

    def _side_sums(
        self, v1: NDArray[np.int64], v2: NDArray[np.int64]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Σ c₀ q^v and Σ c₀ v q^v over v1 ≤ v ≤ v2 (0 where v2 < v1)."""
        one_q = 1.0 + self._q
        r = 1.0 / math.expm1(1.0 / self.scale)
        ok = v2 >= v1
        a, b = np.where(ok, v1, 0), np.where(ok, v2 + 1, 0)
        pa, pb = self._pow(a), self._pow(b)
        m0 = np.where(ok, (pa - pb) / one_q, 0.0)
        m1 = np.where(ok, (pa * (a + r) - pb * (b + r)) / one_q, 0.0)
        return m0, m1

    def interval_moments(
        self, lower: ArrayLike, upper: ArrayLike, center: float | None = None
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Exact P(lower < L ≤ upper) and E[(L − center)·1{lower < L ≤ upper}].

        ``center`` defaults to x_K. Sums over the grid in closed form (geometric series on
        each side of K, atoms at the ends added separately); E[·] uses x_j = x_K + (j − K)h
        (the grid's own rounding, below one ulp, is not modelled).
        """
        base = float(self.location(self.center))
        c = base if center is None else float(center)
        ja = self._index(lower, strict=False) + 1
        jb = self._index(upper, strict=False)
        ja, jb = np.broadcast_arrays(ja, jb)
        n, k = self.steps, self.center
        # interior j in [max(ja, 1), min(jb, n − 1)], split at K
        i1, i2 = np.maximum(ja, 1), np.minimum(jb, n - 1)
        r0, r1 = self._side_sums(np.maximum(i1 - k, 0), i2 - k)  # d ≥ 0
        l0, l1 = self._side_sums(np.maximum(k - i2, 1), k - i1)  # d = −v < 0
        m0 = r0 + l0
        dsum = r1 - l1
        for j, atom in ((0, self.atom_lo), (n, self.atom_hi)):
            hit = (ja <= j) & (j <= jb)
            m0 = m0 + np.where(hit, atom, 0.0)
            dsum = dsum + np.where(hit, atom * (j - k), 0.0)
        return m0, (base - c) * m0 + self.spacing * dsum

    def mean(self) -> float:
        """E[L]."""
        _, m1 = self.interval_moments(-np.inf, np.inf)
        return float(self.location(self.center)) + float(m1)

    def sample(
        self, size: int | tuple[int, ...] | None = None, rng: RandomLike = None
    ) -> NDArray[np.float64] | float:
        """Exact draws: J = clip(K + Z, 0, N) from :func:`sample_discrete_laplace`, then x_J."""
        gen = as_generator(rng)
        shape = () if size is None else size
        count = int(np.prod(shape, dtype=np.int64))
        z = sample_discrete_laplace(self.scale, count, gen, cap=self.steps)
        j = np.clip(self.center + z, 0, self.steps).reshape(shape)
        out = self.location(j)
        if size is None:
            return float(out)
        return np.asarray(out, dtype=np.float64)
