"""The one CDP-Fair pipeline: plan → grid → ledger → S1 per fold → S2 → fitted state.

Every single-server fit of paper 003 (Algorithm 5) — :class:`~dpfair.fairclass.CDPFairClassifier`
and its three baselines in memory, :func:`~dpfair.fairclass.fit_cdp_fair_from_file` on a file,
and the Dask fit of :mod:`dpfair.session` — runs :func:`run_pipeline` on a :class:`Source`.
A source is where the rows live; the pipeline reads them only through two sufficient
statistics, exactly as the privacy proof does (``docs/proofs/fairclass_cdp_fair.md``):

* S1 (kernel group score): the exact integer linear-binning weights W_{a,y} of a training
  half on the public grid and its (group, label) counts (:meth:`Source.grid_weights`);
* S2: per calibration half, the calibration scores Z computed from the *released* S1 fold,
  either raw (:class:`CalibrationScores`, in memory) or counted on the public score lattice
  (:class:`~dpfair.fairclass._threshold.ScoreHistogram`, out of core)
  (:meth:`Source.score_histograms`);
* S2 under equal opportunity: per calibration half, its (half, group, label) counts and
  its positive-label rows, whose score needs p̃_{a,1} = m̃_a/n_C from S2's own noisy counts
  — so the source hands S2 an object that scores those rows once m̃ is drawn: their η̃ in
  memory (:class:`~dpfair.fairclass._opportunity.OpportunityCalibration`), or one streamed
  pass counting the lattice-rounded scores
  (:class:`~dpfair.fairclass.outofcore.PositiveScoreHistogram`, out of core)
  (:meth:`Source.opportunity_calibrations`).

The linear group score (objective perturbation, ``_linear.py``) needs the training rows
themselves: only a source with :meth:`ArraySource.rows` (arrays in memory) offers it.

Three implementations of :class:`Source`: :class:`ArraySource` (here),
``_ParquetAggregates`` (DuckDB, :mod:`dpfair.fairclass.outofcore`) and ``DaskAggregates``
(:mod:`dpfair.session._dask_fair`).

Draws from the fit's generator, in this order, whatever the source: the split
(:func:`~dpfair.fairclass._split.draw_split`), S1 of each fold, then per α and per fold
S2 (the noisy calibration count, the threshold, the certificate's check), last the
public tie-break salt. So the same seed, the same split kind and the same rows in the same
order give the same release through every source.

Privacy: the pipeline adds no mechanism of its own; the guarantee is that of the estimator
(S1 and S2 on disjoint halves, composed by the budget plan and charged to the ledger
*before* any noise is drawn).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from dpfair._errors import InvalidDataError, InvalidParameterError
from dpfair.fairclass._budget import (
    KERNEL_SUM_RKHS_SENSITIVITY,
    BudgetPlan,
    PrivacyLedger,
    S1Release,
)
from dpfair.fairclass._certify import (
    FairnessCertificate,
    certified_target,
    check_threshold,
    choose_side_share,
    side_margins,
)
from dpfair.fairclass._laplace_count import noisy_count
from dpfair.fairclass._linear import (
    LINEAR_COUNT_SHARE,
    LINEAR_JACOBIAN_SHARE,
    RADIUS_SHARE,
    FeatureMap,
    ReleasedLinearFold,
    plan_linear_s1,
    release_linear_fold,
)
from dpfair.fairclass._model import (
    ReleasedFold,
    _lattice_noise,
    make_grid,
    release_s1_from_weights,
)
from dpfair.fairclass._opportunity import (
    OpportunityCalibration,
    OpportunityInput,
    s2_opportunity,
)
from dpfair.fairclass._rule import OpportunityFold
from dpfair.fairclass._split import HALF_LABELS, Split, draw_split
from dpfair.fairclass._threshold import (
    AIM_WINDOW,
    DDSteps,
    dd_steps,
    exact_fair_threshold,
    snap_scores,
    threshold_law_from_steps,
)
from dpfair.fairclass._validation import check_group_table
from dpfair.fairclass.aggregate import GridAggregate
from dpfair.mechanisms import GaussianProcessMechanism, KroneckerGaussianGrid
from dpfair.privacy import Budget

__all__ = [
    "ArraySource",
    "Calibration",
    "CalibrationScores",
    "FitSettings",
    "PipelineResult",
    "Source",
    "check_counts",
    "expected_sizes",
    "run_pipeline",
    "s2_threshold",
]

#: (α, margin) of one S2 run, or None (no fairness step).
Entry = tuple[float, float] | None


@dataclass(frozen=True, eq=False)
class CalibrationScores:
    """Raw calibration scores of one half, with their groups (in memory).

    ``steps(m1, m0)`` rounds them to the public score lattice first (what the private
    threshold sees, equal to a :class:`ScoreHistogram` of the same scores);
    ``exact_steps()`` keeps them raw (the non-private fair plug-in).
    """

    z: NDArray[np.float64]
    groups: NDArray[np.int8]

    def group_counts(self) -> tuple[int, int]:
        """(rows of group 1, all rows)."""
        return int(np.sum(self.groups == 1)), int(self.z.size)

    def steps(self, m1: float, m0: float) -> DDSteps:
        z = snap_scores(self.z)  # public lattice: THREATS.md rule 6 (see snap_scores)
        return dd_steps(z[self.groups == 1], z[self.groups == 0], m1, m0)

    def exact_steps(self) -> DDSteps:
        return dd_steps(self.z[self.groups == 1], self.z[self.groups == 0])


class Calibration(Protocol):
    """The calibration half as S2 reads it (:class:`CalibrationScores`, :class:`ScoreHistogram`)."""

    def group_counts(self) -> tuple[int, int]:
        """(rows of group 1, all rows)."""
        ...

    def steps(self, m1: float, m0: float) -> DDSteps:
        """DD̂ of the lattice-rounded scores with the public denominators."""
        ...

    def exact_steps(self) -> DDSteps:
        """DD̂ with the true group sizes (non-private use only)."""
        ...


AnyFold = ReleasedFold | ReleasedLinearFold
#: A fitted fold: an S1 fold with its τ̂, or its equal-opportunity wrapper.
FittedFold = ReleasedFold | ReleasedLinearFold | OpportunityFold


def fold_scores(
    fold: AnyFold, grid: KroneckerGaussianGrid | None, U: NDArray[np.float64],
    A: NDArray[np.int8],
) -> NDArray[np.float64]:
    """Z = 2(2a − 1)·π̃_a·(η̃_a(x) − 1/2) of rows under a released fold (post-processing)."""
    if isinstance(fold, ReleasedFold):
        if grid is None:
            raise InvalidParameterError("a kernel fold needs its public grid.")
        return fold.scores(grid, U, A)
    return fold.scores(grid, U, A)


def fold_eta(
    fold: AnyFold, grid: KroneckerGaussianGrid | None, U: NDArray[np.float64],
    A: NDArray[np.int8],
) -> NDArray[np.float64]:
    """η̃_{A_i}(U_i) of rows under a released fold (post-processing; the equal-opportunity
    score is formed from it once p̃ is released)."""
    if isinstance(fold, ReleasedFold):
        if grid is None:
            raise InvalidParameterError("a kernel fold needs its public grid.")
        return np.asarray(fold.eta_at(grid, U, A), dtype=np.float64)
    return np.asarray(fold.eta_at(grid, U, A), dtype=np.float64)


class Source(Protocol):
    """Where the rows of a CDP-Fair fit live; read only through aggregates.

    Rows are identified by their 0-based *position*, which decides their half through the
    fit's :class:`~dpfair.fairclass._split.Split`.
    """

    #: How the source is named in error messages.
    name: str
    #: The split kind used when the estimator does not choose ("permutation"/"position").
    default_split: str

    def n_rows(self) -> int:
        """Number of rows (public)."""
        ...

    def check_halves(self, split: Split) -> None:
        """Refuse a split with fewer than 2 rows of a group in a half, where the source
        can tell before any aggregate (arrays); otherwise a no-op (checked from counts)."""
        ...

    def grid_weights(
        self, grid: KroneckerGaussianGrid, split: Split, half: int, bits: int
    ) -> GridAggregate:
        """Exact integer linear-binning weights (q = ``bits``) of the rows of ``half``,
        validating every row."""
        ...

    def score_histograms(
        self, grid: KroneckerGaussianGrid | None, split: Split, folds: dict[int, AnyFold]
    ) -> tuple[dict[int, Calibration], NDArray[np.int64]]:
        """Per calibration half in ``folds``: its scores under that fold; and the
        (half, group, label) row counts of the streamed halves."""
        ...

    def opportunity_calibrations(
        self, grid: KroneckerGaussianGrid | None, split: Split, folds: dict[int, AnyFold]
    ) -> tuple[dict[int, OpportunityInput], NDArray[np.int64]]:
        """Per calibration half in ``folds``: its positive-label rows as S2 under equal
        opportunity reads them; and the (half, group, label) row counts of those halves."""
        ...

    def fitted_extras(self, n: int, half_sizes: tuple[int, int]) -> dict[str, Any]:
        """Extra fitted attributes the source adds (e.g. ``outofcore_``)."""
        ...


class ArraySource:
    """:class:`Source` of validated arrays in memory (features already in the unit box, or
    the public feature map's u(x) for the linear score)."""

    name = "the training data"
    default_split = "permutation"

    def __init__(self, U: NDArray[np.float64], A: NDArray[np.int8], y: NDArray[np.int8]):
        self.U, self.A, self.y = U, A, y
        self._rows: tuple[Split, tuple[NDArray[np.intp], NDArray[np.intp]]] | None = None

    def _halves(self, split: Split) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
        if self._rows is None or self._rows[0] is not split:
            self._rows = (split, split.rows(self.n_rows()))
        return self._rows[1]

    def n_rows(self) -> int:
        return int(self.U.shape[0])

    def check_halves(self, split: Split) -> None:
        halves = self._halves(split)
        if min(int(np.sum(self.A[h] == a)) for h in halves for a in (0, 1)) < 2:
            raise InvalidDataError(
                "sensitive_features: after the random split into two halves a group has "
                "fewer than 2 rows in one half; collect more data for the smaller group."
            )

    def rows(
        self, split: Split, half: int
    ) -> tuple[NDArray[np.float64], NDArray[np.int8], NDArray[np.int8]]:
        """(U, A, y) of the rows of ``half``."""
        idx = self._halves(split)[half]
        return self.U[idx], self.A[idx], self.y[idx]

    def grid_weights(
        self, grid: KroneckerGaussianGrid, split: Split, half: int, bits: int
    ) -> GridAggregate:
        U, A, y = self.rows(split, half)
        scale = float(1 << bits) ** grid.ndim
        weights = np.empty((*grid.shape, 2, 2), dtype=np.float64)
        counts = np.zeros((2, 2), dtype=np.int64)
        for a in (0, 1):
            for label in (0, 1):
                mask = (A == a) & (y == label)
                counts[a, label] = int(mask.sum())
                weights[..., a, label] = grid.exact_binning(U[mask], bits) / scale
        return GridAggregate(weights, counts, int(U.shape[0]), bits)

    def score_histograms(
        self, grid: KroneckerGaussianGrid | None, split: Split, folds: dict[int, AnyFold]
    ) -> tuple[dict[int, Calibration], NDArray[np.int64]]:
        out: dict[int, Calibration] = {}
        counts = np.zeros((2, 2, 2), dtype=np.int64)
        for h, fold in folds.items():
            U, A, y = self.rows(split, h)
            out[h] = CalibrationScores(fold_scores(fold, grid, U, A), A)
            np.add.at(counts, (np.full(A.size, h), A.astype(np.intp), y.astype(np.intp)), 1)
        return out, counts

    def opportunity_calibrations(
        self, grid: KroneckerGaussianGrid | None, split: Split, folds: dict[int, AnyFold]
    ) -> tuple[dict[int, OpportunityInput], NDArray[np.int64]]:
        out: dict[int, OpportunityInput] = {}
        counts = np.zeros((2, 2, 2), dtype=np.int64)
        for h, fold in folds.items():
            U, A, y = self.rows(split, h)
            np.add.at(counts, (np.full(A.size, h), A.astype(np.intp), y.astype(np.intp)), 1)
            pos = y == 1
            out[h] = OpportunityCalibration(fold_eta(fold, grid, U[pos], A[pos]), A[pos],
                                            int(y.size))
        return out, counts

    def fitted_extras(self, n: int, half_sizes: tuple[int, int]) -> dict[str, Any]:
        return {}


@dataclass(frozen=True)
class FitSettings:
    """A validated request of the pipeline (built by the estimator, no data read).

    Attributes
    ----------
    plan : BudgetPlan or None
        The budget split (None: a non-private baseline).
    cross_fit : bool
        Two folds with the halves swapped.
    score : {"kernel", "linear"}
        The S1 group score.
    split : {"permutation", "position"} or None
        The split kind (None: the source's default).
    fail_prob : float or None
        β of the certified rule (None: no certificate).
    resolution, max_nodes : float, int
        The public grid's parameters (kernel score).
    bandwidth : callable (n_train, d, μ_f) -> h
        The estimator's bandwidth choice (public rule or the user's h).
    feature_map : FeatureMap or None
        The public map of the linear score (for the fitted state).
    radius : float or {"auto", "box"}
        The linear score's row radius (``_linear.release_linear_fold``).
    lows, highs : ndarray or None
        The public box of the kernel score (for the fitted state).
    calibration_share : float
        The calibration half's share of the rows (public; ½ but for a certified in-memory
        fit that asks otherwise, ``_split.calibration_size``).
    """

    plan: BudgetPlan | None
    cross_fit: bool
    score: str
    split: str | None
    fail_prob: float | None
    resolution: float
    max_nodes: int
    bandwidth: Callable[[int, int, float | None], float]
    d: int
    feature_map: FeatureMap | None = None
    radius: float | str = "auto"
    lows: NDArray[np.float64] | None = None
    highs: NDArray[np.float64] | None = None
    constraints: str = "demographic_parity"
    calibration_share: float = 0.5

    @property
    def pairs(self) -> list[tuple[int, int]]:
        """(training half, calibration half) of each fold."""
        return [(0, 1), (1, 0)] if self.cross_fit else [(0, 1)]


@dataclass(frozen=True)
class PipelineResult:
    """The fitted states (one per α entry) and the public facts of the fit."""

    states: list[dict[str, Any]]
    n: int
    half_sizes: tuple[int, int]


def check_counts(counts: NDArray[np.int64]) -> None:
    """The group checks of every fit, from the (half, group, label) counts of all rows."""
    check_group_table(counts.sum(axis=0))
    if int(counts.sum(axis=2).min()) < 2:
        raise InvalidDataError(
            "sensitive_features: after the split into two halves a group has fewer than 2 "
            "rows in one half; collect more data for the smaller group."
        )


def expected_sizes(pi: NDArray[np.float64], n_cal: int, rate: float = 1.0) -> tuple[float, float]:
    """(m₁, m₀) ≈ rate·π̃_a·n_C: calibration-independent denominators for the side choice.

    π̃ is S1's release (training half), n_C public: the side share chosen from these does
    not depend on the calibration half given S1, as the side allocation requires
    (``docs/proofs/fairclass_cdp_fair.md`` §10). ``rate``: an assumed P(Y = 1 | A) for the
    equal-opportunity denominators (positive-label rows).
    """
    lo = 2.0
    m1 = max(float(rate) * float(pi[1]) * n_cal, lo)
    m0 = max(float(rate) * float(pi[0]) * n_cal, lo)
    return m1, m0


def s2_threshold(
    cal: Calibration,
    pi: NDArray[np.float64],
    entry: tuple[float, float],
    plan: BudgetPlan | None,
    rng: np.random.Generator,
    fail_prob: float | None = None,
) -> tuple[float, FairnessCertificate | None]:
    """S2, the one implementation: τ̂ from a calibration half (private when ``plan``).

    ``entry`` = (α, margin). Non-private: the exact argmin{|τ| : |DD̂(τ)| ≤ α − margin}
    on the raw scores. Private: the group-1 count + exact discrete Laplace (ε_c) gives the
    public denominators m̃₁, m̃₀ = n_cal − m̃₁; τ̂ is drawn by the exponential mechanism on
    the lattice-rounded DD̂ step function (ε_e-DP, :func:`~dpfair.fairclass.private_fair_threshold`).
    With ``fail_prob`` (the fold's β) and ε_k > 0 the certified rule runs: the aim is shrunk
    by the public margin, then the Laplace check of DD̂(τ̂) (ε_k-DP, ``_certify.py``)
    decides the certificate; the certified threshold uses the windowed loss
    (:data:`~dpfair.fairclass._threshold.AIM_WINDOW`) and the aim of
    :func:`~dpfair.fairclass._certify.certified_target`. The fold's β is split between the
    two sides by the sign of τ̂ with the share κ of
    :func:`~dpfair.fairclass._certify.choose_side_share`, chosen from ``pi`` (S1's π̃) and
    n_C only (:func:`expected_sizes`). Draws from ``rng``: count, threshold, check — in
    that order.
    """
    alpha, margin = entry
    if plan is None:
        return exact_fair_threshold(cal.exact_steps(), alpha - margin).tau, None
    n1, n_cal = cal.group_counts()
    # Laplace on the group-1 count (sensitivity 1; n_cal is public): exact discrete
    # Laplace of scale ≈ 1/ε_c on a public lattice (noisy_count).
    m1 = noisy_count(n1, n_cal, plan.epsilon_count, rng)
    m1 = min(max(m1, 1.0), n_cal - 1.0)
    m0 = n_cal - m1
    steps = cal.steps(m1, m0)
    r = float(min(pi))
    n_law = max(n_cal, 1)
    if fail_prob is None or plan.epsilon_check <= 0:
        law = threshold_law_from_steps(
            steps, m1, m0, alpha - margin, plan.epsilon_threshold, r, n_cal=n_law
        )
        return law.sample(rng), None
    # Side allocation (``_certify.py``): κ from S1's π̃ and public numbers only, never
    # from this calibration half; the margins at the released m̃.
    kappa = choose_side_share(
        alpha, *expected_sizes(pi, n_cal), epsilon_count=plan.epsilon_count,
        epsilon_threshold=plan.epsilon_threshold, epsilon_check=plan.epsilon_check,
        fail_prob=fail_prob, extra_margin=margin,
    ).side_share
    t, t_other = side_margins(
        m1, m0, epsilon_count=plan.epsilon_count, epsilon_check=plan.epsilon_check,
        fail_prob=fail_prob, side_share=kappa,
    )
    aim = certified_target(
        alpha, t, m1, m0, epsilon_threshold=plan.epsilon_threshold,
        epsilon_check=plan.epsilon_check, extra_margin=margin, margin_other=t_other,
    )
    law = threshold_law_from_steps(steps, m1, m0, aim, plan.epsilon_threshold, r, n_cal=n_law,
                                   window=AIM_WINDOW)
    tau = law.sample(rng)
    cert = check_threshold(
        steps, tau, m1, m0, alpha, margin=t, target=aim, epsilon_check=plan.epsilon_check,
        fail_prob=fail_prob, rng=rng, margin_other=t_other, side_share=kappa,
    )
    return tau, cert


def _linear_s1_records(lin: Any, fit_no: int) -> list[S1Release]:
    """The linear score's S1 releases of fit ``fit_no`` as (label, guarantee, noise)."""
    radius: list[S1Release] = []
    if lin.epsilon_radius > 0:
        radius.append((
            f"fit {fit_no} / S1 / row radius (exponential mechanism on a public ladder)",
            Budget.pure(lin.epsilon_radius),
            "exact exponential mechanism, score |#{|v| > r} - n/2|, sensitivity 1",
        ))
    return [
        *radius,
        (
            f"fit {fit_no} / S1 / group-1 count n_1 (Gaussian, sensitivity 1)",
            Budget.approx(lin.epsilon_count, lin.delta_count),
            f"N(0, {lin.sigma_count:.6g}^2)",
        ),
        (
            f"fit {fit_no} / S1 / logistic group score (objective perturbation)",
            Budget.approx(lin.epsilon_jacobian + lin.epsilon_noise, lin.delta_noise),
            f"b ~ N(0, {lin.sigma_b:.6g}^2 I), Lambda = {lin.regulariser:.6g}",
        ),
        (
            f"fit {fit_no} / S1 / logistic group score: lattice release of "
            "the certified minimiser (discrete Gaussian)",
            Budget.approx(lin.epsilon_output, lin.delta_output),
            (
                f"2^-{lin.lattice_bits} * N_Z(0, {lin.output_variance}), "
                f"sensitivity {lin.output_sensitivity:.6g} lattice units"
            ),
        ),
    ]


def run_pipeline(
    settings: FitSettings,
    source: Source,
    alphas: Sequence[Entry],
    rng: np.random.Generator,
) -> PipelineResult:
    """S1 once per fold, then S2 once per (α, margin) entry: one fitted state per entry.

    Each state is a complete, separately (ε, δ)-DP model (its S1 + its own S2 with fresh
    noise); releasing several of them composes (``path_privacy_spent_``).
    """
    name = source.name
    n = source.n_rows()
    if n == 0:
        raise InvalidDataError(f"'{name}': no rows.")
    split = draw_split(settings.split or source.default_split, rng, n,
                       settings.calibration_share)
    sizes = split.half_sizes(n)
    if min(sizes) < 2:
        raise InvalidDataError(f"'{name}': {n} row(s) are too few to split into two halves.")
    source.check_halves(split)
    plan, pairs = settings.plan, settings.pairs
    labels = [(HALF_LABELS[tr], HALF_LABELS[cal]) for tr, cal in pairs]
    opportunity = settings.constraints == "equal_opportunity"

    # Public S1 set-up: the grid (kernel) or the logistic plan (linear).
    grid: KroneckerGaussianGrid | None = None
    mech: GaussianProcessMechanism | None = None
    h: float | None = None
    lin = None
    if settings.score == "kernel":
        if plan is not None:
            mech = GaussianProcessMechanism(
                sigma=plan.sigma_function, rkhs_sensitivity=KERNEL_SUM_RKHS_SENSITIVITY
            )
        h = settings.bandwidth(sizes[0], settings.d, None if mech is None else mech.mu)
        grid = make_grid(settings.d, h, resolution=settings.resolution,
                         max_nodes=settings.max_nodes)
    else:
        if not isinstance(source, ArraySource):
            raise InvalidParameterError(
                f"estimator='linear': the logistic group score needs the rows in memory; "
                f"{name} is read through aggregates. Use estimator='kernel' (d <= 3)."
            )
        if plan is not None:
            lin = plan_linear_s1(
                float(plan.s1.epsilon or 0.0), plan.delta, n_rows=n,
                width=source.U.shape[1] + 2,
                radius_share=RADIUS_SHARE if settings.radius == "auto" else 0.0,
                count_share=LINEAR_COUNT_SHARE, jacobian_share=LINEAR_JACOBIAN_SHARE,
            )

    # Check the whole plan against the limit before any noise is drawn.
    ledgers: list[PrivacyLedger | None] = []
    for _ in alphas:
        ledger = PrivacyLedger(plan.limit) if plan is not None else None
        if plan is not None and ledger is not None:
            for fit_no, (rows, cal_rows) in enumerate(labels, start=1):
                recs = None if lin is None else _linear_s1_records(lin, fit_no)
                plan.charge_fit(ledger, fit_no, rows, cal_rows, s1_records=recs)
        ledgers.append(ledger)
    # What publishing every model returned here costs together (S1 shared, S2 per α).
    path_ledger = plan.path_ledger(len(alphas), labels) if plan is not None else None

    # S1 on each training half.
    counts = np.zeros((2, 2, 2), dtype=np.int64)  # (half, group, label)
    s1: list[AnyFold] = []
    for tr, _cal in pairs:
        if grid is not None:
            agg = source.grid_weights(grid, split, tr, grid.binning_bits(sizes[tr], grid.ndim))
            counts[tr] = agg.counts
            eta, pi = release_s1_from_weights(
                grid, agg.weights, n=sizes[tr], n1=int(agg.counts[1].sum()),
                sigma_count=None if plan is None else plan.sigma_count, mechanism=mech,
                rng=rng,
            )
            s1.append(ReleasedFold(eta=eta, pi=pi, tau=0.0))
        else:
            assert isinstance(source, ArraySource) and settings.feature_map is not None
            U, A, y = source.rows(split, tr)
            np.add.at(counts, (np.full(A.size, tr), A.astype(np.intp), y.astype(np.intp)), 1)
            nt = U.shape[0]
            n1 = float(np.sum(A == 1))
            if lin is not None:
                # exact discrete Gaussian on a public lattice (n public): no float leak
                n1 += _lattice_noise(nt, lin.sigma_count, rng)
            p1 = min(max(n1 / nt, 1.0 / nt), 1.0 - 1.0 / nt)
            theta, dmap = release_linear_fold(U, A, y, settings.feature_map, lin,
                                              settings.radius, rng)
            s1.append(ReleasedLinearFold(theta=theta, pi=np.array([1.0 - p1, p1]), tau=0.0,
                                         norm_bound=dmap.norm_bound, design_map=dmap))
    if any(int(counts[tr].sum()) != sizes[tr] for tr, _ in pairs):
        raise InvalidDataError(f"'{name}': the data changed while they were being read.")

    # S2 input: one pass over the calibration half (or both halves when cross-fit).
    cals: dict[int, Calibration] = {}
    eo_cals: dict[int, OpportunityInput] = {}
    if any(entry is not None for entry in alphas):
        pre = {cal: fold for fold, (_tr, cal) in zip(s1, pairs, strict=True)}
        if opportunity:
            eo_cals, streamed = source.opportunity_calibrations(grid, split, pre)
        else:
            cals, streamed = source.score_histograms(grid, split, pre)
        for _tr, cal in pairs:
            if settings.cross_fit:
                if not np.array_equal(streamed[cal], counts[cal]):
                    raise InvalidDataError(
                        f"'{name}': the data changed while they were being read."
                    )
            else:
                counts[cal] = streamed[cal]
        if int(counts[pairs[0][1]].sum()) != sizes[pairs[0][1]]:
            raise InvalidDataError(f"'{name}': the data changed while they were being read.")
        check_counts(counts)

    # S2 on each calibration half, once per alpha.
    beta = settings.fail_prob if plan is not None else None
    states: list[dict[str, Any]] = []
    for entry, ledger in zip(alphas, ledgers, strict=True):
        folds: list[FittedFold] = []
        certs: list[FairnessCertificate] = []
        for fold, (_tr, cal) in zip(s1, pairs, strict=True):
            tau = 0.0
            fold_beta = None if beta is None else beta / len(pairs)
            if entry is not None and opportunity:
                # Symmetric split under equal opportunity (pi not passed): S1 releases no
                # label rates, and a wrong assumed rate cost power (s2_opportunity).
                tau, cert, positive = s2_opportunity(eo_cals[cal], entry, plan, rng, fold_beta)
                if cert is not None:
                    certs.append(cert)
                folds.append(OpportunityFold(fold, positive, tau))
                continue
            if entry is not None:
                tau, cert = s2_threshold(cals[cal], fold.pi, entry, plan, rng, fold_beta)
                if cert is not None:
                    certs.append(cert)
            folds.append(_with_tau(fold, tau))
        certify = beta is not None and entry is not None
        states.append(
            _fitted_state(folds, certs, rng, certify=certify, plan=plan, ledger=ledger,
                          path_ledger=path_ledger, settings=settings, grid=grid, bandwidth=h)
        )
    return PipelineResult(states, n, sizes)


def _with_tau(fold: AnyFold, tau: float) -> AnyFold:
    if isinstance(fold, ReleasedLinearFold):
        return ReleasedLinearFold(theta=fold.theta, pi=fold.pi, tau=tau,
                                  norm_bound=fold.norm_bound, design_map=fold.design_map)
    return ReleasedFold(eta=fold.eta, pi=fold.pi, tau=tau)


def _fitted_state(
    folds: Sequence[FittedFold],
    certs: Sequence[FairnessCertificate],
    rng: np.random.Generator,
    *,
    certify: bool,
    plan: BudgetPlan | None,
    ledger: PrivacyLedger | None,
    path_ledger: PrivacyLedger | None,
    settings: FitSettings,
    grid: KroneckerGaussianGrid | None,
    bandwidth: float | None,
) -> dict[str, Any]:
    """The fitted attributes of one model (draws the public tie-break salt from ``rng``,
    the last draw of the fit)."""
    certified = all(c.certified for c in certs) if certify else None
    kernel = settings.score == "kernel"
    return {
        "grid_": grid,
        "folds_": tuple(folds),
        "bandwidth_": bandwidth,
        "feature_lows_": settings.lows if kernel else None,
        "feature_highs_": settings.highs if kernel else None,
        "tau_": np.array([f.tau for f in folds]),
        "pi_": np.vstack([f.pi for f in folds]),
        "classes_": np.array([0, 1]),
        "tie_seed_": int(rng.integers(0, 2**63 - 1)),
        "budget_plan_": plan,
        "privacy_ledger_": ledger,
        "privacy_spent_": ledger.total if ledger is not None else None,
        "path_privacy_spent_": path_ledger.total if path_ledger is not None else None,
        "path_privacy_ledger_": path_ledger,
        "certified_": certified,
        "certificates_": tuple(certs) if certified is not None else None,
        "estimator_": settings.score,
        "feature_map_": None if kernel else settings.feature_map,
        "constraints_": settings.constraints,
    }
