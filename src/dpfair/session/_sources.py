"""Where a :class:`~dpfair.Session`'s data live: in memory, in a file, or on a Dask cluster.

Each source answers the questions the releases ask of the data — one column, a few
columns, or the 2^D-bin histogram of one column (the sufficient statistic of the median's
aggregated path) — and nothing else. None of these answers is released: they are the
inputs of mechanisms.
"""

from __future__ import annotations

import abc
import os
from collections.abc import Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfair._errors import InvalidDataError, InvalidParameterError

__all__ = ["DaskSource", "DataSource", "FileSource", "MemorySource", "as_source"]

_ONE_COLUMN = "x"  # the name of the only column of a 1-D array


def _is_pandas_frame(obj: Any) -> bool:
    return type(obj).__module__.startswith("pandas") and hasattr(obj, "columns")


def _is_dask_frame(obj: Any) -> bool:
    mod = type(obj).__module__
    return (mod.startswith("dask.") or mod.startswith("dask_expr")) and hasattr(obj, "columns")


def _to_float(name: Hashable, values: Any) -> NDArray[np.float64]:
    """A float64 copy of one column (missing values become NaN; the releases refuse NaN)."""
    to_numpy = getattr(values, "to_numpy", None)
    try:
        if to_numpy is not None:  # pandas: nullable dtypes need an explicit NA value
            arr = to_numpy(dtype=np.float64, na_value=np.nan)
        else:
            arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidDataError(
            f"column={name!r}: could not be read as numbers; the releases need a numeric "
            "column."
        ) from None
    if arr.ndim != 1:
        raise InvalidDataError(f"column={name!r}: expected one value per row, got shape "
                               f"{arr.shape}.")
    return np.array(arr, dtype=np.float64, copy=True)


def _did_you_mean(name: Hashable, available: Sequence[Hashable]) -> str:
    """`` Did you mean 'x'?`` for a near or case-folded match among the column names."""
    import difflib

    names = [a for a in available if isinstance(a, str)]
    if not isinstance(name, str) or not names:
        return ""
    folded = [a for a in names if a.lower() == name.lower()]
    close = folded or difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    return f" Did you mean '{close[0]}'?" if close else ""


class DataSource(abc.ABC):
    """What every source provides (see the subclasses)."""

    kind: str = ""
    path: Path | None = None

    @abc.abstractmethod
    def names(self) -> list[Hashable]:
        """The column names."""

    #: A file whose layout could not be read at opening: raised by the first release's
    #: compute step, where the failure is charged and withheld (see FileSource).
    broken: InvalidDataError | None = None

    def check_columns(self, columns: Sequence[Hashable]) -> None:
        """Raise :class:`InvalidParameterError` naming a column that is not in the data."""
        if self.broken is not None:
            return  # unknown layout: the release fails on the data, charged
        available = self.names()
        for c in columns:
            if c not in available:
                shown = ", ".join(repr(a) for a in available)
                raise InvalidParameterError(
                    f"column={c!r}: {self._not_found()}. Available columns: "
                    f"{shown}.{_did_you_mean(c, available)}"
                )

    def _not_found(self) -> str:
        return "not in the session's data"

    def resolve(self, column: Hashable | None) -> Hashable:
        """The column to use: ``column``, or the only one when the data have one."""
        if column is None:
            if self.broken is not None:
                raise InvalidParameterError(
                    "column=None: name the column to use (the session's file could not be "
                    "read to list its columns)."
                )
            names = self.names()
            if len(names) != 1:
                raise InvalidParameterError(
                    f"column=None: the data have {len(names)} columns; name one of "
                    f"{', '.join(repr(n) for n in names)}."
                )
            return names[0]
        self.check_columns([column])
        return column

    @abc.abstractmethod
    def column(self, name: Hashable) -> NDArray[np.float64]:
        """One column as a float64 array (loads it)."""

    def columns(self, names: Sequence[Hashable]) -> dict[Hashable, NDArray[np.float64]]:
        """Several columns as float64 arrays (loads them)."""
        return {n: self.column(n) for n in names}

    @abc.abstractmethod
    def describe(self) -> str:
        """A short description for the ledger and errors."""


