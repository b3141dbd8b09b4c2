r"""Exact discrete Gaussian sampling (Canonne, Kamath & Steinke 2020), integers only.

The discrete Gaussian N_ℤ(0, σ²) has P(Z = z) = exp(−z²/(2σ²)) / Σ_{y∈ℤ} exp(−y²/(2σ²)).
:func:`sample_discrete_gaussian` draws it exactly for a rational variance σ² = p/q
(CKS 2020, Algorithm 3): with t = ⌊σ⌋ + 1 (here a power of two within √2 of σ; any
integer t ≥ 1 gives the exact law), draw Y from the discrete Laplace law
P(Y = y) ∝ exp(−|y|/t) and accept it with probability exp(−γ),
γ = (|Y| − σ²/t)²/(2σ²); then P(accept, Y = y) ∝ exp(−|y|/t − (|y| − σ²/t)²/(2σ²))
= exp(−y²/(2σ²) − σ²/(2t²)), proportional to the target. Written with integers,
γ = A²/B with A = |Y|·t·q − p and B = 2pq·t². Algorithm 2's own test (keep U with
probability exp(−U/t)) and Algorithm 3's are fused into one Bernoulli(exp(−E)),
E = U/t + γ = ⌊E⌋ + r/D, with ⌊E⌋ and the remainder r computed exactly (int64 when
provably in range, Python integers otherwise). When D ≤ 2^62 (D = 2σ² for an integer σ²
that is a multiple of t, as :func:`round_to_scale` makes it, else D = B ≈ 2σ⁴)
exp(−E) = e^{−⌊E⌋}·Π_j exp(−r_j 2^{bj}/D) over the base-2^b digits r_j of r, and each
factor is one independent Bernoulli [U_f < p_f] decided by comparing the first 62 bits of
a uniform U_f with the exact integer ⌊2^62 p_f⌋ from a table (built once per D in exact
integer arithmetic; :mod:`dpfair.mechanisms._exp_tables`); only a tie (probability 2^-62
per factor) needs further bits of U_f, which are drawn and compared with further exactly
computed bits of p_f. For D > 2^62, ⌊E⌋ uses the same e^{−k} table and exp(−r/D) CKS
Algorithm 1 (:func:`bernoulli_exp_big`). No floating-point number enters the law; the only
assumption is that the generator's raw 64-bit words (and ``integers``) are uniform.

This module only samples: the noise in real units on a public lattice is
:mod:`dpfair.mechanisms.lattice`, and the privacy statements (zCDP, the (ε, δ) slack) are
:mod:`dpfair.mechanisms.gaussian_calibration`.

Timing: the loops below run until every pending draw is accepted; their number of rounds
is a function of the uniform draws only. The sampler never sees the statistic it is added
to, so its running time cannot depend on the data.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpfair._errors import InvalidParameterError
from dpfair._rng import RandomLike, as_generator
from dpfair.mechanisms._exp_tables import ExpTables, decide_exp, exp_tables
from dpfair.mechanisms.discrete_laplace import bernoulli_exp

__all__ = [
    "MAX_VARIANCE",
    "bernoulli_exp_big",
    "round_to_scale",
    "sample_discrete_gaussian",
]

#: Largest σ (variance parameter ≤ 2^104) the sampler accepts: keeps the Laplace scale t
#: ≤ 2^52 + 1 and every accepted draw far inside int64.
_MAX_VARIANCE = Fraction(2**104)
#: The public form of that limit: callers check a planned variance against it before they
#: charge a release (a release the sampler would refuse must cost nothing).
MAX_VARIANCE = _MAX_VARIANCE
#: |A| up to this bound keeps A² in int64.
_A_SAFE = math.isqrt(2**63 - 1)
_CHUNK = 62


# --------------------------------------------------------------------------- Bernoulli
def bernoulli_exp_big(num: ArrayLike, den: int, rng: RandomLike = None) -> NDArray[np.bool_]:
    """Exact Bernoulli(exp(−num/den)) for integers 0 ≤ num ≤ den of any size.

    The sibling of :func:`~dpfair.mechanisms.discrete_laplace.bernoulli_exp` (which is used
    when den ≤ 2^62): the same CKS Algorithm 1 (stop at the first failed
    Bernoulli(γ/k) = Bernoulli(num/den)·Bernoulli(1/k), return 1 iff the stopping k is
    odd), with Bernoulli(num/den) drawn by comparing a uniform real U ∈ [0, 1), generated
    62 bits at a time, with num/den: the prefix u₁ decides U < num/den unless
    u₁ = ⌊num·2^62/den⌋, in which case the next chunk is compared with the remainder. Exact
    for every size of ``num`` and ``den`` (Python integers); vectorised over ``num``.
    """
    gen = as_generator(rng)
    d = int(den)
    nums = np.asarray(num, dtype=object).ravel()
    if d < 1 or any(int(a) < 0 or int(a) > d for a in nums):
        raise InvalidParameterError(f"bernoulli_exp_big: need 0 <= num <= den (den={den!r}).")
    if d <= 2**62:
        small = np.array([int(a) for a in nums], dtype=np.int64)
        return bernoulli_exp(small, d, gen).reshape(np.shape(num))
    out = np.zeros(nums.size, dtype=bool)
    active = np.arange(nums.size)
    k = 1
    while active.size:
        hit = _bernoulli_ratio(nums[active], d, gen)
        if k > 1:
            hit &= gen.integers(0, k, size=active.size) == 0
        out[active[~hit]] = k % 2 == 1
        active = active[hit]
        k += 1
    return out.reshape(np.shape(num))


def _bernoulli_ratio(
    nums: NDArray[np.object_], den: int, gen: np.random.Generator
) -> NDArray[np.bool_]:
    """Exact Bernoulli(num/den) per entry (lazy 62-bit comparison of a uniform real)."""
    res = np.array([int(a) for a in nums], dtype=object)
    out = np.zeros(res.size, dtype=bool)
    pending = np.arange(res.size)
    while pending.size:
        shifted = res[pending] << _CHUNK
        digit = shifted // den  # in [0, 2^62]
        u = gen.integers(0, 2**_CHUNK, size=pending.size)
        less = np.array([int(a) < int(b) for a, b in zip(u, digit, strict=True)], dtype=bool)
        equal = np.array([int(a) == int(b) for a, b in zip(u, digit, strict=True)], dtype=bool)
        out[pending[less]] = True
        res[pending] = shifted - digit * den
        pending = pending[equal]
    return out


# --------------------------------------------------------------------------- sampler
def _as_variance(variance: int | Fraction) -> Fraction:
    if isinstance(variance, bool) or not isinstance(variance, (int, np.integer, Fraction)):
        raise InvalidParameterError(
            f"variance={variance!r}: expected an int or a fractions.Fraction (exact rational)."
        )
    v = Fraction(int(variance)) if not isinstance(variance, Fraction) else variance
    if v <= 0 or v > _MAX_VARIANCE:
        raise InvalidParameterError(f"variance={variance!r}: expected 0 < variance <= 2^104.")
    return v


def _raw(m: int, gen: np.random.Generator) -> NDArray[np.uint64]:
    """``m`` uniform 64-bit words straight from the generator's bit generator (PCG64)."""
    return gen.bit_generator.random_raw(m)


