"""The site role of FDP-Fair: one data holder, its own data only, two messages out.

A :class:`Site` never receives another site's data: its inputs are its own rows, the public
``setup`` message and the centre's broadcast model (a post-processing of all sites' noisy
round-1 releases).

Releases and their privacy shares (derivations in ``_protocol.py`` and
``docs/proofs/fairclass_fdp_fair.md``):

* round 1, per fold, on the fold's training half T: ñ_{s,1} = n_1(T) + N(0, σ_c²) and the
  four binned kernel sums F_{a,y} + σ_f·W_{a,y} on the public grid — one μ₁-GDP release;
* round 2, per fold, on the calibration half C: Z_i = 2(2a−1)·π̃_a·(η̃_a(X_i) − 1/2) with the
  broadcast (η̃, π̃); a binary tree of counts of Z over group 0 and of −Z over group 1
  (2^M bins of [−1, 1], noisy roots), N(0, σ_t²) on every node — one μ₂-GDP release.

Without cross-fitting the halves are disjoint (parallel composition, μ₁ = μ₂ = μ*); with it
each half is in one release of each round and the site's ledger composes them exactly.

Randomness (THREATS.md rule 2). Each release draws its noise when it is made: from fresh
OS entropy (``SeedSequence()``) unless a seed is given, and a seed — for tests and studies
only — is always mixed with the site id, the run id and the stream (split, round 1,
round 2) by :func:`mixed_seed`, so two sites or two runs given the same seed never draw the
same noise, and round 2's noise is independent of round 1's. The split of the rows into
halves is data-independent and not noise: its entropy (:attr:`Site.split_entropy`) is
what a site keeps between the two rounds' processes (in its private state file); nothing
that determines a release's noise is kept anywhere.

Split. Row i (its position in the site's data) goes to half
:meth:`PositionSplit.half_of(i) <dpfair.fairclass._split.PositionSplit>`, the package's
seeded position hash with coefficients drawn from the split entropy (:func:`split_of`) —
the same split whether the rows are in memory (:class:`Site`) or in a file
(:class:`~dpfair.fairclass.federated._filesite.FileSite`). It depends on (N_s, entropy)
only, never on a row's values, so the halves are independent of the data, their sizes are
public functions of (N_s, entropy), and a replace-one neighbour keeps its position and so
its half (``docs/proofs/fairclass_fdp_fair.md``).
"""

from __future__ import annotations

import hashlib
import math
import secrets
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpfair._errors import InsufficientDataError, InvalidDataError, InvalidParameterError
from dpfair.fairclass._budget import KERNEL_SUM_RKHS_SENSITIVITY
from dpfair.fairclass._model import ReleasedFold, _lattice_noise, kernel_cell_weights
from dpfair.fairclass._rff import (
    ReleasedRFFFold,
    release_rff_sums,
    rff_cell_sums,
    rff_lattice,
)
from dpfair.fairclass._split import PositionSplit
from dpfair.fairclass._validation import check_binary, check_sensitive, scale_to_unit_box
from dpfair.fairclass.federated._messages import Envelope, ProtocolError
from dpfair.fairclass.federated._opportunity import (
    check_positive_shares,
    opportunity_folds,
    positive_rows,
    score_arrays,
)
from dpfair.fairclass.federated._protocol import ProtocolConfig, SiteLedger
from dpfair.mechanisms import (
    GaussianProcessMechanism,
    KroneckerGaussianGrid,
    NoisyBinaryTree,
    leaf_counts,
)
from dpfair.privacy import Budget

__all__ = ["Site", "flatten_levels", "mixed_seed", "split_of", "unflatten_levels"]

_HALVES = ("half A", "half B")
#: Each group needs at least this many rows in each half of each site.
MIN_GROUP_ROWS_PER_HALF = 2


def flatten_levels(levels: tuple[NDArray[np.float64], ...]) -> NDArray[np.float64]:
    """Concatenate tree levels 0..M into one vector of length 2^(M+1) − 1."""
    return np.concatenate([np.asarray(lv, dtype=np.float64) for lv in levels])


def unflatten_levels(flat: NDArray[np.float64], depth: int) -> tuple[NDArray[np.float64], ...]:
    """Inverse of :func:`flatten_levels`."""
    out = []
    start = 0
    for ell in range(depth + 1):
        out.append(np.asarray(flat[start : start + (1 << ell)], dtype=np.float64))
        start += 1 << ell
    return tuple(out)


