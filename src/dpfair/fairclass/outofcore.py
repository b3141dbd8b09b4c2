"""CDP-Fair on a training file larger than memory (DuckDB aggregates + streamed scores).

:func:`fit_cdp_fair_from_file` returns a fitted :class:`CDPFairClassifier` whose released
state (public grid, η̃ on the grid, π̃, τ̂, tie seed, ledger) is produced from aggregates,
so ``predict``/``predict_proba``/``export_released_model`` are the in-memory methods,
unchanged: prediction is post-processing of the same kind of release. Memory is
O(grid + score bins + batch), never O(n).

Pipeline (one fit; with ``cross_fit=True`` a second fit with the halves swapped)
--------------------------------------------------------------------------------
0. **Rows and split.** n = number of rows (Parquet metadata). Row number i (its 0-based
   position in the file) goes to half ``PositionSplit.half_of(i)``, a seeded degree-3
   polynomial hash mod 2^61 − 1 (:mod:`dpfair.fairclass._split`). The split is a function
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
Not the fit itself: the in-memory split is a permutation, this one a position hash. Given
the same split (the S1 row set) and the generator in the same state, the S1 release
(η̃ on the grid, π̃) equals ``release_s1`` on those rows up to floating-point rounding of
the aggregated weights (tested at 1e-9), and τ̂ equals ``private_fair_threshold`` on the
rounded scores exactly.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import duckdb
import numpy as np
from numpy.typing import NDArray

from dpfair._errors import InsufficientDataError, InvalidDataError, InvalidParameterError
from dpfair._rng import as_generator
from dpfair._sqlpath import literal_pattern, scan_sql, sql_string
from dpfair.fairclass._budget import KERNEL_SUM_RKHS_SENSITIVITY, PrivacyLedger
from dpfair.fairclass._certify import (
    FairnessCertificate,
    certification_margin,
    certified_target,
    check_threshold,
)
from dpfair.fairclass._estimators import _HALF_LABELS, CDPFairClassifier, _warn_if_uncertified
from dpfair.fairclass._laplace_count import noisy_count
from dpfair.fairclass._model import ReleasedFold, make_grid, release_s1_from_weights
from dpfair.fairclass._split import PositionSplit
from dpfair.fairclass._threshold import (
    dd_steps_from_counts,
    threshold_law_from_steps,
)
from dpfair.fairclass._validation import MIN_GROUP_ROWS, check_feature_bounds
from dpfair.fairclass.aggregate import GridAggregate, kernel_grid_weights
from dpfair.mechanisms import GaussianProcessMechanism, KroneckerGaussianGrid

__all__ = ["OutOfCoreFit", "ScoreHistogram", "fit_cdp_fair_from_file"]

_NUMERIC_PREFIXES = (
    "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
    "UINTEGER", "UBIGINT", "UHUGEINT", "FLOAT", "REAL", "DOUBLE", "DECIMAL", "BOOLEAN",
)


@dataclass(frozen=True)
class ScoreHistogram:
    """Calibration scores rounded to the lattice (2/B)·ℤ ∩ [−1, 1], counted per group.

    Attributes
    ----------
    bins : int
        B (a power of two ≥ 2); the lattice has B + 1 points, spacing 2/B.
    counts : ndarray of shape (2, B + 1), int64
        counts[a, k]: rows of group a whose rounded score is −1 + 2k/B.
    """

    bins: int
    counts: NDArray[np.int64]

    @property
    def values(self) -> NDArray[np.float64]:
        """The lattice points −1 + 2k/B, k = 0..B (exact in floating point)."""
        half = self.bins // 2
        return (np.arange(self.bins + 1, dtype=np.float64) - half) * (2.0 / self.bins)

    @staticmethod
    def round_scores(z: NDArray[np.float64], bins: int) -> NDArray[np.int64]:
        """Lattice index of each score: rint(z·B/2) + B/2, clipped to [0, B] (|z| ≤ 1)."""
        half = bins // 2
        k = np.rint(np.asarray(z, dtype=np.float64) * half).astype(np.int64) + half
        return np.clip(k, 0, bins)


@dataclass(frozen=True)
class OutOfCoreFit:
    """Facts about an out-of-core fit (public: functions of n, the seed and the settings).

    Attributes
    ----------
    path : str
        The training file.
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


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def _lit(path: Path) -> str:
    """``path`` as an SQL literal for *reading*: glob characters escaped, so DuckDB's
    ``read_parquet``/``read_csv`` read exactly that file (see :mod:`dpfair._sqlpath`)."""
    return sql_string(literal_pattern(path))


