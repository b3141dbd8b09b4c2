"""CDP-Fair on a Dask DataFrame: the out-of-core pipeline with its statistics on the cluster.

:func:`fit_cdp_fair_from_dask` runs exactly the pipeline of
:func:`dpfair.fairclass.fit_cdp_fair_from_file` (the one CDP-Fair pipeline of
:mod:`dpfair.fairclass._pipeline`: same validation, budget plan, split, grid, noise,
threshold), with this module's :class:`DaskAggregates` as its source and the
two sufficient statistics computed by one task per partition on the workers and summed in a
tree on the cluster:

* S1 — the per-(group, label) linear-binning weights of the training half on the public
  kernel grid (``4 · grid.size`` numbers) and the (group, label) counts;
* S2 — per calibration half and group, the histogram of the calibration scores rounded to
  the public lattice (``2 · (B + 1)`` counters), computed from the *released* S1 fold.
  Under ``constraints="equal_opportunity"``: the (half, group, label) counts of the
  calibration half, then — once S2 has drawn the noisy positive-label counts m̃ and so
  p̃_{a,1} = m̃_a/n_C — the histogram of the rounded scores of its positive-label rows
  (one more pass per S2 draw, :class:`~dpfair.fairclass.outofcore.PositiveScoreHistogram`).

Only these aggregates (and the partition lengths, to number the rows) come back to the
session; no row does. Rows are numbered by their position in the DataFrame (partition
offset + position inside the partition), and the half of position i is the same seeded
hash as for a file's row number (:class:`~dpfair.fairclass._split.PositionSplit`, evaluated
by DuckDB on the workers with the very SQL expression of the file path), so a Parquet file
written from the same DataFrame in order gives the same split. Privacy is that of the file
path (see :mod:`dpfair.fairclass.outofcore`): each row contributes one kernel bump to the
weights and one rounded score to one histogram, whatever partition it sits in.

Equality with the DuckDB path: the split and the score histograms are equal; the S1 weights
are equal up to floating-point rounding (NumPy's linear binning vs DuckDB's, both tested
against each other at 1e-12), hence η̃ and π̃ up to that rounding and τ̂ exactly unless a
score sits within rounding of a lattice midpoint.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfair._errors import InvalidDataError
from dpfair.fairclass import CDPFairClassifier
from dpfair.fairclass.aggregate import GridAggregate
from dpfair.fairclass.outofcore import (
    AnyFold,
    Calibration,
    FitRequest,
    OpportunityInput,
    OutOfCoreFit,
    PositiveScoreHistogram,
    ScoreHistogram,
    Split,
    fit_from_source,
    positive_score_counts,
    score_rows,
    validate_request,
)
from dpfair.mechanisms import KroneckerGaussianGrid
from dpfair.session._dask import _tree_sum

__all__ = ["DaskAggregates", "fit_cdp_fair_from_dask"]


def _rows(part: Any, names: Sequence[Hashable], target: Hashable, sensitive: Hashable,
          req: FitRequest) -> tuple[NDArray[np.float64], NDArray[np.float64],
                                    NDArray[np.float64], dict[str, int], NDArray[np.bool_]]:
    """(unit-box features, a, y, problem counts, ok mask) of one partition, validated as
    :func:`dpfair.fairclass.kernel_grid_weights` validates a file."""
    X = np.column_stack(
        [part[c].to_numpy(dtype=np.float64, na_value=np.nan) for c in names]
    ) if len(part) else np.zeros((0, len(names)))
    a = part[sensitive].to_numpy(dtype=np.float64, na_value=np.nan)
    y = part[target].to_numpy(dtype=np.float64, na_value=np.nan)
    missing = ~np.all(np.isfinite(X), axis=1) | np.isnan(a) | np.isnan(y)
    notbinary = ~missing & ~(np.isin(a, (0.0, 1.0)) & np.isin(y, (0.0, 1.0)))
    ok = ~missing & ~notbinary
    U = (np.where(ok[:, None], X, 0.0) - req.lows) / (req.highs - req.lows)
    if req.clip:
        U = np.clip(U, 0.0, 1.0)
        outside = np.zeros(ok.shape, dtype=bool)
    else:
        outside = ok & np.any((U < 0.0) | (U > 1.0), axis=1)
    ok &= ~outside
    problems = {"missing": int(missing.sum()), "notbinary": int(notbinary.sum()),
                "outside": int(outside.sum())}
    return U, a, y, problems, ok


def _add_dicts(*parts: Any) -> Any:
    """Sum tuples/dicts/arrays of per-partition results elementwise."""
    first = parts[0]
    if isinstance(first, dict):
        return {k: _add_dicts(*[p[k] for p in parts]) for k in first}
    if isinstance(first, tuple):
        return tuple(_add_dicts(*[p[i] for p in parts]) for i in range(len(first)))
    total = first.copy() if isinstance(first, np.ndarray) else first
    for p in parts[1:]:
        total = total + p
    return total


def _weights_task(part: Any, offset: int, names: Sequence[Hashable], target: Hashable,
                  sensitive: Hashable, req: FitRequest, grid: KroneckerGaussianGrid,
                  split: Split, half: int, bits: int) -> tuple[Any, ...]:
    U, a, y, problems, ok = _rows(part, names, target, sensitive, req)
    keep = ok & (split.labels(offset, len(part)) == half)
    # exact integer weights (each row adds 2^{q·d}): partition sums are exact in any order
    weights = np.zeros((*grid.shape, 2, 2), dtype=np.int64)
    counts = np.zeros((2, 2), dtype=np.int64)
    for ga in (0, 1):
        for gy in (0, 1):
            sel = keep & (a == ga) & (y == gy)
            counts[ga, gy] = int(sel.sum())
            if counts[ga, gy]:
                weights[..., ga, gy] = grid.exact_binning(U[sel], bits)
    return weights, counts, problems


def _scores_task(part: Any, offset: int, names: Sequence[Hashable], target: Hashable,
                 sensitive: Hashable, req: FitRequest, grid: KroneckerGaussianGrid | None,
                 split: Split, folds: dict[int, AnyFold]) -> tuple[Any, ...]:
    U, a, y, problems, ok = _rows(part, names, target, sensitive, req)
    half = split.labels(offset, len(part))
    hist = {h: np.zeros((2, req.bins + 1), dtype=np.int64) for h in folds}
    counts = np.zeros((2, 2, 2), dtype=np.int64)
    streamed = ok & np.isin(half, list(folds))
    np.add.at(counts, (half[streamed], a[streamed].astype(np.intp),
                       y[streamed].astype(np.intp)), 1)
    # the file path's scoring of validated rows (one function for both sources)
    score_rows(req, grid, folds, U[ok], a[ok].astype(np.int8), half[ok], hist)
    return hist, counts, problems


def _cells_task(part: Any, offset: int, names: Sequence[Hashable], target: Hashable,
                sensitive: Hashable, req: FitRequest, split: Split,
                halves: tuple[int, ...]) -> tuple[Any, ...]:
    """Rows per (half, group, label) of the validated rows of ``halves``."""
    _U, a, y, problems, ok = _rows(part, names, target, sensitive, req)
    half = split.labels(offset, len(part))
    keep = ok & np.isin(half, halves)
    counts = np.zeros((2, 2, 2), dtype=np.int64)
    np.add.at(counts, (half[keep], a[keep].astype(np.intp), y[keep].astype(np.intp)), 1)
    return counts, problems


def _positive_scores_task(part: Any, offset: int, names: Sequence[Hashable],
                          target: Hashable, sensitive: Hashable, req: FitRequest,
                          grid: KroneckerGaussianGrid | None, split: Split, half: int,
                          fold: AnyFold, positive: NDArray[np.float64]) -> tuple[Any, ...]:
    """Rounded equal-opportunity scores of the positive-label rows of ``half``."""
    U, a, y, problems, ok = _rows(part, names, target, sensitive, req)
    keep = ok & (split.labels(offset, len(part)) == half) & (y == 1)
    hist = positive_score_counts(req, grid, fold, positive, U[keep], a[keep].astype(np.int8))
    return hist, problems


def _raise_problems(name: str, problems: dict[str, int], req: FitRequest) -> None:
    parts = []
    if problems["missing"]:
        parts.append(f"{problems['missing']} row(s) with NULL/NaN/infinite values")
    if problems["notbinary"]:
        parts.append(f"{problems['notbinary']} row(s) whose {req.target!r} or "
                     f"{req.sensitive!r} is not 0/1")
    if problems["outside"]:
        parts.append(f"{problems['outside']} row(s) with a feature outside its public bounds "
                     "(widen feature_bounds or pass clip=True)")
    if parts:
        raise InvalidDataError(f"'{name}': " + "; ".join(parts) +
                               ". dpfair never drops rows silently.")


class DaskAggregates:
    """The pipeline's :class:`~dpfair.fairclass._pipeline.Source` for a Dask DataFrame:
    its aggregates are computed on the cluster."""

    name = "Dask DataFrame"
    default_split = "position"

    def __init__(self, frame: Any, names: Sequence[Hashable], target: Hashable,
                 sensitive: Hashable, req: FitRequest) -> None:
        import dask

        self.names, self.target, self.sensitive, self.req = list(names), target, sensitive, req
        self.parts = frame[[*self.names, target, sensitive]].to_delayed()
        lengths = dask.compute(*[dask.delayed(len, pure=True)(p) for p in self.parts])
        self.offsets = np.concatenate(([0], np.cumsum(lengths)))[:-1].astype(np.int64)
        self._n = int(sum(lengths))

    def n_rows(self) -> int:
        return self._n

    def _run(self, task: Any, *args: Any) -> Any:
        import dask

        partials = [
            dask.delayed(task, pure=True)(p, int(off), self.names, self.target,
                                          self.sensitive, self.req, *args)
            for p, off in zip(self.parts, self.offsets, strict=True)
        ]
        summed = _tree_sum(partials, add=_add_dicts)
        (result,) = dask.compute(summed)
        return result

    def check_halves(self, split: Split) -> None:
        """Group sizes per half are checked from the aggregated counts."""

    def fitted_extras(self, n: int, half_sizes: tuple[int, int]) -> dict[str, Any]:
        return {"outofcore_": OutOfCoreFit("dask", n, half_sizes, self.req.bins, False)}

    def grid_weights(self, grid: KroneckerGaussianGrid, split: Split,
                     half: int, bits: int) -> GridAggregate:
        ints, counts, problems = self._run(_weights_task, grid, split, half, bits)
        _raise_problems(self.name, problems, self.req)
        if int(counts.sum()) == 0:
            raise InvalidDataError(f"'{self.name}': no rows in half {half} of the split.")
        weights = ints.astype(np.float64) / float(1 << bits) ** grid.ndim
        return GridAggregate(weights, counts, int(counts.sum()), bits)

    def score_histograms(
        self, grid: KroneckerGaussianGrid | None, split: Split,
        folds: dict[int, AnyFold],
    ) -> tuple[dict[int, Calibration], NDArray[np.int64]]:
        hist, counts, problems = self._run(_scores_task, grid, split, folds)
        _raise_problems(self.name, problems, self.req)
        return {h: ScoreHistogram(self.req.bins, c) for h, c in hist.items()}, counts

    def opportunity_calibrations(
        self, grid: KroneckerGaussianGrid | None, split: Split,
        folds: dict[int, AnyFold],
    ) -> tuple[dict[int, OpportunityInput], NDArray[np.int64]]:
        """The (half, group, label) counts of the calibration halves (one pass on the
        cluster); per half a :class:`PositiveScoreHistogram` whose scores are counted on
        the cluster once S2 has drawn m̃ (one more pass)."""
        counts, problems = self._run(_cells_task, split, tuple(folds))
        _raise_problems(self.name, problems, self.req)
        out: dict[int, OpportunityInput] = {}
        for h, fold in folds.items():
            def histogram(positive: NDArray[np.float64], h: int = h,
                          fold: AnyFold = fold) -> NDArray[np.int64]:
                hist, problems = self._run(_positive_scores_task, grid, split, h, fold,
                                           positive)
                _raise_problems(self.name, problems, self.req)
                return np.asarray(hist, dtype=np.int64)

            out[h] = PositiveScoreHistogram(
                int(counts[h].sum()), (int(counts[h, 1, 1]), int(counts[h, 0, 1])),
                self.req.bins, histogram, self.name,
            )
        return out, counts


def fit_cdp_fair_from_dask(
    frame: Any,
    *,
    features: Sequence[Hashable],
    target: Hashable,
    sensitive: Hashable,
    feature_bounds: Sequence[tuple[float, float]],
    random_state: Any = None,
    score_bins: int = 2**16,
    **settings: Any,
) -> Any:
    """Fit CDP-Fair on a Dask DataFrame; only aggregates leave the workers.

    Parameters
    ----------
    frame : dask.dataframe.DataFrame
        Training rows (any partitioning; row i is the i-th row in partition order).
    features, target, sensitive, feature_bounds, random_state, score_bins, **settings
        As for :func:`dpfair.fairclass.fit_cdp_fair_from_file` (``epsilon``, ``delta``,
        ``alpha``, ``cross_fit``, ``clip``, ``bandwidth``, …). Column names are used as
        given.

    Returns
    -------
    CDPFairClassifier
        Fitted, with ``privacy_spent_`` (the same (ε, δ) as the file path) and
        ``outofcore_`` (n, half sizes, score bins).
    """
    from dpfair.session._dask import _check_numeric

    names = list(features)
    for c in (*names, target, sensitive):
        _check_numeric(frame, c)
    clf = CDPFairClassifier(feature_bounds=feature_bounds, random_state=random_state, **settings)
    req = validate_request(clf, features=[str(f) for f in names], target=str(target),
                           sensitive=str(sensitive), score_bins=score_bins)
    return fit_from_source(clf, req.settings, DaskAggregates(frame, names, target, sensitive, req))
