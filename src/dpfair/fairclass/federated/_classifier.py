"""The final FDP-Fair classifier and the in-process driver of the whole protocol."""

from __future__ import annotations

import secrets
import warnings
from collections.abc import Sequence
from dataclasses import fields, replace
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, ClassifierMixin

from dpfair._errors import InvalidParameterError, NotFittedError
from dpfair._rng import as_generator
from dpfair._warnings import UncertifiedFairnessWarning
from dpfair.fairclass._estimators import uncertified_message
from dpfair.fairclass._routing import SENSITIVE_REQUEST, require_sensitive
from dpfair.fairclass._validation import check_binary
from dpfair.fairclass.federated._centre import Centre
from dpfair.fairclass.federated._config import DEFAULT_TOLERANCE, MAX_GRID_NODES, FDPConfig
from dpfair.fairclass.federated._keys import Signer
from dpfair.fairclass.federated._messages import Envelope, decode, encode
from dpfair.fairclass.federated._protocol import ProtocolConfig, SiteSpec, make_protocol
from dpfair.fairclass.federated._released import (
    FederatedModel,
    certified_from_thresholds,
    uncertified_detail,
)
from dpfair.fairclass.federated._site import Site, seed_of
from dpfair.privacy import Budget

__all__ = ["FDPFairClassifier", "FederatedModel", "certified_from_thresholds", "run_protocol"]


def _as_list(name: str, value: Any, n_sites: int) -> list[float]:
    if np.ndim(value) == 0:
        return [float(value)] * n_sites
    vals = [float(v) for v in value]
    if len(vals) != n_sites:
        raise InvalidParameterError(
            f"{name}: {len(vals)} value(s) for {n_sites} site(s); give one per site or a scalar."
        )
    return vals


#: FDPConfig fields the classifier leaves at their defaults (the default grid).
_GRID_DEFAULTS: dict[str, Any] = {
    "grid_shape": None,
    "grid_resolution": 4.0,
    "max_grid_nodes": MAX_GRID_NODES,
}
#: Spawn-key entry of the stream that draws a seeded in-process run's public ids.
_IDS_STREAM = 0x1D5


def _run_ids(seed: np.random.SeedSequence | None, rff: bool) -> tuple[str, int | None]:
    """The in-process run id and RFF seed: fresh, or (tests and studies) from their own
    stream of the user seed, independent of the stream ``run_protocol`` draws from."""
    if seed is None:
        return f"inproc-{secrets.token_hex(8)}", None
    ids = np.random.default_rng(
        np.random.SeedSequence(seed.entropy, spawn_key=(*seed.spawn_key, _IDS_STREAM))
    )
    protocol_id = f"inproc-{int(ids.integers(0, 2**62)):x}"
    return protocol_id, int(ids.integers(0, 2**62)) if rff else None