def _connect(memory_limit: str, threads: int | None) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(":memory:")
    con.execute(f"SET memory_limit = '{memory_limit}'")
    con.execute("SET enable_progress_bar = false")
    con.execute("SET preserve_insertion_order = true")
    if threads is not None:
        con.execute(f"SET threads = {int(threads)}")
    return con


def _check_columns(
    con: duckdb.DuckDBPyConnection, source: str, name: str, columns: Sequence[str]
) -> None:
    try:
        schema = {
            str(r[0]): str(r[1])
            for r in con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()
        }
    except duckdb.Error as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise InvalidDataError(f"'{name}': could not be read ({first}).") from None
    missing = [c for c in columns if c not in schema]
    if missing:
        raise InvalidParameterError(
            f"column(s) {', '.join(repr(c) for c in missing)}: not found in '{name}'. "
            f"Available columns: {', '.join(repr(c) for c in schema)}."
        )
    for c in columns:
        if not schema[c].upper().startswith(_NUMERIC_PREFIXES):
            raise InvalidDataError(
                f"column='{c}': has type {schema[c]}, expected a numeric column."
            )


@contextmanager
def _as_parquet(
    path: Path,
    columns: Sequence[str],
    *,
    memory_limit: str,
    threads: int | None,
    tmp_dir: str | os.PathLike[str] | None,
) -> Iterator[tuple[Path, bool]]:
    """Yield a Parquet file with the rows of ``path`` in file order (CSV: a temporary copy)."""
    with path.open("rb") as fh:
        is_parquet = fh.read(4) == b"PAR1"
    with _connect(memory_limit, threads) as con:
        source = scan_sql(path, "parquet" if is_parquet else "csv")
        _check_columns(con, source, path.name, columns)
        if is_parquet:
            yield path, False
            return
        with tempfile.TemporaryDirectory(prefix="dpfair-csv-", dir=tmp_dir) as tmp:
            out = Path(tmp) / path.name  # same name: error messages name the user's file
            select = ", ".join(_quote(c) for c in columns)
            try:
                # COPY of a single-table SELECT keeps the CSV's row order
                # (preserve_insertion_order = true, set in _connect).
                con.execute(
                    f"COPY (SELECT {select} FROM {source}) TO {sql_string(str(out))} "
                    "(FORMAT parquet, ROW_GROUP_SIZE 1000000)"
                )
            except duckdb.Error as exc:
                first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                raise InvalidDataError(f"'{path.name}': could not be read ({first}).") from None
            yield out, True


def _count_rows(con: duckdb.DuckDBPyConnection, pq: Path) -> int:
    rows = con.execute(f"SELECT count(*) FROM read_parquet({_lit(pq)})").fetchall()
    return int(rows[0][0])