#: Streams of a site's randomness (the spawn key's last entry).
STREAM_SPLIT, STREAM_ROUND1, STREAM_ROUND2 = 0, 1, 2


def _id_hash(text: str) -> int:
    """Deterministic 64-bit hash of an id (Python's ``hash`` is salted per process)."""
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


def mixed_seed(
    seed: np.random.SeedSequence, site_id: str, run_id: str, stream: int
) -> np.random.SeedSequence:
    """The seed of one stream of one site in one run, from a user seed (tests/studies).

    ``SeedSequence(entropy=seed.entropy, spawn_key=(*seed.spawn_key, H(site_id),
    H(run_id), stream))`` with H the first 64 bits of SHA-256: the same user seed gives
    independent streams at different sites, in different runs and for different rounds.
    """
    return np.random.SeedSequence(
        entropy=seed.entropy,
        spawn_key=(*seed.spawn_key, _id_hash(site_id), _id_hash(run_id), int(stream)),
    )


def seed_of(random_state: Any, name: str = "random_state") -> np.random.SeedSequence | None:
    """A user seed as a SeedSequence (None: fresh OS entropy at every release).

    A ``Generator`` is consumed once (128 bits) at construction.
    """
    if random_state is None:
        return None
    if isinstance(random_state, np.random.SeedSequence):
        return random_state
    if isinstance(random_state, np.random.Generator):
        return np.random.SeedSequence(random_state.integers(0, 2**32, size=4).tolist())
    if isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool):
        if random_state < 0:
            raise InvalidParameterError(
                f"{name}={random_state}: a seed must be a non-negative integer."
            )
        return np.random.SeedSequence(int(random_state))
    raise InvalidParameterError(
        f"{name}={random_state!r}: expected None, a non-negative int, a numpy SeedSequence "
        "or a numpy Generator."
    )


def split_entropy_of(
    seed: np.random.SeedSequence | None, site_id: str, run_id: str, given: int | None
) -> int:
    """The 128-bit entropy of the data-independent split (given, from the seed, or fresh)."""
    if given is not None:
        if isinstance(given, bool) or not isinstance(given, int) or not 0 <= given < 2**128:
            raise InvalidParameterError(
                f"split_entropy={given!r}: expected an integer in [0, 2**128)."
            )
        return given
    if seed is None:
        return secrets.randbits(128)
    words = mixed_seed(seed, site_id, run_id, STREAM_SPLIT).generate_state(4, np.uint32)
    return int.from_bytes(words.astype("<u4").tobytes(), "little")


def split_of(split_entropy: int) -> PositionSplit:
    """The site's data-independent split into halves (in memory and out of core alike)."""
    return PositionSplit.from_rng(np.random.default_rng(np.random.SeedSequence(split_entropy)))


def check_half_groups(site_id: str, counts: NDArray[np.int64]) -> None:
    """Refuse a split with fewer than :data:`MIN_GROUP_ROWS_PER_HALF` rows of a group in a
    half (``counts[half, group]``); a data-dependent refusal: nothing is released."""
    for h in (0, 1):
        for a in (0, 1):
            c = int(counts[h, a])
            if c < MIN_GROUP_ROWS_PER_HALF:
                raise InsufficientDataError(
                    f"site {site_id!r}, field 'sensitive_features': group {a} has {c} "
                    f"row(s) in {_HALVES[h]} of the site's random split; each group "
                    f"needs at least {MIN_GROUP_ROWS_PER_HALF} per half. This site "
                    "cannot take part until it has more rows of that group."
                )


def folds_of(cross_fit: bool) -> list[tuple[int, int]]:
    """(training half, calibration half) per fold."""
    return [(0, 1), (1, 0)] if cross_fit else [(0, 1)]