# --------------------------------------------------------------------------- U < e^{-v}
@functools.lru_cache(maxsize=4096)
def _exp_neg_floor(v: int, bits: int) -> int:
    """⌊e^{−v}·2^bits⌋ exactly (Python integers).

    Partial sums S_K of Σ_k (−v)^k/k! alternate around e^{−v} once the terms decrease
    (k > v), so e^{−v} lies between S_K and S_{K+1}; K grows until both give the same floor
    (e^{−v}·2^bits is irrational for v ≥ 1, so this terminates).
    """
    if v == 0:
        return 1 << bits
    if 100 * bits <= 144 * v:  # e^{−v}·2^bits ≤ 2^{(1.44 − log2 e)v} < 1
        return 0
    scale = 1 << bits
    k_max = 2 * v + bits  # v^k/k! < 2^-bits well before this
    while True:
        total = Fraction(0)
        term = Fraction(1)
        for k in range(k_max + 1):
            total += term
            term = term * (-v) / (k + 1)
        lo, hi = sorted((total, total + term))
        flo, fhi = math.floor(lo * scale), math.floor(hi * scale)
        if flo == fhi:
            return int(flo)
        k_max += 16


#: c_v = ⌊e^{−v}·2^62⌋ for v = 0..42 (c_42 = 2, c_43 = 0): U < e^{−v} is decided by the first
#: 62 bits u of a uniform U unless u = c_v. Written out (``_exp_neg_floor(v, 62)`` takes
#: ~20 ms of exact rational arithmetic, which every command importing this module paid at
#: start-up); tests/mechanisms/test_exp_table_literal.py checks it against that function.
_EXP_TABLE = [
    4611686018427387904, 1696544475317221318, 624123833502197199, 229602327090566617,
    84465975781740359, 31073295968587224, 11431226756278699, 4205313311003847,
    1547048310802923, 569127268043403, 209370221323236, 77023000018333, 28335178204092,
    10423929523214, 3834749367810, 1410725454462, 518976891834, 190920928948, 70235884649,
    25838337995, 9505393342, 3496838790, 1286415100, 473245668, 174097351, 64046836,
    23561514, 8667796, 3188704, 1173058, 431544, 158756, 58403, 21485, 7904, 2907, 1069,
    393, 144, 53, 19, 7, 2,
]
_VMAX = 42
_EXP_C = np.array(_EXP_TABLE, dtype=np.int64)
_EXP_ASC = np.array(_EXP_TABLE[1:][::-1], dtype=np.int64)  # c_42 … c_1, increasing
#: 0, c_42, …, c_1 (the sentinel 0 ≤ every u) and, shifted by one, the entry just below.
_EXP_ASC0 = np.concatenate(([0], _EXP_ASC))
_EXP_BELOW = np.concatenate(([-1], _EXP_ASC0))