def _stream_scores(
    con: duckdb.DuckDBPyConnection,
    pq: Path,
    *,
    name: str,
    features: Sequence[str],
    target: str,
    sensitive: str,
    lows: NDArray[np.float64],
    highs: NDArray[np.float64],
    clip: bool,
    split: PositionSplit,
    grid: KroneckerGaussianGrid,
    folds: dict[int, ReleasedFold],
    bins: int,
    batch_size: int,
) -> tuple[dict[int, ScoreHistogram], NDArray[np.int64]]:
    """One streaming pass: per calibration half, the histogram of rounded scores.

    ``folds`` maps a calibration half (0/1) to the released S1 fold whose scores it needs.
    Also returns the (half, group, label) row counts of the streamed halves.
    """
    cols = ", ".join(f"CAST({_quote(c)} AS DOUBLE)" for c in (*features, sensitive, target))
    half_expr = split.sql("file_row_number")
    where = "" if len(folds) == 2 else f"WHERE {half_expr} = {next(iter(folds))}"
    sql = (
        f"SELECT {cols}, {half_expr} AS half "
        f"FROM read_parquet({_lit(pq)}, file_row_number = true) {where}"
    )
    d = len(features)
    hist = {h: np.zeros((2, bins + 1), dtype=np.int64) for h in folds}
    counts = np.zeros((2, 2, 2), dtype=np.int64)
    try:
        # A relation's Arrow reader streams record batches (a DB-API result would copy all
        # rows first). DuckDB >= 2.0 names it to_arrow_reader, 1.x fetch_record_batch.
        rel = con.sql(sql)
        to_reader = getattr(rel, "to_arrow_reader", None) or rel.fetch_record_batch
        reader = to_reader(batch_size)
        for batch in reader:
            arr = np.column_stack(
                [batch.column(j).to_numpy(zero_copy_only=False) for j in range(d + 2)]
            ).astype(np.float64, copy=False)
            half = batch.column(d + 2).to_numpy(zero_copy_only=False).astype(np.intp)
            # Defensive: the S1 pass has already validated every row of the file.
            if not np.all(np.isfinite(arr)):
                raise InvalidDataError(f"'{name}': NULL/NaN/infinite values in the columns used.")
            a_col, y_col = arr[:, d], arr[:, d + 1]
            if not np.all(((a_col == 0) | (a_col == 1)) & ((y_col == 0) | (y_col == 1))):
                raise InvalidDataError(f"'{name}': {target!r} and {sensitive!r} must be 0/1.")
            U = (arr[:, :d] - lows) / (highs - lows)
            if clip:
                U = np.clip(U, 0.0, 1.0)
            elif np.any((U < 0.0) | (U > 1.0)):
                raise InvalidDataError(f"'{name}': a feature lies outside its public bounds.")
            A = a_col.astype(np.int8)
            np.add.at(counts, (half, A.astype(np.intp), y_col.astype(np.intp)), 1)
            for h, fold in folds.items():
                sel = half == h
                if not sel.any():
                    continue
                z = fold.scores(grid, U[sel], A[sel])
                k = ScoreHistogram.round_scores(z, bins)
                a_sel = A[sel]
                for a in (0, 1):
                    hist[h][a] += np.bincount(k[a_sel == a], minlength=bins + 1)
    except duckdb.Error as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise InvalidDataError(f"'{name}': could not stream the calibration rows ({first}).") \
            from None
    return {h: ScoreHistogram(bins, c) for h, c in hist.items()}, counts


def _check_counts(counts: NDArray[np.int64]) -> None:
    """The in-memory fit's group checks, from (half, group, label) counts of all rows."""
    total = counts.sum(axis=0)  # (group, label)
    for a in (0, 1):
        count = int(total[a].sum())
        if count == 0:
            raise InsufficientDataError(
                f"sensitive_features: group {a} is empty; both groups 0 and 1 must be present "
                "to estimate (and constrain) the demographic disparity."
            )
        if count < MIN_GROUP_ROWS:
            raise InsufficientDataError(
                f"sensitive_features: group {a} has only {count} row(s); at least "
                f"{MIN_GROUP_ROWS} are needed (half go to each of the two fitting stages). "
                "Collect more data for that group."
            )
    by_label = total.sum(axis=0)
    if int(by_label.min()) == 0:
        only = int(np.argmax(by_label))
        raise InsufficientDataError(
            f"y: all values are {only}; both outcomes 0 and 1 must occur to fit a classifier."
        )
    if int(counts.sum(axis=2).min()) < 2:
        raise InvalidDataError(
            "sensitive_features: after the split into two halves a group has fewer than 2 "
            "rows in one half; collect more data for the smaller group."
        )