class Site:
    """One data holder of the FDP-Fair protocol.

    Parameters
    ----------
    site_id : str
        Must be one of the setup's sites; its public N_s must equal ``len(X)``.
    X : array-like of shape (N_s, d)
    y : array-like of shape (N_s,)
        Labels 0/1.
    sensitive_features : array-like of shape (N_s,)
        Groups 0/1.
    config : ProtocolConfig
        The public ``setup``.
    random_state : None, int, SeedSequence or Generator
        None (deployments): the split and every release draw fresh OS entropy. A seed is
        for tests and studies: mixed with the site id and the run id (:func:`mixed_seed`).
    clip : bool, default False
        Clip features into the public box instead of raising.
    split_entropy : int, optional
        Re-create a split made earlier (round 2 in another process); the noise is never
        re-created.

    Attributes
    ----------
    ledger : SiteLedger
        The site's own accountant over both rounds.
    split_entropy : int
        Entropy of the data-independent split (kept by the site between its rounds).
    split : PositionSplit
        The split itself (row position → half), from ``split_entropy``.
    """

    def __init__(
        self,
        site_id: str,
        X: ArrayLike,
        y: ArrayLike,
        sensitive_features: ArrayLike,
        *,
        config: ProtocolConfig,
        random_state: Any = None,
        clip: bool = False,
        split_entropy: int | None = None,
    ) -> None:
        spec = self._init_party(site_id, config)
        if config.is_mapped:
            self._init_rff(X, y, sensitive_features, spec.n, clip)
        else:
            self._init_kernel(X, y, sensitive_features, spec.n, clip)
        n = self._U.shape[0]
        self._init_split(random_state, split_entropy)
        which = self.split.halves(n)
        self._halves = (np.flatnonzero(which == 0), np.flatnonzero(which == 1))
        check_half_groups(
            site_id, np.array([np.bincount(self._A[rows], minlength=2)[:2]
                               for rows in self._halves])
        )
        check_site_labels(site_id, int(self._y.min()), int(self._y.max()), n)
        self._init_ledger()

    # Shared by every reader of the rows (the in-memory Site and the out-of-core FileSite).
    def _init_party(self, site_id: str, config: ProtocolConfig) -> Any:
        """Who this site is in the run: its public spec and noise plan."""
        spec = config.site(site_id)
        self.site_id = site_id
        self.config = config
        self.plan = config.plan(site_id)
        return spec

    def _init_split(self, random_state: Any, split_entropy: int | None) -> None:
        """The user seed (None: fresh entropy per release) and the split's entropy."""
        self._seed = seed_of(random_state)
        self.split_entropy = split_entropy_of(
            self._seed, self.site_id, self.config.protocol_id, split_entropy
        )
        self.split = split_of(self.split_entropy)

    def _init_ledger(self) -> None:
        """A fresh ledger over the site's (ε_s, δ_s), before round 1."""
        spec = self.config.site(self.site_id)
        self.ledger = SiteLedger(self.site_id, spec.epsilon, spec.delta, self.plan.mu_total)
        self._round = 0

    def _init_kernel(
        self, X: ArrayLike, y: ArrayLike, sensitive_features: ArrayLike, n_public: int,
        clip: bool,
    ) -> None:
        """Numeric rows scaled into the public box (the kernel grid's input)."""
        site_id, config = self.site_id, self.config
        try:
            X_arr = np.asarray(X, dtype=np.float64)
        except (TypeError, ValueError):
            raise ProtocolError(site_id, "X", "expected a numeric 2-D array.") from None
        d = len(config.feature_bounds)
        if X_arr.ndim != 2 or X_arr.shape[1] != d:
            raise ProtocolError(
                site_id, "X", f"has shape {X_arr.shape}; the protocol has {d} features."
            )
        if not np.all(np.isfinite(X_arr)):
            raise ProtocolError(site_id, "X", "contains NaN or inf.")
        n = X_arr.shape[0]
        _check_n(site_id, n, n_public)
        try:
            self._y = check_binary("y", y, n_samples=n)
            self._A = check_sensitive(sensitive_features, n)
            bounds = np.asarray(config.feature_bounds)
            self._U = scale_to_unit_box(X_arr, bounds[:, 0], bounds[:, 1], clip=clip)
        except InvalidDataError as exc:
            raise ProtocolError(site_id, "data", str(exc)) from None

    def _init_rff(
        self, X: ArrayLike, y: ArrayLike, sensitive_features: ArrayLike, n_public: int,
        clip: bool,
    ) -> None:
        """Rows through the public feature map (numeric bounds, one-hot categories)."""
        site_id, config = self.site_id, self.config
        cols = getattr(X, "columns", None)
        names = [str(c) for c in cols] if cols is not None else None
        try:
            self._U = config.feature_map(clip).transform(X, names)
            n = self._U.shape[0]
            _check_n(site_id, n, n_public)
            self._y = check_binary("y", y, n_samples=n)
            self._A = check_sensitive(sensitive_features, n)
        except InvalidDataError as exc:
            raise ProtocolError(site_id, "data", str(exc)) from None
        if config.is_rff:
            self._freqs = config.rff_freqs()

    def _noise(self, stream: int) -> np.random.Generator:
        """A generator for one release, created when the release is made: fresh OS
        entropy, or the user seed mixed with site, run and stream. Never stored."""
        if self._seed is None:
            return np.random.default_rng(np.random.SeedSequence())
        return np.random.default_rng(
            mixed_seed(self._seed, self.site_id, self.config.protocol_id, stream)
        )

    # ------------------------------------------------------------------ round 1
    def round1(self) -> Envelope:
        """S1 on each fold's training half → the ``round1`` message.

        Privacy: per fold one μ₁-GDP release on the training half (count with Δ = 1 and
        four kernel sums with joint RKHS sensitivity √2; μ₁² = 1/σ_c² + 2/σ_f²), charged to
        the site's ledger before any noise is drawn.
        """
        if self._round != 0:
            raise ProtocolError(self.site_id, "round", "round 1 was already run.")
        if self.config.is_rff:
            return self._round1_rff()
        if self.config.is_linear:
            return self._round1_linear()
        cfg, plan = self.config, self.plan
        grid = cfg.grid()
        folds = folds_of(cfg.cross_fit)
        self._charge_round1()
        rng = self._noise(STREAM_ROUND1)
        mech = GaussianProcessMechanism(
            sigma=plan.sigma_function, rkhs_sensitivity=KERNEL_SUM_RKHS_SENSITIVITY
        )
        counts, sums, n_train = [], [], []
        for tr, _cal in folds:
            n1, cell_sums, n_rows = self._training_stats(tr, grid)
            counts.append(float(n1) + _lattice_noise(n_rows, plan.sigma_count, rng))
            sums.append(mech.release_binned(cell_sums, grid, rng, total_mass=float(n_rows)))
            n_train.append(n_rows)
        return self._round1_envelope(counts, sums, n_train)

    def _round1_envelope(
        self, counts: list[float], sums: list[NDArray[np.float64]], n_train: list[int]
    ) -> Envelope:
        """The round-1 message (either group score) once every fold is released."""
        self._round = 1
        return Envelope(
            "round1",
            self.config.protocol_id,
            self.site_id,
            fields={
                "n_train": n_train,
                "sigma_count": self.plan.sigma_count,
                "sigma_function": self.plan.sigma_function,
            },
            arrays={"count": np.array(counts), "sums": np.stack(sums)},
        )

    def _round1_rff(self) -> Envelope:
        """Round 1 with random Fourier features (``fairclass/_rff.py``): per fold the
        noisy group-1 count (Δ = 1) and the four lattice sums of φ (Δ = 2 in φ units, exact
        in int64) — one μ₁-GDP release, μ₁² = 1/σ_c² + 4/σ_f², charged before any noise."""
        cfg, plan = self.config, self.plan
        folds = folds_of(cfg.cross_fit)
        self._charge_round1()
        rng = self._noise(STREAM_ROUND1)
        counts, sums, n_train = [], [], []
        for tr, _cal in folds:
            n1, cell_sums, n_rows = self._rff_training_stats(tr)
            counts.append(float(n1) + _lattice_noise(n_rows, plan.sigma_count, rng))
            sums.append(release_rff_sums(cell_sums, n_rows, plan.sigma_function, rng))
            n_train.append(n_rows)
        return self._round1_envelope(counts, sums, n_train)

    def _rff_training_stats(self, half: int) -> tuple[int, NDArray[np.int64], int]:
        """(group-1 count, exact int64 lattice sums of φ per (a, y) cell, rows) of a half."""
        rows = self._halves[half]
        U, A, y = self._U[rows], self._A[rows], self._y[rows]
        Q = rff_lattice(U, self._freqs)
        return int(np.sum(A == 1)), rff_cell_sums(Q, A, y), int(rows.size)

    def _round1_linear(self) -> Envelope:
        """Round 1 with the linear estimator (``federated/_linear.py``): per fold the noisy
        group-1 count (Δ = 1) and the group sums and label contrast, cell counts and
        second moments of the lattice rows — one μ₁-GDP release, μ₁² = 1/σ_c² + μ_L²,
        charged before any noise.

        With ``radius="auto"`` each fold first releases the site's own clip radius r_s
        (:func:`~dpfair.fairclass.federated._linear.private_radius`: a noisy histogram of
        the half's row norms on the public ladder, Δ = √2, μ_r = √2/σ_r), then clips its
        rows to r_s and releases the statistics in units of r_s (‖w‖ ≤ 1, so the same
        sensitivities and noise in w units): μ₁² = 1/σ_c² + μ_r² + μ_L² by adaptive
        composition. r_s (a post-processing of the histogram) is sent, signed, in the
        message's ``radius`` field; the histogram itself is not sent."""
        from dpfair.fairclass.federated._linear import release_linear_stats

        cfg, plan = self.config, self.plan
        folds = folds_of(cfg.cross_fit)
        sig = cfg.linear_sigmas(self.site_id)
        cfg.check_servable(self.site_id)  # a round the samplers cannot serve costs nothing
        self._charge_round1()
        rng = self._noise(STREAM_ROUND1)
        counts, sums, cells, moments, n_train, radii = [], [], [], [], [], []
        for tr, _cal in folds:
            r = self._release_radius(tr, sig.radius, rng) if cfg.private_radius else None
            n1, stats, n_rows = self._linear_training_stats(tr, r)
            counts.append(float(n1) + _lattice_noise(n_rows, plan.sigma_count, rng))
            s, c, m = release_linear_stats(*stats, n_rows, sig, rng)
            sums.append(s)
            cells.append(c)
            moments.append(m)
            n_train.append(n_rows)
            radii.append(r)
        env = self._round1_envelope(counts, sums, n_train)
        env.arrays["cells"] = np.stack(cells)
        env.arrays["moments"] = np.stack(moments)
        env.fields["sigma_cells"] = sig.cells
        env.fields["sigma_moments"] = sig.moments
        if cfg.private_radius:
            env.fields["radius"] = radii
            env.fields["sigma_radius"] = sig.radius
        return env

    def _release_radius(self, half: int, sigma: float, rng: np.random.Generator) -> float:
        """The site's private clip radius on one training half (μ_r = √2/σ_r, charged)."""
        from dpfair.fairclass.federated._linear import default_radius, private_radius

        box = default_radius(self.config.feature_map())
        return private_radius(self._radius_histogram(half), box, sigma, rng)[1]

    def _radius_histogram(self, half: int) -> NDArray[np.int64]:
        """The exact histogram of the half's centred row norms over the public ladder."""
        from dpfair.fairclass._linear import radius_ladder
        from dpfair.fairclass.federated._linear import (
            centred_norms,
            default_radius,
            norm_histogram,
            numeric_mask,
        )

        fmap = self.config.feature_map()
        norms = centred_norms(self._U[self._halves[half]], numeric_mask(fmap))
        return norm_histogram(norms, radius_ladder(default_radius(fmap)))

    def _linear_training_stats(
        self, half: int, radius: float | None = None
    ) -> tuple[int, tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]], int]:
        """(group-1 count, exact integer (sums, cells, moments) of the lattice rows, rows),
        the rows clipped to ``radius`` (default: the setup's public radius)."""
        from dpfair.fairclass.federated._linear import (
            lattice_rows,
            linear_cell_stats,
            numeric_mask,
            row_map,
        )

        rows = self._halves[half]
        U, A, y = self._U[rows], self._A[rows], self._y[rows]
        fmap = self.config.feature_map()
        r = self.config.radius if radius is None else radius
        if not isinstance(r, float):
            raise InvalidParameterError(
                "_linear_training_stats: radius='auto' needs the site's released radius."
            )
        Q = lattice_rows(row_map(U, numeric_mask(fmap), r))
        return int(np.sum(A == 1)), linear_cell_stats(Q, A, y), int(rows.size)

    def _charge_round1(self) -> None:
        plan = self.plan
        if self.config.is_linear:
            sig = self.config.linear_sigmas(self.site_id)
            what = ("linear sufficient statistics (group sums + label contrast, cell counts, "
                    "moments)")
            noise = (
                f"N(0, {sig.sums:.6g}^2) per sum coordinate (lattice 2^-12), "
                f"N(0, {sig.cells:.6g}^2) per cell count, N(0, {sig.moments:.6g}^2) per "
                "diagonal moment and half that variance off the diagonal (lattice 2^-24)"
            )
            if self.config.private_radius:
                # the count and the statistics: the rest of μ₁ (adaptive composition); the
                # whole round is checked on every half before its first record is written
                mu_rest = math.hypot(1.0 / plan.sigma_count, sig.mu_stats)
                for tr, _cal in folds_of(self.config.cross_fit):
                    self.ledger.ledger.check(
                        Budget.gdp(math.hypot(sig.mu_radius, mu_rest)), rows=_HALVES[tr],
                        label=f"round 1 (radius + linear statistics) on {_HALVES[tr]}")
                self._charge_radius(sig)
                for k, (tr, _cal) in enumerate(folds_of(self.config.cross_fit), start=1):
                    self.ledger.charge(
                        f"fold {k} / round 1 / count + 4 {what} at the site's radius",
                        _HALVES[tr], mu_rest, f"N(0, {plan.sigma_count:.6g}^2) and {noise}",
                    )
                return
        else:
            what = "D random-Fourier-feature sums" if self.config.is_rff else "kernel sums"
            noise = (
                f"N(0, {plan.sigma_function:.6g}^2) per coordinate (lattice 2^-20)"
                if self.config.is_rff
                else f"{plan.sigma_function:.6g}*GP(0, k_h)"
            )
        for k, (tr, _cal) in enumerate(folds_of(self.config.cross_fit), start=1):
            self.ledger.charge(
                f"fold {k} / round 1 / count + 4 {what} (one Gaussian mechanism)",
                _HALVES[tr],
                plan.mu_round1,
                f"N(0, {plan.sigma_count:.6g}^2) and {noise}",
            )

    def _charge_radius(self, sig: Any) -> None:
        """Charge each fold's radius release (μ_r-GDP on its training half)."""
        for k, (tr, _cal) in enumerate(folds_of(self.config.cross_fit), start=1):
            self.ledger.charge(
                f"fold {k} / round 1 / clip radius: noisy histogram of the row norms on the "
                "public ladder (noisy median)",
                _HALVES[tr], sig.mu_radius,
                f"N(0, {sig.radius:.6g}^2) per bin of 65 (lattice 2^-6)",
            )

    def resume_after_round1(self) -> None:
        """Mark round 1 as done in a new process (same data and split): re-charge its
        spend to this object's in-memory ledger, so its report shows both rounds.

        Used by the command line, where rounds 1 and 2 run in separate processes (the
        persistent per-site ledger there records each round once, keyed by run and round).
        """
        if self._round != 0:
            raise ProtocolError(self.site_id, "round", "round 1 state already present.")
        self._charge_round1()
        self._round = 1

    # ------------------------------------------------------------------ round 2
    def round2(self, model: Envelope) -> Envelope:
        """S2 on each fold's calibration half with the broadcast model → ``round2``.

        Privacy: per fold one μ₂-GDP release — the pair of noisy-root trees with
        σ_t = sqrt(2(M + 1))/μ₂ — on the calibration half.
        """
        if self._round != 1:
            raise ProtocolError(self.site_id, "round", "run round 1 before round 2, once.")
        cfg, plan = self.config, self.plan
        folds = folds_of(cfg.cross_fit)
        score_folds = model_folds(model, cfg)
        grid = None if cfg.is_mapped else cfg.grid()
        depth = cfg.depth
        mech = NoisyBinaryTree(depth=depth, sigma=plan.sigma_tree, root="noisy")
        for k, (_tr, cal) in enumerate(folds, start=1):
            self.ledger.charge(
                f"fold {k} / round 2 / two noisy binary trees (depth {depth}, noisy roots)"
                + (" of the positive-label rows" if cfg.is_opportunity else ""),
                _HALVES[cal],
                plan.mu_round2,
                f"N(0, {plan.sigma_tree:.6g}^2) per node",
            )
        leaves = self._calibration_leaves(
            [(cal, score_folds[k]) for k, (_tr, cal) in enumerate(folds)],
            grid,
        )
        trees, n_cal = [], []
        rng = self._noise(STREAM_ROUND2)
        for pair_counts, n_rows in leaves:
            pair = []
            for counts in pair_counts:  # group 0 (Z), then group 1 (−Z)
                released = mech.release(counts, rng)
                pair.append(flatten_levels(released.levels))
            trees.append(np.stack(pair))
            n_cal.append(n_rows)
        self._round = 2
        return Envelope(
            "round2",
            cfg.protocol_id,
            self.site_id,
            fields={
                "n_cal": n_cal,
                "depth": depth,
                "sigma_tree": plan.sigma_tree,
                "privacy": self.ledger.to_dict(),
            },
            arrays={"trees": np.stack(trees)},
        )

    # ------------------------------------------------------------------ data access
    # The only two places that read the site's rows; everything that adds noise or charges
    # the ledger is above and shared by every subclass (e.g. the out-of-core ``FileSite``).
    def _training_stats(
        self, half: int, grid: KroneckerGaussianGrid
    ) -> tuple[int, NDArray[np.float64], int]:
        """(group-1 count, the exact binned weights W_{a,y}, rows) of training half ``half``.

        The weights (``kernel_cell_weights``) are released as the kernel sums K·W by
        ``GaussianProcessMechanism.release_binned``; ``rows`` is the public half size.
        """
        rows = self._halves[half]
        U, A, y = self._U[rows], self._A[rows], self._y[rows]
        return int(np.sum(A == 1)), kernel_cell_weights(grid, U, A, y), int(rows.size)

    def _calibration_leaves(
        self,
        folds: list[tuple[int, Any]],
        grid: Any,
    ) -> list[tuple[tuple[NDArray[np.int64], NDArray[np.int64]], int]]:
        """Per (calibration half, model): leaf counts of Z over group 0 and −Z over group 1
        on the 2^M dyadic bins of [−1, 1], and the half's rows."""
        out = []
        for half, fold in folds:
            rows = self._halves[half]
            keep = positive_rows(self._y[rows], self.config)  # Y = 1 only under EO
            U, A = self._U[rows][keep], self._A[rows][keep]
            out.append((score_leaf_counts(fold, grid, U, A, self.config.depth), int(rows.size)))
        return out

    # ------------------------------------------------------------------ state
    @property
    def privacy_spent(self) -> Any:
        """The site's (ε, δ) so far (:attr:`SiteLedger.spent`)."""
        return self.ledger.spent

    def data_fingerprint(self) -> str:
        """SHA-256 of the site's scaled data (kept locally to check round 2 uses the same)."""
        h = hashlib.sha256()
        for arr in (self._U, self._A, self._y):
            h.update(np.ascontiguousarray(arr).tobytes())
        return h.hexdigest()