class _Uniform:
    """A uniform U ∈ [0, 1) whose binary digits are drawn 62 at a time, on demand."""

    def __init__(self, prefix: int, gen: np.random.Generator) -> None:
        self.known, self.bits, self.gen = int(prefix), 62, gen

    def below_exp_neg(self, v: int) -> bool:
        """U < e^{−v}, exactly (more digits of U are drawn while they tie with e^{−v})."""
        while True:
            c = _exp_neg_floor(v, self.bits)
            if self.known != c:
                return self.known < c
            self.known = (self.known << 62) | int(self.gen.integers(0, 2**62))
            self.bits += 62


def _geometric_e(
    u62: NDArray[np.int64], gen: np.random.Generator, limit: int | None = None
) -> NDArray[np.int64]:
    """V = max{v ≥ 0 : U < e^{−v}} per entry, P(V ≥ v) = e^{−v}, from U's first 62 bits u62.

    Vectorised: V = #{1 ≤ v ≤ 42 : u < c_v} (one ``searchsorted``), exact unless u equals
    some c_v or u = 0 (probability < 2^-56 per entry; u = 1 gives V = 42 exactly since
    c_43 = 0 < 2^62e^{−43} < 1 ≤ u < c_42); those entries continue exactly with further
    digits (:class:`_Uniform`). A continued V above ``limit`` (only these can exceed 42;
    probability < e^{−limit}) raises OverflowError.
    """
    idx = np.searchsorted(_EXP_ASC0, u62, side="right")  # 1 + #{v ≤ 42 : c_v ≤ u} ≥ 1
    v = (_VMAX + 1) - idx  # #{c_v > u}
    bad = _EXP_BELOW[idx] == u62  # the largest c_v ≤ u equals u, or u = 0 (sentinel)
    if bad.any():
        for i in np.flatnonzero(bad):
            uni = _Uniform(int(u62[i]), gen)
            k = 0
            while uni.below_exp_neg(k + 1):
                k += 1
                if limit is not None and k > limit:
                    raise OverflowError("discrete Laplace draw beyond 2^62 (probability < e^-512).")
            v[i] = k
    return v