def run_protocol(
    config: ProtocolConfig,
    data: Sequence[tuple[ArrayLike, ArrayLike, ArrayLike]],
    *,
    random_state: Any = None,
    clip: bool = False,
) -> tuple[Envelope, list[Site]]:
    """Run setup → round 1 → aggregate → round 2 → finalize in one process.

    Every message is signed, encoded to bytes, and decoded and verified again exactly as a
    file would be, so this is the same code path as the multi-process run
    (``dpfair fdp …``). Every party gets an ephemeral Ed25519 key pair (in memory, never
    written), pinned in the signed setup.

    Parameters
    ----------
    random_state : None, int, SeedSequence or Generator
        None: fresh OS entropy for every release. A seed (tests, studies) is spawned per
        site and mixed with the site id and run id by the site.

    Returns
    -------
    (released_model message, the Site objects)
    """
    rng = as_generator(random_state, name="random_state")
    if random_state is None:
        seeds: list[Any] = [None] * (len(data) + 1)
    else:
        root = np.random.SeedSequence(rng.integers(0, 2**63 - 1, size=4).tolist())
        seeds = list(root.spawn(len(data) + 1))
    signers = {p: Signer.generate(p) for p in ("centre", *config.site_ids)}
    config = replace(config, keys=tuple(sorted((p, s.public) for p, s in signers.items())))
    pinned_centre = {"centre": signers["centre"].public}
    setup = decode(encode(config.to_envelope(), signers["centre"]), keys=pinned_centre,
                   kind="setup")
    cfg = ProtocolConfig.from_envelope(setup)
    keys, pid = cfg.keyring(), cfg.protocol_id

    def wire(msg: Envelope, kind: str) -> Envelope:
        return decode(
            encode(msg, signers[msg.sender]),
            keys=keys,
            kind=kind,
            protocol_id=pid,
            max_bytes=cfg.message_limit(kind),
            shapes=cfg.message_shapes(kind),
        )

    sites = [
        Site(sid, X, y, A, config=cfg, random_state=seeds[i], clip=clip)
        for i, (sid, (X, y, A)) in enumerate(zip(cfg.site_ids, data, strict=True))
    ]
    centre = Centre(cfg, random_state=seeds[-1])
    r1 = [wire(s.round1(), "round1") for s in sites]
    model = wire(centre.aggregate(r1), "model")
    r2 = [wire(s.round2(model), "round2") for s in sites]
    final = wire(centre.finalize(r2, model), "released_model")
    return final, sites