def _check_n(site_id: str, n: int, n_public: int) -> None:
    if n != n_public:
        raise ProtocolError(
            site_id,
            "n",
            f"the site holds {n} rows but the setup declares N_s = {n_public}: the public "
            "size must match (replace-one DP assumes N_s public).",
        )


def check_site_labels(site_id: str, y_min: int, y_max: int, n: int) -> None:
    """Refuse a site whose labels are all equal, as CDP-Fair refuses a constant y.

    Like every input check this is a data-dependent refusal outside the DP guarantee: it
    reveals only that the site's y is constant, and nothing is released.
    """
    if y_min == y_max:
        raise InsufficientDataError(
            f"site {site_id!r}, field 'y': all {n} labels are {y_min}; both outcomes 0 and 1 "
            "must occur at every site to fit a classifier (CDP-Fair refuses a constant y "
            "too). This site cannot take part until it has rows of both outcomes."
        )


def score_leaf_counts(
    fold: ReleasedFold | ReleasedRFFFold,
    grid: Any,
    U: NDArray[np.float64],
    A: NDArray[np.int8],
    depth: int,
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Leaf counts of clip(Z, ±1) over group 0 and of −clip(Z, ±1) over group 1.

    Row-wise, so counts of a partition of the rows add up to the counts of all of them.
    """
    z = np.clip(fold.scores(grid, U, A), -1.0, 1.0)  # ReleasedFold or ReleasedRFFFold
    return (
        leaf_counts(z[A == 0], (-1.0, 1.0), depth),
        leaf_counts(-z[A == 1], (-1.0, 1.0), depth),
    )


def model_folds(model: Envelope, cfg: ProtocolConfig) -> list[Any]:
    """The broadcast model's per-fold group scores (τ = 0), validated against the setup
    (under equal opportunity wrapped with the broadcast p̃_{a,1}, ``_opportunity.py``)."""
    positive = check_positive_shares(model, cfg)
    return opportunity_folds(_estimator_folds(model, cfg), positive)


def _estimator_folds(model: Envelope, cfg: ProtocolConfig) -> list[Any]:
    if cfg.is_linear:
        from dpfair.fairclass.federated._linear import ReleasedFedLinearFold, numeric_mask

        theta, pi = check_linear_model(model, cfg)
        radius = linear_model_radius(model, cfg)
        mask = numeric_mask(cfg.feature_map())
        return [
            ReleasedFedLinearFold(theta=theta[k], pi=pi[k], tau=0.0, numeric=mask,
                                  radius=float(radius[k]))
            for k in range(cfg.n_folds)
        ]
    if cfg.is_rff:
        coef, ridge, pi = check_rff_model(model, cfg)
        W = cfg.rff_freqs()
        return [
            ReleasedRFFFold(coef=coef[k], ridge=ridge[k], pi=pi[k], tau=0.0, freqs=W)
            for k in range(cfg.n_folds)
        ]
    eta, pi = check_model(model, cfg)
    return [ReleasedFold(eta=eta[k], pi=pi[k], tau=0.0) for k in range(cfg.n_folds)]


def check_linear_model(
    model: Envelope, cfg: ProtocolConfig
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Validate a linear ``model`` (θ̃ and π̃ per fold) against the setup."""
    if model.kind != "model":
        raise ProtocolError(model.sender, "kind", f"expected 'model', got {model.kind!r}.")
    if model.protocol_id != cfg.protocol_id:
        raise ProtocolError(model.sender, "protocol_id", "belongs to another run.")
    nf = cfg.n_folds
    expected = {"theta", "pi", "radius"} if cfg.private_radius else {"theta", "pi"}
    if score_arrays(model) != expected:
        raise ProtocolError(
            model.sender, "arrays", "the setup uses estimator='linear': expected "
            + ", ".join(sorted(expected)) + "."
        )
    theta = model.array("theta", (nf, cfg.linear_width + 2))
    pi = model.array("pi", (nf, 2))
    if not np.all(np.isfinite(theta)):
        raise ProtocolError(model.sender, "arrays.theta", "non-finite values.")
    if np.any((pi <= 0) | (pi >= 1)):
        raise ProtocolError(model.sender, "arrays.pi", "values outside (0, 1).")
    return theta, pi


def linear_model_radius(model: Envelope, cfg: ProtocolConfig) -> NDArray[np.float64]:
    """The clip radius of each fold's released score: the model's ``radius`` array (the
    centre's common radius r̄ of the sites' released radii, inside the public ladder's
    range) with ``radius="auto"``, else the setup's public radius."""
    nf = cfg.n_folds
    if not cfg.private_radius:
        return np.full(nf, float(cfg.radius))
    from dpfair.fairclass._linear import radius_ladder
    from dpfair.fairclass.federated._linear import default_radius

    radius = model.array("radius", (nf,))
    ladder = radius_ladder(default_radius(cfg.feature_map()))
    lo, hi = float(ladder[-1]) * (1 - 1e-12), float(ladder[0]) * (1 + 1e-12)
    if np.any((radius < lo) | (radius > hi)):
        raise ProtocolError(model.sender, "arrays.radius",
                            f"outside the public ladder's range [{lo:.6g}, {hi:.6g}].")
    return radius


def check_rff_model(
    model: Envelope, cfg: ProtocolConfig
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Validate an RFF ``model`` (aggregated sums, ridges, π̃); return them per fold."""
    if model.kind != "model":
        raise ProtocolError(model.sender, "kind", f"expected 'model', got {model.kind!r}.")
    if model.protocol_id != cfg.protocol_id:
        raise ProtocolError(model.sender, "protocol_id", "belongs to another run.")
    nf = cfg.n_folds
    if score_arrays(model) != {"coef", "ridge", "pi"}:
        raise ProtocolError(
            model.sender, "arrays", "the setup uses estimator='rff': expected coef, ridge, pi."
        )
    coef = model.array("coef", (nf, cfg.features_dim, 2, 2))
    ridge = model.array("ridge", (nf, 2))
    pi = model.array("pi", (nf, 2))
    if np.any(ridge < 0):
        raise ProtocolError(model.sender, "arrays.ridge", "negative values.")
    if np.any((pi <= 0) | (pi >= 1)):
        raise ProtocolError(model.sender, "arrays.pi", "values outside (0, 1).")
    return coef, ridge, pi


def check_model(
    model: Envelope, cfg: ProtocolConfig
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Validate the broadcast ``model`` against the setup; return (η̃, π̃) per fold."""
    if model.kind != "model":
        raise ProtocolError(model.sender, "kind", f"expected 'model', got {model.kind!r}.")
    if model.protocol_id != cfg.protocol_id:
        raise ProtocolError(model.sender, "protocol_id", "belongs to another run.")
    nf = cfg.n_folds
    if cfg.is_mapped or score_arrays(model) != {"eta", "pi"}:
        raise ProtocolError(
            model.sender, "arrays", f"estimator {cfg.estimator!r} of the setup: expected "
            "eta and pi (kernel grid)."
        )
    eta = model.array("eta", (nf, *cfg.grid_shape, 2))
    pi = model.array("pi", (nf, 2))
    if np.any((eta < 0) | (eta > 1)):
        raise ProtocolError(model.sender, "arrays.eta", "values outside [0, 1].")
    if np.any((pi <= 0) | (pi >= 1)):
        raise ProtocolError(model.sender, "arrays.pi", "values outside (0, 1).")
    return eta, pi
