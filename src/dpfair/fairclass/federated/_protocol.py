"""Public protocol parameters, each site's privacy plan, and the site ledger.

Privacy of one site s (replace-one neighbours inside the site's own data; N_s public; the
split of the site's rows into halves T and C is drawn independently of the data, so a
replaced record lies in exactly one half). Every release is a Gaussian mechanism, so the
site accounts in Gaussian differential privacy (μ-GDP; Dong, Roth & Su 2022): a Gaussian
release with L2 sensitivity Δ and noise σ is (Δ/σ)-GDP, adaptive composition of μ_k-GDP
releases on the same rows is sqrt(Σ μ_k²)-GDP exactly, and μ-GDP is (ε, δ)-DP for exactly
the (ε, δ) pairs of the analytic Gaussian mechanism (Balle & Wang 2018) with σ = 1/μ.

Round 1 on T (one Gaussian mechanism, as CDP-Fair's S1, ``fairclass/_budget.py``):
    ñ_{s,1} = n_1(T) + N(0, σ_c²)                 Δ = 1            μ_c = 1/σ_c
    F̃_{a,y} = F_{a,y} + σ_f·W_{a,y} (4 functions)  Δ_H = √2         μ_f = √2/σ_f
    μ₁² = μ_c² + μ_f², with μ_c² = w_c·μ₁² (``count_share``).
With ``estimator="rff"`` the four functions are the sums of D random Fourier features
(``fairclass/_rff.py``): Δ = 2 in φ units (lattice-exact), σ_f = 2/μ_f, same μ₁ and ledger.
With ``estimator="linear"`` they are the group sums and label contrast, cell counts and
second moments of the centred, radius-clipped rows (``federated/_linear.py``,
``docs/proofs/fdp_linear.md``): one Gaussian mechanism of μ_f² = 8/σ_S² + 2/σ_n² +
2/σ_M², split by fixed public shares, σ_f = σ_S; same μ₁ and ledger. With
``radius="auto"`` each site first releases a noisy histogram of its row norms (Δ = √2,
μ_r² = radius_share·μ₁², its clip radius r_s is the noisy median) and the statistics get
the rest: μ₁² = μ_c² + μ_r² + μ_L² (adaptive composition), the same μ₁.

Round 2 on C (given the broadcast model, which is a post-processing of round-1 releases):
    two noisy binary trees of depth M with noisy roots, one per group, σ_t per node:
    Δ₂ = sqrt(2(M + 1)) for the pair (a record changing group leaves one tree and enters
    the other on all M + 1 levels; see :class:`dpfair.mechanisms.NoisyBinaryTree`):
    μ₂ = sqrt(2(M + 1))/σ_t.

Composition per row:
    * ``cross_fit=False``: T sees round 1 only, C round 2 only → parallel composition,
      μ₁ = μ₂ = μ* where μ* is the GDP level of the site's (ε_s, δ_s).
    * ``cross_fit=True`` (two folds, halves swapped): every row is in one round-1 release
      (as training half of one fold) and one round-2 release (as calibration half of the
      other): μ₁² + μ₂² = μ*², split by ``s1_share`` (μ₁² = s·μ*²). Composed exactly — the
      site spends (ε_s, δ_s) in total, not per fold.

Public resource limits (checked on every setup, built or received, before anything is
allocated; a setup over a limit is refused): at most :data:`MAX_SITES` sites, a grid of at
most :data:`MAX_GRID_NODES` nodes and :data:`MAX_AXIS_NODES` per axis (each axis holds a
dense g×g kernel matrix and its root: a 1-D grid of 2^18 nodes would need 512 GiB), a
bandwidth in [:data:`MIN_BANDWIDTH`, 10] and a tree depth M ≤ :data:`MAX_DEPTH`. Message
sizes follow from these (:meth:`ProtocolConfig.message_limit`). The run's public choices
are an :class:`~dpfair.fairclass.federated.FDPConfig` (``_config.py``, validated there);
:func:`make_protocol` adds the sites and resolves the defaults that need them.
"""

from __future__ import annotations

import math
import secrets
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpfair._errors import InvalidParameterError
from dpfair.fairclass._budget import KERNEL_SUM_RKHS_SENSITIVITY
from dpfair.fairclass._linear import FeatureMap
from dpfair.fairclass._model import bandwidth_rule
from dpfair.fairclass._rff import RFF_SENSITIVITY, rff_frequencies
from dpfair.fairclass._validation import check_budget
from dpfair.fairclass.federated._config import MAX_AXIS_NODES, MAX_DEPTH, FDPConfig
from dpfair.fairclass.federated._keys import parse_public_key
from dpfair.fairclass.federated._linear import (
    LinearSigmas,
    check_linear_noise,
    linear_function_sensitivity,
    linear_sigmas,
    radius_fraction,
)
from dpfair.fairclass.federated._messages import (
    CENTRE,
    MAX_MESSAGE_BYTES,
    Envelope,
    ProtocolError,
    wire_float,
)
from dpfair.mechanisms import (
    KroneckerGaussianGrid,
    approx_dp_sigma_target,
    check_delta_form,
    discrete_gaussian_sigma,
)
from dpfair.privacy import Budget, Ledger, LedgerRecord
from dpfair.privacy import gdp_epsilon as _engine_gdp_epsilon

__all__ = [
    "FDPConfig",
    "ProtocolConfig",
    "SiteLedger",
    "SitePlan",
    "SiteSpec",
    "check_sites",
    "default_bandwidth",
    "default_grid_shape",
    "depth_rule",
    "effective_size",
    "gdp_epsilon",
    "make_protocol",
    "resolve_depth",
    "site_plan",
]