def _private_threshold(
    hist: ScoreHistogram,
    pi: NDArray[np.float64],
    target: float,
    epsilon_count: float,
    epsilon_threshold: float,
    rng: np.random.Generator,
    *,
    certify: tuple[float, float, float] | None = None,
) -> tuple[float, FairnessCertificate | None]:
    """S2 from a score histogram: the in-memory ``_threshold`` with rounded scores.

    Same draws from ``rng`` in the same order (Laplace count, then the law's sample, then
    the certificate's check), and the same law: ``private_fair_threshold`` on
    ``np.repeat(values, counts)`` gives the same τ̂ for the same generator state.
    ``certify = (α, β_fold, ε_k)`` runs the certified rule (``target`` is then the margin
    ``alpha_margin`` only).
    """
    c1, c0 = hist.counts[1], hist.counts[0]
    n_cal = int(c1.sum() + c0.sum())
    m1 = noisy_count(int(c1.sum()), n_cal, epsilon_count, rng)
    m1 = min(max(m1, 1.0), n_cal - 1.0)
    m0 = n_cal - m1
    steps = dd_steps_from_counts(hist.values, c1, c0, m1, m0)
    if certify is None:
        law = threshold_law_from_steps(
            steps, m1, m0, target, epsilon_threshold, float(min(pi)), n_cal=n_cal
        )
        return law.sample(rng), None
    alpha, beta, eps_k = certify
    t = certification_margin(
        m1, m0, epsilon_count=epsilon_count, epsilon_check=eps_k, fail_prob_side=beta / 2.0
    )
    aim = certified_target(
        alpha, t, m1, m0, epsilon_threshold=epsilon_threshold, epsilon_check=eps_k,
        extra_margin=target,
    )
    law = threshold_law_from_steps(
        steps, m1, m0, aim, epsilon_threshold, float(min(pi)), n_cal=n_cal
    )
    tau = law.sample(rng)
    cert = check_threshold(
        steps, tau, m1, m0, alpha, margin=t, target=aim, epsilon_check=eps_k, fail_prob=beta,
        rng=rng,
    )
    return tau, cert


