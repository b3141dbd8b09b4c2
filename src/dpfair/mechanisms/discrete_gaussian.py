r"""Exact discrete Gaussian sampling (Canonne, Kamath & Steinke 2020) and its lattice noise.

The discrete Gaussian N_ℤ(0, σ²) has P(Z = z) = exp(−z²/(2σ²)) / Σ_{y∈ℤ} exp(−y²/(2σ²)).
:func:`sample_discrete_gaussian` draws it exactly for a rational variance σ² = p/q
(CKS 2020, Algorithm 3): with t = ⌊σ⌋ + 1, draw Y from the discrete Laplace law
P(Y = y) ∝ exp(−|y|/t) and accept it with probability exp(−γ),
γ = (|Y| − σ²/t)²/(2σ²); then P(accept, Y = y) ∝ exp(−|y|/t − (|y| − σ²/t)²/(2σ²))
= exp(−y²/(2σ²) − σ²/(2t²)), proportional to the target. Written with integers,
γ = A²/B with A = |Y|·t·q − p and B = 2pq·t², so ⌊γ⌋ and the remainder r = A² − ⌊γ⌋B
are exact (int64 when provably in range, Python integers otherwise) and
exp(−γ) = e^{−1·⌊γ⌋}·exp(−r/B) is drawn as ⌊γ⌋ Bernoulli(e^{−1}) (stopping at the first
failure) and one Bernoulli(exp(−r/B)), all from uniform integers (CKS Algorithm 1). No
floating-point number enters the law; the only assumption is that
``numpy.random.Generator.integers`` gives uniform integers.

Privacy (used by every release that adds this noise to an integer statistic; here
σ² is the variance *parameter*, the true variance of N_ℤ(0, σ²) is smaller):

* **zCDP.** For integers μ, ν the Rényi divergence of order α > 1 is
  D_α(N_ℤ(μ, σ²) ‖ N_ℤ(ν, σ²)) ≤ α(μ − ν)²/(2σ²): completing the square,
  Σ_y P_μ(y)^α P_ν(y)^{1−α} = e^{α(α−1)(μ−ν)²/(2σ²)} · θ(m)/θ(0) with
  m = αμ + (1 − α)ν and θ(m) = Σ_{y∈ℤ} exp(−(y − m)²/(2σ²)); by Poisson summation
  θ(m) = σ√(2π) Σ_k e^{−2π²σ²k²} cos(2πkm) ≤ θ(0) (CKS 2020, Prop. 5 / Lemma 17). For a
  product of independent N_ℤ(0, σ²) on ℤ^d the divergences add, so adding it to an integer
  vector query with L2 sensitivity Δ is **Δ²/(2σ²)-zCDP**, for any real Δ.
* **(ε, δ).** For the one-dimensional case CKS (Thm. 7) give the tight δ. For vectors we
  use the following bound, proved here (:func:`discrete_gaussian_delta_slack`): let
  σ² = σ_c² + s² with s > 0. Post-process the continuous mechanism y = x + N(0, σ_c² I)
  by drawing K ∈ ℤ^d with P(K = k | y) ∝ exp(−‖k − y‖²/(2s²)) (public randomness, no
  access to x). With η_s = 2Σ_{m≥1} e^{−2π²s²m²}, Poisson summation gives
  Σ_{k∈ℤ} φ_s(k − y) ∈ [1 − η_s, 1 + η_s] for every real y (φ_s the N(0, s²) density),
  hence, coordinatewise and multiplied over d coordinates,
  P(K = k) ∈ [φ_σ(k − x)/(1 + η_s)^d, φ_σ(k − x)/(1 − η_s)^d] (φ_c * φ_s = φ_σ), while the
  discrete Gaussian has P_DG(k) = φ_σ(k − x)/θ_σ^d with θ_σ = Σ_y φ_σ(y) ∈ [1, 1 + η_σ].
  So P_DG ≤ (1 + η_s)^d P_K and P_K ≤ ((1 + η_σ)/(1 − η_s))^d P_DG pointwise. If the
  continuous mechanism with σ_c is (ε, δ_c)-DP (e.g. δ_c from the analytic Gaussian, or
  any point of a μ-GDP curve), then for every event E
  P_DG,x(E) ≤ (1 + η_s)^d (e^ε P_K,x′(E) + δ_c) ≤ e^ε (1 + κ) P_DG,x′(E) + (1 + η_s)^d δ_c,
  1 + κ = ((1 + η_s)(1 + η_σ)/(1 − η_s))^d, i.e. the discrete mechanism is
  (ε, (1 + η_s)^d δ_c + e^ε κ)-DP. Releases here take s = 8 lattice units
  (η_s < 10^{−548}) on top of the calibrated variance, and calibrate δ_c slightly below
  the charged δ so that the sum stays below the charged δ (:func:`approx_dp_variance`).

Timing: the loops below run until every pending draw is accepted; their number of rounds
is a function of the uniform draws only. The sampler never sees the statistic it is added
to, so its running time cannot depend on the data.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpfair._errors import InvalidParameterError
from dpfair._rng import RandomLike, as_generator
from dpfair.mechanisms.discrete_laplace import bernoulli_exp

__all__ = [
    "DELTA_SLACK_FRACTION",
    "SMOOTHING_VARIANCE",
    "approx_dp_variance",
    "bernoulli_exp_big",
    "discrete_gaussian_delta_slack",
    "discrete_gaussian_noise_on_lattice",
    "gaussian_noise_bits",
    "lattice_variance",
    "sample_discrete_gaussian",
]

#: Largest σ (variance parameter ≤ 2^104) the sampler accepts: keeps the Laplace scale t
#: ≤ 2^52 + 1 and every accepted draw far inside int64.
_MAX_VARIANCE = Fraction(2**104)
#: |A| up to this bound keeps A² in int64.
_A_SAFE = math.isqrt(2**63 - 1)
_CHUNK = 62
#: s² (lattice units²) added on top of the calibrated variance of (ε, δ) releases.
SMOOTHING_VARIANCE = 64
#: (ε, δ) releases calibrate the continuous σ_c at δ·(1 − this), leaving room for the slack.
DELTA_SLACK_FRACTION = 2.0**-40


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


def _bern_exp(a: NDArray[np.int64], d: int, gen: np.random.Generator) -> NDArray[np.bool_]:
    """Bernoulli(exp(−a/d)) per entry, 0 ≤ a ≤ d ≤ 2^62 (CKS Alg. 1; inputs trusted)."""
    out = np.zeros(a.size, dtype=bool)
    active = np.arange(a.size)
    k = 1
    while active.size:
        hit = gen.integers(0, d, size=active.size) < a[active]
        if k > 1:
            hit &= gen.integers(0, k, size=active.size) == 0
        out[active[~hit]] = k % 2 == 1
        active = active[hit]
        k += 1
    return out


def _bern_exp_one(m: int, gen: np.random.Generator) -> NDArray[np.bool_]:
    """``m`` Bernoulli(e^{−1}) draws (CKS Alg. 1 with γ = 1: the k = 1 trial always succeeds)."""
    out = np.zeros(m, dtype=bool)
    active = np.arange(m)
    k = 2
    while active.size:
        hit = gen.integers(0, k, size=active.size) == 0
        out[active[~hit]] = k % 2 == 1
        active = active[hit]
        k += 1
    return out


_BLOCK = 4


def _run_of_successes(limit: NDArray[np.int64], gen: np.random.Generator) -> NDArray[np.int64]:
    """Per entry, the leading successes of i.i.d. Bernoulli(e^{−1}) trials, capped at ``limit``.

    Trials are drawn in blocks of four per entry (one flat vectorised call); entries whose
    block was all successes and that have not reached ``limit`` draw another block. With
    limit = ∞ (use a huge value) this is V ~ Geometric: P(V ≥ v) = e^{−v}.
    """
    runs = np.zeros(limit.size, dtype=np.int64)
    alive = np.flatnonzero(limit > 0)
    while alive.size:
        trials = _bern_exp_one(alive.size * _BLOCK, gen).reshape(alive.size, _BLOCK)
        lead = np.where(trials.all(axis=1), _BLOCK, np.argmin(trials, axis=1))
        room = limit[alive] - runs[alive]
        runs[alive] += np.minimum(lead, room)
        alive = alive[(lead == _BLOCK) & (room > _BLOCK)]
    return runs


_NO_LIMIT = np.int64(2**62)


def _discrete_laplace_round(
    t: int, m: int, gen: np.random.Generator
) -> tuple[NDArray[np.int64], NDArray[np.bool_], NDArray[np.bool_]]:
    """One round of CKS Algorithm 2 for ``m`` candidates: (|Y|, Y negative, produced).

    U uniform on {0..t−1} kept with probability exp(−U/t), V ~ Geometric(1 − e^{−1}),
    X = U + tV, a fair sign B, rejecting (B = 1, X = 0). X = U + tV is formed in int64;
    V large enough to overflow (probability < e^{−2^9} at t ≤ 2^52 + 1) raises.
    """
    u = gen.integers(0, t, size=m)
    keep = _bern_exp(u, t, gen)
    v = np.zeros(m, dtype=np.int64)
    kept = np.flatnonzero(keep)
    v[kept] = _run_of_successes(np.full(kept.size, _NO_LIMIT), gen)
    if int(v.max(initial=0)) > (2**62 - t) // t:
        raise OverflowError("discrete Laplace draw beyond 2^62 (probability < e^-512).")
    x = u + t * v
    neg = gen.integers(0, 2, size=m) == 1
    return x, neg, keep & ~(neg & (x == 0))


def _accept_probability_draw(
    x: NDArray[np.int64], t: int, p: int, q: int, gen: np.random.Generator
) -> NDArray[np.bool_]:
    """Exact Bernoulli(exp(−A²/B)) per entry, A = x·t·q − p, B = 2pq·t²."""
    big_b = 2 * p * q * t * t
    fl: NDArray[np.int64] | NDArray[np.object_]
    rem: NDArray[np.int64] | NDArray[np.object_]
    xs_max = int(x.max(initial=0))
    # int64 fast path when |A| ≤ √(2^63 − 1) for every entry and B ≤ 2^62
    if big_b <= 2**62 and xs_max * t * q <= p + _A_SAFE and p <= _A_SAFE:
        a = x * (t * q) - p
        sq = a * a
        fl = sq // big_b
        rem = sq - fl * big_b
    else:
        a_obj = x.astype(object) * (t * q) - p
        sq_obj = a_obj * a_obj
        fl = sq_obj // big_b
        rem = sq_obj - fl * big_b
    # ⌊γ⌋ Bernoulli(e^{-1}) trials, stopping at the first failure (a run of ⌊γ⌋ successes);
    # ⌊γ⌋ ≥ 2^62 would need 2^62 successes: capped there (probability e^{-2^62} of mattering)
    if fl.dtype == object:
        fl64 = np.array([min(int(f), 2**62) for f in fl], dtype=np.int64)
    else:
        fl64 = np.asarray(fl, dtype=np.int64)
    ok = _run_of_successes(fl64, gen) == fl64
    idx = np.flatnonzero(ok)
    if idx.size:
        if big_b <= 2**62:
            last = _bern_exp(np.asarray(rem[idx], dtype=np.int64), big_b, gen)
        else:
            last = bernoulli_exp_big(rem[idx], big_b, gen)
        ok[idx[~last]] = False
    return ok


#: Lower bound on the per-candidate acceptance of one round (measured ≥ 0.34 for σ² ≥ 1/4).
_ACCEPT_GUESS = 0.34


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
    Each round, for the pending draws only: |Y| from CKS Algorithm 2 with scale
    t = ⌊σ⌋ + 1, then acceptance with probability exp(−(|Y| − σ²/t)²/(2σ²)) computed in
    integers (module docstring), then a fair sign. Privacy statements are in the module
    docstring: Δ²/(2σ²)-zCDP on integer vectors with L2 sensitivity Δ.

    Timing: the number of rounds and of Bernoulli trials depends on the uniform draws only
    (the sampler never sees the statistic the noise is added to).
    """
    gen = as_generator(rng)
    v = _as_variance(variance)
    p, q = v.numerator, v.denominator
    t = math.isqrt(p // q) + 1  # ⌊σ⌋ + 1 (⌊√⌊x⌋⌋ = ⌊√x⌋)
    # Y from CKS Alg. 2 (sign and magnitude), kept with probability exp(−(|Y| − σ²/t)²/(2σ²))
    shape = (int(size),) if isinstance(size, (int, np.integer)) else tuple(int(s) for s in size)
    count = int(np.prod(shape, dtype=np.int64))
    out = np.empty(count, dtype=np.int64)
    filled = 0
    while filled < count:
        # candidates are i.i.d.; the accepted ones, in order, are i.i.d. N_ℤ(0, σ²)
        need = count - filled
        m = math.ceil(need / _ACCEPT_GUESS) + 16
        x, neg, ok = _discrete_laplace_round(t, m, gen)
        sub = np.flatnonzero(ok)
        acc = _accept_probability_draw(x[sub], t, p, q, gen)
        chosen = sub[acc][:need]
        out[filled : filled + chosen.size] = np.where(neg[chosen], -x[chosen], x[chosen])
        filled += chosen.size
    return out.reshape(shape)


# --------------------------------------------------------------------------- lattice noise
def lattice_variance(sigma: float, bits: int, extra: int = 0) -> int:
    """S = ⌈σ²·4^bits⌉ + ``extra``: the variance parameter in units of 2^-bits.

    σ is read as the exact rational value of its binary64, so S·4^-bits ≥ σ² exactly and
    the relative overshoot of the variance is (S − σ²4^bits)/(σ²4^bits)
    ≤ (1 + extra)/(S − 1 − extra) (≈ 1/S for extra = 0).
    """
    s = Fraction(float(sigma))
    if not s > 0:
        raise InvalidParameterError(f"sigma={sigma!r}: must be > 0.")
    return math.ceil(s * s * 4 ** int(bits)) + int(extra)


def gaussian_noise_bits(sigma: float, magnitude: float) -> int:
    """Public lattice bits b for discrete Gaussian noise σ on a statistic of size ``magnitude``.

    The smallest b ≥ 0 with σ·2^b ≥ 2^10 (the discrete Gaussian on 2^-b·ℤ is then
    indistinguishable from the continuous one at the accuracy of any release, and the
    sampler's integers stay in int64), capped by
    :func:`~dpfair.mechanisms.gaussian.lattice_bits` so that statistic + noise is an exact
    binary64 sum. σ and ``magnitude`` must be public.
    """
    from dpfair.mechanisms.gaussian import lattice_bits

    s = float(sigma)
    if not (math.isfinite(s) and s > 0):
        raise InvalidParameterError(f"sigma={sigma!r}: must be finite and > 0.")
    want = max(0, 10 - math.floor(math.log2(s)))
    return int(min(want, lattice_bits(magnitude)))


def discrete_gaussian_noise_on_lattice(
    sigma: float,
    bits: int,
    size: int | tuple[int, ...],
    rng: RandomLike = None,
    *,
    extra_variance: int = 0,
) -> NDArray[np.float64]:
    """Exact discrete Gaussian noise on the public lattice 2^-bits·ℤ, as binary64.

    Returns Z·2^-bits with Z ~ N_ℤ(0, S) exactly, S = :func:`lattice_variance`
    (σ, bits, extra_variance), so in real units the variance parameter is S·4^-bits ≥ σ²
    (relative overshoot ≤ (1 + extra)/(S − 1 − extra)). Z·2^-bits is exact in binary64
    (|Z| < 2^53 is checked). Added to a statistic on the same lattice it gives an exact
    integer mechanism in lattice units: Δ_lat²/(2S)-zCDP with Δ_lat = 2^bits·Δ, i.e.
    ≤ Δ²/(2σ²) (module docstring).
    """
    b = int(bits)
    if b < 0 or b > 60:
        raise InvalidParameterError(f"bits={bits!r}: expected an integer in [0, 60].")
    s_lat = lattice_variance(sigma, b, extra_variance)
    z = sample_discrete_gaussian(s_lat, size, rng)
    if z.size and int(np.abs(z).max()) >= 2**53:
        raise OverflowError("discrete Gaussian draw beyond 2^53 lattice units.")
    return np.asarray(z.astype(np.float64) * (2.0**-b), dtype=np.float64)


# --------------------------------------------------------------------------- (ε, δ) slack
def discrete_gaussian_delta_slack(
    epsilon: float, dim: int, smoothing: int = SMOOTHING_VARIANCE
) -> float:
    """log of an upper bound on the additive δ slack of the discrete Gaussian (module docstring).

    With s² = ``smoothing`` (lattice units²) subtracted from the variance parameter to
    form the continuous σ_c² = σ² − s², the d-dimensional discrete Gaussian mechanism is
    (ε, δ_c + ξ)-DP whenever the continuous one with σ_c is (ε, δ_c)-DP, where
    ξ = ((1 + η_s)^d − 1)δ_c + e^ε κ ≤ (2 + 8e^ε)·d·η_s as long as d·η_s ≤ 1/8
    (using η_σ ≤ η_s for σ ≥ s, log(1 + x) ≤ x, 1/(1 − η) ≤ 1 + 2η and e^y − 1 ≤ 2y for
    y ≤ 1/2), and η_s = 2Σ_{m≥1} e^{−2π²s²m²} ≤ 2e^{−2π²s²}/(1 − e^{−6π²s²}).
    Returns log((2 + 8e^ε)·d·η_s) (an upper bound, rounded up by 10^-9 relative);
    at s² = 64 this is about log(d) + ε − 1258.
    """
    e = max(float(epsilon), 0.0)
    s2 = int(smoothing)
    if s2 < 1 or int(dim) < 1:
        raise InvalidParameterError("smoothing and dim must be positive integers.")
    log_eta = math.log(2.0) - 2.0 * math.pi**2 * s2 - math.log1p(-math.exp(-6.0 * math.pi**2 * s2))
    if math.log(int(dim)) + log_eta > math.log(1 / 8):
        raise InvalidParameterError("smoothing variance too small for this dimension.")
    log_front = e + math.log(8.0 + 2.0 * math.exp(-e))
    out = log_front + math.log(int(dim)) + log_eta
    return out + 1e-9 * abs(out)


def approx_dp_sigma_target(epsilon: float, delta: float, dim: int) -> float:
    """The δ_c at which to calibrate the continuous σ_c for a charged (ε, δ).

    δ_c = δ·(1 − 2^-40); checks that the discrete Gaussian's slack (with
    s² = :data:`SMOOTHING_VARIANCE` lattice units² added to the variance) is
    ≤ δ·2^-41, so that δ_c (rounded) + slack < δ: the charged δ is a true bound.
    """
    d = float(delta)
    if not 0 < d < 1:
        raise InvalidParameterError(f"delta={delta!r}: expected 0 < delta < 1.")
    if discrete_gaussian_delta_slack(epsilon, dim) > math.log(d) - 41 * math.log(2.0):
        raise InvalidParameterError(
            f"epsilon={epsilon!r}, delta={delta!r}: the discrete Gaussian's δ slack is not "
            "negligible here (ε above ~500 or δ below 1e-300); use a larger delta or epsilon."
        )
    return d * (1.0 - DELTA_SLACK_FRACTION)


def approx_dp_variance(sigma_c: float, bits: int) -> int:
    """Lattice variance S = ⌈σ_c²4^bits⌉ + s² of an (ε, δ) release calibrated at σ_c."""
    return lattice_variance(sigma_c, bits, SMOOTHING_VARIANCE)
