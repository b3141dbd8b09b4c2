r"""Bounds of paper 000: Table 1's rates and the explicit constants the proofs give.

The theorem and bound functions of the facility package, grouped here so that
:mod:`dpfair.facility` keeps the mechanism, the metrics and the data families:
``from dpfair.facility import bounds; bounds.table1(...)``.

Table 1 states rates (O/Ω) without constants; :func:`table1` evaluates each entry with
constant 1 so that measured quantiles can be set beside their *shape*. Where the proofs
give explicit expressions, they are implemented exactly:

* Thm 7.9 (CTM): P(p_α(D, L) > k) ≤ G·e^{−ε(k+1)/2} / (α(K − k)) with
  G = (1 − e^{−εK/2})/(1 − e^{−ε/2}) and K = ⌊n/2⌋ (odd n; K = min(k_med − 1, n − k_med)
  in general) — :func:`ctm_tail_bound`; the sharper sum form (5) with ``form="sum"``;
  k* = ⌈−1 + (2/ε) ln(2G/(αβK))⌉ — :func:`ctm_kstar`; and the smallest k whose bound is
  ≤ β, :func:`ctm_min_k`, which is valid without the theorem's "nε large enough" premise.
* Inequality (7) with Lemma 7.11: on CTM, FAIR(D, ℓ) ≤ p_α(D, ℓ)·m/K + αm —
  :func:`ctm_fair_bound` evaluates it at a high-probability bound on p_α.
* SWDIFF. The paper's (11), SWDIFF ≤ (2p_α − 1)·FAIR, is false with widening: agents
  within αm of ℓ on the crossed side are counted in SWDIFF but not in p_α. On the data set
  with every agent at one point (which is in CTM), DPExpMed_{α*} puts L uniformly on
  [T − αm, T + αm] and E[SWDIFF] = n·αm/2 = m/(2ε), independent of n, while Thm 7.13
  claims O(m/(nε²)·ln²(1/β)). The always-valid replacement, derived in
  ``docs/proofs/facility_dpexpmed.md``, is

  .. math:: \mathrm{SWDIFF}(D, ℓ) ≤ (w + 2(p - 1)^+)\,\mathrm{FAIR}(D, ℓ)
            + 2\,(N - (p - 1)^+)\,αm,

  with p = p_α(D, ℓ), w the side's SWDIFF weight (1 for odd n) and N the number of agents
  on ℓ's side of the median (k − 1 left, n − k right) — :func:`swdiff_loss_bound`.
  :func:`ctm_swdiff_bound` returns both the paper's and the corrected high-probability
  bound.
  The corrected CTM rate for α* is O(m ln²(1/β)/(nε²) + m/ε), and the point mass attains
  the m/ε term.
* SPM_λ (Thm 7.15 and the proof of Thm 7.18): :func:`spm_tail_bound`, :func:`spm_kstar`
  and :func:`spm_fair_bound`. The latter re-derives the FAIR conversion with Lemma 7.17's
  factor 2 (the paper's chain drops it): FAIR ≤ 2m(p + 1)/n + 4mλ + αm.
* Thm 7.19 (SPM SWDIFF) reuses (11) and fails the same way: n i.i.d. draws from
  N(0.1, (1e-4/n)²) lie in SPM_λ with λ their KS distance to that single-peaked law, yet
  the 0.95-quantile of SWDIFF stays at 0.95·m/ε for every n while the theorem's rate
  falls. :func:`spm_swdiff_bound` is the corrected explicit bound (the corrected
  inequality at p ≤ :func:`spm_kstar` and FAIR ≤ :func:`spm_fair_bound`); the rate is
  O(m ln²(nλ/β)/(nε²) + mλ ln(nλ/β)/ε + m/ε).
* Lower bounds: Thm 5.1's 1/(1 + e^ε) and Thm 7.20's 1/(1 + e^{dε}).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special

from dpfair._errors import InvalidParameterError
from dpfair._validation import check_in_open_interval, check_positive
from dpfair.facility._metrics import MedianChoice, check_median, median_index

__all__ = [
    "CTMBounds",
    "Table1",
    "ctm_bounds",
    "ctm_fair_bound",
    "ctm_kstar",
    "ctm_min_k",
    "ctm_swdiff_bound",
    "ctm_tail_bound",
    "direct_lower_bound",
    "impossibility_bound",
    "spm_fair_bound",
    "spm_kstar",
    "spm_swdiff_bound",
    "spm_tail_bound",
    "swdiff_loss_bound",
    "table1",
]


def _n(n: Any) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 3:
        raise InvalidParameterError(f"n={n!r}: expected an integer >= 3.")
    return int(n)


def half_count(n: int, median: MedianChoice = "lower") -> int:
    """K = min(k − 1, n − k): agents on the median's smaller side (⌊n/2⌋ for odd n)."""
    k = median_index(n, check_median(median))
    return min(k - 1, n - k)


