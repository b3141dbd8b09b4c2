"""Out-of-core S1 inputs: linear-binning weights on the public kernel grid, by DuckDB.

CDP-Fair's S1 reads the data only through the four (group a, label y) binned kernel sums
F_{a,y} = K · W_{a,y} on a public grid (:mod:`dpfair.fairclass`, ``_model.py``), where
W_{a,y}[t] = Σ_{i: A_i = a, Y_i = y} w_t(U_i) are the multilinear (linear-binning) weights
of the rows on the grid nodes. W is a sum over rows, so a file far larger than memory
reduces to ``4 · grid.size`` numbers in one streaming SQL pass: DuckDB maps each row to
its grid cell (i_1, …, i_d) and fractional offsets, and ``GROUP BY a, y, i_1, …, i_d``
sums the 2^d corner products. Only the grouped sums (at most 4 · Π(g_j − 1) rows) come
back to Python, where they are added onto the nodes.

Exactness. The unit-box map u = (x − lo)/(hi − lo) is the same IEEE expression as the
in-memory path, so u is bit-identical. The cell index is floor(u·(g − 1)) clipped to
[0, g − 2] and the offset f = u·(g − 1) − i clipped to [0, 1]; the in-memory path finds the
cell by ``searchsorted`` on the ``linspace`` nodes. The two can disagree only for a u
within rounding of a node, and there the linear-binning weights are continuous (a point on
a node gives weight 1 to it from either side), so the results agree to floating-point
rounding (plus summation order): tests check ``rtol = 1e-12`` on adversarial values
(points on nodes, on the box's faces, duplicates, values one ulp away).

Privacy. Nothing here is released: the weights are the exact input of the Gaussian-process
mechanism of S1. For every row the weights are ≥ 0 and sum to 1 (up to one rounding), so a
row contributes Σ_t w_t k(·, t) with RKHS norm ≤ 1 — the sensitivity argument of
``docs/proofs/fairclass_cdp_fair.md`` applies unchanged to the aggregated input, and the
released noisy function has the same law as on the in-memory path (the noise is added by
the same mechanism to sums equal up to rounding).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
from numpy.typing import NDArray

from dpfair._errors import InvalidDataError, InvalidParameterError
from dpfair._sqlpath import is_parquet, scan_sql
from dpfair.fairclass._split import PositionSplit
from dpfair.mechanisms import KroneckerGaussianGrid

__all__ = ["GridAggregate", "kernel_grid_weights"]


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def _is_parquet(path: Path) -> bool:
    return is_parquet(path)


def _source(path: Path, *, row_numbers: bool = False) -> str:
    """The table function reading exactly ``path`` (glob characters are literal)."""
    return scan_sql(path, file_row_number=row_numbers)


@dataclass(frozen=True)
class GridAggregate:
    """Per-(group, label) linear-binning weights of a file on a public grid.

    Attributes
    ----------
    weights : ndarray of shape ``grid.shape + (2, 2)``
        W[..., a, y]: what ``kernel_cell_weights`` gives in memory — the exact integer
        linear binning (fractions rounded to multiples of 2^-q) divided by 2^{q·d}, so it
        carries no summation error. ``grid.kernel_apply(weights)`` is the four kernel sums
        F_{a,y} of S1.
    counts : ndarray of shape (2, 2), int64
        Rows per (a, y) (not private: inputs of a mechanism, never to be published as such).
    n : int
        Rows in the file.
    bits : int
        The q of the integer binning.
    """

    weights: NDArray[np.float64]
    counts: NDArray[np.int64]
    n: int
    bits: int = 0

    def kernel_sums(self, grid: KroneckerGaussianGrid) -> NDArray[np.float64]:
        """F_{a,y} on the grid: ``grid.kernel_apply(weights)``."""
        return grid.kernel_apply(self.weights)


def kernel_grid_weights(
    path: str | os.PathLike[str],
    features: Sequence[str],
    target: str,
    sensitive: str,
    feature_bounds: Sequence[tuple[float, float]],
    grid: KroneckerGaussianGrid,
    *,
    clip: bool = False,
    memory_limit: str = "1GB",
    threads: int | None = None,
    half: tuple[PositionSplit, int] | None = None,
    bits: int | None = None,
) -> GridAggregate:
    """Linear-binning weights of a CSV/Parquet file per (group, label), out of core.

    Parameters
    ----------
    path : str or path-like
        CSV or Parquet file of any size (DuckDB streams it; Parquet detected by its magic).
    features : sequence of str
        Feature columns, in the order of ``feature_bounds`` and the grid's axes.
    target, sensitive : str
        0/1 label and 0/1 group columns.
    feature_bounds : sequence of (lo, hi)
        The public box; features are mapped to [0, 1] with it.
    grid : KroneckerGaussianGrid
        The classifier's public grid on [0, 1]^d with equally spaced nodes (as built by
        ``CDPFairClassifier``; its ``grid_`` after a fit).
    clip : bool, default=False
        Clip features into the box; otherwise values outside are an error.
    memory_limit : str, default="1GB"
        DuckDB's memory cap (it spills beyond it).
    threads : int, optional
        DuckDB worker threads.
    half : (PositionSplit, 0 or 1), optional
        Aggregate only the rows of this half of the position split (Parquet only: the
        position is DuckDB's ``file_row_number``). *Every* row of the file is still
        validated, so an error counts the problems of the whole file.
    bits : int, optional
        Fractional bits q of the exact integer linear binning (each row adds exactly
        2^{q·d}; ``KroneckerGaussianGrid.binning_bits`` of the public row count). Default:
        the value for 2^40 rows.

    Returns
    -------
    GridAggregate
        With ``half``: weights, counts and n of that half's rows only.

    Raises
    ------
    InvalidDataError
        NULL/NaN/infinite values, labels or groups not 0/1, features outside the box
        (without ``clip``), no rows — counted in the message; nothing is dropped silently.
    InvalidParameterError
        Missing file, mismatched features/bounds/grid, a grid that is not uniform on [0, 1].
    """
    p = Path(path).expanduser()
    if not p.is_file():
        raise InvalidParameterError(f"path='{p}': no such file.")
    d = len(features)
    if d == 0 or len(feature_bounds) != d or grid.ndim != d:
        raise InvalidParameterError(
            f"features: {d} name(s), {len(feature_bounds)} bound pair(s) and a "
            f"{grid.ndim}-d grid; they must match."
        )
    sizes = []
    for j, ax in enumerate(grid.axes):
        if ax[0] != 0.0 or ax[-1] != 1.0 or not np.allclose(
            ax, np.linspace(0.0, 1.0, ax.size), rtol=0, atol=1e-15
        ):
            raise InvalidParameterError(
                f"grid.axes[{j}]: expected equally spaced nodes from 0 to 1 (the classifier's "
                "public grid)."
            )
        sizes.append(ax.size)
    lows = [float(lo) for lo, _ in feature_bounds]
    highs = [float(hi) for _, hi in feature_bounds]
    if not all(np.isfinite(lo) and np.isfinite(hi) and lo < hi
               for lo, hi in zip(lows, highs, strict=True)):
        raise InvalidParameterError(f"feature_bounds={list(feature_bounds)!r}: need lo < hi.")

    keep = "TRUE"
    if half is not None:
        split, which = half
        if not isinstance(split, PositionSplit) or which not in (0, 1):
            raise InvalidParameterError("half: expected (PositionSplit, 0 or 1).")
        if not _is_parquet(p):
            raise InvalidParameterError(
                f"'{p.name}': a half of the position split needs a Parquet file (row positions "
                "come from DuckDB's file_row_number); convert CSV to Parquet first."
            )
        keep = f"{split.sql('file_row_number')} = {int(which)}"

    fq = [_quote(f) for f in features]
    u_exprs = [
        f"(CAST({q} AS DOUBLE) - {lo!r}) / ({hi!r} - {lo!r})"
        for q, lo, hi in zip(fq, lows, highs, strict=True)
    ]
    bad_checks = " OR ".join(
        [f"{q} IS NULL OR isnan(CAST({q} AS DOUBLE)) OR isinf(CAST({q} AS DOUBLE))"
         for q in fq]
    )
    u_cols = ", ".join(
        (f"least(greatest({e}, 0.0), 1.0) AS u{j}" if clip else f"{e} AS u{j}")
        for j, e in enumerate(u_exprs)
    )
    outside = " OR ".join(f"u{j} < 0.0 OR u{j} > 1.0" for j in range(d))
    cell_cols = ", ".join(
        f"CAST(least(greatest(floor(u{j} * {g - 1}), 0), {g - 2}) AS BIGINT) AS i{j}"
        for j, g in enumerate(sizes)
    )
    q_bits = int(bits) if bits is not None else KroneckerGaussianGrid.binning_bits(2**40, d)
    one = 1 << q_bits
    # The fraction rounded to a multiple of 2^-q (same IEEE operations as
    # dpfair.mechanisms.gaussian_process.quantize_fraction), corner weights as exact integers.
    frac_cols = ", ".join(
        f"CAST(least(greatest(floor(least(greatest(u{j} * {g - 1} - i{j}, 0.0), 1.0) * "
        f"{float(one)!r} + 0.5), 0), {one}) AS BIGINT) AS f{j}" for j, g in enumerate(sizes)
    )
    corners = []
    for c in range(1 << d):
        factors = [
            (f"f{j}" if (c >> (d - 1 - j)) & 1 else f"({one} - f{j})") for j in range(d)
        ]
        corners.append(f"CAST(sum({' * '.join(factors)}) AS BIGINT) AS w{c}")
    a_q, y_q = _quote(sensitive), _quote(target)
    i_list = ", ".join(f"i{j}" for j in range(d))
    sql = f"""
        WITH src AS (SELECT * FROM {_source(p, row_numbers=half is not None)}),
        checked AS (
            SELECT CASE WHEN {bad_checks} OR {a_q} IS NULL OR {y_q} IS NULL THEN 'missing'
                        WHEN CAST({a_q} AS DOUBLE) NOT IN (0, 1)
                             OR CAST({y_q} AS DOUBLE) NOT IN (0, 1) THEN 'notbinary'
                        ELSE 'ok' END AS kind,
                   CAST({a_q} AS DOUBLE) AS a, CAST({y_q} AS DOUBLE) AS y,
                   ({keep}) AS keep,
                   {', '.join(f'{q}' for q in fq)}
            FROM src),
        unit AS (SELECT kind, a, y, keep, {u_cols} FROM checked WHERE kind = 'ok'),
        flagged AS (SELECT *, ({outside}) AS out FROM unit),
        cells AS (SELECT a, y, {', '.join(f'u{j}' for j in range(d))}, {cell_cols}
                  FROM flagged WHERE NOT out AND keep),
        fracs AS (SELECT a, y, {i_list}, {frac_cols} FROM cells)
        SELECT 'ok' AS kind, CAST(a AS INTEGER) AS a, CAST(y AS INTEGER) AS y, {i_list},
               count(*) AS n, {', '.join(corners)}
        FROM fracs GROUP BY a, y, {i_list}
        UNION ALL
        SELECT kind, NULL, NULL, {', '.join('NULL' for _ in range(d))}, count(*),
               {', '.join('NULL' for _ in range(1 << d))}
        FROM checked WHERE kind <> 'ok' GROUP BY kind
        UNION ALL
        SELECT 'outside', NULL, NULL, {', '.join('NULL' for _ in range(d))}, count(*),
               {', '.join('NULL' for _ in range(1 << d))}
        FROM flagged WHERE out
    """
    with duckdb.connect(":memory:") as con:
        con.execute(f"SET memory_limit = '{memory_limit}'")
        con.execute("SET enable_progress_bar = false")
        if threads is not None:
            con.execute(f"SET threads = {int(threads)}")
        try:
            rows = con.execute(sql).fetchall()
        except duckdb.Error as exc:
            first = str(exc).strip().splitlines()[0]
            raise InvalidDataError(
                f"'{p.name}': could not aggregate columns {[*features, target, sensitive]} "
                f"({first})."
            ) from None
    problems = {str(r[0]): int(r[3 + d]) for r in rows if r[0] != "ok" and int(r[3 + d]) > 0}
    if problems:
        parts = []
        if "missing" in problems:
            parts.append(f"{problems['missing']} row(s) with NULL/NaN/infinite values")
        if "notbinary" in problems:
            parts.append(f"{problems['notbinary']} row(s) whose {target!r} or {sensitive!r} "
                         "is not 0/1")
        if "outside" in problems:
            parts.append(f"{problems['outside']} row(s) with a feature outside its public "
                         "bounds (widen feature_bounds or pass clip=True)")
        raise InvalidDataError(
            f"'{p.name}': " + "; ".join(parts) + ". dpfair never drops rows silently."
        )
    ok = [r for r in rows if r[0] == "ok"]
    if not ok:
        where = "" if half is None else f" in half {half[1]} of the split"
        raise InvalidDataError(f"'{p.name}': no rows{where}.")
    arr = np.array([r[1:] for r in ok], dtype=np.int64)
    a_idx, y_idx = arr[:, 0].astype(np.intp), arr[:, 1].astype(np.intp)
    cells = arr[:, 2 : 2 + d].astype(np.intp)
    counts = np.zeros((2, 2), dtype=np.int64)
    np.add.at(counts, (a_idx, y_idx), arr[:, 2 + d])
    wts = arr[:, 3 + d :]
    shape = tuple(sizes)
    strides = np.array([int(np.prod(shape[j + 1 :])) for j in range(d)], dtype=np.intp)
    flat = np.zeros((int(np.prod(shape)), 2, 2), dtype=np.int64)
    for c in range(1 << d):
        corner = np.array([(c >> (d - 1 - j)) & 1 for j in range(d)], dtype=np.intp)
        node = ((cells + corner) * strides).sum(axis=1)
        np.add.at(flat, (node, a_idx, y_idx), wts[:, c])
    weights = flat.reshape((*shape, 2, 2)).astype(np.float64) / float(one) ** d
    return GridAggregate(weights, counts, int(counts.sum()), q_bits)
