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
sizes follow from these (:meth:`ProtocolConfig.message_limit`).
"""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpfair._errors import InvalidParameterError
from dpfair.fairclass._budget import KERNEL_SUM_RKHS_SENSITIVITY, LedgerRecord
from dpfair.fairclass._linear import FeatureMap
from dpfair.fairclass._model import bandwidth_rule
from dpfair.fairclass._rff import MAX_FEATURES_DIM, RFF_SENSITIVITY, rff_frequencies
from dpfair.fairclass._validation import check_alpha, check_budget, check_feature_bounds
from dpfair.fairclass.federated._keys import parse_public_key
from dpfair.fairclass.federated._messages import (
    CENTRE,
    MAX_MESSAGE_BYTES,
    Envelope,
    ProtocolError,
)
from dpfair.fairclass.federated._monotone import CORRECTIONS, THRESHOLD_RULES
from dpfair.mechanisms import (
    KroneckerGaussianGrid,
    analytic_gaussian_delta,
    approx_dp_sigma_target,
    check_delta_form,
    discrete_gaussian_sigma,
)
from dpfair.privacy import Accountant, Budget

__all__ = [
    "ProtocolConfig",
    "SiteLedger",
    "SitePlan",
    "SiteSpec",
    "depth_rule",
    "effective_size",
    "gdp_epsilon",
    "make_protocol",
    "site_plan",
]

TAIL_ESTIMATORS = ("dyadic", "consistent")
#: Group-score estimators of the protocol: the kernel grid (paper) or random Fourier
#: features of the same Gaussian kernel (``fairclass/_rff.py``; scales in d).
PROTOCOL_ESTIMATORS = ("kernel", "rff")
#: Default number D of random Fourier features (the privacy noise of φ(x)·S̃ does not
#: grow with D; the approximation error of the kernel falls like D^-1/2).
DEFAULT_FEATURES_DIM = 2048
#: Scale of the RFF default bandwidth (see make_protocol).
RFF_BANDWIDTH_FACTOR = 0.85

#: Public resource limits (module docstring).
MAX_SITES = 1000
MAX_GRID_NODES = 2**18
MAX_AXIS_NODES = 2048
MAX_DEPTH = 20
MIN_BANDWIDTH = 1e-4
_PARTY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
_RESERVED_IDS = (CENTRE, "all")

#: Tree depth M used by the confidence rule when ``depth`` is not given (see
#: ``docs/proofs/fairclass_fdp_fair.md`` §Depth: the DD noise grows like M while the grid
#: step 2^(1−M) only needs to be small against α; the paper's rule applies to "paper").
DEFAULT_CONFIDENCE_DEPTH = 8


def gdp_epsilon(mu: float, delta: float) -> float:
    """Smallest ε with μ-GDP ⇒ (ε, δ(1 − 2^-40))-DP (analytic Gaussian, σ = 1/μ, Δ = 1).

    Every release of a site is an exact *discrete* Gaussian on a public lattice, which is
    (ε, δ_c + ξ)-DP whenever the continuous mechanism is (ε, δ_c)-DP, with ξ ≤ δ·2^-41 for
    every ε ≤ ~1200 + ln δ (:func:`~dpfair.mechanisms.discrete_gaussian.approx_dp_sigma_target`;
    beyond, ε is exceeded by < 10^-500). So the ε returned makes (ε, δ) a true bound.
    """
    if mu <= 0:
        return 0.0
    eps = _gdp_epsilon_continuous(mu, approx_dp_sigma_target(0.0, delta, _MAX_NOISE_VALUES))
    check_delta_form(eps, delta, _MAX_NOISE_VALUES)  # refuse what is not proven
    return eps


#: Public bound on the number of noise values a site ever draws (for the lattice slack).
_MAX_NOISE_VALUES = 2**40


def _gdp_epsilon_continuous(mu: float, delta: float) -> float:
    """Smallest ε with μ-GDP ⇒ (ε, δ)-DP for the continuous Gaussian (σ = 1/μ, Δ = 1)."""
    sigma = 1.0 / mu
    if analytic_gaussian_delta(sigma, 1.0, 0.0) <= delta:
        return 0.0
    lo, hi = 0.0, 1.0
    while analytic_gaussian_delta(sigma, 1.0, hi) > delta:
        lo, hi = hi, 2.0 * hi
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if analytic_gaussian_delta(sigma, 1.0, mid) > delta:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * max(hi, 1.0):
            break
    return hi


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


@dataclass
class SiteLedger:
    """One site's accountant over both rounds, row partition by row partition.

    Each partition ("half A", "half B") has a zCDP :class:`~dpfair.privacy.Accountant`
    with limit ρ* = μ*²/2: for Gaussian releases ρ = μ²/2 and zCDP adds exactly like μ²,
    so the filter is exact for this protocol and refuses a release that would exceed the
    site's budget *before* the noise is drawn. The reported (ε, δ) is the exact analytic-
    Gaussian conversion of the composed μ (tighter than a generic zCDP conversion, valid
    because every release is Gaussian).
    """

    site_id: str
    epsilon: float
    delta: float
    mu_total: float
    records: list[LedgerRecord] = field(default_factory=list)
    accountants: dict[str, Accountant] = field(default_factory=dict)

    def charge(self, label: str, rows: str, mu: float, noise: str) -> None:
        """Charge a μ-GDP release on ``rows`` (raises BudgetExceededError if over)."""
        limit = Budget.zcdp(self.mu_total**2 / 2.0 * (1.0 + 1e-9))
        acct = self.accountants.setdefault(rows, Accountant(limit))
        budget = Budget.zcdp(mu**2 / 2.0, note=f"{mu:.6g}-GDP")
        acct.charge(budget, label=label)
        self.records.append(LedgerRecord(label, rows, budget, noise=noise))

    def mu_by_rows(self) -> dict[str, float]:
        """Composed μ per partition."""
        return {
            rows: math.sqrt(2.0 * float(acct.spent.rho or 0.0))
            for rows, acct in self.accountants.items()
        }

    @property
    def spent(self) -> Budget:
        """(ε, δ) of everything released so far: parallel over halves, exact GDP within."""
        mus = self.mu_by_rows()
        mu = max(mus.values(), default=0.0)
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
                {"label": r.label, "rows": r.rows, "rho": r.budget.rho, "noise": r.noise}
                for r in self.records
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
    alpha, alpha_margin, rho, c_omega, eta_fail : float
        α, the margin (target α − margin), the tolerance band ρ, C_ω, and η of ω.
    correction : str
        "alg6", "alg4", "isotonic" or "none".
    tail : str
        "dyadic" (paper: sum of O(M) nodes) or "consistent" (Honaker BLUE).
    cross_fit : bool
    s1_share, count_share : float
    threshold_rule : str
        "confidence" (default: certified set of the pointwise confidence envelopes) or
        "paper" (monotone correction + tolerance band ρ).
    fail_prob : float
        β of the confidence rule: P(population |DD| > α) ≤ β (up to the approximations
        stated in ``docs/proofs/fairclass_fdp_fair.md``) whenever the outcome is certified.
    keys : tuple of (party, public key)
        The pinned Ed25519 public key of the centre and of every site (``"ed25519:…"``);
        every later message is verified against these. Empty only for in-memory use
        without messages.
    """

    protocol_id: str
    sites: tuple[SiteSpec, ...]
    feature_bounds: tuple[tuple[float, float], ...]
    bandwidth: float
    grid_shape: tuple[int, ...]
    depth: int
    alpha: float
    alpha_margin: float
    rho: float
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

    @property
    def is_rff(self) -> bool:
        """True for the random-Fourier-feature estimator."""
        return self.estimator == "rff"

    def function_sensitivity(self) -> float:
        """L2 sensitivity of the round-1 function sums (√2 kernel, 2 RFF)."""
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
        nf, g = self.n_folds, tuple(self.grid_shape)
        n_nodes = (1 << (self.depth + 1)) - 1
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
                "rho": self.rho,
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
            },
        )

    def estimator_fields(self) -> dict[str, Any]:
        """The optional setup/released-model fields of the RFF estimator (none for the
        kernel grid, whose messages are unchanged)."""
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
                    for k in ("epsilon", "delta")
                )
            )
            if not ok:
                raise ProtocolError(
                    env.sender,
                    f"fields.sites[{i}]",
                    "malformed (exactly site_id: str, n: int, epsilon, delta: numbers).",
                )
            sites.append(SiteSpec(s["site_id"], s["n"], float(s["epsilon"]), float(s["delta"])))
        grid_shape = env.get("grid_shape", list)
        est = env.get("estimator", str) if "estimator" in env.fields else "kernel"
        rff_kw: dict[str, Any] = {}
        if est == "rff":
            raw_cats = env.get("categories", list)
            ok = all(
                isinstance(c, list) and len(c) == 2 and isinstance(c[0], int)
                and not isinstance(c[0], bool) and isinstance(c[1], list)
                for c in raw_cats
            )
            if not ok:
                raise ProtocolError(env.sender, "fields.categories", "malformed.")
            rff_kw = {
                "features_dim": env.get("features_dim", int),
                "rff_seed": env.get("rff_seed", int),
                "categories": {int(c[0]): list(c[1]) for c in raw_cats},
            }
        if not (
            (est == "rff" and not grid_shape)
            or (
                1 <= len(grid_shape) <= 18
                and all(isinstance(g, int) and not isinstance(g, bool) for g in grid_shape)
            )
        ):
            raise ProtocolError(env.sender, "fields.grid_shape", "malformed.")
        raw_keys = env.get("keys", dict)
        depth = env.get("depth", int)
        try:
            return make_protocol(
                sites,
                feature_bounds=env.get("feature_bounds", list),
                alpha=env.number("alpha"),
                alpha_margin=env.number("alpha_margin"),
                rho=env.number("rho"),
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
                grid_shape=tuple(grid_shape) if est != "rff" else None,
                depth=depth,
                protocol_id=env.protocol_id,
                keys=raw_keys,
                estimator=est,
                **rff_kw,
            )
        except InvalidParameterError as exc:
            if isinstance(exc, ProtocolError):
                raise
            raise ProtocolError(env.sender, "fields", str(exc)) from None