#: Scale of the RFF default bandwidth (see :func:`default_bandwidth`).
RFF_BANDWIDTH_FACTOR = 0.85
#: Public limit on the number of sites (the grid, bandwidth and depth limits are
#: :mod:`~dpfair.fairclass.federated._config`'s).
MAX_SITES = 1000
_PARTY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
_RESERVED_IDS = (CENTRE, "all")

#: Tree depth M used by the confidence rule when ``depth`` is not given (see
#: ``docs/proofs/fairclass_fdp_fair.md`` §Depth: the DD noise grows like M while the grid
#: step 2^(1−M) only needs to be small against α; the paper's rule applies to "paper").
DEFAULT_CONFIDENCE_DEPTH = 8


def gdp_epsilon(mu: float, delta: float) -> float:
    """Smallest ε with μ-GDP ⇒ (ε, δ)-DP for a site's exact discrete Gaussian releases.

    The conversion itself is the engine's (:func:`dpfair.privacy.gdp_epsilon`, exact for the
    continuous Gaussian, Dong, Roth & Su 2022 Cor. 2.13), read off at δ(1 − 2^-40). Every
    release of a site is an exact *discrete* Gaussian on a public lattice, which is
    (ε, δ_c + ξ)-DP whenever the continuous mechanism is (ε, δ_c)-DP, with ξ ≤ δ·2^-41 for
    every ε ≤ ~1200 + ln δ (:func:`~dpfair.mechanisms.discrete_gaussian.approx_dp_sigma_target`;
    beyond, the setup is refused). So the ε returned makes (ε, δ) a true bound.
    """
    if mu <= 0:
        return 0.0
    eps = _engine_gdp_epsilon(mu, approx_dp_sigma_target(0.0, delta, _MAX_NOISE_VALUES))
    check_delta_form(eps, delta, _MAX_NOISE_VALUES)  # refuse what is not proven
    return eps


#: Public bound on the number of noise values a site ever draws (for the lattice slack).
_MAX_NOISE_VALUES = 2**40


def effective_size(n: float, epsilon: float) -> float:
    """min(N, N²ε²): the effective sample size of paper 003 (its weights and its rule for M)."""
    return float(min(n, (n * epsilon) ** 2))


def depth_rule(sizes: list[int], epsilons: list[float]) -> int:
    """M = max(⌊log2 Σ_s min(N_s, N_s² ε_s²)⌋ + 1, 6) (paper §5.1.2)."""
    total = sum(effective_size(n, e) for n, e in zip(sizes, epsilons, strict=True))
    return max(math.floor(math.log2(total)) + 1, 6)


@dataclass(frozen=True)
class SiteSpec:
    """Public facts about one site: id, size N_s and budget (ε_s, δ_s)."""

    site_id: str
    n: int
    epsilon: float
    delta: float

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"site_id": self.site_id, "n": self.n, "epsilon": self.epsilon, "delta": self.delta}


@dataclass(frozen=True)
class SitePlan:
    """Noise scales of one site (module docstring).

    Attributes
    ----------
    mu_total : float
        μ* of the site's (ε_s, δ_s).
    mu_round1, mu_round2 : float
        GDP levels of the round-1 release and of the round-2 pair of trees.
    sigma_count, sigma_function, sigma_tree : float
        σ_c, σ_f (multiplier of the GP), σ_t (per tree node).
    """

    mu_total: float
    mu_round1: float
    mu_round2: float
    sigma_count: float
    sigma_function: float
    sigma_tree: float

    def round2_epsilon(self, delta: float) -> float:
        """The (ε, δ) level of the round-2 release alone (for ω)."""
        return gdp_epsilon(self.mu_round2, delta)


def site_plan(
    epsilon: float,
    delta: float,
    depth: int,
    *,
    cross_fit: bool,
    s1_share: float,
    count_share: float,
    function_sensitivity: float = KERNEL_SUM_RKHS_SENSITIVITY,
) -> SitePlan:
    """Derive σ_c, σ_f, σ_t from (ε_s, δ_s) (module docstring).

    ``function_sensitivity``: L2 sensitivity of the four function sums — √2 in the RKHS for
    the kernel grid, 2 (φ units) for random Fourier features (``fairclass/_rff.py``).
    """
    # calibrated at δ(1 − 2^-40): the discrete Gaussian's lattice slack fits in the rest
    mu_star = 1.0 / discrete_gaussian_sigma(epsilon, delta, 1.0, _MAX_NOISE_VALUES)
    if cross_fit:
        mu1 = mu_star * math.sqrt(s1_share)
        mu2 = mu_star * math.sqrt(1.0 - s1_share)
    else:
        mu1 = mu2 = mu_star
    mu_c = mu1 * math.sqrt(count_share)
    mu_f = mu1 * math.sqrt(1.0 - count_share)
    return SitePlan(
        mu_total=mu_star,
        mu_round1=mu1,
        mu_round2=mu2,
        sigma_count=1.0 / mu_c,
        sigma_function=function_sensitivity / mu_f,
        sigma_tree=math.sqrt(2.0 * (depth + 1)) / mu2,
    )


