"""Step S1 for many features, federated: random Fourier features of the Gaussian kernel.

The kernel estimate of :mod:`._model` needs a grid of m^d nodes. Random Fourier features
(Rahimi & Recht 2007) replace the kernel k_h(u, v) = exp(−‖u − v‖²/(2h²)) by an inner
product of D-dimensional vectors,

    φ(u) = m^{-1/2} (cos(ω_1·u), …, cos(ω_m·u), sin(ω_1·u), …, sin(ω_m·u)),  D = 2m,
    φ(u)·φ(v) = m^{-1} Σ_j cos(ω_j·(u − v)) → k_h(u, v),   ω_j ~ N(0, h^{-2} I_p)

(i.i.d.), where u ∈ [0, 1]^p is the *public* feature map of a record (numeric columns scaled with
their public bounds, categorical columns one-hot over their public lists:
:class:`~dpfair.fairclass._linear.FeatureMap`). The frequencies come from a *public* seed
(part of the signed setup), so every party computes the same φ. ‖φ(u)‖ = 1 exactly in real
arithmetic.

**Released statistic.** Per cell (a, y): S_{a,y} = Σ_{i: A_i = a, Y_i = y} φ(u_i) ∈ R^D,
and the group score η̃_a(x) = (G⁺ + λ/2)/(G⁺ + H⁺ + λ) with G = φ(x)·S̃_{a,1},
H = φ(x)·S̃_{a,0} (the same ratio as the kernel estimate; post-processing).

**Sensitivity as computed (THREATS.md rule 6, ``docs/floating_point.md``).** Each record's
φ is mapped to the integer lattice 2^{-q}·Z^D, q = :data:`RFF_LATTICE_BITS`, by rounding
every coordinate *toward zero* (Q_j = trunc(φ_j·2^q)), and then the integer norm is checked
exactly in int64: Σ_j Q_j² ≤ 4^q. A row that fails (possible only through rounding of
cos/sin) is halved toward zero until it passes, so ‖Q‖ ≤ 2^q holds for every computed row,
whatever the floating-point library returns. The four cell sums are int64 sums (exact:
|Σ Q| ≤ N·2^q < 2^62 by the public check below). Under replace-one a record either stays in
its cell (the sum changes by Q(x′) − Q(x), norm ≤ 2·2^q) or moves to another cell (two
sums change by Q(x) and Q(x′): norm ≤ √2·2^q). Hence the L2 sensitivity of the integer
vector (S_{a,y})_{a,y} ∈ Z^{4D} is Δ = 2·2^q, i.e. :data:`RFF_SENSITIVITY` = 2 in φ units.
(The RKHS bound √2 of the exact kernel does not transfer: the RFF inner product
φ(u)·φ(v) can be negative, so ‖φ(u) − φ(v)‖ can reach 2.)

**Mechanism and guarantee.** The release is (S + N)·2^{-q} with N = rint(σ·2^q·Z),
Z ~ N(0, I_{4D}): rint(S + σ2^qZ) = S + rint(σ2^qZ) because S is an integer vector, so the
released value is a deterministic function of the Gaussian mechanism S + σ2^q Z of
sensitivity 2·2^q, which is μ-GDP with μ = 2·2^q/(σ·2^q) = 2/σ (post-processing keeps it).
All arithmetic is in int64 (exact) and the final scaling by 2^{-q} is exact in binary64;
the noise law does not depend on the data. Noise scale: σ_f = 2/μ_f.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from numpy.typing import NDArray

from dpfair._errors import InvalidParameterError
from dpfair.fairclass._rule import PlugInRule
from dpfair.mechanisms import (
    SMOOTHING_VARIANCE,
    LatticeNoise,
    lattice_variance,
    sample_discrete_gaussian,
)
from dpfair.mechanisms import round_to_scale as _round_to_scale

__all__ = [
    "MAX_FEATURES_DIM",
    "RFF_LATTICE_BITS",
    "RFF_SENSITIVITY",
    "ReleasedRFFFold",
    "release_rff_sums",
    "rff_cell_sums",
    "rff_features",
    "rff_frequencies",
    "rff_lattice",
]

#: Bits q of the per-coordinate lattice 2^-q of the quantized features.
RFF_LATTICE_BITS = 20
#: L2 sensitivity of the four cell sums in φ units (module docstring).
RFF_SENSITIVITY = 2.0
#: Public upper limit on D (checked on every setup before anything is allocated).
MAX_FEATURES_DIM = 4096
#: Public upper limit on the width p of the feature map (numeric + one-hot columns).
MAX_MAP_WIDTH = 4096
_INT_LIMIT = 2**62


def rff_frequencies(p: int, dim: int, bandwidth: float, seed: int) -> NDArray[np.float64]:
    """The public frequencies ω_1..ω_m (shape (p, m), m = D/2) from the public seed."""
    if not (isinstance(dim, int) and dim >= 2 and dim % 2 == 0 and dim <= MAX_FEATURES_DIM):
        raise InvalidParameterError(
            f"features_dim={dim!r}: expected an even integer in [2, {MAX_FEATURES_DIM}]."
        )
    if not 1 <= p <= MAX_MAP_WIDTH:
        raise InvalidParameterError(
            f"feature map width {p}: expected 1..{MAX_MAP_WIDTH} (numeric + one-hot columns)."
        )
    return _frequencies(int(p), int(dim), float(bandwidth), int(seed))


@lru_cache(maxsize=8)
def _frequencies(p: int, dim: int, bandwidth: float, seed: int) -> NDArray[np.float64]:
    rng = np.random.default_rng(np.random.SeedSequence(seed))
    W = rng.standard_normal((p, dim // 2)) / bandwidth
    W.setflags(write=False)  # shared by the cache: read-only
    return W


def rff_features(U: NDArray[np.float64], W: NDArray[np.float64]) -> NDArray[np.float64]:
    """φ(u) in floating point (for evaluating the released model: post-processing)."""
    proj = U @ W
    m = W.shape[1]
    return np.concatenate((np.cos(proj), np.sin(proj)), axis=1) / np.sqrt(m)


def rff_lattice(
    U: NDArray[np.float64], W: NDArray[np.float64], bits: int = RFF_LATTICE_BITS
) -> NDArray[np.int64]:
    """Q(u) ∈ Z^D with Σ_j Q_j² ≤ 4^bits for every row, checked in exact int64 arithmetic."""
    scale = float(2**bits)
    Q = np.trunc(rff_features(U, W) * scale).astype(np.int64)
    limit = np.int64(4**bits)
    for _ in range(64):
        bad = np.einsum("ij,ij->i", Q, Q) > limit  # int64: ≤ D·4^bits < 2^63
        if not np.any(bad):
            return Q
        Q[bad] = Q[bad] // 2 + (Q[bad] < 0) * (Q[bad] % 2)  # halve toward zero, exactly
    raise AssertionError("unreachable: halving 64 times reaches 0")  # pragma: no cover


def rff_cell_sums(
    Q: NDArray[np.int64], A: NDArray[np.int8], y: NDArray[np.int8]
) -> NDArray[np.int64]:
    """Exact int64 sums S_{a,y} = Σ Q(u_i) over each cell; shape (D, 2, 2)."""
    out = np.zeros((Q.shape[1], 2, 2), dtype=np.int64)
    for a in (0, 1):
        for yy in (0, 1):
            out[:, a, yy] = Q[(A == a) & (y == yy)].sum(axis=0, dtype=np.int64)
    return out


def release_rff_sums(
    sums: NDArray[np.int64],
    n_rows: int,
    sigma: float,
    rng: np.random.Generator,
    bits: int = RFF_LATTICE_BITS,
) -> NDArray[np.float64]:
    """(S + rint(σ·2^q·Z))·2^{-q}: the Gaussian mechanism on the integer sums (docstring).

    μ-GDP with μ = :data:`RFF_SENSITIVITY`/σ for sums from :func:`rff_lattice` rows.
    """
    scale = 2**bits
    if (n_rows + 64.0 * sigma) * scale >= _INT_LIMIT:
        raise InvalidParameterError(
            f"release_rff_sums: N = {n_rows} rows with noise sd {sigma:g} exceed the exact "
            "int64 range of the lattice; use fewer rows per site or a larger budget."
        )
    # Exact discrete Gaussian N_Z(0, S) in lattice units, S = ⌈σ²4^q⌉ + 64 rounded up to the
    # sampler's scale (LatticeNoise), added to the exact integer sums: an integer mechanism
    # with L2 sensitivity 2·2^q, hence μ-GDP for μ = 2/σ up to the lattice slack of
    # mechanisms.discrete_gaussian (the GDP plan is calibrated at δ(1 − 2^-40) for it).
    # The check above leaves room for |Z| ≤ 64σ·2^q (probability of more < e^-2000; the
    # noise is not clipped, int64 overflow would need |Z| ≥ 2^62 and raises).
    lat = LatticeNoise(float(sigma), int(bits), _round_to_scale(
        lattice_variance(sigma, bits, SMOOTHING_VARIANCE)))
    noise = sample_discrete_gaussian(lat.variance, sums.shape, rng)
    return (sums + noise).astype(np.float64) / float(scale)


@dataclass(frozen=True)
class ReleasedRFFFold(PlugInRule):
    """A released RFF group score: public numbers only (drop-in for ``ReleasedFold``).

    Attributes
    ----------
    coef : ndarray of shape (D, 2, 2)
        The aggregated noisy sums Σ_s ν_s S̃^s_{a,y}/ñ^s_a.
    ridge : ndarray of shape (2,)
        λ_a of the ratio.
    pi : ndarray of shape (2,)
    tau : float
    freqs : ndarray of shape (p, D/2)
        The public frequencies.
    """

    coef: NDArray[np.float64]
    ridge: NDArray[np.float64]
    pi: NDArray[np.float64]
    tau: float
    freqs: NDArray[np.float64]

    def eta_at(
        self, grid: object, U: NDArray[np.float64], A: NDArray[np.int8]
    ) -> NDArray[np.float64]:
        """η̃_{A_i}(u_i) (``grid`` is unused; kept for the ``ReleasedFold`` interface)."""
        from dpfair.fairclass._model import eta_from_sums

        phi = rff_features(U, self.freqs)
        a = A.astype(np.intp)
        out = np.empty(U.shape[0])
        for g in (0, 1):
            rows = a == g
            if np.any(rows):
                sums = phi[rows] @ self.coef[:, g, :]  # (n_g, 2): H, G
                out[rows] = eta_from_sums(sums, float(self.ridge[g]))
        return out
