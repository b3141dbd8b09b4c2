"""The public choices of an FDP-Fair run, validated once: :class:`FDPConfig`.

One frozen object holds what the analyst chooses before any data is read — α and its
margin, the tolerance band, the threshold rule, the estimator, the feature box, the grid,
the bandwidth, the depth, the budget shares — and checks every value in one place.
:func:`~dpfair.fairclass.federated.make_protocol` turns it, with the sites' public sizes and
budgets, into the signed ``setup`` (:class:`~dpfair.fairclass.federated.ProtocolConfig`);
:class:`~dpfair.fairclass.federated.FDPFairClassifier` builds the same object from its
parameters in ``fit``. Nothing here reads data or draws noise, so nothing here spends
privacy: every field is public.

The per-site budgets (ε_s, δ_s) are not here: they are facts of each site
(:class:`~dpfair.fairclass.federated.SiteSpec`), like its size N_s. The choices that need
the sites (the default depth, bandwidth and grid) are resolved by ``make_protocol``.

Public resource limits (checked before anything is allocated; a setup over a limit is
refused): at most :data:`MAX_GRID_NODES` grid nodes and :data:`MAX_AXIS_NODES` per axis
(each axis holds a dense g×g kernel matrix and its root: a 1-D grid of 2^18 nodes would
need 512 GiB), a bandwidth in [:data:`MIN_BANDWIDTH`, 10] and a tree depth
M ≤ :data:`MAX_DEPTH`.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from dpfair._errors import InvalidParameterError
from dpfair._validation import check_in_open_interval
from dpfair.fairclass._budget import KERNEL_SUM_RKHS_SENSITIVITY
from dpfair.fairclass._linear import FeatureMap
from dpfair.fairclass._rff import MAX_FEATURES_DIM, MAX_MAP_WIDTH, RFF_SENSITIVITY
from dpfair.fairclass._validation import AUTO_KERNEL_MAX_D, check_alpha, check_feature_bounds
from dpfair.fairclass.federated._linear import (
    MAX_LINEAR_WIDTH,
    RADIUS_SHARE,
    linear_function_sensitivity,
    radius_fraction,
    resolve_radius,
)
from dpfair.fairclass.federated._monotone import CORRECTIONS, THRESHOLD_RULES

__all__ = ["FDPConfig"]

TAIL_ESTIMATORS = ("dyadic", "consistent")
#: Group-score estimators of the protocol: the kernel grid (paper) or random Fourier
#: features of the same Gaussian kernel (``fairclass/_rff.py``; scales in d). "auto"
#: picks the kernel grid for at most ``AUTO_KERNEL_MAX_D`` numeric features (CDP-Fair's)
#: and the linear score otherwise.
PROTOCOL_ESTIMATORS = ("kernel", "rff", "linear")
#: Other accepted names, resolved at construction (none since "linear" is its own
#: estimator: one round of noisy sufficient statistics, ``federated/_linear.py``).
ESTIMATOR_ALIASES: dict[str, str] = {}
#: Default number D of random Fourier features (the privacy noise of φ(x)·S̃ does not
#: grow with D; the approximation error of the kernel falls like D^-1/2).
DEFAULT_FEATURES_DIM = 2048
#: Default tolerance band of the paper's threshold search (paper §5.1.2: 0.02–0.03).
DEFAULT_TOLERANCE = 0.03

#: Public resource limits (module docstring).
MAX_GRID_NODES = 2**18
MAX_AXIS_NODES = 2048
MAX_DEPTH = 20
MIN_BANDWIDTH = 1e-4


@dataclass(frozen=True, kw_only=True)
class FDPConfig:
    """Public parameters of an FDP-Fair run, validated at construction.

    Parameters
    ----------
    feature_bounds : sequence of (lo, hi)
        Public feature box. With ``estimator="rff"`` one entry per column: (lo, hi) for a
        numeric column, None for a column listed in ``categories``.
    alpha : float, default 0.1
        Disparity tolerance α ∈ (0, 1).
    alpha_margin : float, default 0
        Target α − margin in the threshold search (paper §4.2).
    tolerance : float, default 0.03
        Tolerance band of the paper's threshold search (paper §5.1.2, where it is called
        ρ; unrelated to the zCDP ρ of :mod:`dpfair.privacy`).
    c_omega : float, default 0.1
        C_ω of the monotone band ω.
    eta_fail : float, default 0.05
        η in ω's log(M/η).
    correction : {"alg6", "alg4", "isotonic", "none"}, default "alg6"
        Monotone correction of the paper rule (unused by the confidence rule).
    tail : {"consistent", "dyadic"}, default "consistent"
        Tail counts from Honaker's consistent (BLUE) estimate of each tree, or from the
        O(M) canonical nodes (paper) — both post-processing.
    threshold_rule : {"confidence", "paper"}, default "confidence"
        "confidence": the certified set of the pointwise confidence envelopes; "paper":
        monotone correction + tolerance band.
    fail_prob : float in (0, 1), default 0.05
        β of the confidence rule.
    cross_fit : bool or None, default None
        Two folds with the halves swapped, budget composed per row. None: True for the
        paper rule, False for the confidence rule (resolved at construction).
    s1_share : float in (0, 1), default 0.5
        Round 1's share of each site's μ*² when cross-fitting.
    count_share : float in (0, 1), default 0.05
        The group count's share of round 1's μ₁².
    depth : int, "paper" or None, default None
        Tree depth M in [1, :data:`MAX_DEPTH`]; None: 8 for the confidence rule, the
        paper's rule for the paper rule; "paper": the paper's rule (needs the sites).
    bandwidth : float or None, default None
        h in unit-box units, in [:data:`MIN_BANDWIDTH`, 10]; None: the public rule of
        :func:`~dpfair.fairclass.federated.make_protocol` (needs the sites).
    grid_shape : tuple of int or None, default None
        Nodes per axis of the kernel grid; None: from ``grid_resolution`` and the bandwidth.
    grid_resolution : float, default 4.0
        Grid nodes per bandwidth of the default grid.
    max_grid_nodes : int, default :data:`MAX_GRID_NODES`
        Nodes of the default grid.
    estimator : {"kernel", "rff", "linear", "auto"}, default "kernel"
        The group-score estimator: the kernel grid, D random Fourier features, or
        "linear": a logistic-type score sigmoid(θ̃·(1, a, w(x))) fitted by the centre from
        one round of noisy sufficient statistics per site (``federated/_linear.py``,
        ``docs/proofs/fdp_linear.md``); "auto" (resolved at construction): the kernel grid
        for at most 3 numeric features without categories, else "rff".
    features_dim : int or None, default None
        D of the rff estimator (even, at most 4096); None: 2048.
    categories : mapping of column index to list, or None
        Public category lists of the categorical columns (rff and linear; JSON strings or
        numbers: they are sent in the signed setup).
    constraints : {"demographic_parity", "equal_opportunity"}, default "demographic_parity"
        The disparity the threshold caps (Fairlearn's keywords). "equal_opportunity" caps
        the true-positive-rate difference: the centre broadcasts p̃_{a,1} (post-processing
        of round 1) and the sites' round-2 trees count their positive-label rows
        (``federated/_opportunity.py``, ``docs/proofs/equal_opportunity.md`` §5); it needs
        the confidence rule.
    radius : "auto", "box", float or None, default None
        Linear estimator only: the L2 radius r of the centred rows v(x), in half-widths of
        the public box (numeric coordinates lie in [−1, 1], each one-hot block has norm 1);
        rows are clipped to it. "auto" (also None): each site releases its own radius in
        round 1 — the noisy median of its row norms on CDP-Fair's public ladder, a
        Gaussian-DP noisy histogram charged to the site's ledger (``radius_share`` of
        μ₁²; ``docs/proofs/fdp_linear.md`` §7). "box": √(k + c), the largest possible norm
        (no clipping). A number: a public radius (e.g. from the features' known spread).
    radius_share : float or None, default None
        With ``radius="auto"``: the radius release's share of round 1's μ₁² (None:
        ``RADIUS_SHARE`` = 0.04); in (0, 0.5) with count_share + radius_share < 1.
        Public, in the signed setup: every party derives the same noise scales from it.

    Raises
    ------
    InvalidParameterError
        A value out of range or over a public resource limit; the message names the
        argument and the fix.
    """

    feature_bounds: Any
    alpha: float = 0.1
    alpha_margin: float = 0.0
    tolerance: float = DEFAULT_TOLERANCE
    c_omega: float = 0.1
    eta_fail: float = 0.05
    correction: str = "alg6"
    tail: str = "consistent"
    threshold_rule: str = "confidence"
    fail_prob: float = 0.05
    cross_fit: bool | None = None
    s1_share: float = 0.5
    count_share: float = 0.05
    depth: int | str | None = None
    bandwidth: float | None = None
    grid_shape: tuple[int, ...] | None = None
    grid_resolution: float = 4.0
    max_grid_nodes: int = MAX_GRID_NODES
    estimator: str = "kernel"
    features_dim: int | None = None
    categories: Any = None
    radius: float | str | None = None
    radius_share: float | None = None
    constraints: str = "demographic_parity"

    def __post_init__(self) -> None:
        checked = {**_check_rules(self), **_check_estimator(self)}
        for name, value in checked.items():
            object.__setattr__(self, name, value)
        for name, value in _check_grid(self).items():
            object.__setattr__(self, name, value)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_params(cls, params: Mapping[str, Any], *, where: str = "FDPConfig.from_params",
                    stacklevel: int = 2) -> FDPConfig:
        """Build from keyword parameters, accepting the deprecated ``rho=`` (one release).

        ``rho`` was the tolerance band's name; it is renamed ``tolerance`` because ρ means
        zCDP everywhere else in dpfair. Giving ``rho`` warns (DeprecationWarning); giving
        both with different values is an error.
        """
        kw = dict(params)
        if "rho" in kw:
            rho = kw.pop("rho")
            if rho is not None:
                warnings.warn(
                    f"rho= is deprecated ({where}) and will be removed in the next release; "
                    "use tolerance= (the tolerance band of the threshold search; ρ means "
                    "zCDP elsewhere in dpfair).",
                    DeprecationWarning,
                    stacklevel=stacklevel,
                )
                tol = kw.get("tolerance", DEFAULT_TOLERANCE)
                if "tolerance" in kw and tol != DEFAULT_TOLERANCE and tol != rho:
                    raise InvalidParameterError(
                        f"rho={rho!r} and tolerance={tol!r}: give only tolerance= "
                        "(rho is its deprecated name)."
                    )
                kw["tolerance"] = rho
        unknown = sorted(set(kw) - {f.name for f in fields(cls)})
        if unknown:
            raise InvalidParameterError(
                f"{where}: unknown parameter(s) {unknown}; FDPConfig accepts "
                f"{sorted(f.name for f in fields(cls))}."
            )
        return cls(**kw)

    # ------------------------------------------------------------------ derived
    @property
    def is_rff(self) -> bool:
        """True for the random-Fourier-feature estimator."""
        return self.estimator == "rff"

    @property
    def is_linear(self) -> bool:
        """True for the linear (sufficient-statistics) estimator."""
        return self.estimator == "linear"

    @property
    def is_mapped(self) -> bool:
        """True when rows go through the public feature map (rff or linear, no grid)."""
        return self.estimator in ("rff", "linear")

    @property
    def n_features(self) -> int:
        """Columns of X: one per entry of ``feature_bounds``."""
        return len(self.feature_bounds)

    def function_sensitivity(self) -> float:
        """L2 sensitivity of the round-1 function sums (√2 kernel grid, 2 RFF; for the
        linear estimator the factor that makes σ_f its sums' σ_S)."""
        if self.is_linear:
            share = float(self.radius_share or 0.0) if self.radius == "auto" else 0.0
            return linear_function_sensitivity(radius_fraction(share, self.count_share))
        return RFF_SENSITIVITY if self.is_rff else KERNEL_SUM_RKHS_SENSITIVITY


def _share(name: str, v: Any) -> float:
    """A share strictly inside (0, 1)."""
    return check_in_open_interval(name, v, 0.0, 1.0)


def _choice(name: str, value: Any, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise InvalidParameterError(f"{name}={value!r}: expected one of {allowed}.")
    return str(value)


def _check_rules(c: FDPConfig) -> dict[str, Any]:
    """α, the margin, the band, ω's constants, the rule and its shares."""
    a, margin = check_alpha(c.alpha, c.alpha_margin)
    out: dict[str, Any] = {"alpha": a, "alpha_margin": margin}
    for name in ("tolerance", "c_omega"):
        v = getattr(c, name)
        try:
            x = float(v)
        except (TypeError, ValueError):
            x = math.nan
        if isinstance(v, bool) or not (math.isfinite(x) and x >= 0):
            raise InvalidParameterError(f"{name}={v!r}: must be a finite number >= 0.")
        out[name] = x
    out["eta_fail"] = _share("eta_fail", c.eta_fail)
    out["correction"] = _choice("correction", c.correction, CORRECTIONS)
    out["threshold_rule"] = _choice("threshold_rule", c.threshold_rule, THRESHOLD_RULES)
    out["fail_prob"] = _share("fail_prob", c.fail_prob)
    out["tail"] = _choice("tail", c.tail, TAIL_ESTIMATORS)
    cross_fit = c.threshold_rule == "paper" if c.cross_fit is None else c.cross_fit
    if not isinstance(cross_fit, (bool, np.bool_)):
        raise InvalidParameterError(f"cross_fit={c.cross_fit!r}: expected True or False.")
    out["cross_fit"] = bool(cross_fit)
    out["s1_share"] = _share("s1_share", c.s1_share)
    out["count_share"] = _share("count_share", c.count_share)
    out["constraints"] = _choice("constraints", c.constraints,
                                 ("demographic_parity", "equal_opportunity"))
    if out["constraints"] == "equal_opportunity" and out["threshold_rule"] != "confidence":
        raise InvalidParameterError(
            "constraints='equal_opportunity' with threshold_rule='paper': the paper rule's "
            "band omega is derived for demographic parity; use threshold_rule='confidence' "
            "(the certified rule) for equal opportunity."
        )
    return out


def _check_estimator(c: FDPConfig) -> dict[str, Any]:
    """The estimator ("auto" resolved), the feature box, the categories and D."""
    est = _choice("estimator", c.estimator, ("auto", *PROTOCOL_ESTIMATORS, *ESTIMATOR_ALIASES))
    est = ESTIMATOR_ALIASES.get(est, est)
    if est == "auto":
        fb = c.feature_bounds
        d = len(fb) if isinstance(fb, (list, tuple)) else 0
        numeric = d > 0 and all(b is not None for b in fb)
        # many or categorical features: the linear score (one round of noisy sufficient
        # statistics; measured better than random features on Adult and at d = 20)
        est = "kernel" if (not c.categories and numeric and d <= AUTO_KERNEL_MAX_D) else "linear"
    if est != "linear" and c.radius_share is not None:
        raise InvalidParameterError(
            "radius_share: only the linear estimator with radius='auto' releases a radius."
        )
    if est == "rff":
        if c.radius is not None:
            raise InvalidParameterError("radius: only the linear estimator clips rows to a radius.")
        fmap, dim = _check_rff(c.feature_bounds, c.categories, c.features_dim)
        cats = tuple(sorted((int(j), tuple(v)) for j, v in fmap.categories.items()))
        return {"estimator": est, "feature_bounds": fmap.bounds, "categories": cats,
                "features_dim": dim}
    if est == "linear":
        if c.features_dim is not None:
            raise InvalidParameterError(
                "features_dim: only estimator='rff' has random features; drop it for 'linear'."
            )
        fmap, _ = _check_rff(c.feature_bounds, c.categories, None)
        if fmap.width > MAX_LINEAR_WIDTH:
            raise InvalidParameterError(
                f"categories/feature_bounds: the linear map has {fmap.width} columns; the "
                f"public limit is {MAX_LINEAR_WIDTH} (round-1 messages carry p(p+1)/2 "
                "moments per fold). Merge rare categories."
            )
        cats = tuple(sorted((int(j), tuple(v)) for j, v in fmap.categories.items()))
        radius = resolve_radius(c.radius, fmap)
        return {"estimator": est, "feature_bounds": fmap.bounds, "categories": cats,
                "features_dim": None, "radius": radius,
                "radius_share": _radius_share(c, radius)}
    if c.radius is not None:
        raise InvalidParameterError("radius: only the linear estimator clips rows to a radius.")
    if c.categories:
        raise InvalidParameterError(
            "categories: the kernel estimator needs numeric features on a grid; use "
            "estimator='rff' or 'linear' (or 'auto') for one-hot categorical columns."
        )
    fb_arr = np.asarray(c.feature_bounds, dtype=object) if c.feature_bounds is not None else None
    d = 0 if fb_arr is None or fb_arr.ndim != 2 else fb_arr.shape[0]
    lows, highs = check_feature_bounds(c.feature_bounds, max(d, 1))
    bounds = tuple(zip(lows.tolist(), highs.tolist(), strict=True))
    return {"estimator": est, "feature_bounds": bounds, "categories": (), "features_dim": None}


def _radius_share(c: FDPConfig, radius: float | str) -> float | None:
    """The radius release's share of μ₁² (``radius="auto"`` only; default RADIUS_SHARE)."""
    if radius != "auto":
        if c.radius_share is not None:
            raise InvalidParameterError(
                f"radius_share={c.radius_share!r}: only radius='auto' releases a radius (the "
                f"radius here is the public {radius!r}); drop radius_share."
            )
        return None
    share = RADIUS_SHARE if c.radius_share is None else c.radius_share
    v = check_in_open_interval("radius_share", share, 0.0, 0.5)
    count = float(c.count_share)
    if count + v >= 1.0:
        raise InvalidParameterError(
            f"radius_share={share!r} with count_share={c.count_share!r}: together they must "
            "stay below 1 (the rest of round 1 pays the sufficient statistics)."
        )
    return v


def _check_rff(
    feature_bounds: Any, categories: Any, features_dim: Any
) -> tuple[FeatureMap, int]:
    """Validate the RFF estimator's public parameters (limits checked before allocation)."""
    dim = DEFAULT_FEATURES_DIM if features_dim is None else features_dim
    if (
        isinstance(dim, bool)
        or not isinstance(dim, (int, np.integer))
        or not 2 <= int(dim) <= MAX_FEATURES_DIM
        or int(dim) % 2
    ):
        raise InvalidParameterError(
            f"features_dim={features_dim!r}: expected an even integer in "
            f"[2, {MAX_FEATURES_DIM}] (public limit: round-1 messages carry 4·D numbers "
            "per fold)."
        )
    n_cols = len(feature_bounds) if isinstance(feature_bounds, (list, tuple)) else 0
    if not 1 <= n_cols <= 4096:
        raise InvalidParameterError(
            "feature_bounds: expected one entry per column — (lo, hi) for a numeric column, "
            "None for a categorical one listed in categories."
        )
    if isinstance(categories, tuple):  # the normalised form ((column, (categories…)), …)
        categories = {int(j): list(v) for j, v in categories}
    if isinstance(categories, Mapping):
        for key, vals in categories.items():
            for v in vals:
                if isinstance(v, bool) or not isinstance(v, (str, int, float)):
                    raise InvalidParameterError(
                        f"categories[{key!r}]: category {v!r} must be a string or a number "
                        "(it is sent in the signed setup)."
                    )
    fmap = FeatureMap.build(feature_bounds, categories, n_cols)
    if fmap.width > MAX_MAP_WIDTH:
        raise InvalidParameterError(
            f"categories: the one-hot map has {fmap.width} columns; the public limit is "
            f"{MAX_MAP_WIDTH}."
        )
    return fmap, int(dim)


def _check_grid(c: FDPConfig) -> dict[str, Any]:
    """Bandwidth, depth and the kernel grid's limits (those that do not need the sites)."""
    out: dict[str, Any] = {"depth": _check_depth(c.depth)}
    if c.bandwidth is not None:
        try:
            h = float(c.bandwidth)
        except (TypeError, ValueError):
            h = math.nan
        if isinstance(c.bandwidth, bool) or not (math.isfinite(h) and MIN_BANDWIDTH <= h <= 10):
            raise InvalidParameterError(
                f"bandwidth={c.bandwidth!r}: expected a number in [{MIN_BANDWIDTH:g}, 10] "
                "(unit-box units; public limit: a bandwidth finer than the finest allowed "
                "grid can resolve only makes the model noise)."
            )
        out["bandwidth"] = h
    r = c.grid_resolution
    if isinstance(r, bool) or not isinstance(r, (int, float)) or not (
        math.isfinite(r) and r > 0
    ):
        raise InvalidParameterError(f"grid_resolution={r!r}: must be > 0.")
    if c.is_mapped:
        return out
    d = len(c.feature_bounds)
    m = c.max_grid_nodes
    if not (isinstance(m, int) and not isinstance(m, bool) and 2**d <= m <= MAX_GRID_NODES):
        raise InvalidParameterError(
            f"max_grid_nodes={m!r}: expected an integer in [2**d, {MAX_GRID_NODES}] "
            f"(d = {d})."
        )
    if c.grid_shape is not None:
        out["grid_shape"] = _check_grid_shape(c.grid_shape, d)
    return out


def _check_depth(depth: Any) -> int | str | None:
    if depth is None or (isinstance(depth, str) and depth == "paper"):
        return depth
    if (
        isinstance(depth, bool)
        or not isinstance(depth, (int, np.integer, float))
        or int(depth) != depth
        or not 1 <= int(depth) <= MAX_DEPTH
    ):
        raise InvalidParameterError(
            f"depth={depth!r}: expected an integer in [1, {MAX_DEPTH}], 'paper' or None "
            f"(public limit: a depth-{MAX_DEPTH} tree pair already has 2^{MAX_DEPTH + 2} "
            "nodes)."
        )
    return int(depth)


def _check_grid_shape(grid_shape: Any, d: int) -> tuple[int, ...]:
    shape = tuple(grid_shape)
    if (
        len(shape) != d
        or not all(isinstance(g, (int, np.integer)) and not isinstance(g, bool) for g in shape)
        or min(shape) < 2
        or max(shape) > MAX_AXIS_NODES
        or math.prod(int(g) for g in shape) > MAX_GRID_NODES
    ):
        raise InvalidParameterError(
            f"grid_shape={list(shape)!r}: need {d} integer axis sizes in "
            f"[2, {MAX_AXIS_NODES}] with at most {MAX_GRID_NODES} nodes in total "
            "(public limits, checked before anything is allocated)."
        )
    return tuple(int(g) for g in shape)