def _alpha(alpha: float | None, n: int, epsilon: float) -> float:
    if alpha is None:
        return 1.0 / (n * epsilon)
    return check_positive("widening", alpha)


def _geom(epsilon: float, count: int) -> float:
    """(1 − e^{−ε·count/2}) / (1 − e^{−ε/2}), computed without cancellation."""
    return float(np.expm1(-0.5 * epsilon * count) / np.expm1(-0.5 * epsilon))


def ctm_tail_bound(
    k: ArrayLike,
    n: int,
    epsilon: float,
    widening: float | None = None,
    *,
    form: Literal["simplified", "sum"] = "simplified",
    median: MedianChoice = "lower",
) -> NDArray[np.float64]:
    """Upper bound on sup_{D ∈ CTM} P(p_α(D, DPExpMed_α(D)) > k) (Thm 7.9's proof).

    ``form="sum"`` is inequality (5), 1 − α/(α + (1/(K − k)) Σ_{i=k+1}^{K} e^{−εi/2});
    ``"simplified"`` is the displayed bound G·e^{−ε(k+1)/2}/(α(K − k)). Both rest on
    Lemma 7.8 (the worst case is D_k^CTM). The formulas need k < K; for K ≤ k < cap the
    result is the trivial bound 1, and for k ≥ cap (the largest loss) it is 0.
    """
    nn = _n(n)
    eps = check_positive("epsilon", epsilon)
    a = _alpha(widening, nn, eps)
    big_k = half_count(nn, median)
    kk = np.asarray(k, dtype=np.float64)
    gap = big_k - kk
    with np.errstate(divide="ignore", invalid="ignore"):
        if form == "sum":
            # Σ_{i=k+1}^{K} e^{−εi/2} = e^{−ε(k+1)/2} · (1 − e^{−ε(K−k)/2})/(1 − e^{−ε/2})
            s = np.exp(-0.5 * eps * (kk + 1)) * np.expm1(-0.5 * eps * gap) / np.expm1(-0.5 * eps)
            s = s / gap
            out = s / (a + s)
        elif form == "simplified":
            out = _geom(eps, big_k) * np.exp(-0.5 * eps * (kk + 1)) / (a * gap)
        else:
            raise InvalidParameterError(f"form={form!r}: expected 'simplified' or 'sum'.")
    cap = min(median_index(nn, median), nn + 1 - median_index(nn, median))
    return np.where(gap > 0, np.minimum(out, 1.0), np.where(kk >= cap, 0.0, 1.0))


def ctm_kstar(
    n: int, epsilon: float, beta: float, widening: float | None = None,
    *, median: MedianChoice = "lower",
) -> int:
    """k* of Thm 7.9: ⌈−1 + (2/ε)·ln(2G/(αβK))⌉, floored at 0."""
    nn = _n(n)
    eps = check_positive("epsilon", epsilon)
    b = check_in_open_interval("beta", beta, 0.0, 1.0)
    a = _alpha(widening, nn, eps)
    big_k = half_count(nn, median)
    val = -1.0 + (2.0 / eps) * math.log(2.0 * _geom(eps, big_k) / (a * b * big_k))
    return max(0, math.ceil(val))