def _share(name: str, v: Any) -> float:
    x = float(v)
    if not 0.0 < x < 1.0:
        raise InvalidParameterError(f"{name}={v!r}: must lie strictly between 0 and 1.")
    return x


def make_protocol(
    sites: list[SiteSpec] | list[tuple[str, int, float, float]],
    *,
    feature_bounds: Any,
    alpha: float,
    alpha_margin: float = 0.0,
    rho: float = 0.03,
    c_omega: float = 0.1,
    eta_fail: float = 0.05,
    correction: str = "alg6",
    tail: str = "consistent",
    cross_fit: bool | None = None,
    s1_share: float = 0.5,
    count_share: float = 0.05,
    threshold_rule: str = "confidence",
    fail_prob: float = 0.05,
    bandwidth: float | None = None,
    grid_shape: tuple[int, ...] | None = None,
    depth: int | str | None = None,
    grid_resolution: float = 4.0,
    max_grid_nodes: int = MAX_GRID_NODES,
    protocol_id: str | None = None,
    keys: Any = None,
    estimator: str = "kernel",
    features_dim: int | None = None,
    rff_seed: int | None = None,
    categories: Any = None,
) -> ProtocolConfig:
    """Build and validate the public protocol parameters (the centre's ``setup``).

    Parameters
    ----------
    sites : list of SiteSpec or (site_id, N_s, ε_s, δ_s)
        Public size and budget of every site (replace-one DP: N_s is public).
    feature_bounds : sequence of (lo, hi)
        Public feature box.
    alpha : float
        Disparity tolerance α ∈ (0, 1).
    alpha_margin : float, default 0
        Target α − margin in the threshold search (paper §4.2: α − ρ keeps the population
        disparity below α with high probability).
    rho : float, default 0.03
        Tolerance band ρ of the threshold search (paper §5.1.2).
    c_omega : float, default 0.1
        C_ω of the monotone band ω.
    eta_fail : float, default 0.05
        η in ω's log(M/η).
    correction : {"alg6", "alg4", "isotonic", "none"}, default "alg6"
    tail : {"consistent", "dyadic"}, default "consistent"
        Tail counts from the O(M) canonical nodes (paper), or from Honaker's consistent
        (BLUE) estimate of each tree — also post-processing, lower variance.
    cross_fit : bool or None, default None
        Two folds with the halves swapped; budget composed per row (module docstring).
        None: True for the paper rule, False for the confidence rule (each fold must be
        certified on its own, and a fold's round 2 then gets μ* instead of μ*/√2).
    threshold_rule : {"confidence", "paper"}, default "confidence"
    fail_prob : float in (0, 1), default 0.05
        β of the confidence rule.
    s1_share : float in (0, 1), default 0.5
        Round 1's share of μ*² when cross-fitting.
    count_share : float in (0, 1), default 0.05
        The group count's share of round 1's μ₁².
    bandwidth : float, optional
        h in unit-box units; default :func:`dpfair.fairclass.bandwidth_rule` with
        n = Σ_s ⌊N_s/2⌋ and the privacy term at the aggregate's noise level
        (n·μ_f)_eff = 1/sqrt(Σ_s ν_s²/(n_s μ_{f,s})²) — public quantities only.
    grid_shape, depth : optional
        Override the grid (default :func:`dpfair.fairclass._model.make_grid`) and M
        (default: :data:`DEFAULT_CONFIDENCE_DEPTH` for the confidence rule,
        :func:`depth_rule` for the paper rule, capped at :data:`MAX_DEPTH`;
        ``depth="paper"`` forces the paper's rule).
    max_grid_nodes : int
        Nodes of the default grid (at most :data:`MAX_GRID_NODES`; each axis at most
        :data:`MAX_AXIS_NODES`).
    keys : mapping of party to public key, optional
        ``{"centre": "ed25519:…", site_id: "ed25519:…", …}`` — exactly the centre and every
        site. Required for a setup that is sent as a message.
    estimator : {"kernel", "rff"}, default "kernel"
        The group-score estimator: the kernel grid, or D random Fourier features of the
        same Gaussian kernel (``fairclass/_rff.py``), which scale in d and accept one-hot
        categorical columns. With "rff", ``feature_bounds`` has one entry per column:
        (lo, hi) for a numeric column, None for a column listed in ``categories``.
    features_dim : int, optional
        D (even, at most :data:`~dpfair.fairclass._rff.MAX_FEATURES_DIM`; public limit);
        default :data:`DEFAULT_FEATURES_DIM`.
    rff_seed : int, optional
        Public seed of the frequencies (signed in the setup); default fresh.
    categories : mapping of column index to list, optional
        Public category lists of the categorical columns (JSON strings or numbers).

    Raises
    ------
    InvalidParameterError
        Any parameter out of range or over a public resource limit (module docstring).
    """
    if not isinstance(sites, (list, tuple)) or len(sites) > MAX_SITES:
        raise InvalidParameterError(
            f"sites: expected a list of at most {MAX_SITES} sites (public limit)."
        )
    specs: list[SiteSpec] = []
    for s in sites:
        spec = s if isinstance(s, SiteSpec) else SiteSpec(*s)
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
        specs.append(SiteSpec(spec.site_id, int(spec.n), eps, dl))
    if not specs:
        raise InvalidParameterError("sites: at least one site is required.")
    ids = [s.site_id for s in specs]
    if len(set(ids)) != len(ids):
        raise InvalidParameterError(f"sites: duplicate site ids in {ids}.")
    a, margin = check_alpha(alpha, alpha_margin)
    for name, v in (("rho", rho), ("c_omega", c_omega)):
        if not (math.isfinite(float(v)) and float(v) >= 0):
            raise InvalidParameterError(f"{name}={v!r}: must be a finite number >= 0.")
    eta_f = _share("eta_fail", eta_fail)
    if correction not in CORRECTIONS:
        raise InvalidParameterError(f"correction={correction!r}: expected one of {CORRECTIONS}.")
    if threshold_rule not in THRESHOLD_RULES:
        raise InvalidParameterError(
            f"threshold_rule={threshold_rule!r}: expected one of {THRESHOLD_RULES}."
        )
    beta = _share("fail_prob", fail_prob)
    if tail not in TAIL_ESTIMATORS:
        raise InvalidParameterError(f"tail={tail!r}: expected one of {TAIL_ESTIMATORS}.")
    if cross_fit is None:
        cross_fit = threshold_rule == "paper"
    if not isinstance(cross_fit, (bool, np.bool_)):
        raise InvalidParameterError(f"cross_fit={cross_fit!r}: expected True or False.")
    s1 = _share("s1_share", s1_share)
    cs = _share("count_share", count_share)
    if estimator not in PROTOCOL_ESTIMATORS:
        raise InvalidParameterError(
            f"estimator={estimator!r}: expected one of {PROTOCOL_ESTIMATORS}."
        )
    rff = estimator == "rff"
    if rff:
        fmap, dim, seed = _check_rff(feature_bounds, categories, features_dim, rff_seed)
        d = len(fmap.bounds)
        bounds_t: tuple[Any, ...] = fmap.bounds
    else:
        if categories:
            raise InvalidParameterError(
                "categories: the kernel estimator needs numeric features on a grid; use "
                "estimator='rff' for one-hot categorical columns."
            )
        fb = np.asarray(feature_bounds, dtype=np.float64) if feature_bounds is not None else None
        d = 0 if fb is None or fb.ndim != 2 else fb.shape[0]
        lows, highs = check_feature_bounds(feature_bounds, max(d, 1))
        d = lows.size
        bounds_t = tuple(zip(lows.tolist(), highs.tolist(), strict=True))
        dim, seed, fmap = 0, 0, None
    sizes, epss = [s.n for s in specs], [s.epsilon for s in specs]
    if depth is None:
        m: Any = (
            min(depth_rule(sizes, epss), MAX_DEPTH)
            if threshold_rule == "paper"
            else DEFAULT_CONFIDENCE_DEPTH
        )
    elif depth == "paper":
        m = min(depth_rule(sizes, epss), MAX_DEPTH)
    else:
        m = depth
    if (
        isinstance(m, bool)
        or not isinstance(m, (int, np.integer, float))
        or int(m) != m
        or not 1 <= int(m) <= MAX_DEPTH
    ):
        raise InvalidParameterError(
            f"depth={depth!r}: expected an integer in [1, {MAX_DEPTH}] (public limit: a "
            f"depth-{MAX_DEPTH} tree pair already has 2^{MAX_DEPTH + 2} nodes)."
        )
    m = int(m)
    tmp_id = protocol_id or secrets.token_hex(8)
    cfg_partial = ProtocolConfig(
        tmp_id,
        tuple(specs),
        bounds_t,
        1.0,
        () if rff else (2,) * d,
        m,
        a,
        margin,
        float(rho),
        float(c_omega),
        eta_f,
        correction,
        tail,
        bool(cross_fit),
        s1,
        cs,
        str(threshold_rule),
        beta,
        estimator=str(estimator),
    )
    if bandwidth is None:
        n_train = [s.n // 2 for s in specs]
        nu = cfg_partial.weights()
        sens = cfg_partial.function_sensitivity()
        mu_f = [sens / cfg_partial.plan(s.site_id).sigma_function for s in specs]
        inv = math.sqrt(
            sum((w / (n * mf)) ** 2 for w, n, mf in zip(nu, n_train, mu_f, strict=True))
        )
        n_tot = sum(n_train)
        h = bandwidth_rule(n_tot, d, (1.0 / inv) / n_tot)
        if rff:
            # Unit-box distances over d columns grow like sqrt(d) (a one-hot column
            # contributes 0 or 2 to the squared distance): the per-column rule times
            # RFF_BANDWIDTH_FACTOR·sqrt(d). The factor was set on full Adult (the data of
            # docs/fairclass_full_adult.md, so not an out-of-sample choice): the ratio
            # estimate collapses towards the base rate for h ≳ 1.2 there.
            h = h * RFF_BANDWIDTH_FACTOR * math.sqrt(d)
    else:
        h = float(bandwidth)
        if not (math.isfinite(h) and MIN_BANDWIDTH <= h <= 10):
            raise InvalidParameterError(
                f"bandwidth={bandwidth!r}: expected a number in [{MIN_BANDWIDTH:g}, 10] "
                "(unit-box units; public limit: a bandwidth finer than the finest allowed "
                "grid can resolve only makes the model noise)."
            )
    if not (isinstance(max_grid_nodes, int) and 2**d <= max_grid_nodes <= MAX_GRID_NODES):
        raise InvalidParameterError(
            f"max_grid_nodes={max_grid_nodes!r}: expected an integer in "
            f"[2**d, {MAX_GRID_NODES}]."
        )
    if rff:
        shape: tuple[int, ...] = ()
    elif grid_shape is None:
        shape = tuple(
            min(int(g), MAX_AXIS_NODES)
            for g in _grid_shape(d, h, grid_resolution, max_grid_nodes)
        )
    else:
        shape = tuple(grid_shape)
        if (
            len(shape) != d
            or not all(
                isinstance(g, (int, np.integer)) and not isinstance(g, bool) for g in shape
            )
            or min(shape) < 2
            or max(shape) > MAX_AXIS_NODES
            or math.prod(int(g) for g in shape) > MAX_GRID_NODES
        ):
            raise InvalidParameterError(
                f"grid_shape={list(grid_shape)!r}: need {d} integer axis sizes in "
                f"[2, {MAX_AXIS_NODES}] with at most {MAX_GRID_NODES} nodes in total "
                "(public limits, checked before anything is allocated)."
            )
        shape = tuple(int(g) for g in shape)
    pinned = _check_keys(keys, [s.site_id for s in specs])
    return ProtocolConfig(
        tmp_id,
        tuple(specs),
        cfg_partial.feature_bounds,
        h,
        tuple(shape),
        m,
        a,
        margin,
        float(rho),
        float(c_omega),
        eta_f,
        correction,
        tail,
        bool(cross_fit),
        s1,
        cs,
        str(threshold_rule),
        beta,
        pinned,
        str(estimator),
        dim,
        seed,
        tuple(sorted((int(j), tuple(c)) for j, c in fmap.categories.items())) if fmap else (),
    )


def _check_rff(
    feature_bounds: Any, categories: Any, features_dim: Any, rff_seed: Any
) -> tuple[FeatureMap, int, int]:
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
    if rff_seed is None:
        seed = secrets.randbits(63)
    elif (
        isinstance(rff_seed, bool)
        or not isinstance(rff_seed, (int, np.integer))
        or not 0 <= int(rff_seed) < 2**63
    ):
        raise InvalidParameterError(f"rff_seed={rff_seed!r}: expected an integer in [0, 2**63).")
    else:
        seed = int(rff_seed)
    if feature_bounds is None or not isinstance(feature_bounds, (list, tuple)):
        n_cols = 0
    else:
        n_cols = len(feature_bounds)
    if not 1 <= n_cols <= 4096:
        raise InvalidParameterError(
            "feature_bounds: expected one entry per column — (lo, hi) for a numeric column, "
            "None for a categorical one listed in categories."
        )
    if categories is not None and isinstance(categories, dict):
        for key, vals in categories.items():
            for c in vals:
                if isinstance(c, bool) or not isinstance(c, (str, int, float)):
                    raise InvalidParameterError(
                        f"categories[{key!r}]: category {c!r} must be a string or a number "
                        "(it is sent in the signed setup)."
                    )
    fmap = FeatureMap.build(feature_bounds, categories, n_cols)
    from dpfair.fairclass._rff import MAX_MAP_WIDTH

    if fmap.width > MAX_MAP_WIDTH:
        raise InvalidParameterError(
            f"categories: the one-hot map has {fmap.width} columns; the public limit is "
            f"{MAX_MAP_WIDTH}."
        )
    return fmap, int(dim), seed


def _grid_shape(d: int, h: float, resolution: float, max_nodes: int) -> tuple[int, ...]:
    """The default grid's shape (:func:`dpfair.fairclass._model.make_grid`'s rule),
    computed without building the grid."""
    if resolution <= 0 or not math.isfinite(resolution):
        raise InvalidParameterError(f"grid_resolution={resolution!r}: must be > 0.")
    g = math.ceil(min(resolution / h, 1e9)) + 1
    cap = math.floor(max_nodes ** (1.0 / d) + 1e-9)
    return (max(min(g, cap), 2),) * d


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
