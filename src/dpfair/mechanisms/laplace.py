"""Laplace mechanism, with the exact law of its (optionally clipped) output.

Adding Laplace(0, b) noise with b = Δ₁/ε to a query of L1 sensitivity Δ₁ is pure ε-DP
(Dwork, McSherry, Nissim & Smith 2006). Clipping the noisy value to a public interval is
post-processing; the clipped law has atoms at the interval's ends and a Laplace density
in between, all of which :class:`ClippedLaplaceLaw` gives exactly.

Floating-point model (``docs/floating_point.md``): the continuous mechanism computed in
binary64 (``value + numpy's Laplace draw``) leaks the low-order bits of ``value`` (Mironov
2012), so :meth:`LaplaceMechanism.release` does not compute it: it snaps the value to a
public lattice and adds an exact discrete Laplace draw in integer arithmetic (pure ε-DP as
executed, noise larger by a factor ≤ 1 + 2^-28 for ε ≥ 1/2). :class:`ClippedLaplaceLaw`
is the law of the continuous mechanism (its ``sample`` draws from that law for
simulation, not for releases).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpfair._errors import InvalidParameterError
from dpfair._rng import RandomLike, as_generator
from dpfair._validation import check_positive
from dpfair.privacy import Budget

__all__ = ["ClippedLaplaceLaw", "LaplaceMechanism"]


@dataclass(frozen=True, slots=True)
class ClippedLaplaceLaw:
    """The law of ``clip(loc + Z, lo, hi)`` with Z ~ Laplace(0, scale).

    Parameters
    ----------
    loc : float
        Centre (the exact query value).
    scale : float
        Laplace scale b > 0.
    lo, hi : float
        Clipping interval (``-inf`` / ``inf`` for no clipping), ``lo < hi``; ``loc`` may
        lie anywhere.

    Notes
    -----
    With d = t − loc, P(loc + Z ≤ t) = ½e^{d/b} for d < 0 and 1 − ½e^{−d/b} otherwise;
    both tails are evaluated from their own side, so tiny tail probabilities keep their
    relative precision. The atoms are P(X = lo) = P(loc + Z ≤ lo) and
    P(X = hi) = P(loc + Z ≥ hi).
    """

    loc: float
    scale: float
    lo: float = -math.inf
    hi: float = math.inf

    def __post_init__(self) -> None:
        if not math.isfinite(self.loc):
            raise InvalidParameterError(f"loc={self.loc!r}: must be finite.")
        check_positive("scale", self.scale)
        if math.isnan(self.lo) or math.isnan(self.hi) or not self.lo < self.hi:
            raise InvalidParameterError(
                f"(lo, hi)=({self.lo!r}, {self.hi!r}): need lo < hi (use ±inf for no clipping)."
            )

    # ------------------------------------------------------------------ Laplace pieces
    def _lap_cdf(self, t: NDArray[np.float64]) -> NDArray[np.float64]:
        d = (t - self.loc) / self.scale
        with np.errstate(over="ignore"):
            return np.where(d < 0, 0.5 * np.exp(np.minimum(d, 0.0)), 1.0 - 0.5 * np.exp(-d))

    def _lap_sf(self, t: NDArray[np.float64]) -> NDArray[np.float64]:
        d = (t - self.loc) / self.scale
        with np.errstate(over="ignore"):
            return np.where(d > 0, 0.5 * np.exp(-np.maximum(d, 0.0)), 1.0 - 0.5 * np.exp(d))

    @property
    def atom_lo(self) -> float:
        """P(X = lo) (0 without clipping)."""
        if not math.isfinite(self.lo):
            return 0.0
        return float(self._lap_cdf(np.asarray(self.lo)))

    @property
    def atom_hi(self) -> float:
        """P(X = hi) (0 without clipping)."""
        if not math.isfinite(self.hi):
            return 0.0
        return float(self._lap_sf(np.asarray(self.hi)))

    # ------------------------------------------------------------------ distribution
    def cdf(self, t: ArrayLike) -> NDArray[np.float64]:
        """P(X ≤ t)."""
        arr = np.asarray(t, dtype=np.float64)
        out = self._lap_cdf(arr)
        return np.where(arr < self.lo, 0.0, np.where(arr >= self.hi, 1.0, out))

    def prob_below(self, t: ArrayLike) -> NDArray[np.float64]:
        """P(X < t)."""
        arr = np.asarray(t, dtype=np.float64)
        out = self._lap_cdf(arr)
        return np.where(arr <= self.lo, 0.0, np.where(arr > self.hi, 1.0, out))

    def sf(self, t: ArrayLike) -> NDArray[np.float64]:
        """P(X > t)."""
        arr = np.asarray(t, dtype=np.float64)
        out = self._lap_sf(arr)
        return np.where(arr < self.lo, 1.0, np.where(arr >= self.hi, 0.0, out))

    def prob_above(self, t: ArrayLike) -> NDArray[np.float64]:
        """P(X ≥ t)."""
        arr = np.asarray(t, dtype=np.float64)
        out = self._lap_sf(arr)
        return np.where(arr <= self.lo, 1.0, np.where(arr > self.hi, 0.0, out))

    def pdf(self, t: ArrayLike) -> NDArray[np.float64]:
        """Density of the continuous part (strictly inside (lo, hi)); atoms excluded."""
        arr = np.asarray(t, dtype=np.float64)
        dens = np.exp(-np.abs(arr - self.loc) / self.scale) / (2.0 * self.scale)
        return np.where((arr > self.lo) & (arr < self.hi), dens, 0.0)

    def logpdf(self, t: ArrayLike) -> NDArray[np.float64]:
        """log of :meth:`pdf` (``-inf`` outside (lo, hi))."""
        arr = np.asarray(t, dtype=np.float64)
        val = -np.abs(arr - self.loc) / self.scale - math.log(2.0 * self.scale)
        return np.where((arr > self.lo) & (arr < self.hi), val, -np.inf)

    def interval_moments(
        self, lower: ArrayLike, upper: ArrayLike, center: float | None = None
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Exact P(lower < X ≤ upper) and E[(X − center)·1{lower < X ≤ upper}].

        ``center`` defaults to ``loc``; passing the point that the caller measures
        distances from keeps the first moment free of cancellation. Atoms at ``lo`` and
        ``hi`` are included when they lie in the half-open interval.
        """
        c = self.loc if center is None else float(center)
        a = np.asarray(lower, dtype=np.float64)
        b = np.asarray(upper, dtype=np.float64)
        a, b = np.broadcast_arrays(a, b)
        m0 = np.zeros(a.shape)
        m1 = np.zeros(a.shape)
        # continuous part on (max(a, lo), min(b, hi)), split at loc
        ca = np.maximum(a, self.lo)
        cb = np.minimum(b, self.hi)
        s = self.scale
        shift = self.loc - c
        # right of loc: t = loc + u, u in [u1, u2]
        u1 = np.maximum(ca - self.loc, 0.0)
        u2 = np.maximum(cb - self.loc, 0.0)
        ok = u2 > u1
        e1, e2 = np.exp(-u1 / s), np.exp(-u2 / s)
        p_r = np.where(ok, 0.5 * (e1 - e2), 0.0)
        mu_r = np.where(ok, 0.5 * ((u1 + s) * e1 - (u2 + s) * e2), 0.0)  # E[u; .]
        # left of loc: t = loc - v, v in [v1, v2]
        v1 = np.maximum(self.loc - cb, 0.0)
        v2 = np.maximum(self.loc - ca, 0.0)
        ok = v2 > v1
        f1, f2 = np.exp(-v1 / s), np.exp(-v2 / s)
        p_l = np.where(ok, 0.5 * (f1 - f2), 0.0)
        mu_l = np.where(ok, 0.5 * ((v1 + s) * f1 - (v2 + s) * f2), 0.0)  # E[v; .]
        m0 += p_r + p_l
        m1 += mu_r - mu_l + shift * (p_r + p_l)
        # atoms
        if math.isfinite(self.lo):
            hit = (a < self.lo) & (self.lo <= b)
            m0 += np.where(hit, self.atom_lo, 0.0)
            m1 += np.where(hit, self.atom_lo * (self.lo - c), 0.0)
        if math.isfinite(self.hi):
            hit = (a < self.hi) & (self.hi <= b)
            m0 += np.where(hit, self.atom_hi, 0.0)
            m1 += np.where(hit, self.atom_hi * (self.hi - c), 0.0)
        return m0, m1

    def mean(self) -> float:
        """E[X], exactly."""
        _, m1 = self.interval_moments(-np.inf, np.inf)
        return float(self.loc + m1)

    def sample(
        self, size: int | tuple[int, ...] | None = None, rng: RandomLike = None
    ) -> NDArray[np.float64] | float:
        """Draws of ``clip(loc + Laplace(0, scale), lo, hi)``."""
        gen = as_generator(rng)
        z = gen.laplace(0.0, self.scale, size=() if size is None else size)
        out = np.clip(self.loc + z, self.lo, self.hi)
        if size is None:
            return float(out)
        return np.asarray(out, dtype=np.float64)


