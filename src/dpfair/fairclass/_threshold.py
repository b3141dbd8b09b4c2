"""Step S2: the fairness threshold τ from calibration scores Z (exact, no grid).

For a plug-in model (η̃_a, π̃_a) the score of a record is Z = 2(2a − 1)·π̃_a·(η̃_a(x) − 1/2);
the classifier predicts 1 for group 1 iff Z ≥ τ and for group 0 iff Z ≤ τ. On a
calibration sample the empirical disparity

    DD̂(τ) = #{i ∈ group 1: Z_i ≥ τ} / m_1 − #{i ∈ group 0: Z_i ≤ τ} / m_0

is a non-increasing step function whose only breakpoints are the calibration Z values.
Split the real line at the sorted distinct values b_1 < … < b_K into the cells
(−∞, b_1), {b_1}, (b_1, b_2), …, {b_K}, (b_K, ∞): DD̂ is constant on each cell, so every
question about DD̂ is answered exactly on these 2K + 1 cells in O(n log n).

* :func:`exact_fair_threshold` — τ̂ = argmin{|τ| : |DD̂(τ) + shift| ≤ α}, exactly (the
  non-private fair plug-in of Zeng et al. 2024 uses shift = 0).
* :func:`private_fair_threshold` — the differentially private version used by
  CDP-Fair (see its Notes for why the paper's own vertical shift is not DP as stated).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

from dpfair._errors import InvalidParameterError
from dpfair._rng import RandomLike, as_generator
from dpfair.mechanisms import PieceMasses, PiecewiseConstantLaw, choose_piece, exact_rate

__all__ = [
    "AIM_WINDOW",
    "SCORE_LATTICE_BINS",
    "DDSteps",
    "ScoreHistogram",
    "ThresholdLaw",
    "ThresholdResult",
    "dd_steps",
    "dd_steps_from_counts",
    "exact_fair_threshold",
    "loss_lattice",
    "private_fair_threshold",
    "snap_scores",
    "threshold_law",
    "threshold_law_from_steps",
]


#: B of the public score lattice (2/B)·ℤ ∩ [−1, 1] on which the private threshold's inputs
#: lie (the out-of-core path's default ``score_bins``).
SCORE_LATTICE_BINS = 2**16


def snap_scores(z: NDArray[np.float64], bins: int = SCORE_LATTICE_BINS) -> NDArray[np.float64]:
    """Scores rounded to the public lattice −1 + 2k/B (|z| ≤ 1), per record.

    Floating-point model (``docs/floating_point.md``): a per-record deterministic rounding,
    so neighbours stay neighbours and the privacy proof of :func:`private_fair_threshold`
    applies to the rounded scores unchanged. Afterwards every edge of the threshold law is
    a public number (a lattice point, ±r or 0), the law depends on the data only through
    integer counts per lattice point divided by the public m_a, and the released τ̂ =
    lo + u·(hi − lo) is computed from the public edges of the chosen piece: no low-order
    bit of a score reaches τ̂. The in-memory fit and the out-of-core fit (which rounds to
    the same lattice) then run the same mechanism on the same numbers.
    """
    half = int(bins) // 2
    k = np.clip(np.rint(np.asarray(z, dtype=np.float64) * half), -half, half)
    return np.asarray(k * (2.0 / int(bins)))


@dataclass(frozen=True)
class ScoreHistogram:
    """Calibration scores rounded to the lattice (2/B)·ℤ ∩ [−1, 1], counted per group.

    What S2 reads of a calibration half held out of core; its step function equals
    :func:`dd_steps` of the lattice-rounded scores (:func:`snap_scores`, same B).

    Attributes
    ----------
    bins : int
        B (a power of two ≥ 2); the lattice has B + 1 points, spacing 2/B.
    counts : ndarray of shape (2, B + 1), int64
        counts[a, k]: rows of group a whose rounded score is −1 + 2k/B.
    """

    bins: int
    counts: NDArray[np.int64]

    @property
    def values(self) -> NDArray[np.float64]:
        """The lattice points −1 + 2k/B, k = 0..B (exact in floating point)."""
        half = self.bins // 2
        return (np.arange(self.bins + 1, dtype=np.float64) - half) * (2.0 / self.bins)

    @staticmethod
    def round_scores(z: NDArray[np.float64], bins: int) -> NDArray[np.int64]:
        """Lattice index of each score: rint(z·B/2) + B/2, clipped to [0, B] (|z| ≤ 1)."""
        half = bins // 2
        k = np.rint(np.asarray(z, dtype=np.float64) * half).astype(np.int64) + half
        return np.clip(k, 0, bins)

    def group_counts(self) -> tuple[int, int]:
        """(rows of group 1, all rows)."""
        return int(self.counts[1].sum()), int(self.counts.sum())

    def steps(self, m1: float, m0: float) -> DDSteps:
        """DD̂ with the public denominators (:func:`dd_steps_from_counts`)."""
        return dd_steps_from_counts(self.values, self.counts[1], self.counts[0], m1, m0)

    def exact_steps(self) -> DDSteps:
        """DD̂ with the true group sizes (the rounded scores are all there is)."""
        return dd_steps_from_counts(self.values, self.counts[1], self.counts[0])


@dataclass(frozen=True)
class DDSteps:
    """DD̂ on the cells cut by the sorted distinct calibration scores.

    Attributes
    ----------
    breaks : ndarray of shape (K,)
        Sorted distinct Z values b_1 < … < b_K.
    gap : ndarray of shape (K + 1,)
        DD̂ on the open gaps (b_k, b_{k+1}), k = 0..K, with b_0 = −∞, b_{K+1} = +∞.
    atom : ndarray of shape (K,)
        DD̂ at τ = b_k.
    """

    breaks: NDArray[np.float64]
    gap: NDArray[np.float64]
    atom: NDArray[np.float64]

    def at(self, tau: float) -> float:
        """DD̂(τ) for one τ."""
        k = int(np.searchsorted(self.breaks, tau, side="left"))
        if k < self.breaks.size and self.breaks[k] == tau:
            return float(self.atom[k])
        return float(self.gap[k])


def dd_steps_from_counts(
    values: NDArray[np.float64],
    c1: NDArray[np.int64],
    c0: NDArray[np.int64],
    m1: float | None = None,
    m0: float | None = None,
) -> DDSteps:
    """:class:`DDSteps` of scores given as a histogram: value ``values[k]`` occurs ``c1[k]``
    times in group 1 and ``c0[k]`` times in group 0 (``values`` strictly increasing).

    Equal to ``dd_steps(np.repeat(values, c1), np.repeat(values, c0), m1, m0)`` — the same
    integer counts enter the same divisions — in O(len(values)) memory, whatever the
    number of records.
    """
    v = np.asarray(values, dtype=np.float64)
    k1 = np.asarray(c1, dtype=np.int64)
    k0 = np.asarray(c0, dtype=np.int64)
    if v.ndim != 1 or k1.shape != v.shape or k0.shape != v.shape or np.any(np.diff(v) <= 0):
        raise InvalidParameterError(
            "dd_steps_from_counts: expected increasing values and two count arrays of its shape."
        )
    if np.any(k1 < 0) or np.any(k0 < 0):
        raise InvalidParameterError("dd_steps_from_counts: counts must be >= 0.")
    n1 = int(k1.sum())
    d1 = float(n1 if m1 is None else m1)
    d0 = float(int(k0.sum()) if m0 is None else m0)
    if d1 <= 0 or d0 <= 0:
        raise InvalidParameterError("dd_steps: both group denominators must be > 0.")
    occ = (k1 + k0) > 0
    breaks = v[occ]
    k1, k0 = k1[occ], k0[occ]
    le1 = np.cumsum(k1)  # #{z1 <= b}
    lt1 = le1 - k1  # #{z1 < b}
    le0 = np.cumsum(k0)  # #{z0 <= b}
    gap_c1 = np.concatenate(([n1], n1 - le1))
    gap_c0 = np.concatenate(([0], le0))
    gap = gap_c1 / d1 - gap_c0 / d0
    atom = (n1 - lt1) / d1 - le0 / d0
    return DDSteps(breaks=breaks, gap=gap, atom=atom)


def dd_steps(
    z1: NDArray[np.float64],
    z0: NDArray[np.float64],
    m1: float | None = None,
    m0: float | None = None,
) -> DDSteps:
    """Build :class:`DDSteps` from the group-1 and group-0 calibration scores.

    ``m1``, ``m0`` are the denominators (default: the group sizes).
    """
    s1 = np.sort(np.asarray(z1, dtype=np.float64))
    s0 = np.sort(np.asarray(z0, dtype=np.float64))
    d1 = float(s1.size if m1 is None else m1)
    d0 = float(s0.size if m0 is None else m0)
    if d1 <= 0 or d0 <= 0:
        raise InvalidParameterError("dd_steps: both group denominators must be > 0.")
    breaks = np.unique(np.concatenate((s1, s0)))
    le1 = np.searchsorted(s1, breaks, side="right")  # #{z1 <= b}
    lt1 = np.searchsorted(s1, breaks, side="left")  # #{z1 < b}
    le0 = np.searchsorted(s0, breaks, side="right")  # #{z0 <= b}
    n1 = s1.size
    gap_c1 = np.concatenate(([n1], n1 - le1))  # #{z1 > b_k} on (b_k, b_{k+1})
    gap_c0 = np.concatenate(([0], le0))  # #{z0 <= b_k} on (b_k, b_{k+1})
    gap = gap_c1 / d1 - gap_c0 / d0
    atom = (n1 - lt1) / d1 - le0 / d0
    return DDSteps(breaks=breaks, gap=gap, atom=atom)


@dataclass(frozen=True, slots=True)
class ThresholdResult:
    """Outcome of a threshold search.

    Attributes
    ----------
    tau : float
        The threshold.
    feasible : bool
        Whether the constraint holds at ``tau`` on the (shifted) calibration curve.
    dd : float
        DD̂(τ) on the calibration sample (without any shift; private results keep it
        internal, it is *not* part of the release).
    """

    tau: float
    feasible: bool
    dd: float


def exact_fair_threshold(steps: DDSteps, alpha: float, *, shift: float = 0.0) -> ThresholdResult:
    """τ̂ = argmin{|τ| : |DD̂(τ) + shift| ≤ α}, exactly, over all real τ.

    DD̂ is constant on each cell, so it suffices to take, in every feasible cell, the point
    of smallest |τ| and then the best cell. An open gap (b_k, b_{k+1}) on the positive side
    has infimum b_k, not attained: there the floating-point argmin ``nextafter(b_k, +∞)`` is
    returned (mirror image on the negative side). If no cell is feasible — possible only
    when one step of DD̂ jumps across the whole band, e.g. through tied scores — the cell
    closest to the band is returned (smallest |τ| among ties) with ``feasible=False``.

    Parameters
    ----------
    steps : DDSteps
    alpha : float
        Tolerance α > 0.
    shift : float, default=0
        A vertical shift w of the whole curve.
    """
    b = steps.breaks
    k_all = b.size
    # Candidate τ (smallest |τ|) per gap k = 0..K: gap (b_k, b_{k+1}).
    left = np.concatenate(([-np.inf], b))
    right = np.concatenate((b, [np.inf]))
    gap_tau = np.where(
        (left < 0) & (right > 0),
        0.0,
        np.where(left >= 0, np.nextafter(left, np.inf), np.nextafter(right, -np.inf)),
    )
    taus = np.concatenate((gap_tau, b))
    values = np.concatenate((steps.gap, steps.atom)) + shift
    violation = np.maximum(np.abs(values) - alpha, 0.0)
    feasible = violation <= 0.0
    if k_all == 0:
        return ThresholdResult(0.0, bool(feasible[0]), float(steps.gap[0]))
    if feasible.any():
        cand = np.flatnonzero(feasible)
        best = cand[np.argmin(np.abs(taus[cand]))]
    else:
        order = np.lexsort((np.abs(taus), violation))
        best = order[0]
    tau = float(taus[best])
    return ThresholdResult(tau, bool(feasible[best]), steps.at(tau))


def private_fair_threshold(
    z1: NDArray[np.float64],
    z0: NDArray[np.float64],
    m1: float,
    m0: float,
    alpha: float,
    epsilon: float,
    radius: float,
    rng: RandomLike = None,
    *,
    atom_mass: float | None = None,
    base: tuple[NDArray[np.float64], NDArray[np.float64]] | None = None,
) -> ThresholdResult:
    """Differentially private τ̂: the exponential mechanism on the exact DD̂ step function.

    Parameters
    ----------
    z1, z0 : arrays
        Calibration scores of groups 1 and 0 in [−1, 1]; each is rounded to the public
        lattice (2/B)ℤ ∩ [−1, 1] (:func:`snap_scores`, B = 2^16) before use, a per-record
        map, so the guarantee holds for raw scores too.
    m1, m0 : float
        *Public* (privately released) group sizes used as denominators, > 0.
    alpha : float
        Targeted tolerance (α minus any margin).
    epsilon : float
        Privacy parameter of this step (pure ε-DP).
    radius : float
        Public r > 0: τ̂ is drawn from [−r, r]. CDP-Fair uses r = min(π̃_0, π̃_1), which
        contains the plug-in model's target because |τ*| ≤ min_a π_a (paper, Lemma 11).
    rng : seed or Generator
    atom_mass : float, optional
        Base-measure mass b₀ of the point τ = 0 (default: the continuous base mass divided
        by n̆, i.e. 2r/n̆ — one average spacing of the n̆ calibration scores).
    base : (edges, density), optional
        A *public* piecewise-constant base density on [−r, r] replacing Lebesgue measure
        (e.g. built from released quantities only); the guarantee is unchanged.

    Returns
    -------
    ThresholdResult
        ``feasible`` reports |DD̂(τ̂)| ≤ α on the calibration curve with the public
        denominators (internal diagnostics: not released).

    Notes
    -----
    **Loss.** The smallest vertical shift w for which the paper's rule argmin{|τ| :
    |DD̂(τ) + w| ≤ α} returns τ is L(τ) = |DD̂(τ) − α| for τ > 0, |DD̂(τ) + α| for τ < 0 and
    max(|DD̂(0)| − α, 0) at τ = 0.

    **Mechanism.** Draw τ̂ with density ∝ exp(−ε·L(τ)/(2Δ)) with respect to the *public*
    base measure "Lebesgue on [−r, r] plus mass b₀ at 0" (the point mass lets the
    automatically fair regime, |DD̂(0)| ≤ α, return exactly τ̂ = 0). L is constant between
    consecutive calibration scores, so the law is piecewise constant plus one atom and is
    sampled exactly (pick a piece by its mass, then a uniform point inside).

    **Privacy.** With m_1, m_0 fixed (public), replacing one calibration record moves at most
    one group-1 count and one group-0 count by 1 at every τ, so |ΔDD̂(τ)| ≤ Δ = 1/m_1 + 1/m_0
    for all τ, and L (1-Lipschitz in DD̂) has sensitivity Δ. The exponential mechanism with
    any public base measure is then ε-DP (McSherry & Talwar 2007).

    **As executed** (``docs/floating_point.md``). The loss is quantised to integers
    ⌈L̂/g⌉ on a public unit g ≈ 2^-20·Δ whose sensitivity S (≈ 2^20 + 1 units) is proven
    for the binary64 computation (:func:`loss_lattice`); the rate is ε/(2S) per unit, an
    exact rational, and the piece (or the atom) is chosen by the exact sampler
    :func:`~dpfair.mechanisms.exact_choice.choose_piece` with the exact base-measure
    masses. So the executed law is exactly an ε-DP exponential mechanism — no
    floating-point slack — and differs from the real-arithmetic one by a relative ≈ 2^-20
    in ε and < g in the loss.

    **Why not the paper's vertical shift.** Algorithm 5 returns argmin{|τ| : |DD̂(τ) + w| ≤ α}
    for Gaussian w. That output is always one of the calibration scores (or 0): with
    positive probability it equals the score of one particular record, an event of
    probability 0 once that record is replaced. So it is not (ε, δ)-DP for any useful δ
    (the paper's proof bounds P(τ̂ ≤ t) only, which does not control all events). The
    exponential mechanism keeps the paper's idea — the likelihood of a vertical shift — but
    integrates it against a data-independent measure on τ.
    """
    gen = as_generator(rng)
    law = threshold_law(z1, z0, m1, m0, alpha, epsilon, radius, atom_mass=atom_mass, base=base)
    tau = law.sample(gen)
    dd_tau = law.steps.at(tau)
    return ThresholdResult(tau, abs(dd_tau) <= alpha, dd_tau)



def _public_cell(
    lo: float, hi: float, rate: Fraction, gen: np.random.Generator,
    bins: int = SCORE_LATTICE_BINS,
) -> tuple[float, float]:
    """A cell of the finest *public* partition inside the piece [lo, hi], ∝ its length.

    A piece's edges are public points (score-lattice points −1 + 2k/B, ±r, 0, base edges),
    but *which* lattice points are edges depends on the data. A uniform point computed as
    lo + u·(hi − lo) would then round on a data-dependent grid (a piece [0, 1] yields
    multiples of 2^-53 where its halves [0, ½], [½, 1] yield odd multiples of 2^-54 in
    [¼, ½)): Mironov's leak in miniature. So the point is drawn in two exact steps: a public
    cell — the first partial cell [lo, p], one of the m full lattice cells (an exact uniform
    integer), or the last [q, hi], chosen with probabilities ∝ their exact lengths by
    :func:`~dpfair.mechanisms.exact_choice.choose_piece` — and then the uniform point of that
    cell, computed from the cell's own (public) edges. Given the piece, the cell law is
    exactly length-proportional, so the released law is unchanged.
    """
    h = Fraction(2, int(bins))
    first = math.floor((Fraction(lo) + 1) / h) + 1  # first lattice index strictly above lo
    last = math.ceil((Fraction(hi) + 1) / h) - 1  # last lattice index strictly below hi
    if first > last:
        return lo, hi
    p = float(-1 + first * h)  # exact: k·2^-15 with |k| ≤ 2^16
    q = float(-1 + last * h)
    part = choose_piece(PieceMasses.lengths(np.array([lo, p, q, hi])),
                        np.zeros(3, dtype=np.int64), rate, gen)
    if part == 0:
        return lo, p
    if part == 2:
        return q, hi
    k = first + int(gen.integers(0, last - first))
    return float(-1 + k * h), float(-1 + (k + 1) * h)


@dataclass(frozen=True, eq=False)
class ThresholdLaw:
    """Exact output law of :func:`private_fair_threshold`: an atom at 0 plus pieces.

    Attributes
    ----------
    continuous : PiecewiseConstantLaw
        The law of τ̂ given τ̂ ≠ 0 (piecewise constant on [−r, r]).
    p_atom : float
        P(τ̂ = 0).
    steps : DDSteps
        The calibration curve with the public denominators.
    sensitivity : float
        Δ = 1/m_1 + 1/m_0.
    masses : PieceMasses
        Exact base-measure masses of the pieces of ``continuous``, then the atom's b₀.
    units : ndarray of int64
        The quantised loss ⌈L̂/g⌉ of each piece, then of the atom (:func:`loss_lattice`).
    rate : Fraction
        The exact rate c per unit: P(piece j) ∝ masses_j·exp(−c·units_j).
    """

    continuous: PiecewiseConstantLaw
    p_atom: float
    steps: DDSteps
    sensitivity: float
    masses: PieceMasses
    units: NDArray[np.int64]
    rate: Fraction

    def density(self, tau: NDArray[np.float64]) -> NDArray[np.float64]:
        """Density of the continuous part, (1 − p_atom)·pdf(τ)."""
        return (1.0 - self.p_atom) * self.continuous.pdf(tau)

    def sample(self, rng: RandomLike = None) -> float:
        """One exact draw: the atom or a piece, chosen by the exact sampler
        (:func:`~dpfair.mechanisms.exact_choice.choose_piece`: exact law, no floating-point
        slack), then a uniform point of the piece computed from its public edges."""
        gen = as_generator(rng)
        j = choose_piece(self.masses, self.units, self.rate, gen)
        edges = self.continuous.edges
        if j == edges.size - 1:
            return 0.0
        lo, hi = _public_cell(float(edges[j]), float(edges[j + 1]), self.rate, gen)
        return float(min(lo + gen.random() * (hi - lo), hi))


def _check_law(epsilon: float, radius: float, m1: float, m0: float) -> tuple[float, float]:
    """(ε, r) of a threshold law, validated with the public denominators."""
    eps = float(epsilon)
    r = float(radius)
    if not (eps > 0 and math.isfinite(eps)):
        raise InvalidParameterError(f"epsilon={epsilon!r}: must be > 0 and finite.")
    if not (r > 0 and math.isfinite(r)):
        raise InvalidParameterError(f"radius={radius!r}: must be > 0 and finite.")
    if not (m1 > 0 and m0 > 0):
        raise InvalidParameterError("m1 and m0 must be > 0.")
    return eps, r


def threshold_law(
    z1: NDArray[np.float64],
    z0: NDArray[np.float64],
    m1: float,
    m0: float,
    alpha: float,
    epsilon: float,
    radius: float,
    *,
    atom_mass: float | None = None,
    base: tuple[NDArray[np.float64], NDArray[np.float64]] | None = None,
    window: float = 0.0,
) -> ThresholdLaw:
    """The exact law sampled by :func:`private_fair_threshold` (same parameters).

    ``base = (edges, density)``: an optional *public* piecewise-constant base density on
    [−r, r] (edges from −r to r); default the constant 1 (Lebesgue measure). ``window``:
    the windowed loss of the certified rule (:func:`threshold_law_from_steps`).
    """
    eps, r = _check_law(epsilon, radius, m1, m0)
    # Scores are rounded per record to the public lattice (2/B)ℤ ∩ [−1, 1] here, whoever
    # calls (idempotent on scores the estimators already snapped): with raw scores as
    # piece edges, the point drawn inside a piece would round on a grid set by a record's
    # low-order bits (docs/floating_point.md, threshold).
    steps = dd_steps(snap_scores(np.asarray(z1, dtype=np.float64)),
                     snap_scores(np.asarray(z0, dtype=np.float64)), m1, m0)
    n_cal = max(int(np.size(z1) + np.size(z0)), 1)
    return threshold_law_from_steps(
        steps, m1, m0, alpha, eps, r, n_cal=n_cal, atom_mass=atom_mass, base=base,
        window=window,
    )


def threshold_law_from_steps(
    steps: DDSteps,
    m1: float,
    m0: float,
    alpha: float,
    epsilon: float,
    radius: float,
    *,
    n_cal: int,
    atom_mass: float | None = None,
    base: tuple[NDArray[np.float64], NDArray[np.float64]] | None = None,
    window: float = 0.0,
) -> ThresholdLaw:
    """:func:`threshold_law` from an already built step function (denominators m1, m0).

    ``n_cal`` is the number of calibration records (it sets the default atom mass 2r/n_cal).
    The out-of-core fit builds ``steps`` from score histograms
    (:func:`dd_steps_from_counts`); the law is then the same function of the curve.

    ``window`` = h ≥ 0 (public; a multiple of the score lattice's spacing 2/B, e.g.
    :data:`AIM_WINDOW`): the *windowed* loss of the certified rule,

        L_h(τ) = max(DD̂(τ) − α, α − DD̂(τ − h), 0)   (τ > 0),
        L_h(τ) = max(−α − DD̂(τ), DD̂(τ + h) + α, 0)   (τ < 0),

    which is 0 exactly on the τ-window of width h on the *feasible* side of the crossing
    of ±α (DD̂ non-increasing), whatever the curve: a jump of DD̂ across the target (tied
    scores) leaves a zero-loss window right after the jump, so the mechanism prefers the
    feasible side of the jump more and more as ε grows. h = 0 is the symmetric loss
    |DD̂(τ) ∓ α|. Privacy is unchanged: L_h is a maximum of 0 and two functions of DD̂ each
    moving by at most Δ between neighbours, so L_h has sensitivity Δ; its pieces are cut at
    the public points b_k ± h (lattice points), and each computed term has the rounding
    bound of :func:`loss_lattice` (the maximum is exact).
    """
    eps, r = _check_law(epsilon, radius, m1, m0)
    h = float(window)
    if not (h >= 0 and math.isfinite(h)):
        raise InvalidParameterError(f"window={window!r}: must be finite and >= 0.")
    sens = 1.0 / m1 + 1.0 / m0
    b = steps.breaks
    inner = b[(b > -r) & (b < r)]
    cuts = [inner, np.array([-r, 0.0, r])]
    if h > 0:
        shifted = np.concatenate((b + h, b - h))
        cuts.append(shifted[(shifted > -r) & (shifted < r)])
    if base is not None:
        base_edges = np.asarray(base[0], dtype=np.float64)
        base_dens = np.asarray(base[1], dtype=np.float64)
        if (
            base_edges.ndim != 1
            or base_dens.shape != (base_edges.size - 1,)
            or np.any(np.diff(base_edges) <= 0)
            or np.any(base_dens <= 0)
            or not np.all(np.isfinite(base_dens))
            or base_edges[0] > -r
            or base_edges[-1] < r
        ):
            raise InvalidParameterError(
                "base: expected (edges, density) with increasing edges covering [-r, r] and a "
                "positive finite density per piece."
            )
        cuts.append(base_edges[(base_edges > -r) & (base_edges < r)])
    edges = np.unique(np.concatenate(cuts))
    mids = 0.5 * (edges[:-1] + edges[1:])
    gap_idx = np.searchsorted(b, mids, side="left")
    dd = steps.gap[gap_idx]
    if h > 0:
        # No break lies strictly inside a piece shifted by ±h (the cuts b ± h), so the
        # shifted curve is one gap value per piece too.
        dd_left = steps.gap[np.searchsorted(b, mids - h, side="left")]
        dd_right = steps.gap[np.searchsorted(b, mids + h, side="left")]
        loss = np.where(
            mids > 0,
            np.maximum(np.maximum(dd - alpha, alpha - dd_left), 0.0),
            np.maximum(np.maximum(-alpha - dd, dd_right + alpha), 0.0),
        )
    else:
        loss = np.where(mids > 0, np.abs(dd - alpha), np.abs(dd + alpha))
    if base is None:
        dens = np.ones(mids.size)
        base_total = 2.0 * r
    else:
        j = np.clip(np.searchsorted(base_edges, mids, side="right") - 1, 0, base_dens.size - 1)
        dens = base_dens[j]
        # From the public base alone (never from the data-refined pieces).
        base_total = float(np.sum(np.diff(np.clip(base_edges, -r, r)) * base_dens))
    loss0 = max(abs(steps.at(0.0)) - alpha, 0.0)
    b0 = base_total / max(int(n_cal), 1) if atom_mass is None else float(atom_mass)
    if not (b0 >= 0 and math.isfinite(b0)):
        raise InvalidParameterError(f"atom_mass={atom_mass!r}: must be finite and >= 0.")
    unit, per_sensitivity = loss_lattice(m1, m0, alpha, n_cal)
    units = np.ceil(np.append(loss, loss0) / unit).astype(np.int64)
    rate = exact_rate(eps, per_sensitivity)
    masses = PieceMasses.lengths(edges, dens).append(Fraction(b0))
    # The law as executed (rate c per unit), for analysis and the tests.
    c_float = float(rate)
    law = PiecewiseConstantLaw(edges, np.log(dens) - c_float * units[:-1])
    log_atom = (math.log(b0) if b0 > 0 else -math.inf) - c_float * float(units[-1])
    # P(atom) = e^{log_atom} / (e^{log_atom} + e^{log_norm}), in log-space.
    p_atom = 1.0 / (1.0 + math.exp(min(law.log_norm - log_atom, 700.0)))
    return ThresholdLaw(law, p_atom, steps, sens, masses, units, rate)


#: h of the certified rule's windowed loss (:func:`threshold_law_from_steps`): 2^-13, a
#: multiple of the score lattice's spacing 2^-15 (so b ± h are lattice points).
AIM_WINDOW = 2.0**-13


#: The loss lattice unit is g = 2^(⌊log2 Δ⌋ − LOSS_LATTICE_BITS): about 2^-20 Δ.
LOSS_LATTICE_BITS = 20


def loss_lattice(m1: float, m0: float, alpha: float, n_cal: int) -> tuple[float, int]:
    """The public loss unit g and the sensitivity S of the quantised loss ⌈L̂/g⌉ in units.

    Floating-point model (``docs/floating_point.md``). The executed loss L̂ of a piece is
    fl(|fl(fl(c₁/m₁) − fl(c₀/m₀)) ∓ α|) (fl(|DD̂(0)| − α) ∨ 0 for the atom) with integer
    counts c_a ≤ n_cal; each of its ≤ 3 roundings is a relative error ≤ u = 2^-53 of a
    number ≤ n_cal/m₁ + n_cal/m₀ + |α|, so |L̂ − L| ≤ e_L = 3.1u(n_cal·Δ + |α|) with
    Δ = 1/m₁ + 1/m₀ (all public). For neighbours (same public m₁, m₀, α, n_cal),
    |L(D) − L(D′)| ≤ Δ at every τ, so |L̂(D) − L̂(D′)| ≤ Δ + 2e_L and the integers
    ⌈L̂/g⌉ (g a power of two, so L̂/g is exact) differ by at most S = ⌊(Δ + 2e_L)/g⌋ + 1.
    The mechanism runs at rate ε/(2S) per unit
    (:func:`~dpfair.mechanisms.exact_choice.exact_rate`): pure ε-DP as executed. Against
    the real-arithmetic loss at rate ε/(2Δ), the effective ε is lower by a relative
    ≈ 2^-20 and the loss is rounded up by less than g ≈ 2^-20·Δ.
    """
    fm1, fm0 = Fraction(float(m1)), Fraction(float(m0))
    delta = 1 / fm1 + 1 / fm0
    e_loss = Fraction(31, 10) * Fraction(1, 2**53) * (int(n_cal) * delta + abs(Fraction(alpha)))
    exponent = math.floor(math.log2(float(delta))) - LOSS_LATTICE_BITS
    unit = Fraction(2) ** exponent
    per_sensitivity = math.floor((delta + 2 * e_loss) / unit) + 1
    return float(unit), int(per_sensitivity)


def paper_vertical_shift_threshold(
    z1: NDArray[np.float64],
    z0: NDArray[np.float64],
    alpha: float,
    sigma: float,
    rng: RandomLike = None,
) -> ThresholdResult:
    """The paper's S2 rule (Algorithm 5) with Gaussian shift w ~ N(0, σ²) — NOT private.

    Kept only to document, in tests and in the study, that its output is a calibration
    score (see :func:`private_fair_threshold`, Notes). Never used by the estimators.
    """
    gen = as_generator(rng)
    w = float(gen.normal(0.0, sigma))
    return exact_fair_threshold(dd_steps(z1, z0), alpha, shift=w)
