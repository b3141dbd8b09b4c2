"""CDP-Fair on a training file larger than memory (DuckDB aggregates + streamed scores).

:func:`fit_cdp_fair_from_file` fits a configured :class:`CDPFairClassifier` from a file
through the one CDP-Fair pipeline (:mod:`dpfair.fairclass._pipeline`) with the file as its
source: ``_ParquetAggregates`` reads it only through DuckDB aggregates
(:mod:`dpfair.data.fairclass_sql`). The released state (public grid, η̃ on the grid, π̃,
τ̂, tie seed, ledger) is produced from aggregates,
so ``predict``/``predict_proba``/``export_released_model`` are the in-memory methods,
unchanged: prediction is post-processing of the same kind of release. Memory is
O(grid + score bins + batch), never O(n).

Pipeline (one fit; with ``cross_fit=True`` a second fit with the halves swapped)
--------------------------------------------------------------------------------
0. **Rows and split.** n = number of rows (Parquet metadata). Row number i (its 0-based
   position in the file) goes to half ``PositionSplit.half_of(i)``, a seeded degree-3
   polynomial hash mod 2^61 − 1 (:mod:`dpfair.fairclass._split`; a ``calibration_share``
   c moves the hash's cut so a row is in the calibration half w.p. c). The split is a function
   of (position, seed) only: independent of the data, half sizes public given n, and a
   replaced record keeps its position and its half. Positions come from DuckDB's
   ``file_row_number`` (Parquet). A CSV file is first copied, in file order, to a
   temporary Parquet file of the used columns; we rely on DuckDB's documented order
   preservation ("COPY" and a "SELECT … FROM" one table keep insertion order while
   ``preserve_insertion_order = true``, which we set explicitly).
1. **S1 (training half).** :func:`dpfair.fairclass.kernel_grid_weights` aggregates the
   training half's per-(group, label) exact integer linear-binning weights W on the public
   grid in one streaming GROUP BY (every row of the file is validated in the same pass);
   F = K·W are the four kernel sums and
   :func:`~dpfair.fairclass._model.release_s1_from_weights` adds the noise exactly as in
   memory (group-1 count + N(0, σ_c²); σ_f·GP(0, k_h) on F, in the whitened space),
   with the same budget plan, the same bandwidth rule (n = |training half|) and the same
   grid.
2. **S2 (calibration half).** The calibration rows are streamed in Arrow record batches;
   each row's score Z = 2(2a − 1)·π̃_a·(η̃_a(x) − 1/2) is computed from the *released*
   η̃, π̃ (post-processing) and rounded to the lattice L = (2/B)·ℤ ∩ [−1, 1] (B =
   ``score_bins``, default 2^16, spacing 2^-15); per group a histogram of the rounded
   scores (B + 1 counters) is kept. The exponential mechanism of
   :func:`~dpfair.fairclass.private_fair_threshold` runs on the exact DD̂ step function of
   the rounded scores (:func:`~dpfair.fairclass._threshold.dd_steps_from_counts`), with the
   Laplace-noised group-1 count as public denominator, as in memory.
3. **S2 under equal opportunity.** The score Z = (2a − 1)·p̃_{a,1}·(2 − 1/η̃_a(x)) needs
   p̃_{a,1} = m̃_a/n_C from S2's own noisy positive-label counts, so S2 first reads the
   (half, group, label) counts by one aggregate query
   (:func:`~dpfair.data.fairclass_sql.half_cell_counts`) and, once m̃ is drawn, streams the
   calibration half's rows with label 1 (one pass per S2 draw) and counts their rounded
   scores per group (:class:`PositiveScoreHistogram`): the in-memory step function of the
   rounded scores (``docs/proofs/equal_opportunity.md`` §4a).

Privacy (unchanged; see ``docs/proofs/fairclass_cdp_fair.md`` §9)
-----------------------------------------------------------------
* S1: the input of the Gaussian mechanism is the same sum over rows of one kernel bump
  per row (weights ≥ 0 summing to 1), so the RKHS sensitivity √2 of the four sums and the
  sensitivity 1 of the count are unchanged; the noise is calibrated by the same plan.
* S2: rounding is a fixed map applied to each record separately (Z ↦ round(Z·B/2)·2/B,
  with η̃, π̃ already released), so the rounded calibration sample is a data set in which
  replacing one record changes exactly one rounded score, i.e. one group count by at most
  1 at every τ: each record lands in one bin. DD̂ of the rounded scores has the same
  sensitivity Δ = 1/m̃₁ + 1/m̃₀ and the exponential mechanism with the same public base
  measure is ε_e-DP. The half sizes are public (step 0), the count is Laplace(1/ε_c).
* Composition and the ledger are those of the in-memory fit; ``privacy_spent_`` is the
  request.

Effect of the binning on τ̂
--------------------------
Every rounded score is within 1/B = 2^-16 of the exact one, so for all τ

    DD̂(τ + 1/B) ≤ DD̂_bin(τ) ≤ DD̂(τ − 1/B)

(group-1 rows with Z ≥ τ + 1/B have rounded Z ≥ τ, etc.): the curve the mechanism sees is
the exact curve up to a horizontal shift of at most 2^-16. Hence τ̂ is drawn from the
exact law of a curve that differs from the in-memory one only on τ-intervals of length
2^-15 around occupied lattice points; the disparity of the released classifier changes by
at most the probability mass of Z in a window of width 2^-15 (O(2^-15 × density of Z)),
far below the sampling error O(n^-1/2) of DD̂ for n ≲ 10^9. Atoms of Z on the lattice —
notably Z = 0, where η̃ = 1/2 — are represented exactly, so the automatically-fair case
τ̂ = 0 behaves as in memory.

What is equal to the in-memory fit
----------------------------------
The in-memory default split is a permutation, this one a position hash. With
``CDPFairClassifier(split="position")`` the in-memory fit draws the same split from the
same seed, and the two run the same pipeline on the same statistics: the S1 weights are
the same exact integers (DuckDB's integer binning and NumPy's agree except for a u within
rounding of a node, where the binning is continuous), the S2 step function of the score
histogram equals that of the rounded scores, and the draws come in the same order — so
the same seed gives the same release (tested through the public API).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from dpfair._errors import InvalidDataError, InvalidParameterError
from dpfair.data.fairclass_sql import as_parquet as _as_parquet
from dpfair.data.fairclass_sql import connect as _connect
from dpfair.data.fairclass_sql import count_rows, half_cell_counts, stream_batches
from dpfair.data.fairclass_sql import literal as _lit  # noqa: F401  (FDP file site)
from dpfair.data.sql import quote as _quote  # noqa: F401  (FDP file site)
from dpfair.fairclass._estimators import (
    CDPFairClassifier,
    fit_from_source,
    prepare_out_of_core,
)
from dpfair.fairclass._opportunity import OpportunityInput
from dpfair.fairclass._pipeline import (
    AnyFold,
    Calibration,
    FitSettings,
    fold_eta,
    fold_scores,
)
from dpfair.fairclass._rule import opportunity_scores
from dpfair.fairclass._split import PositionSplit, Split
from dpfair.fairclass._threshold import DDSteps, ScoreHistogram, dd_steps_from_counts
from dpfair.fairclass.aggregate import GridAggregate, kernel_grid_weights
from dpfair.mechanisms import KroneckerGaussianGrid

# The names a further out-of-core source (the Session's Dask source) builds on: the pipeline's
# fold and calibration types, its split and the entry point that runs it over a source.
if TYPE_CHECKING:  # the connection is opened and used by dpfair.data.fairclass_sql
    import duckdb

__all__ = ["AnyFold", "Calibration", "FitRequest", "OpportunityInput", "OutOfCoreFit",
           "PositiveScoreHistogram", "ScoreHistogram", "Split", "fit_cdp_fair_from_file",
           "fit_from_source", "positive_score_counts", "validate_request"]

@dataclass(frozen=True)
class OutOfCoreFit:
    """Facts about an out-of-core fit (public: functions of n, the seed and the settings).

    Attributes
    ----------
    path : str
        The training file ("dask" for a Dask DataFrame).
    n : int
        Rows in the file (public, as in every dpfair fit).
    half_sizes : (int, int)
        Rows in halves A and B of the position split.
    score_bins : int
        B of the S2 score lattice (spacing 2/B).
    converted_csv : bool
        Whether the file was CSV (copied in order to a temporary Parquet file).
    """

    path: str
    n: int
    half_sizes: tuple[int, int]
    score_bins: int
    converted_csv: bool

    @property
    def score_resolution(self) -> float:
        """Spacing 2/B of the score lattice; every score moves by at most half of it."""
        return 2.0 / self.score_bins


@dataclass(frozen=True)
class FitRequest:
    """A validated out-of-core CDP-Fair request: the configured estimator, its pipeline
    settings, and the columns to read (no data read yet)."""

    clf: CDPFairClassifier
    settings: FitSettings
    names: list[str]
    target: str
    sensitive: str
    lows: NDArray[np.float64]
    highs: NDArray[np.float64]
    clip: bool
    bins: int

    @property
    def bounds(self) -> list[tuple[float, float]]:
        return [(float(lo), float(hi)) for lo, hi in zip(self.lows, self.highs, strict=True)]


def validate_request(
    estimator: CDPFairClassifier,
    *,
    features: Sequence[str],
    target: str,
    sensitive: str,
    score_bins: int = 2**16,
) -> FitRequest:
    """Validate an out-of-core request exactly as :func:`fit_cdp_fair_from_file` does
    (estimator settings first, then the columns and ``score_bins``; no data read)."""
    names = [str(f) for f in features] if not isinstance(features, str) else [features]
    settings, lows, highs, clip = prepare_out_of_core(estimator, len(names))
    if not names or len(set(names)) != len(names):
        raise InvalidParameterError(f"features={list(features)!r}: expected distinct names.")
    if len({*names, str(target), str(sensitive)}) != len(names) + 2:
        raise InvalidParameterError(
            "target and sensitive must be two distinct columns, not among the features."
        )
    bins = score_bins
    if (
        isinstance(bins, bool)
        or not isinstance(bins, (int, np.integer))
        or not (2**4 <= bins <= 2**24)
        or (int(bins) & (int(bins) - 1))
    ):
        raise InvalidParameterError(
            f"score_bins={score_bins!r}: expected a power of two between 2**4 and 2**24."
        )
    return FitRequest(estimator, settings, names, str(target), str(sensitive), lows, highs,
                      clip, int(bins))


def score_rows(
    req: FitRequest,
    grid: KroneckerGaussianGrid | None,
    folds: dict[int, AnyFold],
    U: NDArray[np.float64],
    A: NDArray[np.int8],
    half: NDArray[np.intp],
    hist: dict[int, NDArray[np.int64]],
) -> None:
    """Add the rounded scores of validated rows (unit-box U, group A, half) to ``hist``
    (one (2, B + 1) counter per calibration half in ``folds``)."""
    for h, fold in folds.items():
        sel = half == h
        if not sel.any():
            continue
        k = ScoreHistogram.round_scores(fold_scores(fold, grid, U[sel], A[sel]), req.bins)
        a_sel = A[sel]
        for a in (0, 1):
            hist[h][a] += np.bincount(k[a_sel == a], minlength=req.bins + 1)


def positive_score_counts(
    req: FitRequest,
    grid: KroneckerGaussianGrid | None,
    fold: AnyFold,
    positive: NDArray[np.float64],
    U: NDArray[np.float64],
    A: NDArray[np.int8],
) -> NDArray[np.int64]:
    """(2, B + 1) counts of the lattice-rounded equal-opportunity scores of validated
    positive-label rows (unit-box U, group A) under ``fold`` and the released
    p̃ = ``positive`` = (p̃_{0,1}, p̃_{1,1}): row by row, so counts of a partition of the rows
    add up (the in-memory :class:`~dpfair.fairclass._opportunity.OpportunityCalibration`
    rounds the same per-row scores)."""
    k = ScoreHistogram.round_scores(opportunity_scores(fold_eta(fold, grid, U, A), A, positive),
                                    req.bins)
    return np.stack([np.bincount(k[A == a], minlength=req.bins + 1) for a in (0, 1)])


@dataclass(frozen=True, eq=False)
class PositiveScoreHistogram:
    """A calibration half held out of core, as S2 under equal opportunity reads it.

    The score of a positive-label row, Z = (2a − 1)·p̃_{a,1}·(2 − 1/η̃_a(x)), needs the
    p̃_{a,1} = m̃_a/n_C that S2 releases from its own noisy counts, so the histogram of the
    lattice-rounded scores cannot be counted before S2 runs: :meth:`steps` counts it — one
    streaming pass over that half's positive-label rows (``histogram``) — once m̃ is
    drawn. Its step function is that of the in-memory
    :class:`~dpfair.fairclass._opportunity.OpportunityCalibration` (same per-row scores,
    same rounding, :func:`~dpfair.fairclass._threshold.dd_steps_from_counts`).

    Privacy: given (η̃, m̃) each record lands in at most one bin of one group's histogram
    (none when its label is 0), so a replaced record moves each tail count by at most 1:
    the sensitivity 1/m̃₁ + 1/m̃₀ of ``docs/proofs/equal_opportunity.md`` §2.

    Attributes
    ----------
    n_cal : int
        Rows of the calibration half, all labels (public).
    counts : (int, int)
        (n_{1,1}, n_{0,1}) from the aggregate query (private; the noisy counts' input).
    bins : int
        B of the score lattice.
    histogram : callable
        p̃ (shape (2,)) → (2, B + 1) counts of the rounded scores, group 0 then 1.
    name : str
        The source, for error messages.
    """

    n_cal: int
    counts: tuple[int, int]
    bins: int
    histogram: Callable[[NDArray[np.float64]], NDArray[np.int64]]
    name: str

    def positive_counts(self) -> tuple[int, int]:
        """(n_{1,1}, n_{0,1}): positive-label rows of groups 1 and 0 (private)."""
        return self.counts

    def _steps(self, positive: NDArray[np.float64], m1: float | None,
               m0: float | None) -> DDSteps:
        hist = ScoreHistogram(self.bins, np.asarray(self.histogram(positive), dtype=np.int64))
        if (int(hist.counts[1].sum()), int(hist.counts[0].sum())) != self.counts:
            raise InvalidDataError(f"'{self.name}': the data changed while they were being read.")
        return dd_steps_from_counts(hist.values, hist.counts[1], hist.counts[0], m1, m0)

    def steps(self, m1: float, m0: float) -> DDSteps:
        """EOD̂ of the rounded scores with p̃_{a,1} = m̃_a/n_C and denominators m̃₁, m̃₀."""
        return self._steps(np.array([m0 / self.n_cal, m1 / self.n_cal]), m1, m0)

    def exact_steps(self) -> DDSteps:
        """EOD̂ with the true positive counts (non-private use only; rounded scores)."""
        n1, n0 = self.counts
        return self._steps(np.array([n0 / self.n_cal, n1 / self.n_cal]), None, None)


def _position_split(split: Split) -> PositionSplit:
    if not isinstance(split, PositionSplit):
        raise InvalidParameterError(
            "split: an out-of-core source needs the position split (rows are identified by "
            "their position in the file)."
        )
    return split


class _ParquetAggregates:
    """The pipeline's :class:`~dpfair.fairclass._pipeline.Source` for a Parquet file, by
    DuckDB (out of core)."""

    default_split = "position"

    def __init__(self, con: duckdb.DuckDBPyConnection, pq: Path, name: str, req: FitRequest,
                 *, memory_limit: str, threads: int | None, batch_size: int,
                 path: Path, converted: bool) -> None:
        self.con, self.pq, self.name, self.req = con, pq, name, req
        self.memory_limit, self.threads, self.batch_size = memory_limit, threads, batch_size
        self.path, self.converted = path, converted

    def n_rows(self) -> int:
        return count_rows(self.con, self.pq)

    def check_halves(self, split: Split) -> None:
        _position_split(split)  # group sizes per half are checked from the counts

    def grid_weights(self, grid: KroneckerGaussianGrid, split: Split,
                     half: int, bits: int) -> GridAggregate:
        req = self.req
        return kernel_grid_weights(
            self.pq, req.names, req.target, req.sensitive, req.bounds, grid, clip=req.clip,
            memory_limit=self.memory_limit, threads=self.threads,
            half=(_position_split(split), half), bits=bits,
        )

    def score_histograms(
        self, grid: KroneckerGaussianGrid | None, split: Split, folds: dict[int, AnyFold],
    ) -> tuple[dict[int, Calibration], NDArray[np.int64]]:
        """One streaming pass: per calibration half, the histogram of rounded scores, and
        the (half, group, label) row counts of the streamed halves."""
        req, name, d = self.req, self.name, len(self.req.names)
        hist = {h: np.zeros((2, req.bins + 1), dtype=np.int64) for h in folds}
        counts = np.zeros((2, 2, 2), dtype=np.int64)
        batches = stream_batches(
            self.con, self.pq, [*req.names, req.sensitive, req.target],
            half_sql=_position_split(split).sql("file_row_number"),
            only_half=None if len(folds) == 2 else next(iter(folds)),
            batch_size=self.batch_size, name=name,
        )
        for arr, half in batches:
            U, A = self._validated(arr)
            np.add.at(counts, (half, A.astype(np.intp), arr[:, d + 1].astype(np.intp)), 1)
            score_rows(req, grid, folds, U, A, half, hist)
        return {h: ScoreHistogram(req.bins, c) for h, c in hist.items()}, counts

    def opportunity_calibrations(
        self, grid: KroneckerGaussianGrid | None, split: Split, folds: dict[int, AnyFold],
    ) -> tuple[dict[int, OpportunityInput], NDArray[np.int64]]:
        """One aggregate query for the (half, group, label) counts of the calibration
        halves; per half a :class:`PositiveScoreHistogram` that streams its positive-label
        rows once S2 has drawn m̃."""
        req, pos = self.req, _position_split(split)
        only = None if len(folds) == 2 else next(iter(folds))
        counts = half_cell_counts(self.con, self.pq, half_sql=pos.sql("file_row_number"),
                                  target=req.target, sensitive=req.sensitive, only_half=only,
                                  name=self.name)
        out: dict[int, OpportunityInput] = {}
        for h, fold in folds.items():
            def histogram(positive: NDArray[np.float64], h: int = h,
                          fold: AnyFold = fold) -> NDArray[np.int64]:
                return self._positive_histogram(grid, pos, h, fold, positive)

            out[h] = PositiveScoreHistogram(
                int(counts[h].sum()), (int(counts[h, 1, 1]), int(counts[h, 0, 1])), req.bins,
                histogram, self.name,
            )
        return out, counts

    def _positive_histogram(self, grid: KroneckerGaussianGrid | None, split: PositionSplit,
                            half: int, fold: AnyFold,
                            positive: NDArray[np.float64]) -> NDArray[np.int64]:
        """One streaming pass over the positive-label rows of ``half``."""
        hist = np.zeros((2, self.req.bins + 1), dtype=np.int64)
        batches = stream_batches(
            self.con, self.pq, [*self.req.names, self.req.sensitive],
            half_sql=split.sql("file_row_number"), only_half=half,
            batch_size=self.batch_size, name=self.name, positive_of=self.req.target,
        )
        for arr, _half in batches:
            U, A = self._validated(arr, with_label=False)
            hist += positive_score_counts(self.req, grid, fold, positive, U, A)
        return hist

    def _validated(self, arr: NDArray[np.float64], *, with_label: bool = True
                   ) -> tuple[NDArray[np.float64], NDArray[np.int8]]:
        """(unit-box U, group A) of one batch (features, group[, label]), validated.

        Defensive: the S1 pass has already validated every row of the file."""
        req, name, d = self.req, self.name, len(self.req.names)
        if not np.all(np.isfinite(arr)):
            raise InvalidDataError(f"'{name}': NULL/NaN/infinite values in the columns used.")
        binary = arr[:, d:] if with_label else arr[:, d : d + 1]
        if not np.all((binary == 0) | (binary == 1)):
            raise InvalidDataError(f"'{name}': {req.target!r} and {req.sensitive!r} must be 0/1.")
        U = (arr[:, :d] - req.lows) / (req.highs - req.lows)
        if req.clip:
            U = np.clip(U, 0.0, 1.0)
        elif np.any((U < 0.0) | (U > 1.0)):
            raise InvalidDataError(f"'{name}': a feature lies outside its public bounds.")
        return U, arr[:, d].astype(np.int8)

    def fitted_extras(self, n: int, half_sizes: tuple[int, int]) -> dict[str, Any]:
        return {"outofcore_": OutOfCoreFit(str(self.path), n, half_sizes, self.req.bins,
                                           self.converted)}


#: The estimator parameters the deprecated keyword form of fit_cdp_fair_from_file accepts.
_LEGACY = ("feature_bounds", "epsilon", "delta", "alpha", "random_state", "cross_fit", "clip",
           "bandwidth", "alpha_margin", "threshold_rule", "fail_prob", "check_share",
           "cross_fit_budget", "s1_share", "count_share", "threshold_count_share",
           "grid_resolution", "max_grid_nodes")


def fit_cdp_fair_from_file(
    path: str | os.PathLike[str],
    estimator: CDPFairClassifier | None = None,
    *,
    features: Sequence[str],
    target: str,
    sensitive: str,
    score_bins: int = 2**16,
    batch_size: int = 2**17,
    memory_limit: str = "1GB",
    threads: int | None = None,
    tmp_dir: str | os.PathLike[str] | None = None,
    **settings: Any,
) -> CDPFairClassifier:
    """Fit a configured CDP-Fair classifier on a CSV/Parquet file of any size.

    Memory O(grid + bins + batch): the file is read only through DuckDB aggregates.

    Parameters
    ----------
    path : str or path-like
        Training file: Parquet (recognised by its magic bytes) or CSV (copied in file order
        to a temporary Parquet file of the used columns first, under ``tmp_dir``).
    estimator : CDPFairClassifier
        The configured (unfitted) estimator: its ``feature_bounds`` (one per feature, the
        *public* box), ε, δ, α, threshold rule, budget shares, grid and ``random_state``
        are used as in :meth:`CDPFairClassifier.fit`; it is fitted in place and returned.
        Its ``cross_fit=None`` follows the threshold rule, as in memory.
    features : sequence of str
        Feature columns, in the order of ``feature_bounds``; ``predict`` takes X with the
        columns in this order.
    target, sensitive : str
        0/1 label and 0/1 group columns.
    score_bins : int, default=2**16
        B: calibration scores are rounded to the lattice (2/B)·ℤ ∩ [−1, 1] (a power of two
        between 2^4 and 2^24).
    batch_size : int, default=2**17
        Rows per Arrow record batch while streaming the calibration half.
    memory_limit : str, default="1GB"
        DuckDB's memory cap (it spills to disk beyond it).
    threads : int, optional
        DuckDB worker threads.
    tmp_dir : path-like, optional
        Where a CSV's temporary Parquet copy is written (default: the system's temp dir).
    **settings
        Deprecated: the old keyword form (``feature_bounds``, ``epsilon``, ``delta``,
        ``alpha``, ``random_state``, ``cross_fit`` — default False here —, ``clip``, …)
        without ``estimator``; it builds the estimator and warns (DeprecationWarning).

    Returns
    -------
    CDPFairClassifier
        ``estimator``, fitted: ``predict``, ``predict_proba``, ``privacy_spent_``,
        ``privacy_ledger_``, ``export_released_model`` behave as after ``fit``. Extra
        attribute ``outofcore_`` (:class:`OutOfCoreFit`).

    Raises
    ------
    InvalidDataError
        NULL/NaN/infinite values, labels or groups not 0/1, features outside the bounds
        (without ``clip``), non-numeric columns, a half without 2 rows of a group.
    InsufficientDataError
        A group with fewer than 20 rows, or a constant label (as in memory).
    InvalidParameterError
        Missing file or column, bad parameters.

    Notes
    -----
    Privacy: the same (ε, δ) as :meth:`CDPFairClassifier.fit` with the same parameters
    (replace-one neighbours, n public). The split is a seeded hash of the row *position*
    (data-independent; half sizes are functions of n and the seed); S1 adds the same
    noise to the same kind of sums (each row one kernel bump: RKHS sensitivity √2); S2
    runs the same exponential mechanism on the DD̂ step function of the calibration scores
    rounded to a public lattice of spacing 2/B — rounding acts on each record separately,
    so one replaced record changes one rounded score and the sensitivity 1/m̃₁ + 1/m̃₀ is
    unchanged. Rounding moves the curve horizontally by at most 1/B (2^-16 by default);
    see the module docstring and ``docs/proofs/fairclass_cdp_fair.md`` §9. Under
    ``constraints="equal_opportunity"`` the positive-label counts are charged as in memory
    and S2 streams the calibration half's positive-label rows once more per draw
    (``docs/proofs/equal_opportunity.md`` §4a); the same seed gives the in-memory release.

    Examples
    --------
    >>> clf = CDPFairClassifier(epsilon=1.0, delta=1e-6, alpha=0.1,  # doctest: +SKIP
    ...                         feature_bounds=[(0, 1), (0, 1)], random_state=0)
    >>> fit_cdp_fair_from_file("train.parquet", clf, features=["x1", "x2"],  # doctest: +SKIP
    ...                        target="y", sensitive="a")
    """
    if estimator is None:
        unknown = sorted(set(settings) - set(_LEGACY))
        if unknown:
            raise InvalidParameterError(
                f"{', '.join(unknown)}: unknown parameter(s) of fit_cdp_fair_from_file; pass a "
                "configured CDPFairClassifier as estimator= instead."
            )
        warnings.warn(
            "fit_cdp_fair_from_file(path, features=..., epsilon=..., ...): the keyword form "
            "is deprecated; pass a configured estimator: "
            "fit_cdp_fair_from_file(path, CDPFairClassifier(...), features=..., target=..., "
            "sensitive=...).",
            DeprecationWarning,
            stacklevel=2,
        )
        estimator = CDPFairClassifier(**{"cross_fit": False, **settings})
    elif settings:
        raise InvalidParameterError(
            f"{', '.join(sorted(settings))}: set these on the estimator "
            "(CDPFairClassifier(...)), not as keywords of fit_cdp_fair_from_file."
        )
    req = validate_request(estimator, features=features, target=target, sensitive=sensitive,
                           score_bins=score_bins)
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or (
        batch_size < 1
    ):
        raise InvalidParameterError(f"batch_size={batch_size!r}: expected a positive integer.")
    if not isinstance(path, (str, os.PathLike)):
        raise InvalidParameterError(f"path={path!r}: expected a file path.")
    p = Path(path).expanduser()
    if not p.is_file():
        raise InvalidParameterError(f"path='{p}': no such file. Check the path and try again.")
    if p.stat().st_size == 0:
        raise InvalidDataError(f"path='{p}': the file is empty.")
    columns = [*req.names, req.target, req.sensitive]
    with _as_parquet(
        p, columns, memory_limit=memory_limit, threads=threads, tmp_dir=tmp_dir
    ) as (pq, converted), _connect(memory_limit, threads) as con:
        source = _ParquetAggregates(
            con, pq, p.name, req, memory_limit=memory_limit, threads=threads,
            batch_size=int(batch_size), path=p, converted=converted,
        )
        return fit_from_source(req.clf, req.settings, source)
