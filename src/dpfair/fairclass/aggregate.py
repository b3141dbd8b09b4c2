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

from dpfair._errors import InvalidParameterError
from dpfair.data._fairclass_sql import GridAggregate, kernel_grid_weights_sql
from dpfair.fairclass._split import PositionSplit
from dpfair.mechanisms.gaussian_process import KroneckerGaussianGrid

__all__ = ["GridAggregate", "kernel_grid_weights"]


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
        The classifier's public grid on [0, 1]^d with equally spaced nodes (its ``grid_``
        after a fit).
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
    keep = None
    if half is not None:
        split, which = half
        if not isinstance(split, PositionSplit) or which not in (0, 1):
            raise InvalidParameterError("half: expected (PositionSplit, 0 or 1).")
        keep = (split.sql("file_row_number"), int(which))
    return kernel_grid_weights_sql(
        path, features, target, sensitive, feature_bounds, grid, clip=clip,
        memory_limit=memory_limit, threads=threads, half=keep, bits=bits,
    )