def _bernoulli_exp_int(
    fl: NDArray[np.int64], u62: NDArray[np.int64], gen: np.random.Generator
) -> NDArray[np.bool_]:
    """Bernoulli(e^{−fl}) = [U < e^{−fl}] per entry (fl ≥ 0 integer), U's first 62 bits u62."""
    small = fl <= _VMAX
    c = _EXP_C[np.minimum(fl, _VMAX)]
    out = small & (u62 < c)
    for i in np.flatnonzero(~small | (u62 == c)):
        out[i] = _Uniform(int(u62[i]), gen).below_exp_neg(int(fl[i]))
    return out


def _raw62(m: int, gen: np.random.Generator) -> NDArray[np.int64]:
    """``m`` uniform 62-bit integers (top 62 bits of uniform 64-bit words)."""
    return (_raw(m, gen) >> np.uint64(2)).view(np.int64)


def _candidates(
    t: int, m: int, gen: np.random.Generator
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.bool_]]:
    """(U, X = U + tV, Y positive) for ``m`` candidates of CKS Algorithm 2 (before its tests).

    t is a power of two ≤ 2^52: U (uniform on {0..t−1}) and the sign are independent bit
    fields of one uniform 62-bit word; V ~ Geometric(1 − e^{−1}), P(V ≥ v) = e^{−v}, from a
    second word (:func:`_geometric_e`). V large enough to overflow X in int64 (probability
    < e^{−2^9}) raises.
    """
    w = _raw62(2 * m, gen).reshape(2, m)
    return _candidates_from(w[0], w[1], t, gen)