def fit_cdp_fair_from_file(
    path: str | os.PathLike[str],
    *,
    features: Sequence[str],
    target: str,
    sensitive: str,
    feature_bounds: Sequence[tuple[float, float]],
    epsilon: float = 1.0,
    delta: float = 1e-5,
    alpha: float = 0.1,
    random_state: Any = None,
    cross_fit: bool = False,
    clip: bool = False,
    bandwidth: float | None = None,
    alpha_margin: float = 0.0,
    threshold_rule: str = "certified",
    fail_prob: float = 0.05,
    check_share: float = 0.35,
    cross_fit_budget: str = "split",
    s1_share: float = 0.75,
    count_share: float = 0.05,
    threshold_count_share: float = 0.25,
    grid_resolution: float = 4.0,
    max_grid_nodes: int = 2**18,
    score_bins: int = 2**16,
    batch_size: int = 2**17,
    memory_limit: str = "1GB",
    threads: int | None = None,
    tmp_dir: str | os.PathLike[str] | None = None,
) -> CDPFairClassifier:
    """Fit CDP-Fair on a CSV/Parquet file of any size; memory O(grid + bins + batch).

    Parameters
    ----------
    path : str or path-like
        Training file: Parquet (recognised by its magic bytes) or CSV (copied in file order
        to a temporary Parquet file of the used columns first, under ``tmp_dir``).
    features : sequence of str
        Feature columns, in the order of ``feature_bounds``; ``predict`` takes X with the
        columns in this order.
    target, sensitive : str
        0/1 label and 0/1 group columns.
    feature_bounds : sequence of (lo, hi)
        The *public* box of the features.
    epsilon, delta, alpha, random_state, clip, bandwidth, alpha_margin, cross_fit_budget, \
s1_share, count_share, threshold_count_share, grid_resolution, max_grid_nodes, \
threshold_rule, fail_prob, check_share
        As for :class:`CDPFairClassifier` (same validation, same budget plan; the certified
        rule is the default, as in memory).
    cross_fit : bool, default=False
        Fit twice with the halves swapped (one more aggregation pass).
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

    Returns
    -------
    CDPFairClassifier
        Fitted: ``predict``, ``predict_proba``, ``privacy_spent_``, ``privacy_ledger_``,
        ``export_released_model`` behave as after ``fit``. Extra attribute
        ``outofcore_`` (:class:`OutOfCoreFit`).

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
    see the module docstring and ``docs/proofs/fairclass_cdp_fair.md`` §9.
    """
    req = validate_request(
        features=features, target=target, sensitive=sensitive,
        feature_bounds=feature_bounds, score_bins=score_bins, epsilon=epsilon, delta=delta,
        alpha=alpha, random_state=random_state, cross_fit=cross_fit, clip=clip,
        bandwidth=bandwidth, alpha_margin=alpha_margin, cross_fit_budget=cross_fit_budget,
        s1_share=s1_share, count_share=count_share,
        threshold_count_share=threshold_count_share, threshold_rule=threshold_rule,
        fail_prob=fail_prob, check_share=check_share, grid_resolution=grid_resolution,
        max_grid_nodes=max_grid_nodes,
    )
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

    rng = as_generator(random_state, name="random_state")
    split = PositionSplit.from_rng(rng)  # the only draw before S1 (in memory: permutation)
    columns = [*req.names, req.target, req.sensitive]
    with _as_parquet(
        p, columns, memory_limit=memory_limit, threads=threads, tmp_dir=tmp_dir
    ) as (pq, converted), _connect(memory_limit, threads) as con:
        source = _ParquetAggregates(
            con, pq, p.name, req, memory_limit=memory_limit, threads=threads,
            batch_size=int(batch_size),
        )
        n, sizes = fit_from_aggregates(req, source, split, rng)
    req.clf.__dict__["outofcore_"] = OutOfCoreFit(str(p), n, sizes, req.bins, converted)
    return req.clf


@dataclass(frozen=True)
class FitRequest:
    """A validated out-of-core CDP-Fair request (the estimator holds the settings)."""

    clf: CDPFairClassifier
    epsilon: float
    delta: float
    target_alpha: float
    alpha: float
    margin: float
    cross_fit: bool
    clip: bool
    resolution: float
    max_nodes: int
    names: list[str]
    target: str
    sensitive: str
    lows: NDArray[np.float64]
    highs: NDArray[np.float64]
    bins: int

    @property
    def bounds(self) -> list[tuple[float, float]]:
        return [(float(lo), float(hi)) for lo, hi in zip(self.lows, self.highs, strict=True)]


def validate_request(
    *,
    features: Sequence[str],
    target: str,
    sensitive: str,
    feature_bounds: Sequence[tuple[float, float]],
    score_bins: int,
    **settings: Any,
) -> FitRequest:
    """Validate a request exactly as :func:`fit_cdp_fair_from_file` does (no data read).

    ``settings`` are :class:`CDPFairClassifier` parameters (``epsilon``, ``delta``, …).
    """
    clf = CDPFairClassifier(feature_bounds=feature_bounds, **settings)
    eps, dl = clf._privacy_params()
    alpha_value, margin = clf._alpha_params()
    do_cross, do_clip, resolution, max_nodes = clf._validate_common()
    names = [str(f) for f in features] if not isinstance(features, str) else [features]
    if not names or len(set(names)) != len(names):
        raise InvalidParameterError(f"features={list(features)!r}: expected distinct names.")
    if len({*names, str(target), str(sensitive)}) != len(names) + 2:
        raise InvalidParameterError(
            "target and sensitive must be two distinct columns, not among the features."
        )
    lows, highs = check_feature_bounds(feature_bounds, len(names))
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
    return FitRequest(
        clf=clf, epsilon=eps, delta=dl, target_alpha=alpha_value - margin, alpha=alpha_value,
        margin=margin, cross_fit=do_cross,
        clip=do_clip, resolution=resolution, max_nodes=max_nodes, names=names,
        target=str(target), sensitive=str(sensitive), lows=lows, highs=highs, bins=int(bins),
    )


