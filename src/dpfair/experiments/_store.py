"""Columnar result store: one Parquet file per completed chunk, read back with DuckDB.

Layout of a store directory::

    manifest.json          experiment name, grid fingerprint, seed (what may be mixed in)
    chunks/part-*.parquet  one file per completed chunk of (cell, rep) rows
    results.parquet        the final table of the last complete run (ordered by cell, rep)
    summary.json           its per-cell summary

Every file is written to a temporary name in the same directory and then renamed, so a
killed process leaves either a complete file or none (temporary files are ignored and
cleaned up on the next open). A lock (``fcntl.flock`` where available) keeps two runs from
writing into the same store at once; the operating system releases it when the process
dies, so a killed run never leaves a stale lock.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from dpfair._atomic import atomic_open, write_json_atomic
from dpfair._errors import InvalidDataError, InvalidParameterError
from dpfair.data.sql import literal_pattern
from dpfair.experiments._registry import Experiment

__all__ = ["ResultStore", "StoreMismatchError"]

_FORMAT = 1
_CHUNK_GLOB = "part-*.parquet"


class StoreMismatchError(InvalidParameterError):
    """The store directory holds results of another experiment, grid or seed."""


def _sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _atomic_write(path: Path, write: Callable[[IO[bytes]], object]) -> None:
    """Write through ``write(fileobj)`` into a temporary file next to ``path``, then rename."""
    with atomic_open(path) as fh:
        write(fh)


def _to_arrow(rel: duckdb.DuckDBPyRelation) -> pa.Table:
    """A DuckDB relation as a pyarrow Table (DuckDB 1.x and 2.x spell this differently)."""
    to_table = getattr(rel, "to_arrow_table", None)
    if to_table is not None:
        return to_table()
    out = rel.arrow()
    return out.read_all() if isinstance(out, pa.RecordBatchReader) else out


class ResultStore:
    """The results of one experiment at one seed, in a directory.

    Parameters
    ----------
    root : path
        Store directory (created if missing).
    experiment : Experiment
        What the store holds; checked against ``manifest.json`` when it exists.
    seed : int
        Root seed of the run; part of the store's identity.

    Notes
    -----
    Use as a context manager: entering takes the lock, checks or writes the manifest and
    removes stale temporary files; leaving releases the lock.
    """

    def __init__(self, root: str | os.PathLike[str], experiment: Experiment, seed: int) -> None:
        self.root = Path(root)
        self.chunks = self.root / "chunks"
        self.experiment = experiment
        self.seed = int(seed)
        self._lock: IO[str] | None = None

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> ResultStore:
        self.chunks.mkdir(parents=True, exist_ok=True)
        self._acquire_lock()
        try:
            self._check_manifest()
            for stale in self.chunks.glob(".tmp-*"):
                stale.unlink(missing_ok=True)
            for stale in self.root.glob(".tmp-*"):
                stale.unlink(missing_ok=True)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the lock."""
        if self._lock is not None:
            self._lock.close()  # closing the descriptor releases the flock
            self._lock = None

    def _acquire_lock(self) -> None:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows: no advisory lock
            return
        fh = open(self.root / ".lock", "w")  # kept open (and locked) while the run lasts
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.close()
            raise InvalidParameterError(
                f"out={str(self.root)!r}: another run is writing into this store. Wait for it "
                "to finish, or choose another output directory."
            ) from None
        self._lock = fh

    def _manifest(self) -> dict[str, Any]:
        from dpfair import __version__

        exp = self.experiment
        return {
            "format": _FORMAT,
            "experiment": exp.name,
            "fingerprint": exp.fingerprint(),
            "seed": self.seed,
            "parameters": list(exp.parameters),
            "n_cells": exp.n_cells,
            "grid": list(exp.grid),
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
            "dpfair_version": __version__,
        }

    def _check_manifest(self) -> None:
        path = self.root / "manifest.json"
        want = self._manifest()
        if not path.exists():
            text = json.dumps(want, indent=2, allow_nan=True)
            _atomic_write(path, lambda fh: fh.write(text.encode("utf-8")))
            return
        try:
            have = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise StoreMismatchError(
                f"out={str(self.root)!r}: manifest.json is unreadable ({exc}). Remove the "
                "directory or choose another one."
            ) from None
        for key in ("experiment", "seed", "fingerprint"):
            if have.get(key) != want[key]:
                raise StoreMismatchError(
                    f"out={str(self.root)!r}: holds results of experiment "
                    f"{have.get('experiment')!r} with seed {have.get('seed')!r} (grid "
                    f"{have.get('fingerprint')}), not of {want['experiment']!r} with seed "
                    f"{want['seed']} (grid {want['fingerprint']}). Results of another grid or "
                    "seed cannot be mixed in: choose another output directory or remove this "
                    "one."
                )

    # ------------------------------------------------------------------ chunks
    def chunk_files(self) -> list[Path]:
        """Completed chunk files, sorted by name (first cell, first repetition)."""
        return sorted(self.chunks.glob(_CHUNK_GLOB))

    def _source(self, files: Sequence[Path], *, filename: bool = False) -> str:
        listed = ", ".join(_sql_string(literal_pattern(f)) for f in files)
        extra = ", filename=true" if filename else ""
        return f"read_parquet([{listed}], union_by_name=true{extra})"

    def _unreadable(self, files: Sequence[Path], exc: Exception) -> InvalidDataError:
        """A one-line error naming the chunk files that are not complete Parquet files."""
        bad = []
        for f in files:
            try:
                pq.read_metadata(f)
            except (OSError, pa.ArrowException):
                bad.append(f.name)
        if bad:
            shown = ", ".join(repr(b) for b in bad[:3]) + (" ..." if len(bad) > 3 else "")
            return InvalidDataError(
                f"out={str(self.root)!r}: {len(bad)} result chunk(s) in {str(self.chunks)!r} "
                f"are truncated or corrupt ({shown}). Delete them and rerun: their "
                "repetitions are recomputed with the same seeds."
            )
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return InvalidDataError(
            f"out={str(self.root)!r}: the result store cannot be read ({first})."
        )

    def done(self) -> set[tuple[int, int]]:
        """The (cell, rep) pairs already stored."""
        files = self.chunk_files()
        if not files:
            return set()
        with duckdb.connect(":memory:") as con:
            try:
                got = con.sql(
                    f"SELECT DISTINCT cell, rep FROM {self._source(files)}"
                ).fetchnumpy()
            except duckdb.Error as exc:
                raise self._unreadable(files, exc) from None
        return set(zip(got["cell"].tolist(), got["rep"].tolist(), strict=True))

    def write_chunk(self, rows: Sequence[Mapping[str, Any]]) -> Path | None:
        """Store the rows of one completed chunk atomically; return the file written."""
        if not rows:
            return None
        first = rows[0]
        name = f"part-c{int(first['cell']):06d}-r{int(first['rep']):09d}-{uuid.uuid4().hex[:8]}"
        path = self.chunks / f"{name}.parquet"
        table = pa.Table.from_pylist([dict(r) for r in rows])
        _atomic_write(path, lambda fh: pq.write_table(table, fh))
        return path

    def table(self, reps: int) -> pa.Table:
        """The stored rows with ``rep < reps``, one per (cell, rep), ordered by (cell, rep).

        Columns: ``cell``, ``rep``, the grid's parameters, then the outputs of ``run_one``.
        """
        files = self.chunk_files()
        if not files:
            return pa.table({"cell": pa.array([], pa.int64()), "rep": pa.array([], pa.int64())})
        query = (
            f"SELECT * EXCLUDE (filename) FROM {self._source(files, filename=True)} "
            f"WHERE rep < {int(reps)} AND cell < {self.experiment.n_cells} "
            "QUALIFY row_number() OVER (PARTITION BY cell, rep ORDER BY filename) = 1 "
            "ORDER BY cell, rep"
        )
        with duckdb.connect(":memory:") as con:
            try:
                table = _to_arrow(con.sql(query))
            except duckdb.Error as exc:
                raise self._unreadable(files, exc) from None
        front = ["cell", "rep", *self.experiment.parameters]
        order = [c for c in front if c in table.column_names]
        order += [c for c in table.column_names if c not in order]
        return table.select(order)

    # ------------------------------------------------------------------ final outputs
    def write_results(self, table: pa.Table, summary: Sequence[Mapping[str, Any]]) -> None:
        """Write ``results.parquet`` and ``summary.json`` (each atomically)."""
        _atomic_write(self.root / "results.parquet", lambda fh: pq.write_table(table, fh))

        write_json_atomic(self.root / "summary.json", list(summary))