def ctm_min_k(
    n: int, epsilon: float, beta: float, widening: float | None = None,
    *, form: Literal["simplified", "sum"] = "simplified", median: MedianChoice = "lower",
) -> int:
    """Smallest k with :func:`ctm_tail_bound` ≤ β (inequality (6)); the loss cap if none."""
    nn = _n(n)
    b = check_in_open_interval("beta", beta, 0.0, 1.0)
    k_med = median_index(nn, check_median(median))
    cap = min(k_med, nn + 1 - k_med)
    ks = np.arange(cap + 1)
    ok = np.flatnonzero(ctm_tail_bound(ks, nn, epsilon, widening, form=form, median=median) <= b)
    return int(ok[0])


def ctm_fair_bound(
    n: int,
    m: float,
    epsilon: float,
    beta: float,
    widening: float | None = None,
    *,
    k_bound: int | None = None,
    median: MedianChoice = "lower",
) -> float:
    """High-probability FAIR bound on CTM: inequality (7) at a (1 − β) bound on p_α.

    FAIR ≤ k_b·m/K + αm with k_b = ``k_bound`` or, by default, :func:`ctm_min_k` (the
    smallest k satisfying inequality (6); it equals or improves on k*).
    """
    nn = _n(n)
    mm = check_positive("m", m)
    eps = check_positive("epsilon", epsilon)
    a = _alpha(widening, nn, eps)
    kb = ctm_min_k(nn, eps, beta, a, median=median) if k_bound is None else int(k_bound)
    return kb * mm / half_count(nn, median) + a * mm


def swdiff_loss_bound(
    p: ArrayLike,
    fair: ArrayLike,
    n: int,
    band: float,
    *,
    side: Literal["left", "right"] = "left",
    median: MedianChoice = "lower",
) -> NDArray[np.float64]:
    """Always-valid SWDIFF bound from the loss p = p_α(D, ℓ) and FAIR(D, ℓ) (any data).

    SWDIFF ≤ (w + 2(p − 1)⁺)·FAIR + 2(N − (p − 1)⁺)·band, with band = αm, w and N the
    weight and agent count of ℓ's side (module docstring). Replaces the paper's (11).
    When p is the loss cap (ℓ beyond every agent on its side, where the capped loss no
    longer counts them) the bound is the trivial (w + 2N)·FAIR.
    """
    nn = int(n)
    k = median_index(nn, check_median(median))
    cap = min(k, nn + 1 - k)
    w, count = (nn - 2 * k + 2, k - 1) if side == "left" else (2 * k - nn, nn - k)
    parr = np.asarray(p, dtype=np.float64)
    pp = np.minimum(np.maximum(parr - 1.0, 0.0), count)
    f = np.asarray(fair, dtype=np.float64)
    out = (w + 2.0 * pp) * f + 2.0 * (count - pp) * band
    return np.asarray(np.where(parr >= cap, (w + 2.0 * count) * f, out))


def ctm_swdiff_bound(
    n: int,
    m: float,
    epsilon: float,
    beta: float,
    widening: float | None = None,
    *,
    corrected: bool = True,
    median: MedianChoice = "lower",
) -> float:
    """High-probability SWDIFF bound on CTM at p_α ≤ k_b (= :func:`ctm_min_k`).

    ``corrected=False``: the paper's (11), (2k_b − 1)·F with F = :func:`ctm_fair_bound`
    (not a valid bound, see the module docstring). ``corrected=True``: the larger side of
    :func:`swdiff_loss_bound` at p = k_b and FAIR = F (the bound is increasing in p).
    """
    nn = _n(n)
    eps = check_positive("epsilon", epsilon)
    a = _alpha(widening, nn, eps)
    kb = ctm_min_k(nn, eps, beta, a, median=median)
    f = ctm_fair_bound(nn, m, eps, beta, a, k_bound=kb, median=median)
    if not corrected:
        return max(2 * kb - 1, 1) * f
    band = a * float(m)
    return float(
        max(
            swdiff_loss_bound(kb, f, nn, band, side="left", median=median),
            swdiff_loss_bound(kb, f, nn, band, side="right", median=median),
        )
    )


