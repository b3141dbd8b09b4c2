r"""Trials and grids of the studies of paper 000: private facility location (DPExpMed).

Every number is *exact*: the metrics come from the mechanisms' output laws
(:meth:`dpfair.facility.DPExpMed.distribution` and the baselines' ``distribution``), never
from Monte Carlo draws of the mechanism. The only randomness is in the data sets drawn
from single-peaked laws, so deterministic data (the CTM worst cases, evenly spaced agents,
all agents at one point, the lower-bound pairs) ignore the seed and give the same row in
every repetition, and one repetition of a sampled family is one sampled data set. Only the
public API of :mod:`dpfair.facility` is used (including its exact worst-case helpers
:func:`~dpfair.facility.worst_case_level` and :func:`~dpfair.facility.ctm_family_max`).

Data sets and seeds
-------------------
Repetition ``rep`` of a sampled family draws its data set from the stream
:func:`data_seed` — a function of the run's root seed, the family, n and ``rep`` only (not
of ε, α, the mechanism or the cell). So within one run every cell with the same
(family, n) sees the *same* data set in repetition ``rep``: the curves over ε, over the
widening c and across mechanisms are compared on common data (common random numbers), as
"on the same data" asks, while repetitions stay independent. The row still depends only on
(seed, cell, rep), so tables do not depend on ``--jobs``, the backend or interruptions.

Registered experiments (β = 0.05, domain V = [0, 1], so m = 1)
-------------------------------------------------------------
Each is registered by its own module of :mod:`dpfair.experiments`, named after it
(``my-study`` in ``my_study.py``).

``facility-scaling``
    Grid family × n × ε with n ∈ {101, 1001, 10001, 100001, 1000001} and
    ε ∈ {0.1, 0.2, 0.5, 1, 2}: the (1 − β)-quantiles and expectations of FAIR and SWDIFF,
    the explicit bounds (Thm 7.9 + ineq. (7) on CTM, the SPM_λ bound on samples, the
    paper's and the corrected SWDIFF bounds) and Table 1's rates.
``facility-widening``
    α = c/(nε) with c = 10^{k/5}, k = −10, …, 10 (0.01 … 100) at n = 10001, ε ∈ {0.5, 1}.
``facility-impossibility``
    P(FAIR ≥ radius) on both data sets of the lower-bound pairs (Thm 5.1's bimodal pair
    for DPExpMed and every baseline; Thms 7.21 and 7.24 for DPExpMed) against
    1/(1 + e^{dε}).
``facility-baselines``
    DPExpMed_{α*} against the unwidened mechanism, the Laplace median (sensitivity m) and
    the grid exponential mechanism (rank and percentile scores) on the same data.
``facility-smoke``
    A few seconds' version of the scaling study, to check an installation or a cluster.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfair._errors import InvalidParameterError
from dpfair.facility import (
    DPExpMed,
    GridExpMed,
    LaplaceMedian,
    LowerBoundPair,
    OutputDistribution,
    SinglePeakedLaw,
    ctm_family_max,
    ctm_worst_case,
    fair_lower_bound_pair,
    impossibility_pair,
    ks_distance,
    spm_lower_bound_pair,
    triangular_law,
    truncated_normal_law,
    unwidened_expmed,
    worst_case_level,
)
from dpfair.facility.bounds import ctm_bounds, spm_fair_bound, table1

__all__ = [
    "BETA",
    "DETERMINISTIC_FAMILIES",
    "DOMAIN",
    "GRID_SIZE",
    "MECHANISMS",
    "SAMPLED_FAMILIES",
    "baselines_trial",
    "data_seed",
    "family_data",
    "impossibility_trial",
    "make_mechanism",
    "sampled_law",
    "scaling_trial",
    "widening_trial",
]

#: The public domain V of every study (m = 1).
DOMAIN: tuple[float, float] = (0.0, 1.0)
#: Tail probability β: quantiles are at level 1 − β.
BETA = 0.05
#: Candidates of the grid exponential mechanism: k/999, k = 0, …, 999 (the domain's ends
#: are on the grid, its centre is not).
GRID_SIZE = 1000

#: Families drawn from single-peaked laws: one repetition is one data set.
SAMPLED_FAMILIES: dict[str, int] = {"triangular": 1, "truncated_normal": 2}
#: Deterministic families (the seed is ignored).
DETERMINISTIC_FAMILIES: tuple[str, ...] = (
    "ctm_worst_p",
    "ctm_family_max",
    "ctm_uniform",
    "point_mass",
)
_FAMILIES = (*DETERMINISTIC_FAMILIES, *SAMPLED_FAMILIES)

#: Mechanisms compared in the impossibility and baselines studies (name → description).
MECHANISMS: dict[str, str] = {
    "dpexpmed": "DPExpMed(alpha*)",
    "dpexpmed_alpha0": "DPExpMed(alpha=0)",
    "laplace": "Laplace median (sens. m)",
    "grid_rank": "grid EM (rank score)",
    "grid_percentile": "grid EM (percentile score)",
}

_DATA_STREAM = 0xFAC  # first spawn-key word of the data-set streams (cells never use it)
_REL = 1e-9  # relative slack of "measured <= bound" (floating-point rounding)
_NAN = math.nan
_REF = "paper 000 (Fish, Gonczarowski, Tang & Vadhan, FORC 2026)"


# --------------------------------------------------------------------------- data
def sampled_law(family: str, domain: tuple[float, float] = DOMAIN) -> SinglePeakedLaw:
    """The single-peaked law of a sampled family.

    ``"triangular"``: the symmetric triangular law on the domain (peak at its centre);
    ``"truncated_normal"``: N(lo + 0.4m, (m/8)²) truncated to the domain, each side
    re-weighted to mass 1/2 so that the peak is the median.
    """
    lo, hi = domain
    if family == "triangular":
        return triangular_law(domain)
    if family == "truncated_normal":
        return truncated_normal_law(domain, peak=lo + 0.4 * (hi - lo), scale=(hi - lo) / 8.0)
    raise InvalidParameterError(
        f"family={family!r}: not a sampled family; choose one of {', '.join(SAMPLED_FAMILIES)}."
    )


def data_seed(seed: np.random.SeedSequence, family: str, n: int) -> np.random.SeedSequence:
    """The stream of the data set of a sampled ``family`` in the repetition of ``seed``.

    Parameters
    ----------
    seed : numpy.random.SeedSequence
        The repetition's seed from the runner, ``SeedSequence(root, spawn_key=(cell, rep))``
        (:func:`dpfair.experiments.rep_seed`).
    family : str
        A key of :data:`SAMPLED_FAMILIES`.
    n : int
        Number of agents.

    Returns
    -------
    numpy.random.SeedSequence
        ``SeedSequence(root, spawn_key=(0xFAC, code(family), n, rep))``: independent of
        the cell, so every cell with the same (family, n) uses the same data set in
        repetition ``rep`` (common random numbers), and independent across repetitions.
        A seed without a spawn key counts as repetition 0.
    """
    if family not in SAMPLED_FAMILIES:
        raise InvalidParameterError(
            f"family={family!r}: not a sampled family; choose one of "
            f"{', '.join(SAMPLED_FAMILIES)}."
        )
    rep = int(seed.spawn_key[-1]) if seed.spawn_key else 0
    return np.random.SeedSequence(
        seed.entropy, spawn_key=(_DATA_STREAM, SAMPLED_FAMILIES[family], int(n), rep)
    )


def family_data(
    family: str, n: int, seed: np.random.SeedSequence | None = None
) -> tuple[NDArray[np.float64], float]:
    """The data set of a family that does not depend on ε, and its KS distance λ.

    Parameters
    ----------
    family : str
        ``"ctm_uniform"`` (n evenly spaced agents, Lemma 7.11's most spread CTM set),
        ``"point_mass"`` (every agent at the domain's centre, also CTM), ``"bimodal"``
        (the first data set of Thm 5.1's pair) or a sampled family (needs ``seed``).
    n : int
        Number of agents.
    seed : numpy.random.SeedSequence, optional
        The repetition's seed (sampled families only; see :func:`data_seed`).

    Returns
    -------
    (x, lam)
        The sorted locations and, for sampled families, the KS distance between the
        sample and its law (λ in the SPM_λ bounds); NaN otherwise.
    """
    lo, hi = DOMAIN
    if family == "ctm_uniform":
        return np.linspace(lo, hi, n), _NAN
    if family == "point_mass":
        return np.full(n, 0.5 * (lo + hi)), _NAN
    if family == "bimodal":
        return impossibility_pair(n, DOMAIN).first, _NAN
    law = sampled_law(family)
    if seed is None:
        raise InvalidParameterError(f"seed=None: the sampled family {family!r} needs a seed.")
    x = np.sort(law.sample(n, np.random.default_rng(data_seed(seed, family, n))))
    return x, ks_distance(x, law.cdf)


def make_mechanism(name: str, epsilon: float) -> Any:
    """A mechanism of :data:`MECHANISMS` on :data:`DOMAIN`, each pure ε-DP per release.

    ``"dpexpmed"`` uses the default widening α* = 1/(nε) for the data it is applied to.
    """
    if name == "dpexpmed":
        return DPExpMed(epsilon, DOMAIN)
    if name == "dpexpmed_alpha0":
        return unwidened_expmed(epsilon, DOMAIN)
    if name == "laplace":
        return LaplaceMedian(epsilon, DOMAIN)
    if name == "grid_rank":
        return GridExpMed(epsilon, DOMAIN, grid_size=GRID_SIZE, score="rank")
    if name == "grid_percentile":
        return GridExpMed(epsilon, DOMAIN, grid_size=GRID_SIZE, score="percentile")
    raise InvalidParameterError(
        f"mechanism={name!r}: unknown; choose one of {', '.join(MECHANISMS)}."
    )


def _metrics(dist: OutputDistribution, level: float) -> dict[str, float]:
    return {
        "fair_quantile": float(dist.fair_quantile(level)),
        "swdiff_quantile": float(dist.swdiff_quantile(level)),
        "expected_fair": float(dist.expected_fair()),
        "expected_swdiff": float(dist.expected_swdiff()),
    }


def _ratio(a: float, b: float) -> float:
    return a / b if b > 0 and math.isfinite(b) else _NAN


# ---------------------------------------------------------------- deterministic cells
# Worker processes keep these small results (never the data or the laws) across the
# repetitions of a cell: every repetition of a deterministic cell is the same row.
@functools.lru_cache(maxsize=1024)
def _deterministic(
    family: str, n: int, epsilon: float, beta: float, c: float | None
) -> tuple[tuple[str, Any], ...]:
    """Metrics of DPExpMed on a deterministic family (widening c/(nε); None: α*)."""
    level = 1.0 - beta
    alpha = None if c is None else c / (n * epsilon)
    if family == "ctm_family_max":
        best = ctm_family_max(n, epsilon, level, widening=alpha, domain=DOMAIN)
        out: dict[str, Any] = {k: float(best[k]) for k in (
            "fair_quantile", "swdiff_quantile", "expected_fair", "expected_swdiff")}
        out["loss_quantile"] = _NAN
        out["dataset"] = (f"max over D_k and even spacing (FAIR quantile at "
                          f"{best['fair_quantile_at']}, SWDIFF quantile at "
                          f"{best['swdiff_quantile_at']})")
        return tuple(out.items())
    if family == "ctm_worst_p":
        k_beta, dist = worst_case_level(n, epsilon, beta, widening=alpha, domain=DOMAIN)
        label = f"D_{k_beta}^CTM (worst level of p_alpha)"
    else:
        x, _ = family_data(family, n)
        dist = DPExpMed(epsilon, DOMAIN, widening=alpha).distribution(x, presorted=True)
        label = "evenly spaced" if family == "ctm_uniform" else "all agents at the centre"
    out = dict(_metrics(dist, level))
    out["loss_quantile"] = float(dist.loss_quantile(level))
    out["dataset"] = label
    return tuple(out.items())


@functools.lru_cache(maxsize=1024)
def _bounds(n: int, epsilon: float, beta: float) -> tuple[tuple[str, Any], ...]:
    b = ctm_bounds(n, DOMAIN[1] - DOMAIN[0], epsilon, beta)
    return (
        ("kstar", b.kstar),
        ("min_k", b.min_k),
        ("ctm_fair_bound", b.fair_bound),
        ("ctm_swdiff_bound", b.swdiff_bound_corrected),
        ("ctm_swdiff_bound_paper", b.swdiff_bound_paper),
    )


def _check_family(family: str) -> str:
    if family not in _FAMILIES:
        raise InvalidParameterError(
            f"family={family!r}: unknown; choose one of {', '.join(_FAMILIES)}."
        )
    return family


def _sampled_metrics(
    family: str, n: int, epsilon: float, beta: float, c: float | None,
    seed: np.random.SeedSequence,
) -> tuple[dict[str, Any], float]:
    x, lam = family_data(family, n, seed)
    alpha = None if c is None else c / (n * epsilon)
    dist = DPExpMed(epsilon, DOMAIN, widening=alpha).distribution(x, presorted=True)
    out: dict[str, Any] = _metrics(dist, 1.0 - beta)
    out["loss_quantile"] = float(dist.loss_quantile(1.0 - beta))
    out["dataset"] = f"sample from the {family.replace('_', '-')} law"
    return out, lam


# --------------------------------------------------------------------------- run_one
def scaling_trial(params: dict[str, Any], seed: np.random.SeedSequence) -> dict[str, Any]:
    """One cell of ``facility-scaling``: exact FAIR/SWDIFF of DPExpMed_{α*}, bounds, rates.

    Parameters
    ----------
    params : dict
        ``family`` (see :data:`DETERMINISTIC_FAMILIES`, :data:`SAMPLED_FAMILIES`), ``n``,
        ``epsilon``, ``beta``.
    seed : numpy.random.SeedSequence
        The repetition's seed; only sampled families use it (:func:`data_seed`).

    Returns
    -------
    dict
        ``alpha`` (α* = 1/(nε)); ``dataset`` (a description: for ``ctm_worst_p`` the level
        k_β of D_k^CTM, for ``ctm_family_max`` where each maximum is attained);
        ``fair_quantile``, ``swdiff_quantile``, ``expected_fair``, ``expected_swdiff``
        (exact, at level 1 − β); ``loss_quantile`` ((1 − β)-quantile of the mechanism's own
        loss p_α, NaN for the maximum over a family); ``lambda_ks`` (KS distance of a sample
        to its law, NaN for deterministic families); ``kstar``, ``min_k`` (Thm 7.9's k* and
        the smallest k whose bound is ≤ β); ``fair_bound`` (the explicit FAIR bound that
        applies: CTM, Thm 7.9 + ineq. (7); samples, the SPM_λ bound with
        λ = ``lambda_ks``), checked by ``fair_ok`` and ``fair_bound_ratio``
        (measured / bound); ``swdiff_bound`` and ``swdiff_bound_paper`` (the corrected CTM
        bound and the paper's via (11); NaN for samples, which need not be in CTM) with
        ``swdiff_bound_ratio`` and ``swdiff_paper_ratio``; ``fair_rate``, ``swdiff_rate``
        (Table 1's upper rates with constant 1 for the family's class: CTM, or SPM_λ with
        λ = ``lambda_ks`` for samples; SWDIFF's is the corrected rate with its m/ε term,
        :class:`~dpfair.facility.Table1`, since Thms 7.13/7.19's rates are refuted).
    """
    family = _check_family(str(params["family"]))
    n, eps, beta = int(params["n"]), float(params["epsilon"]), float(params["beta"])
    m = DOMAIN[1] - DOMAIN[0]
    if family in SAMPLED_FAMILIES:
        vals, lam = _sampled_metrics(family, n, eps, beta, None, seed)
    else:
        vals, lam = dict(_deterministic(family, n, eps, beta, None)), _NAN
    bounds = dict(_bounds(n, eps, beta))
    if family in SAMPLED_FAMILIES:
        fair_bound = spm_fair_bound(n, m, eps, beta, lam)
        sw_bound = sw_paper = _NAN
        rates = table1(n, m, eps, beta, lam)
        fair_rate, swdiff_rate = rates.spm_fair_upper, rates.spm_swdiff_upper
    else:
        fair_bound = bounds["ctm_fair_bound"]
        sw_bound, sw_paper = bounds["ctm_swdiff_bound"], bounds["ctm_swdiff_bound_paper"]
        rates = table1(n, m, eps, beta, 1.0)  # λ does not enter the CTM rates
        fair_rate, swdiff_rate = rates.ctm_fair_upper, rates.ctm_swdiff_upper
    fq, sq = vals["fair_quantile"], vals["swdiff_quantile"]
    return {
        "alpha": 1.0 / (n * eps),
        "dataset": vals["dataset"],
        "fair_quantile": fq,
        "swdiff_quantile": sq,
        "expected_fair": vals["expected_fair"],
        "expected_swdiff": vals["expected_swdiff"],
        "loss_quantile": vals["loss_quantile"],
        "lambda_ks": float(lam),
        "kstar": int(bounds["kstar"]),
        "min_k": int(bounds["min_k"]),
        "fair_bound": float(fair_bound),
        "fair_ok": bool(fq <= fair_bound * (1.0 + _REL)),
        "fair_bound_ratio": _ratio(fq, fair_bound),
        "swdiff_bound": float(sw_bound),
        "swdiff_bound_paper": float(sw_paper),
        "swdiff_bound_ratio": _ratio(sq, sw_bound),
        "swdiff_paper_ratio": _ratio(sq, sw_paper),
        "fair_rate": float(fair_rate),
        "swdiff_rate": float(swdiff_rate),
    }


def widening_trial(params: dict[str, Any], seed: np.random.SeedSequence) -> dict[str, Any]:
    """One cell of ``facility-widening``: DPExpMed with widening α = c/(nε).

    Parameters
    ----------
    params : dict
        ``family``, ``n``, ``epsilon``, ``c`` (> 0), ``beta``. For ``ctm_worst_p`` the data
        set is D_k^CTM at the worst level k_β(α) *of this α*; ``ctm_family_max`` is the
        maximum over {D_k^CTM} and even spacing at this α.
    seed : numpy.random.SeedSequence
        The repetition's seed; only sampled families use it (:func:`data_seed`).

    Returns
    -------
    dict
        ``alpha``, ``dataset``, ``fair_quantile``, ``swdiff_quantile``, ``expected_fair``,
        ``expected_swdiff``, ``loss_quantile`` (NaN for the family maximum) and
        ``lambda_ks`` (NaN unless sampled).
    """
    family = _check_family(str(params["family"]))
    n, eps, beta = int(params["n"]), float(params["epsilon"]), float(params["beta"])
    c = float(params["c"])
    if not (math.isfinite(c) and c > 0):
        raise InvalidParameterError(f"c={c!r}: the widening multiplier must be > 0.")
    if family in SAMPLED_FAMILIES:
        vals, lam = _sampled_metrics(family, n, eps, beta, c, seed)
    else:
        vals, lam = dict(_deterministic(family, n, eps, beta, c)), _NAN
    return {
        "alpha": c / (n * eps),
        "dataset": vals["dataset"],
        "fair_quantile": vals["fair_quantile"],
        "swdiff_quantile": vals["swdiff_quantile"],
        "expected_fair": vals["expected_fair"],
        "expected_swdiff": vals["expected_swdiff"],
        "loss_quantile": vals["loss_quantile"],
        "lambda_ks": float(lam),
    }


def _pair(name: str, n: int) -> LowerBoundPair:
    if name == "thm5.1":
        return impossibility_pair(n, DOMAIN)
    if name == "thm7.21":
        return fair_lower_bound_pair(n, 5, DOMAIN)
    if name == "thm7.24":
        return spm_lower_bound_pair(n, 0.1, DOMAIN)
    raise InvalidParameterError(
        f"pair={name!r}: unknown; choose 'thm5.1', 'thm7.21' (steps = 5) or 'thm7.24' "
        "(lambda = 0.1)."
    )


def impossibility_trial(params: dict[str, Any], seed: np.random.SeedSequence) -> dict[str, Any]:
    """One cell of ``facility-impossibility``: P(FAIR ≥ radius) on both data sets of a pair.

    Parameters
    ----------
    params : dict
        ``pair`` (``"thm5.1"``: the bimodal pair, radius m/2; ``"thm7.21"``: D_0/D_γ with
        γ = 5m/(n − 1); ``"thm7.24"``: D_1/D_2 with λ = 0.1), ``n``, ``epsilon``,
        ``mechanism`` (a key of :data:`MECHANISMS`).
    seed : numpy.random.SeedSequence
        Unused: the pairs are deterministic.

    Returns
    -------
    dict
        ``distance`` (change-one distance d of the pair, computed), ``radius``,
        ``prob_first``, ``prob_second`` (exact P(FAIR ≥ radius) on each data set),
        ``max_prob``, ``bound`` = 1/(1 + e^{dε}) (Thms 5.1 and 7.20), ``ratio`` =
        max_prob / bound, ``holds`` (max_prob ≥ bound up to rounding) and
        ``epsilon_spent`` (the mechanism's pure-DP ε per release).
    """
    del seed
    n, eps = int(params["n"]), float(params["epsilon"])
    pair = _pair(str(params["pair"]), n)
    mech = make_mechanism(str(params["mechanism"]), eps)
    p1 = float(mech.distribution(pair.first).fair_sf(pair.radius, inclusive=True))
    p2 = float(mech.distribution(pair.second).fair_sf(pair.radius, inclusive=True))
    bound = pair.probability_bound(eps)
    top = max(p1, p2)
    return {
        "distance": int(pair.distance),
        "radius": float(pair.radius),
        "prob_first": p1,
        "prob_second": p2,
        "max_prob": top,
        "bound": bound,
        "ratio": _ratio(top, bound),
        "holds": bool(top >= bound * (1.0 - 1e-12)),
        "epsilon_spent": float(mech.privacy.epsilon),
    }


@functools.lru_cache(maxsize=1024)
def _baseline_deterministic(
    dataset: str, n: int, epsilon: float, beta: float, mechanism: str
) -> tuple[tuple[str, float], ...]:
    x = _baseline_data(dataset, n, epsilon, beta, None)
    dist = make_mechanism(mechanism, epsilon).distribution(x)
    return tuple(_metrics(dist, 1.0 - beta).items())


def _baseline_data(
    dataset: str, n: int, epsilon: float, beta: float, seed: np.random.SeedSequence | None
) -> NDArray[np.float64]:
    if dataset == "ctm_worst_p":
        k_beta, _ = worst_case_level(n, epsilon, beta, domain=DOMAIN)
        return ctm_worst_case(n, k_beta, DOMAIN)
    if dataset in ("ctm_uniform", "point_mass", "bimodal") or dataset in SAMPLED_FAMILIES:
        return family_data(dataset, n, seed)[0]
    raise InvalidParameterError(
        f"dataset={dataset!r}: unknown; choose one of ctm_uniform, ctm_worst_p, point_mass, "
        f"bimodal, {', '.join(SAMPLED_FAMILIES)}."
    )


def baselines_trial(params: dict[str, Any], seed: np.random.SeedSequence) -> dict[str, Any]:
    """One cell of ``facility-baselines``: one mechanism on one data set, against DPExpMed_{α*}.

    Parameters
    ----------
    params : dict
        ``dataset`` (``triangular``, ``truncated_normal``, ``ctm_uniform``, ``ctm_worst_p``
        — D_k^CTM at the worst level of p_α —, ``point_mass``, ``bimodal``), ``n``,
        ``epsilon``, ``mechanism`` (a key of :data:`MECHANISMS`), ``beta``.
    seed : numpy.random.SeedSequence
        The repetition's seed; only sampled data sets use it (:func:`data_seed`), so every
        mechanism and ε sees the same sample in a repetition.

    Returns
    -------
    dict
        The exact ``fair_quantile``, ``swdiff_quantile``, ``expected_fair`` and
        ``expected_swdiff`` of the mechanism, each also divided by DPExpMed_{α*}'s value on
        the same data (``*_vs_dpexpmed``; > 1: the mechanism is worse; NaN if DPExpMed's is
        0), and ``epsilon_spent`` (pure-DP ε per release).
    """
    dataset, mechanism = str(params["dataset"]), str(params["mechanism"])
    n, eps, beta = int(params["n"]), float(params["epsilon"]), float(params["beta"])
    mech = make_mechanism(mechanism, eps)
    if dataset in SAMPLED_FAMILIES:
        x = _baseline_data(dataset, n, eps, beta, seed)
        vals = _metrics(mech.distribution(x), 1.0 - beta)
        ref = _metrics(DPExpMed(eps, DOMAIN).distribution(x, presorted=True), 1.0 - beta)
    else:
        vals = dict(_baseline_deterministic(dataset, n, eps, beta, mechanism))
        ref = dict(_baseline_deterministic(dataset, n, eps, beta, "dpexpmed"))
    out: dict[str, Any] = dict(vals)
    for key in ("fair_quantile", "swdiff_quantile", "expected_fair", "expected_swdiff"):
        out[f"{key}_vs_dpexpmed"] = _ratio(vals[key], ref[key])
    out["epsilon_spent"] = float(mech.privacy.epsilon)
    return out


# --------------------------------------------------------------------------- registry
SCALING_NS: tuple[int, ...] = (101, 1001, 10001, 100001, 1000001)
SCALING_EPSILONS: tuple[float, ...] = (0.1, 0.2, 0.5, 1.0, 2.0)
WIDENING_CS: tuple[float, ...] = tuple(10.0 ** (k / 5) for k in range(-10, 11))
IMPOSSIBILITY_EPSILONS: tuple[float, ...] = tuple(
    float(f"{e:.6g}") for e in np.logspace(-1.0, math.log10(5.0), 15)
)
BASELINE_DATASETS: tuple[str, ...] = (
    "triangular", "truncated_normal", "ctm_uniform", "ctm_worst_p", "point_mass", "bimodal",
)

_SCALING_METRICS = ("fair_quantile", "swdiff_quantile", "fair_ok", "fair_bound_ratio")