class MemorySource(DataSource):
    """NumPy arrays, a pandas DataFrame or a mapping of columns, held by the caller."""

    kind = "memory"

    def __init__(self, data: Any) -> None:
        self._cols: dict[Hashable, Any]
        if _is_pandas_frame(data):
            if not data.columns.is_unique:
                raise InvalidDataError("data: the DataFrame has duplicate column names.")
            self._cols = {c: data[c] for c in data.columns}
            self._n = len(data)
        elif isinstance(data, Mapping):
            self._cols = dict(data)
            lengths = {int(np.shape(v)[0]) if np.ndim(v) else 1 for v in self._cols.values()}
            if len(lengths) > 1:
                raise InvalidDataError(
                    f"data: the columns have different lengths {sorted(lengths)}; a session "
                    "is one data set (one row per individual)."
                )
            self._n = lengths.pop() if lengths else 0
        else:
            try:
                arr = np.asarray(data)
            except (TypeError, ValueError):
                arr = np.asarray([])
            if arr.dtype == object or arr.ndim not in (1, 2):
                raise InvalidParameterError(
                    f"data: expected a NumPy array (1-D or 2-D), a pandas or Dask DataFrame, a "
                    f"mapping of columns, or a CSV/Parquet path; got {type(data).__name__}."
                )
            if arr.ndim == 1:
                self._cols = {_ONE_COLUMN: arr}
            else:
                self._cols = {j: arr[:, j] for j in range(arr.shape[1])}
            self._n = int(arr.shape[0])
        if not self._cols or self._n == 0:
            raise InvalidDataError("data: no rows or no columns.")

    def names(self) -> list[Hashable]:
        return list(self._cols)

    def column(self, name: Hashable) -> NDArray[np.float64]:
        self.check_columns([name])
        return _to_float(name, self._cols[name])

    def describe(self) -> str:
        return f"in-memory data ({self._n} rows, {len(self._cols)} column(s))"


class FileSource(DataSource):
    """A CSV (optionally compressed) or Parquet file, read through DuckDB."""

    kind = "file"

    def __init__(self, path: str | os.PathLike[str]) -> None:
        from dpfair.data import check_path, list_columns
        from dpfair.data.sql import data_error, header_disagrees

        p = check_path(path)  # no such file (globs are never expanded), a directory
        self.path = p
        self._names: list[Hashable] = []
        try:
            self._names = list(list_columns(p))
            if header_disagrees(p, [str(n) for n in self._names]):
                # the sniffer was misled by a row (the header line has another number of
                # fields): a failure on the data, raised (charged) by the first release
                raise data_error(
                    f"path='{p}': the CSV layout could not be detected (a malformed row).",
                    problem="the CSV layout could not be detected (a malformed row)",
                )
        except InvalidDataError as exc:
            # Reading the layout already looked at the data (the sniffer reads rows): the
            # error is kept and raised by the first release's compute step, which charges
            # it and withholds its details (Session._release), instead of here, for free.
            self.broken = exc

    def _not_found(self) -> str:
        assert self.path is not None
        return f"not found in '{self.path.name}'"

    def _raise_if_broken(self) -> None:
        if self.broken is not None:
            raise self.broken

    def names(self) -> list[Hashable]:
        return list(self._names)

    def column(self, name: Hashable) -> NDArray[np.float64]:
        from dpfair.data import read_column

        self._raise_if_broken()
        self.check_columns([name])
        return read_column(self.path, str(name))  # type: ignore[arg-type]

    def columns(self, names: Sequence[Hashable]) -> dict[Hashable, NDArray[np.float64]]:
        from dpfair.data.fairclass_sql import read_columns

        self._raise_if_broken()
        self.check_columns(names)
        got = read_columns(self.path, [str(n) for n in names])  # type: ignore[arg-type]
        return {n: got[str(n)] for n in names}

    def histogram(self, column: Hashable, bounds: tuple[float, float],
                  depth: int) -> NDArray[np.int64]:
        from dpfair.data import histogram_counts

        self._raise_if_broken()
        return histogram_counts(self.path, str(column), bounds, depth)  # type: ignore[arg-type]

    def row_count(self) -> int:
        """Rows of the file (public under replace-one neighbours; never its byte size)."""
        from dpfair.data import row_count

        assert self.path is not None
        self._raise_if_broken()
        return row_count(self.path)

    def describe(self) -> str:
        return f"file {self.path}"


class DaskSource(DataSource):
    """A Dask DataFrame: aggregates are computed on the cluster (:mod:`._dask`)."""

    kind = "dask"

    def __init__(self, frame: Any) -> None:
        self.frame = frame
        self._names: list[Hashable] = list(frame.columns)

    def names(self) -> list[Hashable]:
        return list(self._names)

    def column(self, name: Hashable) -> NDArray[np.float64]:
        """The whole column, brought back to this process (only for releases that need
        every record, e.g. the facility sampler; the median and CDP-Fair use aggregates)."""
        self.check_columns([name])
        from dpfair.session._dask import collect_column

        return collect_column(self.frame, name)

    def histogram(self, column: Hashable, bounds: tuple[float, float],
                  depth: int) -> NDArray[np.int64]:
        from dpfair.session._dask import histogram_counts

        self.check_columns([column])
        return histogram_counts(self.frame, column, bounds, depth)

    def describe(self) -> str:
        return f"Dask DataFrame ({self.frame.npartitions} partitions)"


def as_source(data: Any) -> DataSource:
    """Wrap the data a session is opened on."""
    if isinstance(data, DataSource):
        return data
    if isinstance(data, (str, os.PathLike)):
        return FileSource(data)
    if _is_dask_frame(data):
        return DaskSource(data)
    return MemorySource(data)
