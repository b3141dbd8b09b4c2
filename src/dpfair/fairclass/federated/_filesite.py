"""An FDP-Fair site that runs rounds 1 and 2 from a CSV/Parquet file larger than memory.

:class:`FileSite` is a :class:`~dpfair.fairclass.federated._site.Site` whose only
differences are *how the site's rows are read*; every noise draw, every ledger charge and
every message field is produced by the inherited ``round1``/``round2`` code, unchanged.

* **Split.** Row number i (0-based position in the file; DuckDB's ``file_row_number``)
  goes to half :meth:`PositionSplit.half_of(i) <dpfair.fairclass._split.PositionSplit>`
  (:func:`~dpfair.fairclass.federated._site.split_of`): the in-memory site's split, so
  the same entropy gives the same halves whichever reader runs. Data-independent; half
  sizes are functions of (N_s, seed), hence public; a replaced record keeps its position
  and its half (``docs/proofs/fairclass_fdp_fair.md``).
* **Round 1.** Per training half, :func:`dpfair.fairclass.aggregate.kernel_grid_weights`
  aggregates the per-(group, label) linear-binning weights W on the public grid; the four
  kernel sums are F = K·W and the group-1 count comes from the same pass. These are the
  in-memory ``kernel_cell_sums`` and ``sum(A == 1)`` (F up to floating-point rounding of
  the aggregated weights), fed to the same Gaussian mechanisms with the same σ.
* **Round 2.** The calibration rows are streamed in Arrow record batches; Z is computed
  per row from the broadcast model and the leaf counts on the 2^M dyadic bins of [−1, 1]
  are summed over batches (counts of a partition add up: exactly the in-memory counts).
  Under ``constraints="equal_opportunity"`` only the rows with label 1 enter the leaf
  counts (:func:`~dpfair.fairclass.federated._opportunity.positive_rows`, as in memory);
  every row is still read, validated and counted per group for the "file changed" check.

Memory: O(grid + 2^M + batch). A CSV file is first copied, in file order, to a temporary
Parquet file of the used columns (kept for the lifetime of the object; :meth:`close`).
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfair._errors import InsufficientDataError, InvalidDataError, InvalidParameterError
from dpfair.data.fairclass_sql import (
    connect,
    file_order_parquet,
    group_label_counts,
    stream_batches,
)
from dpfair.fairclass._model import ReleasedFold
from dpfair.fairclass.aggregate import kernel_grid_weights
from dpfair.fairclass.federated._messages import ProtocolError
from dpfair.fairclass.federated._opportunity import positive_rows
from dpfair.fairclass.federated._protocol import ProtocolConfig
from dpfair.fairclass.federated._site import (
    Site,
    check_half_groups,
    check_site_labels,
    score_leaf_counts,
)
from dpfair.mechanisms import KroneckerGaussianGrid

__all__ = ["FileSite"]


class FileSite(Site):
    """One FDP-Fair site reading its rows from a file, out of core (same privacy).

    Parameters
    ----------
    site_id : str
        One of the setup's sites; the file must hold exactly its public N_s rows.
    path : str or path-like
        Parquet (by its magic bytes) or CSV file.
    features : sequence of str
        Feature columns, in the order of the setup's ``feature_bounds``.
    target, sensitive : str
        0/1 label and 0/1 group columns.
    config : ProtocolConfig
        The public ``setup``.
    random_state : None, int, SeedSequence or Generator
        As for :class:`Site`: None draws fresh OS entropy for the split and for every
        release; a seed (tests, studies) is mixed with site id, run id and stream, giving
        the in-memory site's streams.
    clip : bool, default False
        Clip features into the public box instead of raising.
    batch_rows : int, default 2**17
        Rows per Arrow record batch in round 2.
    memory_limit : str, default "1GB"
        DuckDB's memory cap (it spills beyond it).
    threads : int, optional
        DuckDB worker threads.
    tmp_dir : path-like, optional
        Where a CSV's temporary Parquet copy goes.
    split_entropy : int, optional
        Re-create the split of round 1 (round 2 in another process).

    Attributes
    ----------
    split : PositionSplit
        The seeded position hash.
    half_sizes : (int, int)
        Rows of halves A and B (public: functions of N_s and the seed).
    """

    def __init__(
        self,
        site_id: str,
        path: str | os.PathLike[str],
        *,
        features: Sequence[str],
        target: str,
        sensitive: str,
        config: ProtocolConfig,
        random_state: Any = None,
        clip: bool = False,
        batch_rows: int = 2**17,
        memory_limit: str = "1GB",
        threads: int | None = None,
        tmp_dir: str | os.PathLike[str] | None = None,
        split_entropy: int | None = None,
    ) -> None:
        if config.is_mapped:
            raise InvalidParameterError(
                f"site {site_id!r}: the out-of-core FileSite supports the kernel estimator "
                f"only; load the rows and use Site for estimator={config.estimator!r}."
            )
        spec = self._init_party(site_id, config)
        names = [features] if isinstance(features, str) else [str(f) for f in features]
        d = len(config.feature_bounds)
        if len(names) != d or len(set(names)) != d:
            raise ProtocolError(
                site_id, "features", f"expected {d} distinct feature columns, got {names!r}."
            )
        if len({*names, str(target), str(sensitive)}) != d + 2:
            raise ProtocolError(
                site_id, "columns", "target and sensitive must be two distinct non-feature columns."
            )
        if isinstance(batch_rows, bool) or not isinstance(batch_rows, (int, np.integer)) or (
            batch_rows < 1
        ):
            raise InvalidParameterError(f"batch_rows={batch_rows!r}: expected a positive integer.")
        p = Path(path).expanduser()
        if not p.is_file():
            raise InvalidParameterError(f"path='{p}': no such file.")
        self.path = p
        self._features = names
        self._target = str(target)
        self._sensitive = str(sensitive)
        self._bounds = [(float(lo), float(hi)) for lo, hi in config.feature_bounds]
        self._clip = bool(clip)
        self._batch_rows = int(batch_rows)
        self._memory_limit = memory_limit
        self._threads = threads

        # Same streams as Site.__init__ (split entropy kept; noise drawn at each release).
        self._init_split(random_state, split_entropy)

        self._stack = ExitStack()
        try:
            self._pq, self.converted_csv = self._stack.enter_context(
                file_order_parquet(
                    p,
                    [*names, self._target, self._sensitive],
                    memory_limit=memory_limit,
                    threads=threads,
                    tmp_dir=tmp_dir,
                )
            )
            self._group_counts, y_range = self._count_groups()  # (half, group)
        except InvalidDataError as exc:
            self._stack.close()
            raise ProtocolError(site_id, "data", str(exc)) from None
        except BaseException:
            self._stack.close()
            raise
        n = int(self._group_counts.sum())
        if n != spec.n:
            self._stack.close()
            raise ProtocolError(
                site_id,
                "n",
                f"the site holds {n} rows but the setup declares N_s = {spec.n}: the public "
                "size must match (replace-one DP assumes N_s public).",
            )
        self.half_sizes = (int(self._group_counts[0].sum()), int(self._group_counts[1].sum()))
        try:
            check_half_groups(site_id, self._group_counts)
        except InsufficientDataError:
            self._stack.close()
            raise
        if y_range[0] == y_range[1]:
            self._stack.close()
            check_site_labels(site_id, int(y_range[0]), int(y_range[1]), n)
        self._init_ledger()

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        """Remove a CSV's temporary Parquet copy (idempotent)."""
        self._stack.close()

    def __enter__(self) -> FileSite:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ data access
    def _count_groups(self) -> tuple[NDArray[np.int64], tuple[float, float]]:
        """Rows per (half, group), and the smallest and largest label (same pass); any
        group value other than 0/1 is an error (labels are checked when read)."""
        with connect(self._memory_limit, self._threads) as con:
            rows = group_label_counts(
                con, self._pq, half_sql=self.split.sql("file_row_number"),
                target=self._target, sensitive=self._sensitive, name=self.path.name,
            )
        out = np.zeros((2, 2), dtype=np.int64)
        y_lo, y_hi = math.inf, -math.inf
        for h, a, c, lo, hi in rows:
            if a not in (0.0, 1.0):
                raise InvalidDataError(
                    f"'{self.path.name}': column {self._sensitive!r} has {c} value(s) "
                    f"{a!r}; the sensitive group must be 0/1 without missing values."
                )
            out[int(h), int(a)] += int(c)
            if lo is not None and hi is not None:
                y_lo, y_hi = min(y_lo, float(lo)), max(y_hi, float(hi))
        return out, (y_lo, y_hi)

    def _training_stats(
        self, half: int, grid: KroneckerGaussianGrid
    ) -> tuple[int, NDArray[np.float64], int]:
        try:
            agg = kernel_grid_weights(
                self._pq, self._features, self._target, self._sensitive, self._bounds, grid,
                clip=self._clip, memory_limit=self._memory_limit, threads=self._threads,
                half=(self.split, half),
                bits=grid.binning_bits(self.half_sizes[half], grid.ndim),
            )
        except InvalidDataError as exc:
            raise ProtocolError(self.site_id, "data", str(exc)) from None
        if agg.n != self.half_sizes[half] or not np.array_equal(
            agg.counts.sum(axis=1), self._group_counts[half]
        ):
            raise ProtocolError(
                self.site_id, "data", f"'{self.path.name}' changed while it was being read."
            )
        return int(agg.counts[1].sum()), agg.weights, int(agg.n)

    def _calibration_leaves(
        self, folds: list[tuple[int, ReleasedFold]], grid: KroneckerGaussianGrid
    ) -> list[tuple[tuple[NDArray[np.int64], NDArray[np.int64]], int]]:
        depth = self.config.depth
        want = {h for h, _ in folds}
        acc = {
            h: [np.zeros(1 << depth, dtype=np.int64), np.zeros(1 << depth, dtype=np.int64)]
            for h in want
        }
        seen = np.zeros((2, 2), dtype=np.int64)
        d = len(self._features)
        lows = np.array([lo for lo, _ in self._bounds])
        highs = np.array([hi for _, hi in self._bounds])
        only = None if len(want) == 2 else next(iter(want))
        name = self.path.name
        try:
            with connect(self._memory_limit, self._threads) as con:
                for arr, hv in stream_batches(
                    con, self._pq, [*self._features, self._sensitive, self._target],
                    half_sql=self.split.sql("file_row_number"), only_half=only,
                    batch_size=self._batch_rows, name=name,
                ):
                    if not np.all(np.isfinite(arr)):
                        raise InvalidDataError(
                            f"'{name}': NULL/NaN/infinite values in the columns used."
                        )
                    a_col, y_col = arr[:, d], arr[:, d + 1]
                    if not np.all((a_col == 0) | (a_col == 1)):
                        raise InvalidDataError(f"'{name}': {self._sensitive!r} must be 0/1.")
                    if not np.all((y_col == 0) | (y_col == 1)):
                        raise InvalidDataError(f"'{name}': {self._target!r} must be 0/1.")
                    # The in-memory site's scale_to_unit_box, row by row.
                    U = (arr[:, :d] - lows) / (highs - lows)
                    if self._clip:
                        U = np.clip(U, 0.0, 1.0)
                    elif np.any((U < 0.0) | (U > 1.0)):
                        raise InvalidDataError(
                            f"'{name}': a feature lies outside its public bounds."
                        )
                    A = a_col.astype(np.int8)
                    np.add.at(seen, (hv, A.astype(np.intp)), 1)
                    # Y = 1 only under equal opportunity (the in-memory site's rule)
                    keep = np.zeros(A.size, dtype=bool)
                    keep[positive_rows(y_col, self.config)] = True
                    for h, fold in folds:
                        sel = (hv == h) & keep
                        if not sel.any():
                            continue
                        c0, c1 = score_leaf_counts(fold, grid, U[sel], A[sel], depth)
                        acc[h][0] += c0
                        acc[h][1] += c1
        except InvalidDataError as exc:
            raise ProtocolError(self.site_id, "data", str(exc)) from None
        for h in want:
            if not np.array_equal(seen[h], self._group_counts[h]):
                raise ProtocolError(
                    self.site_id, "data", f"'{name}' changed while it was being read."
                )
        return [((acc[h][0], acc[h][1]), self.half_sizes[h]) for h, _ in folds]

    # ------------------------------------------------------------------ state
    def data_fingerprint(self) -> str:
        """SHA-256 of the file's bytes (streamed; checks round 2 reads the same file)."""
        h = hashlib.sha256()
        with self.path.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        return h.hexdigest()

    def halves_in_memory(self) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
        """Row positions of halves A and B (O(N_s) memory: for tests and small files)."""
        which = self.split.halves(self.half_sizes[0] + self.half_sizes[1])
        return np.flatnonzero(which == 0), np.flatnonzero(which == 1)