class Aggregates(Protocol):
    """The two sufficient statistics of an out-of-core fit, from wherever the rows live.

    Rows are identified by their 0-based *position* (file order), which decides their half
    through the :class:`PositionSplit`. Implemented here for Parquet files (DuckDB) and in
    :mod:`dpfair.session._dask_fair` for Dask DataFrames (computed on the cluster).
    """

    name: str

    def n_rows(self) -> int:
        """Number of rows (public)."""
        ...

    def grid_weights(self, grid: KroneckerGaussianGrid, split: PositionSplit,
                     half: int, bits: int) -> GridAggregate:
        """Exact integer linear-binning weights (q = ``bits``) of the rows of ``half``,
        validating *every* row (see :meth:`KroneckerGaussianGrid.exact_binning`)."""
        ...

    def score_histograms(
        self, grid: KroneckerGaussianGrid, split: PositionSplit,
        folds: dict[int, ReleasedFold],
    ) -> tuple[dict[int, ScoreHistogram], NDArray[np.int64]]:
        """Per calibration half in ``folds``: histogram of the rounded scores; and the
        (half, group, label) row counts of the streamed halves."""
        ...


class _ParquetAggregates:
    """:class:`Aggregates` of a Parquet file, by DuckDB (out of core)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, pq: Path, name: str, req: FitRequest,
                 *, memory_limit: str, threads: int | None, batch_size: int) -> None:
        self.con, self.pq, self.name, self.req = con, pq, name, req
        self.memory_limit, self.threads, self.batch_size = memory_limit, threads, batch_size

    def n_rows(self) -> int:
        return _count_rows(self.con, self.pq)

    def grid_weights(self, grid: KroneckerGaussianGrid, split: PositionSplit,
                     half: int, bits: int) -> GridAggregate:
        req = self.req
        return kernel_grid_weights(
            self.pq, req.names, req.target, req.sensitive, req.bounds, grid, clip=req.clip,
            memory_limit=self.memory_limit, threads=self.threads, half=(split, half),
            bits=bits,
        )

    def score_histograms(
        self, grid: KroneckerGaussianGrid, split: PositionSplit,
        folds: dict[int, ReleasedFold],
    ) -> tuple[dict[int, ScoreHistogram], NDArray[np.int64]]:
        req = self.req
        return _stream_scores(
            self.con, self.pq, name=self.name, features=req.names, target=req.target,
            sensitive=req.sensitive, lows=req.lows, highs=req.highs, clip=req.clip,
            split=split, grid=grid, folds=folds, bins=req.bins, batch_size=self.batch_size,
        )


def fit_from_aggregates(
    req: FitRequest, source: Aggregates, split: PositionSplit, rng: np.random.Generator
) -> tuple[int, tuple[int, int]]:
    """Run the out-of-core pipeline on ``source`` and store the released state in
    ``req.clf``; returns (n, half sizes). ``rng`` has drawn ``split`` and nothing else."""
    clf, d, name = req.clf, len(req.names), source.name
    n = source.n_rows()
    if n == 0:
        raise InvalidDataError(f"'{name}': no rows.")
    sizes = split.half_sizes(n)
    if min(sizes) < 2:
        raise InvalidDataError(f"'{name}': {n} row(s) are too few to split into two halves.")
    plan = clf._plan(req.epsilon, req.delta)
    mech = GaussianProcessMechanism(
        sigma=plan.sigma_function, rkhs_sensitivity=KERNEL_SUM_RKHS_SENSITIVITY
    )
    h = clf._resolve_bandwidth(sizes[0], d, mech.mu)
    grid = make_grid(d, h, resolution=req.resolution, max_nodes=req.max_nodes)
    pairs = [(0, 1), (1, 0)] if req.cross_fit else [(0, 1)]
    ledger = PrivacyLedger(plan.limit)
    for fit_no, (tr, cal) in enumerate(pairs, start=1):
        plan.charge_fit(ledger, fit_no, _HALF_LABELS[tr], _HALF_LABELS[cal])

    # S1 on each training half (each pass also validates every row).
    counts = np.zeros((2, 2, 2), dtype=np.int64)  # (half, group, label)
    s1: list[tuple[NDArray[np.float64], NDArray[np.float64]]] = []
    for tr, _cal in pairs:
        agg = source.grid_weights(grid, split, tr, grid.binning_bits(sizes[tr], grid.ndim))
        counts[tr] = agg.counts
        s1.append(
            release_s1_from_weights(
                grid,
                agg.weights,
                n=sizes[tr],
                n1=int(agg.counts[1].sum()),
                sigma_count=plan.sigma_count,
                mechanism=mech,
                rng=rng,
            )
        )
    if any(int(counts[tr].sum()) != sizes[tr] for tr, _ in pairs):
        raise InvalidDataError(f"'{name}': the data changed while they were being read.")

    # S2: one pass over the calibration half (or both halves when cross-fit).
    pre = {cal: ReleasedFold(eta=eta, pi=pi, tau=0.0)
           for (eta, pi), (_tr, cal) in zip(s1, pairs, strict=True)}
    hists, streamed = source.score_histograms(grid, split, pre)
    for _tr, cal in pairs:
        if req.cross_fit:
            if not np.array_equal(streamed[cal], counts[cal]):
                raise InvalidDataError(f"'{name}': the data changed while they were being read.")
        else:
            counts[cal] = streamed[cal]
    if int(counts[pairs[0][1]].sum()) != sizes[pairs[0][1]]:
        raise InvalidDataError(f"'{name}': the data changed while they were being read.")
    _check_counts(counts)

    folds = []
    certs: list[FairnessCertificate] = []
    beta = clf._certify_fail_prob()
    for (eta, pi), (_tr, cal) in zip(s1, pairs, strict=True):
        if beta is None:
            tau, _ = _private_threshold(
                hists[cal], pi, req.target_alpha, plan.epsilon_count, plan.epsilon_threshold,
                rng,
            )
        else:
            tau, cert = _private_threshold(
                hists[cal], pi, req.margin, plan.epsilon_count, plan.epsilon_threshold, rng,
                certify=(req.alpha, beta / len(pairs), plan.epsilon_check),
            )
            assert cert is not None
            certs.append(cert)
        folds.append(ReleasedFold(eta=eta, pi=pi, tau=tau))
    certified = None if beta is None else all(c.certified for c in certs)
    clf.__dict__.update(
        {
            "grid_": grid,
            "folds_": tuple(folds),
            "bandwidth_": h,
            "feature_lows_": req.lows,
            "feature_highs_": req.highs,
            "tau_": np.array([f.tau for f in folds]),
            "pi_": np.vstack([f.pi for f in folds]),
            "classes_": np.array([0, 1]),
            "tie_seed_": int(rng.integers(0, 2**63 - 1)),
            "budget_plan_": plan,
            "privacy_ledger_": ledger,
            "privacy_spent_": ledger.total,
            "n_features_in_": d,
            "certified_": certified,
            "certificates_": None if certified is None else tuple(certs),
        }
    )
    _warn_if_uncertified(clf)
    return n, sizes