@dataclass(frozen=True, slots=True)
class CTMBounds:
    """Explicit high-probability bounds on CTM for one (n, m, ε, α, β) (Thm 7.9 & co.)."""

    n: int
    m: float
    epsilon: float
    widening: float
    beta: float
    kstar: int
    kstar_satisfies_6: bool
    min_k: int
    fair_bound: float
    swdiff_bound_paper: float
    swdiff_bound_corrected: float

    def to_dict(self) -> dict[str, Any]:
        """Plain dict."""
        return asdict(self)


def ctm_bounds(
    n: int, m: float, epsilon: float, beta: float, widening: float | None = None,
    *, median: MedianChoice = "lower",
) -> CTMBounds:
    """All explicit CTM bounds at once (see the module docstring)."""
    nn = _n(n)
    eps = check_positive("epsilon", epsilon)
    a = _alpha(widening, nn, eps)
    ks = ctm_kstar(nn, eps, beta, a, median=median)
    sat = ks < half_count(nn, median) and bool(
        ctm_tail_bound(ks, nn, eps, a, median=median) <= beta
    )
    return CTMBounds(
        n=nn,
        m=float(m),
        epsilon=eps,
        widening=a,
        beta=float(beta),
        kstar=ks,
        kstar_satisfies_6=sat,
        min_k=ctm_min_k(nn, eps, beta, a, median=median),
        fair_bound=ctm_fair_bound(nn, m, eps, beta, a, median=median),
        swdiff_bound_paper=ctm_swdiff_bound(nn, m, eps, beta, a, corrected=False, median=median),
        swdiff_bound_corrected=ctm_swdiff_bound(nn, m, eps, beta, a, median=median),
    )


# --------------------------------------------------------------------------- SPM_λ
def spm_tail_bound(
    k: ArrayLike, n: int, epsilon: float, lam: float, widening: float | None = None
) -> NDArray[np.float64]:
    """Thm 7.15's bound on sup_{D ∈ SPM_λ} P(p_α > k), in the proof's unsimplified form.

    (M − αm)/(αm) with M the proof's mass overestimate on D_k^SPM:
    [Σ_{i=k+1}^{K−s+1} e^{−εi/2}/(J + nλ) + (1 − (J − s)/(J + nλ))·e^{−ε(k+1)/2}] / α,
    J = K − k, s = ⌈λn⌉ − 1, K = ⌊n/2⌋.
    """
    nn = _n(n)
    eps = check_positive("epsilon", epsilon)
    lam_f = check_positive("lam", lam)
    a = _alpha(widening, nn, eps)
    big_k = nn // 2
    s = math.ceil(lam_f * nn) - 1
    kk = np.asarray(k, dtype=np.float64)
    j = big_k - kk
    top = big_k - s + 1
    count = np.maximum(top - kk, 0.0)
    geo = np.exp(-0.5 * eps * (kk + 1)) * np.expm1(-0.5 * eps * count) / np.expm1(-0.5 * eps)
    first = geo / (j + nn * lam_f)
    second = (1.0 - (j - s) / (j + nn * lam_f)) * np.exp(-0.5 * eps * (kk + 1))
    return np.where(j > 0, np.minimum((first + second) / a, 1.0), 0.0)