def _candidates_from(
    w: NDArray[np.int64], w_geo: NDArray[np.int64], t: int, gen: np.random.Generator
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.bool_]]:
    """:func:`_candidates` from given uniform 62-bit words (bit 61 of ``w`` is the sign)."""
    u = w & (t - 1)
    positive = w < 2**61
    v = _geometric_e(w_geo, gen, (2**62 - t) // t)
    v *= t
    v += u
    return u, v, positive


def _exponents(
    u: NDArray[np.int64], x: NDArray[np.int64], t: int, p: int, q: int, big_b: int
) -> tuple[NDArray[np.int64], list[int] | NDArray[np.int64], int]:
    """(⌊E⌋ capped at 2^62, remainders r, denominator D) with E = ⌊E⌋ + r/D = U/t + A²/B.

    A = X·t·q − p, B = 2pq·t². When q = 1 and t divides p (σ² = s₁t), A = t·e with
    e = X − s₁ and E = (2s₁U + e²)/(2p), D = 2p; otherwise E = (2pqt·U + A²)/B, D = B.
    Entries whose numerator fits int64 (|e| or |A| < 2^31) are computed in int64, the others
    with Python integers (exact; r < D, so r is stored in int64 whenever D ≤ 2^62).
    """
    m = u.size
    if q == 1 and p % t == 0 and 2 * p <= 2**62:
        s1, den = p // t, 2 * p
        e = x - s1
        slow = None
        if s1 < 2**31 and (not x.size or int(x.max()) < s1 + 2**31):  # every |e| < 2^31
            e *= e
        else:
            fast = np.abs(e) < 2**31
            slow = np.flatnonzero(~fast)
            e = np.where(fast, e, 0)
            e *= e
        num = (2 * s1) * u
        num += e  # 2s₁U < 2p ≤ 2^62 and e² < 2^62
        fl, rem = np.divmod(num, den)
        for i in () if slow is None else slow:
            f_i, r_i = divmod(2 * s1 * int(u[i]) + (int(x[i]) - s1) ** 2, den)
            fl[i], rem[i] = min(f_i, 2**62), r_i
        return fl, rem, den
    coef = 2 * p * q * t  # U/t = coef·U/B
    if big_b <= 2**62:
        fast = (x < (2**31 + p) // (t * q)) if p < 2**31 else np.zeros(m, dtype=bool)
        a = np.where(fast, x, 0) * (t * q) - np.where(fast, p, 0)
        num = coef * u + a * a
        fl = num // big_b
        rem = num - fl * big_b
        for i in np.flatnonzero(~fast):
            f_i, r_i = divmod(coef * int(u[i]) + (int(x[i]) * t * q - p) ** 2, big_b)
            fl[i], rem[i] = min(f_i, 2**62), r_i
        return fl, rem, big_b
    nums = [coef * int(ui) + (int(xi) * t * q - p) ** 2 for ui, xi in zip(u, x, strict=True)]
    fls = [nm // big_b for nm in nums]
    rems = [nm - f * big_b for nm, f in zip(nums, fls, strict=True)]
    return np.array([min(f, 2**62) for f in fls], dtype=np.int64), rems, big_b


def _laplace_scale(p: int, q: int) -> int:
    """The discrete Laplace scale t of the sampler for σ² = p/q: a power of two near σ.

    CKS take t = ⌊σ⌋ + 1; any t ≥ 1 gives the exact law (the acceptance probability is
    ≤ 1 and the product is ∝ exp(−y²/(2σ²)) for every t). We take the power of two
    t = 2^j nearest to σ on a log scale (2^j·√2 ≥ σ > 2^j/√2, decided in integers), so that
    U and the sign are bit fields of one uniform word.
    """
    j = (math.isqrt(p // q) + 1).bit_length() - 1  # 2^j ≤ ⌊σ⌋ + 1
    if 2 * 4**j * q < p:  # 2^j·√2 < σ
        j += 1
    return 1 << j


@dataclass(frozen=True, slots=True)
class _Plan:
    """Per-variance constants of the sampler (public; cached)."""

    p: int
    q: int
    t: int
    big_b: int
    #: Exact Bernoulli(exp(−r/D)) tables when the denominator D ≤ 2^62 (else None).
    tables: ExpTables | None
    #: P(a candidate is accepted), in floating point: sizes the batches only, never the law.
    accept: float


@functools.lru_cache(maxsize=256)
def _plan(p: int, q: int) -> _Plan:
    """t, B = 2pq·t² and the acceptance rate of one candidate for σ² = p/q.

    A candidate (U, V, sign) has P(X = x, Alg. 2 keeps it) = (1 − e^{−1})/t·e^{−x/t}, and
    e^{−x/t − γ(x)} = e^{−x²/(2σ²) − σ²/(2t²)}; with −0 rejected, P(accept) =
    (1 − e^{−1})/t·e^{−σ²/(2t²)}·θ/2, θ = Σ_z e^{−z²/(2σ²)} (≈ σ√(2π) for σ ≥ 2 by
    Poisson summation): between 0.41 and 0.48 for σ ≥ 2 with t within √2 of σ.
    """
    t = _laplace_scale(p, q)
    s2 = p / q
    if s2 >= 4.0:
        theta = math.sqrt(2.0 * math.pi * s2)
    else:
        z = np.arange(-40, 41, dtype=np.float64)
        theta = float(np.exp(-(z * z) / (2.0 * s2)).sum())
    accept = -math.expm1(-1.0) / t * math.exp(-s2 / (2.0 * t * t)) * theta / 2.0
    big_b = 2 * p * q * t * t
    den = 2 * p if (q == 1 and p % t == 0 and 2 * p <= 2**62) else big_b  # as in _exponents
    tables = exp_tables(den) if den <= 2**62 else None
    return _Plan(p, q, t, big_b, tables, min(max(accept, 0.05), 1.0))


#: Largest number of outputs per round (4096: keeps the working arrays cache-sized; the batching
#: never changes the law, only how the uniforms are grouped).
_ROUND_MAX = 4096


def sample_discrete_gaussian(
    variance: int | Fraction, size: int | tuple[int, ...], rng: RandomLike = None
) -> NDArray[np.int64]:
    """Exact draws of N_ℤ(0, σ²), σ² = ``variance`` an exact rational (CKS 2020, Alg. 3).

    Parameters
    ----------
    variance : int or fractions.Fraction
        σ² > 0 (at most 2^104), the variance parameter: P(z) ∝ exp(−z²/(2σ²)).
    size : int or tuple of int
        Output shape.
    rng : None, int, SeedSequence or Generator

    Returns
    -------
    ndarray of int64
        Independent exact draws.

    Notes
    -----
    Each round draws a batch of i.i.d. candidates: |Y| from CKS Algorithm 2 with a
    power-of-two scale t within √2 of σ, accepted with probability
    exp(−U/t)·exp(−(|Y| − σ²/t)²/(2σ²)) = exp(−E), E = ⌊E⌋ + r/D computed in integers
    (module docstring), and a fair sign (−0 rejected). When D ≤ 2^62 the Bernoulli(exp(−E))
    is one comparison per factor of exp(−⌊E⌋)·Π_j exp(−r_j2^{bj}/D) against exact
    per-D tables (:mod:`dpfair.mechanisms._exp_tables`; ties, probability 2^-62 per factor,
    continue exactly with further bits); otherwise ⌊E⌋ by the exact e^{−k} table and r/D by
    :func:`bernoulli_exp_big`. The accepted candidates, in order, are i.i.d. N_ℤ(0, σ²);
    the batch size (from the known acceptance rate, so that one round usually suffices)
    changes only how many uniforms are consumed, never the law. Privacy statements are in
    the module docstring: Δ²/(2σ²)-zCDP on integer vectors with L2 sensitivity Δ.

    Timing: the number of rounds and of tie continuations depends on the uniform draws
    only (the sampler never sees the statistic the noise is added to).
    """
    gen = as_generator(rng)
    v = _as_variance(variance)
    plan = _plan(v.numerator, v.denominator)
    p, q, t, big_b = plan.p, plan.q, plan.t, plan.big_b
    shape = (int(size),) if isinstance(size, (int, np.integer)) else tuple(int(s) for s in size)
    count = math.prod(shape)
    out = np.empty(count, dtype=np.int64)
    tables = plan.tables
    filled = 0
    while filled < count:
        need = min(count - filled, _ROUND_MAX)
        m = math.ceil((need + 3.0 * math.sqrt(need) + 4.0) / plan.accept)
        if tables is not None:  # D ≤ 2^62: one table comparison per factor of exp(−E)
            w = _raw62((2 + tables.rows) * m, gen).reshape(2 + tables.rows, m)
            u, x, positive = _candidates_from(w[0], w[1], t, gen)
            fl, rem, den = _exponents(u, x, t, p, q, big_b)
            tab, words = tables, w[2:]
            if den != tables.den:  # never for the plan's own (p, q); guards the table index
                tab = exp_tables(den)
                words = _raw62(tab.rows * m, gen).reshape(tab.rows, m)
            ok = decide_exp(fl, np.asarray(rem, dtype=np.int64), tab, words, gen)
        else:
            u, x, positive = _candidates(t, m, gen)
            fl, rem, den = _exponents(u, x, t, p, q, big_b)
            ok = np.ones(m, dtype=bool)
            pos = np.flatnonzero(fl > 0)  # Bernoulli(e^{-⌊E⌋}) = [U < e^{-⌊E⌋}]
            ok[pos] = _bernoulli_exp_int(fl[pos], _raw62(pos.size, gen), gen)
            idx = np.flatnonzero(ok)
            ok[idx] = bernoulli_exp_big(np.array([rem[i] for i in idx], dtype=object), den, gen)
        ok &= (x > 0) | positive  # Alg. 2 rejects −0
        z = np.where(positive, x, -x)[ok][:need]
        out[filled : filled + z.size] = z
        filled += z.size
    return out.reshape(shape)


def round_to_scale(s0: int) -> int:
    """The least S ≥ s0 that is a multiple of its own Laplace scale t (the fast integer path).

    Variances of this form let :func:`sample_discrete_gaussian` use its int64 path with the
    denominator D = 2S (module docstring); :class:`~dpfair.mechanisms.lattice.LatticeNoise`
    rounds its variance up this way.

    S − s0 < t ≤ √2·√S + 1, a relative variance overshoot below 2/√S.
    """
    s = s0
    for _ in range(8):
        t = _laplace_scale(s, 1)
        s_new = -(-s0 // t) * t
        if s_new == s and s % t == 0:
            return s
        s = s_new
    return s