class FDPFairClassifier(ClassifierMixin, BaseEstimator):
    """Fairness-aware classifier trained across S sites under federated DP (FDP-Fair).

    Paper 003, Algorithm 1 (with Algorithms 2–4 and 6), run as the real message protocol of
    :mod:`dpfair.fairclass.federated` inside one process. Each site's data stay with its
    :class:`Site`; only noisy releases cross (as encoded messages).

    Parameters
    ----------
    epsilon : float or sequence of float, default=1.0
        Each site's own ε_s (a scalar applies to every site).
    delta : float or sequence of float, default=1e-5
        Each site's own δ_s; the paper uses (N_s/2)^-2.
    alpha : float, default=0.1
        Disparity tolerance α.
    feature_bounds : sequence of (lo, hi)
        Public feature box.
    tolerance : float, default=0.03
        Tolerance band of the paper rule's threshold search (the paper's ρ, §5.1.2).
    c_omega : float, default=0.1
        C_ω of the monotone band ω.
    alpha_margin : float, default=0.0
        Target α − margin in the search (paper §4.2 suggests ρ to keep |DD| ≤ α w.h.p.).
    correction : {"alg6", "alg4", "isotonic", "none"}, default="alg6"
        Monotone correction of the paper rule (unused by the confidence rule).
    tail : {"consistent", "dyadic"}, default="consistent"
        Honaker's consistent tail counts (lower variance) or the paper's dyadic sums.
    threshold_rule : {"confidence", "paper"}, default="confidence"
        "confidence": τ̂ = smallest |τ| of the set where the running-max upper confidence
        envelope D̂ + z·sd is ≤ α and the running-min lower envelope D̂ − z·sd is ≥ −α,
        with sd the exact noise sd of each grid point (from σ_t, μ_s and the released
        counts) and z from ``fail_prob``; P(|DD| > α in the population and certified) ≤ β
        (joint, not conditional on the certificate). "paper": monotone correction
        (``correction``, ω) + ``tolerance`` band.
    fail_prob : float, default=0.05
        β of the confidence rule (per released classifier, both folds and both sides).
    depth : int, "paper" or None, default=None
        Tree depth M; None: 8 for the confidence rule, the paper's rule
        max(⌊log2 Σ min(N_s, N_s²ε_s²)⌋ + 1, 6) for the paper rule; "paper": that rule.
    bandwidth : float or None, default=None
        Common bandwidth (unit-box units); None: public rule (see
        :func:`~dpfair.fairclass.federated.make_protocol`).
    cross_fit : bool or None, default=None
        None: False for the confidence rule, True (paper §5.1.1) for the paper rule.
    s1_share : float, default=0.5
        Round 1's share of each site's μ*² with cross-fitting.
    count_share : float, default=0.05
    eta_fail : float, default=0.05
    random_state : None, int, SeedSequence or Generator
        None (real data): every release draws fresh OS entropy. A seed reproduces a fit for
        tests and studies; each site mixes it with its id and the run id.
    clip : bool, default=False
    estimator : {"auto", "kernel", "rff", "linear"}, default="auto"
        The group-score estimator of round 1. "kernel": the paper's kernel estimate on a
        public grid (m^d nodes). "rff": D random Fourier features of the same Gaussian
        kernel released as four noisy D-vectors per site (``fairclass/_rff.py``; scales in
        d, accepts one-hot categorical columns). "linear": η̃(x, a) = sigmoid(θ̃·(1, a,
        w(x))) with w the centred, radius-clipped public map; each site releases once the
        noisy sufficient statistics of the quadratic approximation of the logistic loss
        and the centre fits θ̃ (``federated/_linear.py``, ``docs/proofs/fdp_linear.md``;
        scales to tens or hundreds of columns, accepts one-hot categorical columns).
        "auto": kernel for at most 3 numeric features without categories, else linear.
        ``estimator_`` holds the resolved name.
    categories : mapping or None, default=None
        ``{column index or name: [public categories]}``; those columns get ``None`` in
        ``feature_bounds`` and are one-hot encoded over the public list (rff and linear).
    features_dim : int or None, default=None
        D of the rff estimator (even, at most 4096); None: 2048.
    radius : "auto", "box", float or None, default=None
        The linear estimator's L2 clip radius of the centred rows, in half-widths of the
        public box (one-hot blocks count 1). "auto" (also None): each site releases its own
        radius in round 1 — the noisy median of its row norms on a public ladder, a
        Gaussian-DP histogram (sensitivity √2) charged to that site's ledger inside its
        (ε_s, δ_s) — and calibrates its statistics' noise to it (in units of r_s the rows
        have norm ≤ 1); "box": √(k + c), no clipping; a number: a public radius.
    radius_share : float or None, default=None
        With ``radius="auto"``: the radius release's share of round 1's μ₁² (None: 0.04).
    constraints : {"demographic_parity", "equal_opportunity"}, default="demographic_parity"
        The disparity capped at α (Fairlearn's keywords): |DD| or, with
        "equal_opportunity", |EOD| = |TPR₁ − TPR₀|. Same per-site budget and ledger: the
        centre broadcasts p̃_{a,1} derived from round 1 (post-processing) and the round-2
        trees count the positive-label calibration rows (``docs/proofs/equal_opportunity.md``
        §5). Needs ``threshold_rule="confidence"``; in-memory sites only.
    rho : float or None, default=None
        Deprecated name of ``tolerance`` (ρ means zCDP elsewhere in dpfair); accepted for
        one release with a DeprecationWarning.

    Attributes
    ----------
    model_ : FederatedModel
        The released classifier (also ``released_model_``: the message).
    tau_ : ndarray of shape (n_folds,)
    pi_ : ndarray of shape (n_folds, 2)
    privacy_spent_ : Budget
        The largest per-site spend, (max_s ε_s, max_s δ_s); each site's own is in
        ``site_privacy_``. Sites hold disjoint data, so a person in site s is protected by
        site s's (ε_s, δ_s) (federated DP, paper Definition 2).
    site_privacy_ : dict
        Each site's ledger summary (requested, spent, every release).
    certified_ : bool or None
        Confidence rule: True if every fold is certified (P(|DD| > α in the population and
        certified) ≤ ``fail_prob``); False otherwise — ``fit`` then warns with
        :class:`dpfair.UncertifiedFairnessWarning`. None for the paper rule.
    thresholds_ : list of dict
        Per fold: τ̂, the rule, its outcome and diagnostics.
    protocol_ : ProtocolConfig
        The signed setup of the run (public).
    config_ : FDPConfig
        The public choices the setup was built from.

    Notes
    -----
    The parameters other than ``epsilon``, ``delta``, ``random_state`` and ``clip`` are
    those of :class:`~dpfair.fairclass.federated.FDPConfig`, which ``fit`` builds from them
    (validated there, once) and passes to
    :func:`~dpfair.fairclass.federated.make_protocol`; :meth:`from_config` goes the other
    way. With an int or SeedSequence ``random_state``, ``fit`` releases exactly what
    ``run_protocol(make_protocol(sites, config_, protocol_id=protocol_.protocol_id,
    rff_seed=…), data, random_state=random_state)`` releases (sites ``site-1``, … with
    the rows of each X and the given ε_s, δ_s).

    Per site: round 1 (π̃^s and the kernel sums) and round 2 (the trees) are Gaussian
    mechanisms composed exactly in Gaussian DP; the site never exceeds its (ε_s, δ_s)
    (``_protocol.py``; ``docs/proofs/fairclass_fdp_fair.md``). Prediction is
    post-processing of the released model.
    """

    # scikit-learn metadata routing: the groups are requested by default in every method that
    # takes them (``fit`` takes one array per site, so row-splitting model selection applies
    # to ``predict``/``predict_proba``/``score`` on pooled evaluation data).
    __metadata_request__fit: ClassVar[dict[str, bool]] = SENSITIVE_REQUEST
    __metadata_request__predict: ClassVar[dict[str, bool]] = SENSITIVE_REQUEST
    __metadata_request__predict_proba: ClassVar[dict[str, bool]] = SENSITIVE_REQUEST
    __metadata_request__score: ClassVar[dict[str, bool]] = SENSITIVE_REQUEST
    __metadata_request__decision_function: ClassVar[dict[str, bool]] = SENSITIVE_REQUEST

    def __init__(
        self,
        *,
        epsilon: Any = 1.0,
        delta: Any = 1e-5,
        alpha: float = 0.1,
        feature_bounds: Any = None,
        tolerance: float = DEFAULT_TOLERANCE,
        c_omega: float = 0.1,
        alpha_margin: float = 0.0,
        correction: str = "alg6",
        tail: str = "consistent",
        threshold_rule: str = "confidence",
        fail_prob: float = 0.05,
        depth: int | str | None = None,
        bandwidth: float | None = None,
        cross_fit: bool | None = None,
        s1_share: float = 0.5,
        count_share: float = 0.05,
        eta_fail: float = 0.05,
        random_state: Any = None,
        clip: bool = False,
        estimator: str = "auto",
        categories: Any = None,
        features_dim: int | None = None,
        radius: float | str | None = None,
        radius_share: float | None = None,
        constraints: str = "demographic_parity",
        rho: float | None = None,
    ) -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.alpha = alpha
        self.feature_bounds = feature_bounds
        self.tolerance = tolerance
        self.c_omega = c_omega
        self.alpha_margin = alpha_margin
        self.correction = correction
        self.tail = tail
        self.threshold_rule = threshold_rule
        self.fail_prob = fail_prob
        self.depth = depth
        self.bandwidth = bandwidth
        self.cross_fit = cross_fit
        self.s1_share = s1_share
        self.count_share = count_share
        self.eta_fail = eta_fail
        self.random_state = random_state
        self.clip = clip
        self.estimator = estimator
        self.categories = categories
        self.features_dim = features_dim
        self.radius = radius
        self.radius_share = radius_share
        self.constraints = constraints
        self.rho = rho

    @classmethod
    def from_config(
        cls,
        config: FDPConfig,
        *,
        epsilon: Any = 1.0,
        delta: Any = 1e-5,
        random_state: Any = None,
        clip: bool = False,
    ) -> FDPFairClassifier:
        """The classifier whose ``fit`` builds exactly ``config`` (with each site's budget).

        Raises
        ------
        InvalidParameterError
            ``config`` sets ``grid_shape``, ``grid_resolution`` or ``max_grid_nodes``, which
            the classifier leaves at their defaults (use :func:`make_protocol` and
            :func:`run_protocol` for a custom grid).
        """
        if not isinstance(config, FDPConfig):
            raise InvalidParameterError(f"config={config!r}: expected an FDPConfig.")
        custom = [
            name for name, default in _GRID_DEFAULTS.items() if getattr(config, name) != default
        ]
        if custom:
            raise InvalidParameterError(
                f"config: {custom} are not FDPFairClassifier parameters (it uses the default "
                "grid); build the setup with make_protocol and run it with run_protocol."
            )
        params = {
            f.name: getattr(config, f.name)
            for f in fields(FDPConfig)
            if f.name not in _GRID_DEFAULTS
        }
        params["categories"] = {j: list(v) for j, v in config.categories} or None
        return cls(epsilon=epsilon, delta=delta, random_state=random_state, clip=clip, **params)

    def fdp_config(self, X0: Any = None) -> FDPConfig:
        """The :class:`FDPConfig` of this classifier's parameters (validated).

        ``X0`` (the first site's X) resolves ``categories`` given by column name.
        """
        params = {
            f.name: getattr(self, f.name)
            for f in fields(FDPConfig)
            if f.name not in _GRID_DEFAULTS
        }
        params["categories"] = self._category_indices(X0)
        params["rho"] = self.rho
        return FDPConfig.from_params(params, where="FDPFairClassifier", stacklevel=4)

    def fit(
        self,
        X: Sequence[ArrayLike],
        y: Sequence[ArrayLike],
        *,
        sensitive_features: Sequence[ArrayLike] | None = None,
    ) -> FDPFairClassifier:
        """Run the protocol with one entry of ``X``, ``y``, ``sensitive_features`` per site.

        ``sensitive_features`` is required (the default None only makes a call without it a
        clear :class:`~dpfair.InvalidParameterError`); under metadata routing it is
        requested by default. Each fit is a release at every site's (ε_s, δ_s).

        Returns
        -------
        self
        """
        sensitive_features = require_sensitive(sensitive_features, self, "fit")
        if (
            not isinstance(X, (list, tuple))
            or not isinstance(y, (list, tuple))
            or not isinstance(sensitive_features, (list, tuple))
        ):
            raise InvalidParameterError(
                "X, y and sensitive_features: expected lists with one array per site, e.g. "
                "fit([X1, X2], [y1, y2], sensitive_features=[A1, A2])."
            )
        n_sites = len(X)
        if n_sites == 0 or len(y) != n_sites or len(sensitive_features) != n_sites:
            raise InvalidParameterError(
                f"X, y, sensitive_features: {len(X)}, {len(y)} and {len(sensitive_features)} "
                "site entries; they must be equal and >= 1."
            )
        eps = _as_list("epsilon", self.epsilon, n_sites)
        dls = _as_list("delta", self.delta, n_sites)
        specs = [
            SiteSpec(f"site-{i + 1}", int(np.shape(X[i])[0]), eps[i], dls[i])
            for i in range(n_sites)
        ]
        config = self.fdp_config(X[0])
        seed = seed_of(self.random_state)
        protocol_id, rff_seed = _run_ids(seed, config.is_rff)
        cfg = make_protocol(specs, config, protocol_id=protocol_id, rff_seed=rff_seed)
        for i in range(n_sites):
            check_binary("y", y[i], n_samples=int(np.shape(X[i])[0]))
        final, sites = run_protocol(
            cfg,
            list(zip(X, y, sensitive_features, strict=True)),
            random_state=seed,
            clip=bool(self.clip),
        )
        model = FederatedModel.from_envelope(final)
        self.protocol_ = cfg
        self.config_ = config
        self.released_model_ = final
        self.model_ = model
        self.tau_ = np.array([f.tau for f in model.folds])
        self.pi_ = np.vstack([f.pi for f in model.folds])
        self.classes_ = np.array([0, 1])
        self.n_features_in_ = len(cfg.feature_bounds)
        self.estimator_ = config.estimator
        self.site_privacy_ = {s.site_id: s.ledger.to_dict() for s in sites}
        spent = [s.ledger.spent for s in sites]
        self.privacy_spent_ = Budget.approx(
            max(float(b.epsilon or 0.0) for b in spent),
            max(b.delta for b in spent),
            note="largest per-site spend (federated DP: each site's own budget)",
        )
        self.thresholds_ = model.info.get("thresholds")
        self.certified_ = certified_from_thresholds(self.thresholds_)
        if self.certified_ is False:
            text = uncertified_message(
                float(self.alpha), float(self.fail_prob), uncertified_detail(self.thresholds_)
            )
            if cfg.is_opportunity:
                text = text.replace("|DD|", "|EOD|")
            warnings.warn(
                text,
                UncertifiedFairnessWarning,
                stacklevel=2,
            )
        return self

    def _category_indices(self, X0: Any) -> dict[int, list[Any]] | None:
        """``categories`` keyed by column index (names resolved with the first site's X)."""
        if not self.categories or self.estimator == "kernel":
            return self.categories or None
        if not isinstance(self.categories, dict):
            raise InvalidParameterError(
                "categories: expected a mapping {column: [public categories]}."
            )
        cols = getattr(X0, "columns", None)
        names = [str(c) for c in cols] if cols is not None else None
        out: dict[int, list[Any]] = {}
        for key, vals in self.categories.items():
            if isinstance(key, str):
                if names is None or key not in names:
                    raise InvalidParameterError(
                        f"categories: column {key!r} is not a column of X (names: {names})."
                    )
                out[names.index(key)] = list(vals)
            else:
                out[int(key)] = list(vals)
        return out

    def _model(self) -> FederatedModel:
        model = getattr(self, "model_", None)
        if model is None:
            raise NotFittedError(
                "This FDPFairClassifier instance is not fitted yet. Call 'fit' with "
                "appropriate arguments before using this estimator."
            )
        return model

    def predict_proba(
        self, X: ArrayLike, *, sensitive_features: ArrayLike | None = None
    ) -> NDArray[np.float64]:
        """Probability of each output of the cross-fitted randomised classifier.

        ``sensitive_features`` is required (requested by default under metadata routing).
        """
        sensitive_features = require_sensitive(sensitive_features, self, "predict_proba")
        p = self._model().positive_rate(X, sensitive_features, clip=bool(self.clip))
        return np.column_stack((1.0 - p, p))

    def decision_function(
        self, X: ArrayLike, *, sensitive_features: ArrayLike | None = None
    ) -> NDArray[np.float64]:
        """The released linear score θ̃·(1, a, w(x)) (``estimator="linear"`` only).

        Post-processing of the release (no data, no noise): η̃ = sigmoid of it, for ranking
        and calibration next to the randomised fair decisions of :meth:`predict`.
        """
        sensitive_features = require_sensitive(sensitive_features, self, "decision_function")
        return self._model().decision_function(X, sensitive_features, clip=bool(self.clip))

    def predict(
        self, X: ArrayLike, *, sensitive_features: ArrayLike | None = None
    ) -> NDArray[np.int64]:
        """Labels 0/1: post-processing of the released model (no noise, no data).

        ``sensitive_features`` is required (requested by default under metadata routing).
        """
        sensitive_features = require_sensitive(sensitive_features, self, "predict")
        return self._model().predict(X, sensitive_features, clip=bool(self.clip))

    def score(
        self, X: ArrayLike, y: ArrayLike, *, sensitive_features: ArrayLike | None = None
    ) -> float:
        """Accuracy of :meth:`predict`.

        ``sensitive_features`` is required (requested by default under metadata routing);
        without it :class:`~dpfair.InvalidParameterError` is raised. scikit-learn's default
        ``error_score=np.nan`` would report that as a NaN score with a warning: pass
        ``error_score="raise"``.
        """
        sensitive_features = require_sensitive(sensitive_features, self, "score")
        pred = self.predict(X, sensitive_features=sensitive_features)
        truth = check_binary("y", y, n_samples=pred.size)
        return float(np.mean(pred == truth))