class SiteLedger:
    """One site's accountant over both rounds: a view of the engine in Gaussian DP.

    Every release of a site is a Gaussian mechanism, so its privacy is μ-GDP and the
    site's :class:`~dpfair.privacy.Ledger` is kept in that measure, with cap μ*-GDP (μ* of
    the site's (ε_s, δ_s)): within a half ("half A", "half B") μ² adds (exact for Gaussian
    releases, Dong, Roth & Su 2022 Cor. 3.3); the halves are disjoint, data-independent row
    sets and compose in parallel. A release that would pass μ* on its half is refused
    *before* the noise is drawn. The reported (ε, δ) is the exact analytic-Gaussian
    conversion of the composed μ (:func:`gdp_epsilon`, with the lattice slack), tighter than
    any generic zCDP conversion.

    Parameters
    ----------
    site_id : str
    epsilon, delta : float
        The site's requested (ε_s, δ_s).
    mu_total : float
        μ*, its Gaussian-DP level.
    """

    def __init__(self, site_id: str, epsilon: float, delta: float, mu_total: float) -> None:
        self.site_id = site_id
        self.epsilon = float(epsilon)
        self.delta = float(delta)
        self.mu_total = float(mu_total)
        self.ledger = Ledger(Budget.gdp(self.mu_total))

    @property
    def records(self) -> list[LedgerRecord]:
        """Every release charged, oldest first."""
        return list(self.ledger.records)

    def charge(self, label: str, rows: str, mu: float, noise: str) -> None:
        """Charge a μ-GDP release on ``rows`` (raises BudgetExceededError if over)."""
        self.ledger.charge(
            Budget.gdp(mu, note=f"{mu:.6g}-GDP"), label=label, rows=rows, noise=noise
        )

    def mu_by_rows(self) -> dict[str, float]:
        """Composed μ per partition."""
        return {rows: float(b.mu or 0.0) for rows, b in self.ledger.spent_by_rows.items()}

    @property
    def spent(self) -> Budget:
        """(ε, δ) of everything released so far: parallel over halves, exact GDP within."""
        mu = float(self.ledger.spent.mu or 0.0)
        return Budget.approx(
            gdp_epsilon(mu, self.delta),
            self.delta,
            note="exact Gaussian-DP composition within a half, parallel across halves",
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary (sent to the centre in round 2: public facts only)."""
        spent = self.spent
        return {
            "site_id": self.site_id,
            "requested": {"epsilon": self.epsilon, "delta": self.delta},
            "spent": {"epsilon": spent.epsilon, "delta": spent.delta},
            "mu_by_rows": self.mu_by_rows(),
            "records": [
                {"label": r.label, "rows": r.rows, "rho": float(r.cost.mu or 0.0) ** 2 / 2.0,
                 "noise": r.noise}
                for r in self.ledger.records
            ],
        }


@dataclass(frozen=True)
class ProtocolConfig:
    """Public parameters shared by every party (the ``setup`` message).

    Attributes
    ----------
    protocol_id : str
        Random run id; every later message must carry it.
    sites : tuple of SiteSpec
    feature_bounds : tuple of (lo, hi)
    bandwidth : float
        h in unit-box units, common to all sites.
    grid_shape : tuple of int
        Nodes per axis of the public grid on [0, 1]^d.
    depth : int
        Tree depth M (2^M bins on [−1, 1]).
    alpha, alpha_margin, tolerance, c_omega, eta_fail : float
        α, the margin (target α − margin), the tolerance band of the paper's threshold
        search (the paper's ρ; setup field ``tolerance`` since schema version 3), C_ω,
        and η of ω.
    correction : str
        "alg6", "alg4", "isotonic" or "none".
    tail : str
        "dyadic" (paper: sum of O(M) nodes) or "consistent" (Honaker BLUE).
    cross_fit : bool
    s1_share, count_share : float
    threshold_rule : str
        "confidence" (default: certified set of the pointwise confidence envelopes) or
        "paper" (monotone correction + tolerance band).
    fail_prob : float
        β of the confidence rule: P(population |DD| > α) ≤ β (up to the approximations
        stated in ``docs/proofs/fairclass_fdp_fair.md``) whenever the outcome is certified.
    keys : tuple of (party, public key)
        The pinned Ed25519 public key of the centre and of every site (``"ed25519:…"``);
        every later message is verified against these. Empty only for in-memory use
        without messages.
    radius : float or "auto"
        Linear estimator: the public clip radius, or "auto" (each site releases its own in
        round 1, ``federated/_linear.py``); 0.0 for the other estimators.
    radius_share : float
        With ``radius="auto"``: the radius release's share of each site's μ₁² (else 0).
    """

    protocol_id: str
    sites: tuple[SiteSpec, ...]
    feature_bounds: tuple[tuple[float, float], ...]
    bandwidth: float
    grid_shape: tuple[int, ...]
    depth: int
    alpha: float
    alpha_margin: float
    tolerance: float
    c_omega: float
    eta_fail: float
    correction: str
    tail: str
    cross_fit: bool
    s1_share: float
    count_share: float
    threshold_rule: str = "confidence"
    fail_prob: float = 0.05
    keys: tuple[tuple[str, str], ...] = ()
    estimator: str = "kernel"
    features_dim: int = 0
    rff_seed: int = 0
    categories: tuple[tuple[int, tuple[Any, ...]], ...] = ()
    radius: float | str = 0.0
    radius_share: float = 0.0
    constraints: str = "demographic_parity"

    @property
    def is_opportunity(self) -> bool:
        """True under ``constraints="equal_opportunity"`` (``_opportunity.py``)."""
        return self.constraints == "equal_opportunity"

    @property
    def is_rff(self) -> bool:
        """True for the random-Fourier-feature estimator."""
        return self.estimator == "rff"

    @property
    def is_linear(self) -> bool:
        """True for the linear (sufficient-statistics) estimator (``_linear.py``)."""
        return self.estimator == "linear"

    @property
    def is_mapped(self) -> bool:
        """True when rows go through the public feature map (rff or linear, no grid)."""
        return self.estimator in ("rff", "linear")

    @property
    def private_radius(self) -> bool:
        """True when each site releases its own clip radius (linear, ``radius="auto"``)."""
        return self.is_linear and self.radius == "auto"

    @property
    def radius_fraction(self) -> float:
        """The radius release's share f of μ_f² (0 for a public radius)."""
        if not self.private_radius:
            return 0.0
        return radius_fraction(self.radius_share, self.count_share)

    def linear_sigmas(self, site_id: str) -> LinearSigmas:
        """The noise sds of ``site_id``'s linear round 1 (public: from the setup)."""
        return linear_sigmas(self.plan(site_id).sigma_function, self.radius_fraction)

    def check_servable(self, site_id: str | None = None) -> None:
        """Refuse a setup whose noise plan the exact samplers cannot serve.

        For the linear estimator, every variance round 1 draws with (statistics and, with
        ``radius="auto"``, the radius histogram) is checked against the sampler's public
        limit for ``site_id`` (every site when None), from public numbers only
        (:func:`~dpfair.fairclass.federated._linear.check_linear_noise`). Run when a setup is
        built or parsed (:func:`make_protocol`) and by a site before it charges round 1,
        so a setup that cannot run costs no budget.

        Raises
        ------
        InvalidParameterError
            Naming the parameter (``radius_share``, the site's ``epsilon``) and the site.
        """
        if not self.is_linear:
            return
        for sid in self.site_ids if site_id is None else (site_id,):
            try:
                check_linear_noise(self.linear_sigmas(sid), self.site(sid).n,
                                   private_radius=self.private_radius)
            except InvalidParameterError as exc:
                raise InvalidParameterError(f"site {sid!r}: {exc}") from None

    @property
    def linear_width(self) -> int:
        """p: columns of the public map u(x) (the linear model has p + 2 coefficients)."""
        return self.feature_map().width

    @property
    def rho(self) -> float:
        """Deprecated name of :attr:`tolerance` (ρ means zCDP elsewhere in dpfair)."""
        warnings.warn(
            "ProtocolConfig.rho is deprecated and will be removed in the next release; use "
            ".tolerance.",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.tolerance

    def fdp_config(self) -> FDPConfig:
        """The run's public choices with this setup's resolved depth, bandwidth and grid:
        ``make_protocol(self.sites, self.fdp_config(), protocol_id=…, keys=…,
        rff_seed=…)`` rebuilds this setup."""
        return FDPConfig(
            feature_bounds=self.feature_bounds,
            alpha=self.alpha,
            alpha_margin=self.alpha_margin,
            tolerance=self.tolerance,
            c_omega=self.c_omega,
            eta_fail=self.eta_fail,
            correction=self.correction,
            tail=self.tail,
            threshold_rule=self.threshold_rule,
            fail_prob=self.fail_prob,
            cross_fit=self.cross_fit,
            s1_share=self.s1_share,
            count_share=self.count_share,
            depth=self.depth,
            bandwidth=self.bandwidth,
            grid_shape=None if self.is_mapped else self.grid_shape,
            estimator=self.estimator,
            features_dim=self.features_dim if self.is_rff else None,
            categories=self.categories,
            radius=self.radius if self.is_linear else None,
            radius_share=self.radius_share if self.private_radius else None,
            constraints=self.constraints,
        )

    def function_sensitivity(self) -> float:
        """L2 sensitivity of the round-1 function sums (√2 kernel, 2 RFF; linear: the
        factor 2/√share that makes σ_f the sums' σ_S, ``_linear.py``)."""
        if self.is_linear:
            return linear_function_sensitivity(self.radius_fraction)
        return RFF_SENSITIVITY if self.is_rff else KERNEL_SUM_RKHS_SENSITIVITY

    def feature_map(self, clip: bool = False) -> FeatureMap:
        """The public feature map (numeric bounds, one-hot public categories)."""
        return FeatureMap(
            tuple(None if b is None else (float(b[0]), float(b[1]))
                  for b in self.feature_bounds),
            {int(j): tuple(c) for j, c in self.categories},
            clip,
        )

    def rff_freqs(self) -> np.ndarray:
        """The public frequencies of the RFF estimator (from the signed seed)."""
        return rff_frequencies(
            self.feature_map().width, self.features_dim, self.bandwidth, self.rff_seed
        )

    # ------------------------------------------------------------------ derived
    @property
    def n_folds(self) -> int:
        """2 with cross-fitting, else 1."""
        return 2 if self.cross_fit else 1

    @property
    def site_ids(self) -> tuple[str, ...]:
        """Site ids in protocol order."""
        return tuple(s.site_id for s in self.sites)

    def site(self, site_id: str) -> SiteSpec:
        """The spec of ``site_id`` (ProtocolError if unknown)."""
        for s in self.sites:
            if s.site_id == site_id:
                return s
        raise ProtocolError(site_id, "sender", f"not a site of this protocol {self.site_ids}.")

    def plan(self, site_id: str) -> SitePlan:
        """The noise plan of ``site_id`` (recomputable by anyone from public parameters)."""
        s = self.site(site_id)
        return site_plan(
            s.epsilon,
            s.delta,
            self.depth,
            cross_fit=self.cross_fit,
            s1_share=self.s1_share,
            count_share=self.count_share,
            function_sensitivity=self.function_sensitivity(),
        )

    def grid(self) -> KroneckerGaussianGrid:
        """The public grid (rebuilt identically by every party)."""
        return KroneckerGaussianGrid.uniform(
            len(self.grid_shape), self.grid_shape, length_scale=self.bandwidth
        )

    def weights(self) -> np.ndarray:
        """ν_s = μ_s ∝ min(N_s, N_s² ε_s²), normalised to sum to 1 (paper §4, Theorem 2)."""
        w = np.array([effective_size(s.n, s.epsilon) for s in self.sites], dtype=np.float64)
        return w / w.sum()

    def keyring(self) -> dict[str, str]:
        """The pinned public keys, party → ``"ed25519:…"`` (for ``decode(keys=…)``)."""
        return dict(self.keys)

    def message_shapes(self, kind: str) -> dict[str, tuple[int, ...]]:
        """The array shapes this setup implies for a message of ``kind``."""
        shapes = self._estimator_shapes(kind)
        if self.is_opportunity and kind in ("model", "released_model"):
            shapes = {**shapes, "p_a1": (self.n_folds, 2)}  # p̃_{a,1} (_opportunity.py)
        return shapes

    def _estimator_shapes(self, kind: str) -> dict[str, tuple[int, ...]]:
        nf, g = self.n_folds, tuple(self.grid_shape)
        n_nodes = (1 << (self.depth + 1)) - 1
        if self.is_linear:
            p = self.linear_width
            curve = (nf, (1 << self.depth) + 1)
            lin_table: dict[str, dict[str, tuple[int, ...]]] = {
                "setup": {},
                "round1": {"count": (nf,), "sums": (nf, p, 3), "cells": (nf, 2, 2),
                           "moments": (nf, p * (p + 1) // 2)},
                "model": {"theta": (nf, p + 2), "pi": (nf, 2)},
                "round2": {"trees": (nf, 2, n_nodes)},
                "released_model": {"theta": (nf, p + 2), "pi": (nf, 2), "tau": (nf,),
                                   "dd_curve": curve, "dd_sd": curve},
            }
            if self.private_radius and kind in ("model", "released_model"):
                return {**lin_table[kind], "radius": (nf,)}  # the common radius r̄ per fold
            return lin_table[kind]
        if self.is_rff:
            dim = self.features_dim
            final = {
                "coef": (nf, dim, 2, 2),
                "ridge": (nf, 2),
                "pi": (nf, 2),
                "tau": (nf,),
                "dd_curve": (nf, (1 << self.depth) + 1),
                "dd_sd": (nf, (1 << self.depth) + 1),
            }
            rff_table: dict[str, dict[str, tuple[int, ...]]] = {
                "setup": {},
                "round1": {"count": (nf,), "sums": (nf, dim, 2, 2)},
                "model": {"coef": (nf, dim, 2, 2), "ridge": (nf, 2), "pi": (nf, 2)},
                "round2": {"trees": (nf, 2, n_nodes)},
                "released_model": final,
            }
            return rff_table[kind]
        table: dict[str, dict[str, tuple[int, ...]]] = {
            "setup": {},
            "round1": {"count": (nf,), "sums": (nf, *g, 2, 2)},
            "model": {"eta": (nf, *g, 2), "pi": (nf, 2)},
            "round2": {"trees": (nf, 2, n_nodes)},
            "released_model": {
                "eta": (nf, *g, 2),
                "pi": (nf, 2),
                "tau": (nf,),
                "dd_curve": (nf, (1 << self.depth) + 1),
                "dd_sd": (nf, (1 << self.depth) + 1),
            },
        }
        return table[kind]

    def message_limit(self, kind: str) -> int:
        """Largest honest size in bytes of a ``kind`` message of this run (base64 arrays
        plus a generous allowance for the JSON fields); larger ones are refused unread."""
        elements = sum(math.prod(s) for s in self.message_shapes(kind).values())
        b64 = 4 * ((8 * elements + 2) // 3)
        allowance = 256 * 2**10 + 4096 * len(self.sites)  # JSON fields, site reports
        return min(b64 + allowance, MAX_MESSAGE_BYTES)

    def tau_grid(self) -> np.ndarray:
        """τ_j = −1 + 2j/2^M, j = 0..2^M (contains 0 exactly)."""
        k = 1 << self.depth
        return -1.0 + 2.0 * np.arange(k + 1, dtype=np.float64) / k

    # ------------------------------------------------------------------ messages
    def to_envelope(self) -> Envelope:
        """The ``setup`` message."""
        return Envelope(
            "setup",
            self.protocol_id,
            "centre",
            fields={
                "sites": [s.to_dict() for s in self.sites],
                "feature_bounds": [None if b is None else list(b) for b in self.feature_bounds],
                "bandwidth": self.bandwidth,
                "grid_shape": list(self.grid_shape),
                "depth": self.depth,
                "alpha": self.alpha,
                "alpha_margin": self.alpha_margin,
                "tolerance": self.tolerance,
                "c_omega": self.c_omega,
                "eta_fail": self.eta_fail,
                "correction": self.correction,
                "tail": self.tail,
                "cross_fit": self.cross_fit,
                "s1_share": self.s1_share,
                "count_share": self.count_share,
                "threshold_rule": self.threshold_rule,
                "fail_prob": self.fail_prob,
                "keys": dict(self.keys),
                **self.estimator_fields(),
                **self.constraint_fields(),
            },
        )

    def constraint_fields(self) -> dict[str, Any]:
        """``{"constraints": "equal_opportunity"}`` under equal opportunity, else nothing
        (demographic-parity messages are unchanged)."""
        return {"constraints": self.constraints} if self.is_opportunity else {}

    def estimator_fields(self) -> dict[str, Any]:
        """The optional setup/released-model fields of the RFF and linear estimators (none
        for the kernel grid, whose messages are unchanged)."""
        if self.is_linear:
            return {
                "estimator": self.estimator,
                "radius": self.radius,
                **({"radius_share": self.radius_share} if self.private_radius else {}),
                "categories": [[int(j), list(c)] for j, c in self.categories],
            }
        if not self.is_rff:
            return {}
        return {
            "estimator": self.estimator,
            "features_dim": self.features_dim,
            "rff_seed": self.rff_seed,
            "categories": [[int(j), list(c)] for j, c in self.categories],
        }

    @classmethod
    def from_envelope(cls, env: Envelope) -> ProtocolConfig:
        """Validate a ``setup`` message."""
        if env.kind != "setup":
            raise ProtocolError(env.sender, "kind", f"expected 'setup', got {env.kind!r}.")
        try:
            sites = _sites_from_envelope(env)
            config = _fdp_config_from_envelope(env)
            return make_protocol(
                sites,
                config,
                protocol_id=env.protocol_id,
                keys=env.get("keys", dict),
                rff_seed=env.get("rff_seed", int) if config.is_rff else None,
            )
        except InvalidParameterError as exc:
            if isinstance(exc, ProtocolError):
                raise
            raise ProtocolError(env.sender, "fields", str(exc)) from None
        except OverflowError:  # a JSON integer beyond binary64 in a nested field
            raise ProtocolError(env.sender, "fields", "a number beyond binary64's range "
                                "(a huge JSON integer); refused.") from None


def _sites_from_envelope(env: Envelope) -> list[SiteSpec]:
    """The ``sites`` field of a setup: at most :data:`MAX_SITES` exact records."""
    raw_sites = env.get("sites", list)
    if not 1 <= len(raw_sites) <= MAX_SITES:
        raise ProtocolError(
            env.sender, "fields.sites", f"{len(raw_sites)} sites; the limit is {MAX_SITES}."
        )
    sites = []
    for i, s in enumerate(raw_sites):
        ok = (
            isinstance(s, dict)
            and set(s) == {"site_id", "n", "epsilon", "delta"}
            and isinstance(s["site_id"], str)
            and isinstance(s["n"], int)
            and not isinstance(s["n"], bool)
            and all(
                isinstance(s[k], (int, float)) and not isinstance(s[k], bool)
                and math.isfinite(wire_float(s[k]))
                for k in ("epsilon", "delta")
            )
        )
        if not ok:
            raise ProtocolError(
                env.sender,
                f"fields.sites[{i}]",
                "malformed (exactly site_id: str, n: int, epsilon, delta: finite numbers).",
            )
        sites.append(SiteSpec(s["site_id"], s["n"], float(s["epsilon"]), float(s["delta"])))
    return sites


def _fdp_config_from_envelope(env: Envelope) -> FDPConfig:
    """The public choices of a setup message (every field type-checked first)."""
    grid_shape = env.get("grid_shape", list)
    est = env.get("estimator", str) if "estimator" in env.fields else "kernel"
    rff_kw: dict[str, Any] = {}
    foreign = {"rff": ("radius", "radius_share"), "linear": ("features_dim", "rff_seed")}.get(
        est, ("radius", "radius_share", "features_dim", "rff_seed", "categories"))
    extra = sorted(set(foreign) & set(env.fields))
    if extra:
        raise ProtocolError(
            env.sender, f"fields.{extra[0]}", f"not a field of estimator {est!r}; refused."
        )
    if est in ("rff", "linear"):
        raw_cats = env.get("categories", list)
        ok = all(
            isinstance(c, list) and len(c) == 2 and isinstance(c[0], int)
            and not isinstance(c[0], bool) and isinstance(c[1], list)
            for c in raw_cats
        )
        if not ok:
            raise ProtocolError(env.sender, "fields.categories", "malformed.")
        rff_kw = {"categories": {int(c[0]): list(c[1]) for c in raw_cats}}
        if est == "rff":
            rff_kw["features_dim"] = env.get("features_dim", int)
        elif env.fields.get("radius") == "auto":
            rff_kw["radius"] = "auto"
            rff_kw["radius_share"] = env.number("radius_share", positive=True)
        else:
            if "radius_share" in env.fields:
                raise ProtocolError(env.sender, "fields.radius_share",
                                    "only a setup with radius 'auto' has a radius share.")
            rff_kw["radius"] = env.number("radius", positive=True)
    if not (
        (est in ("rff", "linear") and not grid_shape)
        or (
            1 <= len(grid_shape) <= 18
            and all(isinstance(g, int) and not isinstance(g, bool) for g in grid_shape)
        )
    ):
        raise ProtocolError(env.sender, "fields.grid_shape", "malformed.")
    return FDPConfig(
        feature_bounds=env.get("feature_bounds", list),
        alpha=env.number("alpha"),
        alpha_margin=env.number("alpha_margin"),
        tolerance=env.number("tolerance"),
        c_omega=env.number("c_omega"),
        eta_fail=env.number("eta_fail"),
        correction=env.get("correction", str),
        tail=env.get("tail", str),
        cross_fit=env.get("cross_fit", bool),
        s1_share=env.number("s1_share"),
        count_share=env.number("count_share"),
        threshold_rule=env.get("threshold_rule", str),
        fail_prob=env.number("fail_prob"),
        bandwidth=env.number("bandwidth", positive=True),
        grid_shape=tuple(grid_shape) if est not in ("rff", "linear") else None,
        depth=env.get("depth", int),
        estimator=est,
        constraints=(env.get("constraints", str) if "constraints" in env.fields
                     else "demographic_parity"),
        **rff_kw,
    )


def make_protocol(
    sites: Sequence[SiteSpec] | Sequence[tuple[str, int, float, float]],
    config: FDPConfig | None = None,
    *,
    protocol_id: str | None = None,
    keys: Any = None,
    rff_seed: int | None = None,
    **params: Any,
) -> ProtocolConfig:
    """Build and validate the public protocol parameters (the centre's ``setup``).

    ``make_protocol(sites, FDPConfig(feature_bounds=…, alpha=…))``, or with the
    configuration's fields as keywords: ``make_protocol(sites, feature_bounds=…, alpha=…)``
    (the same, built by :meth:`FDPConfig.from_params`; the deprecated ``rho=`` is accepted
    there for one release, with a DeprecationWarning). Nothing is read or released.

    Parameters
    ----------
    sites : list of SiteSpec or (site_id, N_s, ε_s, δ_s)
        Public size and budget of every site (replace-one DP: N_s is public).
    config : FDPConfig, optional
        The run's public choices (α, tolerance, rule, estimator, grid, …).
    protocol_id : str, optional
        The run id every message carries; default fresh (64 random bits).
    keys : mapping of party to public key, optional
        ``{"centre": "ed25519:…", site_id: "ed25519:…", …}`` — exactly the centre and every
        site. Required for a setup that is sent as a message.
    rff_seed : int, optional
        Public seed of the RFF frequencies (signed in the setup); default fresh.
    **params
        :class:`FDPConfig`'s fields, when ``config`` is not given.

    Returns
    -------
    ProtocolConfig
        With the defaults that need the sites resolved: the depth M
        (:data:`DEFAULT_CONFIDENCE_DEPTH` for the confidence rule, :func:`depth_rule` for
        the paper rule or ``depth="paper"``, capped at :data:`MAX_DEPTH`), the bandwidth
        (:func:`default_bandwidth`) and the kernel grid (:func:`default_grid_shape`).

    Raises
    ------
    InvalidParameterError
        Any parameter out of range or over a public resource limit (module docstring).
    """
    cfg = _as_config(config, params)
    specs = check_sites(sites)
    depth = resolve_depth(cfg, specs)
    h = default_bandwidth(cfg, specs, depth) if cfg.bandwidth is None else cfg.bandwidth
    if cfg.is_mapped:
        shape: tuple[int, ...] = ()
    elif cfg.grid_shape is None:
        shape = default_grid_shape(cfg, h)
    else:
        shape = cfg.grid_shape
    setup = ProtocolConfig(
        protocol_id=protocol_id or secrets.token_hex(8),
        sites=specs,
        feature_bounds=cfg.feature_bounds,
        bandwidth=h,
        grid_shape=shape,
        depth=depth,
        alpha=cfg.alpha,
        alpha_margin=cfg.alpha_margin,
        tolerance=cfg.tolerance,
        c_omega=cfg.c_omega,
        eta_fail=cfg.eta_fail,
        correction=cfg.correction,
        tail=cfg.tail,
        cross_fit=bool(cfg.cross_fit),
        s1_share=cfg.s1_share,
        count_share=cfg.count_share,
        threshold_rule=cfg.threshold_rule,
        fail_prob=cfg.fail_prob,
        keys=_check_keys(keys, [s.site_id for s in specs]),
        estimator=cfg.estimator,
        features_dim=int(cfg.features_dim or 0),
        rff_seed=_check_rff_seed(rff_seed) if cfg.is_rff else 0,
        categories=cfg.categories,
        radius=_setup_radius(cfg),
        radius_share=float(cfg.radius_share or 0.0) if cfg.is_linear else 0.0,
        constraints=cfg.constraints,
    )
    setup.check_servable()
    return setup


def _setup_radius(cfg: FDPConfig) -> float | str:
    """The setup's radius: "auto" or the public number (0.0 for the other estimators)."""
    if not cfg.is_linear or cfg.radius is None:
        return 0.0
    return "auto" if cfg.radius == "auto" else float(cfg.radius)


def _as_config(config: FDPConfig | None, params: dict[str, Any]) -> FDPConfig:
    """``config``, or an :class:`FDPConfig` from the keyword parameters (not both)."""
    if config is None:
        return FDPConfig.from_params(params, where="make_protocol", stacklevel=4)
    if not isinstance(config, FDPConfig):
        raise InvalidParameterError(
            f"config={config!r}: expected an FDPConfig (or give its fields as keywords)."
        )
    if params:
        raise InvalidParameterError(
            f"make_protocol: give either config= or its fields as keywords, not both "
            f"(got config and {sorted(params)}); use dataclasses.replace(config, …)."
        )
    return config


def check_sites(sites: Any) -> tuple[SiteSpec, ...]:
    """Validate the sites' public ids, sizes and budgets (at most :data:`MAX_SITES`)."""
    if not isinstance(sites, (list, tuple)) or len(sites) > MAX_SITES:
        raise InvalidParameterError(
            f"sites: expected a list of at most {MAX_SITES} sites (public limit)."
        )
    specs = tuple(_check_site(s if isinstance(s, SiteSpec) else SiteSpec(*s)) for s in sites)
    if not specs:
        raise InvalidParameterError("sites: at least one site is required.")
    ids = [s.site_id for s in specs]
    if len(set(ids)) != len(ids):
        raise InvalidParameterError(f"sites: duplicate site ids in {ids}.")
    return specs


def _check_site(spec: SiteSpec) -> SiteSpec:
    if (
        not isinstance(spec.site_id, str)
        or not 1 <= len(spec.site_id) <= 64
        or not set(spec.site_id) <= _PARTY_CHARS
        or spec.site_id[0] in "._-"
        or spec.site_id in _RESERVED_IDS
    ):
        raise InvalidParameterError(
            f"site id {spec.site_id!r}: expected 1-64 letters, digits, '.', '_' or '-' "
            f"(starting with a letter or digit), not one of {_RESERVED_IDS}."
        )
    if isinstance(spec.n, bool) or not isinstance(spec.n, (int, np.integer)):
        raise InvalidParameterError(
            f"site {spec.site_id!r}: n={spec.n!r}: expected an integer number of rows."
        )
    eps, dl = check_budget(spec.epsilon, spec.delta)
    if int(spec.n) < 8:
        raise InvalidParameterError(f"site {spec.site_id!r}: n={spec.n!r} is too small.")
    return SiteSpec(spec.site_id, int(spec.n), eps, dl)


def resolve_depth(config: FDPConfig, specs: Sequence[SiteSpec]) -> int:
    """The tree depth M: given, the paper's rule (capped at :data:`MAX_DEPTH`), or 8."""
    if isinstance(config.depth, int):
        return config.depth
    if config.depth == "paper" or config.threshold_rule == "paper":
        return min(depth_rule([s.n for s in specs], [s.epsilon for s in specs]), MAX_DEPTH)
    return DEFAULT_CONFIDENCE_DEPTH


def default_bandwidth(config: FDPConfig, specs: Sequence[SiteSpec], depth: int) -> float:
    """The public bandwidth rule with n = Σ_s ⌊N_s/2⌋ and the aggregate's noise level.

    :func:`dpfair.fairclass.bandwidth_rule` with the privacy term at
    (n·μ_f)_eff = 1/sqrt(Σ_s ν_s²/(n_s μ_{f,s})²) — public quantities only. For random
    Fourier features, times ``RFF_BANDWIDTH_FACTOR``·sqrt(d): unit-box distances over d
    columns grow like sqrt(d) (a one-hot column contributes 0 or 2 to the squared distance).
    The factor was set on full Adult (the data of docs/fairclass_full_adult.md, so not an
    out-of-sample choice): the ratio estimate collapses towards the base rate for h ≳ 1.2.
    """
    sens = config.function_sensitivity()
    w = np.array([effective_size(s.n, s.epsilon) for s in specs], dtype=np.float64)
    nu = w / w.sum()
    n_train = [s.n // 2 for s in specs]
    mu_f = [
        sens / site_plan(
            s.epsilon, s.delta, depth, cross_fit=bool(config.cross_fit),
            s1_share=config.s1_share, count_share=config.count_share,
            function_sensitivity=sens,
        ).sigma_function
        for s in specs
    ]
    inv = math.sqrt(sum((v / (n * mf)) ** 2 for v, n, mf in zip(nu, n_train, mu_f, strict=True)))
    n_tot = sum(n_train)
    d = config.n_features
    h = bandwidth_rule(n_tot, d, (1.0 / inv) / n_tot)
    return h * RFF_BANDWIDTH_FACTOR * math.sqrt(d) if config.is_rff else h


def default_grid_shape(config: FDPConfig, bandwidth: float) -> tuple[int, ...]:
    """The default grid (:func:`dpfair.fairclass._model.make_grid`'s rule), computed
    without building it: ⌈resolution/h⌉ + 1 nodes per axis, capped by the node limits."""
    d = config.n_features
    g = math.ceil(min(config.grid_resolution / bandwidth, 1e9)) + 1
    cap = math.floor(config.max_grid_nodes ** (1.0 / d) + 1e-9)
    return (min(max(min(g, cap), 2), MAX_AXIS_NODES),) * d


def _check_rff_seed(rff_seed: Any) -> int:
    if rff_seed is None:
        return secrets.randbits(63)
    if (
        isinstance(rff_seed, bool)
        or not isinstance(rff_seed, (int, np.integer))
        or not 0 <= int(rff_seed) < 2**63
    ):
        raise InvalidParameterError(f"rff_seed={rff_seed!r}: expected an integer in [0, 2**63).")
    return int(rff_seed)


def _check_keys(keys: Any, site_ids: list[str]) -> tuple[tuple[str, str], ...]:
    """Validate the pinned keys: exactly the centre and every site, distinct valid keys."""
    if keys is None:
        return ()
    if not isinstance(keys, dict):
        raise InvalidParameterError("keys: expected a mapping party -> 'ed25519:…'.")
    want = {CENTRE, *site_ids}
    if set(keys) != want:
        missing, extra = sorted(want - set(keys)), sorted(set(keys) - want)
        raise InvalidParameterError(
            f"keys: need exactly one public key per party; missing {missing}, unknown {extra}."
        )
    for party, text in keys.items():
        parse_public_key(text, where=f"keys[{party!r}]")
    if len(set(keys.values())) != len(keys):
        raise InvalidParameterError(
            "keys: two parties share one public key; every party needs its own key pair."
        )
    return tuple(sorted((str(p), str(k)) for p, k in keys.items()))