@dataclass(frozen=True, slots=True)
class LaplaceMechanism:
    """Add Laplace(0, b) noise with b = sensitivity / ε to a real-valued query.

    Parameters
    ----------
    epsilon : float
        Privacy parameter, > 0.
    sensitivity : float
        L1 sensitivity Δ₁ = max over neighbours |f(D) − f(D')|, > 0.

    Notes
    -----
    Privacy: the output densities at any t for neighbours differ by the factor
    exp((|t − f(D')| − |t − f(D)|)/b) ≤ exp(Δ₁/b) = e^ε, so the mechanism is pure ε-DP
    (Dwork et al. 2006). Clipping to a public interval (:meth:`law` with ``clip``) is
    post-processing and keeps the guarantee.
    """

    epsilon: float
    sensitivity: float

    def __post_init__(self) -> None:
        check_positive("epsilon", self.epsilon)
        check_positive("sensitivity", self.sensitivity)

    @property
    def scale(self) -> float:
        """Noise scale b = sensitivity / ε."""
        return self.sensitivity / self.epsilon

    @property
    def privacy(self) -> Budget:
        """Pure ε-DP."""
        return Budget.pure(self.epsilon)

    def law(self, value: float, clip: tuple[float, float] | None = None) -> ClippedLaplaceLaw:
        """Exact law of the release for the exact query ``value`` (clipped if asked)."""
        lo, hi = (-math.inf, math.inf) if clip is None else (float(clip[0]), float(clip[1]))
        return ClippedLaplaceLaw(float(value), self.scale, lo, hi)

    def lattice(self) -> tuple[float, int]:
        """The public lattice λ·ℤ and the integer noise scale t of :meth:`release`.

        λ = 2^{⌊log2 Δ₁⌋ − k} with k = min(30, 31 + ⌊log2 ε⌋) (public), and
        t = ⌈(Δ₁/λ + 1)/ε⌉ in exact rationals: snapping moves each of f(D), f(D') by ≤ λ/2,
        so the snapped statistics of neighbours differ by ≤ Δ₁/λ + 1 lattice steps and the
        discrete Laplace of scale t has every pmf ratio ≤ exp((Δ₁/λ + 1)/t) ≤ e^ε. The noise
        scale t·λ exceeds b = Δ₁/ε by ≤ 2λ/ε ≤ 2^{2−k}·b (≤ 2^-28·b for ε ≥ 2^-1), and
        t ≤ 2^32, so the sampler's int64 range (|Z| ≤ 2^52, i.e. ≥ 2^20 scales) is never the
        binding constraint (probability ≤ e^{−2^20}).
        """
        e_log = math.frexp(self.epsilon)[1] - 1  # ⌊log2 ε⌋
        k = min(30, 31 + e_log)
        if k < 4:
            raise InvalidParameterError(
                f"epsilon={self.epsilon!r}: below 2^-27 the lattice release would add more "
                "than 1/8 extra noise; use a larger epsilon."
            )
        lam = math.ldexp(1.0, math.frexp(self.sensitivity)[1] - 1 - k)
        if not lam > 0.0:
            raise InvalidParameterError(
                f"sensitivity={self.sensitivity!r}: too small for a binary64 lattice; "
                "rescale the query (e.g. report it in smaller units)."
            )
        t = math.ceil((Fraction(self.sensitivity) / Fraction(lam) + 1) / Fraction(self.epsilon))
        return lam, int(t)

    def release(
        self,
        value: float,
        rng: RandomLike = None,
        *,
        clip: tuple[float, float] | None = None,
        size: int | None = None,
    ) -> NDArray[np.float64] | float:
        """Noisy ``value``, ε-DP as executed (each of ``size`` draws is a separate release).

        Mironov's (2012) fix, done exactly: ``value`` is snapped to the public lattice λ·ℤ
        (:meth:`lattice`; K = round(value/λ) in exact rationals), an exact
        discrete Laplace draw Z of integer scale t is added to the integer K in Python
        integer arithmetic (:func:`~dpfair.mechanisms.discrete_laplace.sample_discrete_laplace`),
        and (K + Z)·λ is converted to binary64 — a rounding of an integer that is already
        private, i.e. post-processing. The released number therefore depends on ``value``
        only through K, never through its low-order bits, and the pure ε guarantee holds for
        the computation as executed (``docs/floating_point.md``). Clipping to a public
        ``clip`` interval is post-processing. :meth:`law` is the continuous mechanism's
        law; the release is its discretisation on λ·ℤ (λ ≤ 2^-30·2Δ₁ for ε ≥ 1).
        """
        from dpfair.mechanisms.discrete_laplace import sample_discrete_laplace

        v = float(value)
        if not math.isfinite(v):
            raise InvalidParameterError(f"value={value!r}: must be finite.")
        gen = as_generator(rng)
        lam, t = self.lattice()
        k = round(Fraction(v) / Fraction(lam))  # exact rational, ties to even
        count = 1 if size is None else int(size)
        if count < 0:
            raise InvalidParameterError(f"size={size!r}: must be >= 0.")
        z = sample_discrete_laplace(t, count, gen)
        if abs(k) < 2**52:
            # |Z| ≤ 2^52 (the sampler's cap), so K + Z is exact in int64; its conversion to
            # binary64 and the product by the power of two λ are functions of K + Z alone.
            out = (np.int64(k) + z).astype(np.float64) * lam
        else:
            out = np.array([float((k + int(zi)) * Fraction(lam)) for zi in z], dtype=np.float64)
        if clip is not None:
            out = np.clip(out, float(clip[0]), float(clip[1]))
        if size is None:
            return float(out[0])
        return out