def spm_kstar(
    n: int, epsilon: float, beta: float, lam: float, widening: float | None = None
) -> int:
    """Smallest k with :func:`spm_tail_bound` ≤ β (the role of k* in Thm 7.15)."""
    nn = _n(n)
    b = check_in_open_interval("beta", beta, 0.0, 1.0)
    ks = np.arange(nn // 2 + 1)
    ok = np.flatnonzero(spm_tail_bound(ks, nn, epsilon, lam, widening) <= b)
    return int(ok[0]) if ok.size else nn // 2


def spm_fair_bound(
    n: int, m: float, epsilon: float, beta: float, lam: float, widening: float | None = None,
    *, k_bound: int | None = None,
) -> float:
    """FAIR ≤ 2m(k_b + 1)/n + 4mλ + αm on SPM_λ at p_α ≤ k_b (w.p. ≥ 1 − β).

    Re-derived from Lemma 7.17 (|F⁻¹(½) − a| ≤ 2m|½ − F(a)|) and KS distance λ: with a the
    widened point nearest the empirical median, |½ − F(a)| ≤ (p + 1)/n + λ and the
    population and sample medians differ by at most 2mλ.
    """
    nn = _n(n)
    mm = check_positive("m", m)
    eps = check_positive("epsilon", epsilon)
    lam_f = check_positive("lam", lam)
    a = _alpha(widening, nn, eps)
    kb = spm_kstar(nn, eps, beta, lam_f, a) if k_bound is None else int(k_bound)
    return 2.0 * mm * (kb + 1) / nn + 4.0 * mm * lam_f + a * mm


def spm_swdiff_bound(
    n: int, m: float, epsilon: float, beta: float, lam: float, widening: float | None = None,
    *, corrected: bool = True,
) -> float:
    """High-probability SWDIFF bound on SPM_λ at p_α ≤ k_b (= :func:`spm_kstar`).

    ``corrected=True``: the larger side of :func:`swdiff_loss_bound` at p = k_b and
    FAIR = F = :func:`spm_fair_bound` (lower median, odd n as in the theorem; the bound
    is increasing in p and FAIR). ``corrected=False``: Thm 7.19's route through the
    paper's (11), (2k_b − 1)·F, which is **not** a valid bound (module docstring): kept
    only to show where it fails.
    """
    nn = _n(n)
    eps = check_positive("epsilon", epsilon)
    a = _alpha(widening, nn, eps)
    kb = spm_kstar(nn, eps, beta, lam, a)
    f = spm_fair_bound(nn, m, eps, beta, lam, a, k_bound=kb)
    if not corrected:
        return max(2 * kb - 1, 1) * f
    band = a * float(m)
    return float(
        max(
            swdiff_loss_bound(kb, f, nn, band, side="left"),
            swdiff_loss_bound(kb, f, nn, band, side="right"),
        )
    )


# --------------------------------------------------------------------------- lower bounds
def impossibility_bound(epsilon: float) -> float:
    """Thm 5.1: some data set has P(FAIR ≥ m/2) ≥ 1/(1 + e^ε) under any ε-DP mechanism."""
    return float(special.expit(-check_positive("epsilon", epsilon)))


def direct_lower_bound(epsilon: float, distance: int) -> float:
    """Thm 7.20: max_i P(M(D_i) ∉ Y_i) ≥ 1/(1 + e^{dε}) for change-one distance d."""
    return float(special.expit(-check_positive("epsilon", epsilon) * int(distance)))


# --------------------------------------------------------------------------- Table 1
@dataclass(frozen=True, slots=True)
class Table1:
    """Table 1 of paper 000 evaluated with every hidden constant set to 1.

    Rates, not bounds: compare *shapes* (slopes in n and ε) with these, and values with
    the explicit bounds (:func:`ctm_bounds`, :func:`spm_fair_bound`,
    :func:`spm_swdiff_bound`). ln(x) is read as max(1, ln x), as the proofs' max[1, ·]
    does.

    The two SWDIFF upper rates are **corrected**: Thms 7.13 (CTM) and 7.19 (SPM_λ) rest on
    the paper's inequality (11), which is false with widening (module docstring), and
    their rates are refuted by data sets in the class (all agents at one point; tightly
    concentrated samples), on which SWDIFF's 0.95-quantile stays at 0.95·m/ε for every n.
    ``ctm_swdiff_upper`` and ``spm_swdiff_upper`` therefore carry the extra m/ε term of
    the corrected inequality; the paper's refuted rates are kept, for comparison only, in
    ``ctm_swdiff_upper_paper`` and ``spm_swdiff_upper_paper``.

    Attributes
    ----------
    ctm_swdiff_upper : float
        m·ln²(1/β)/(nε²) + m/ε (corrected Thm 7.13).
    spm_swdiff_upper : float
        m·ln²(nλ/β)/(nε²) + mλ/ε + m/ε (corrected Thm 7.19).
    ctm_swdiff_upper_paper, spm_swdiff_upper_paper : float
        The paper's rates without the m/ε term: refuted, not upper bounds.
    swdiff_upper_corrected : bool
        Always True: marks (also in :meth:`to_dict`) that the SWDIFF upper rates are the
        corrected ones, not Table 1's printed entries.
    """

    n: int
    m: float
    epsilon: float
    beta: float
    lam: float
    ctm_fair_lower: float
    ctm_fair_upper: float
    ctm_swdiff_lower: float
    ctm_swdiff_upper: float
    spm_fair_lower: float
    spm_fair_upper: float
    spm_swdiff_lower: float
    spm_swdiff_upper: float
    general_fair_lower: float
    general_fair_lower_probability: float
    ctm_swdiff_upper_paper: float
    spm_swdiff_upper_paper: float
    swdiff_upper_corrected: bool = True

    def to_dict(self) -> dict[str, Any]:
        """Plain dict."""
        return asdict(self)


def table1(n: int, m: float, epsilon: float, beta: float, lam: float) -> Table1:
    """Every entry of Table 1 as a function of (n, m, ε, β, λ), constants set to 1.

    The SWDIFF upper rates are the corrected ones (see :class:`Table1`); the paper's
    refuted entries are in the ``*_swdiff_upper_paper`` fields.
    """
    nn = int(n)
    if nn < 1:
        raise InvalidParameterError(f"n={n!r}: expected an integer >= 1.")
    mm = check_positive("m", m)
    eps = check_positive("epsilon", epsilon)
    b = check_in_open_interval("beta", beta, 0.0, 1.0)
    lam_f = check_positive("lam", lam)

    def ln(v: float) -> float:
        return max(1.0, math.log(v))

    l1 = ln(1.0 / b)
    lnl = ln(nn * lam_f / b)
    ctm_sw_paper = mm / (nn * eps**2) * l1**2
    spm_sw_paper = mm / (nn * eps**2) * lnl**2 + mm * lam_f / eps
    return Table1(
        n=nn,
        m=mm,
        epsilon=eps,
        beta=b,
        lam=lam_f,
        ctm_fair_lower=mm / (nn * eps) * l1,
        ctm_fair_upper=mm / (nn * eps) * l1,
        ctm_swdiff_lower=mm / (nn * eps**2) * l1**2,
        ctm_swdiff_upper=ctm_sw_paper + mm / eps,
        spm_fair_lower=mm / (nn * eps) * l1 + mm * lam_f,
        spm_fair_upper=mm / (nn * eps) * lnl + mm * lam_f,
        spm_swdiff_lower=mm / (nn * eps**2) * l1**2 + mm * lam_f,
        spm_swdiff_upper=spm_sw_paper + mm / eps,
        general_fair_lower=mm / 2.0,
        general_fair_lower_probability=impossibility_bound(eps),
        ctm_swdiff_upper_paper=ctm_sw_paper,
        spm_swdiff_upper_paper=spm_sw_paper,
    )
