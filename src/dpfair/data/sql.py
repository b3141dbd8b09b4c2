"""The one place dpfair talks to DuckDB: connect, quote, scan a file, count rows, errors.

Every reader of a user's CSV or Parquet file builds its table function with :func:`scan`
and turns a DuckDB error into a one-line :class:`~dpfair.InvalidDataError` with
:func:`translate`, so every command fails the same way (one line, exit code 2) whatever the
file holds.

Reading a file *literally*
    DuckDB's ``read_csv``/``read_parquet`` treat ``*``, ``?`` and ``[...]`` in a path as a
    glob, so ``data[2023].csv`` would silently read a sibling ``data2.csv`` — a different
    data set, a different n, a different privacy analysis. :func:`scan` escapes each glob
    metacharacter as a one-character class (``[`` → ``[[]``, ``?`` → ``[?]``, ``*`` →
    ``[*]``), uses the absolute path, turns off hive partitioning and gives a CSV's
    compression from its magic bytes (DuckDB would cut the name at a ``?`` as if it were a
    URL query). Globs are never expanded.

Encodings and other formats (:func:`sniff`)
    A UTF-16 file (with a byte-order mark, or the NUL pattern of UTF-16-LE text) is read as
    UTF-16 and a file that is not valid UTF-8 in its first 64 KiB as Latin-1 — the common
    exports of spreadsheets and hospital systems. Files that are not text at all (an Excel
    workbook, a ZIP archive, a PDF, SQLite, HDF5, Arrow/Feather, an image) are recognised by
    their magic bytes and named in the error, instead of DuckDB's parse error.

Errors never quote the file
    DuckDB's messages quote the offending line and its number ("Original Line: ..."): data.
    :func:`translate` keeps only the *kind* of problem (malformed row, encoding, too wide a
    header, a value that is not a number, ...) and the column, never a value, a line number
    or a count. The error object carries ``column`` and ``problem`` attributes, which a
    :class:`~dpfair.Session` uses for its withheld message.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from dpfair._errors import InvalidDataError

if TYPE_CHECKING:
    import duckdb
    import numpy as np
    from numpy.typing import NDArray

__all__ = [
    "FileKind",
    "connect",
    "csv_compression",
    "csv_encoding",
    "data_error",
    "header_disagrees",
    "is_parquet",
    "literal_pattern",
    "quote",
    "read_text_column",
    "row_count",
    "scan",
    "sniff",
    "sql_string",
    "translate",
]

FileKind = Literal["csv", "parquet"]

_GLOB_CHARS = re.compile(r"([\[*?])")
_GZIP_MAGIC = b"\x1f\x8b"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_PARQUET_MAGIC = b"PAR1"
_SNIFF_BYTES = 64 * 1024

#: Magic bytes of files people hand to a CSV reader by mistake, and what they are.
_NOT_CSV: tuple[tuple[bytes, str], ...] = (
    (b"PK\x03\x04", "a ZIP archive (an Excel .xlsx / OpenDocument .ods workbook, or a "
                    "zipped file)"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "an old-style Excel .xls (OLE2) workbook"),
    (b"%PDF", "a PDF document"),
    (b"SQLite format 3\x00", "an SQLite database"),
    (b"\x89HDF\r\n\x1a\n", "an HDF5 file"),
    (b"ARROW1", "an Arrow/Feather file"),
    (b"\x89PNG", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"Obj\x01", "an Avro file"),
    (b"{\\rtf", "an RTF document"),
)


def sql_string(text: str) -> str:
    """``text`` as an SQL string literal (single quotes doubled)."""
    return "'" + text.replace("'", "''") + "'"


def quote(identifier: str) -> str:
    """``identifier`` as a double-quoted SQL identifier (double quotes doubled)."""
    return '"' + identifier.replace('"', '""') + '"'


def literal_pattern(path: str | os.PathLike[str]) -> str:
    """The absolute path of ``path`` as a DuckDB glob pattern matching only that file."""
    return _GLOB_CHARS.sub(r"[\1]", os.path.abspath(os.fspath(path)))


def _head(path: Path, n: int) -> bytes:
    with path.open("rb") as fh:
        return fh.read(n)


def is_parquet(path: str | os.PathLike[str]) -> bool:
    """Whether the file starts with the Parquet magic bytes ``PAR1``."""
    return _head(Path(path), 4) == _PARQUET_MAGIC


def csv_compression(path: str | os.PathLike[str]) -> Literal["gzip", "zstd", "none"]:
    """The compression of a CSV file, read from its first bytes."""
    head = _head(Path(path), 4)
    if head.startswith(_GZIP_MAGIC):
        return "gzip"
    if head == _ZSTD_MAGIC:
        return "zstd"
    return "none"


def data_error(message: str, *, problem: str, column: str | None = None) -> InvalidDataError:
    """An :class:`InvalidDataError` with ``problem`` (the kind, no value or count) and
    ``column`` attached, for the withheld message of a release under a budget."""
    err = InvalidDataError(message)
    err.problem = problem  # type: ignore[attr-defined]
    err.column = column  # type: ignore[attr-defined]
    return err


def _looks_utf16(head: bytes) -> bool:
    """UTF-16-LE text without a BOM: most odd bytes are NUL (ASCII text), few even ones."""
    if len(head) < 4:
        return False
    odd, even = head[1::2], head[0::2]
    return odd.count(0) >= 0.9 * len(odd) and even.count(0) <= 0.1 * len(even)


def _valid_utf8(head: bytes, complete: bool) -> bool:
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        # a multi-byte character cut by the sample's end is not an error
        return not complete and exc.start >= len(head) - 3 and exc.reason.startswith(
            "unexpected end"
        )
    return True


def csv_encoding(path: str | os.PathLike[str]) -> Literal["utf-8", "utf-16", "latin-1"]:
    """The text encoding of an uncompressed CSV, sniffed from its first 64 KiB.

    ``"utf-16"`` for a UTF-16 byte-order mark or the NUL pattern of UTF-16-LE text;
    ``"utf-8"`` when the sample is valid UTF-8 (with or without its BOM); else
    ``"latin-1"`` (every byte sequence is valid Latin-1). Compressed files are ``"utf-8"``
    (DuckDB decompresses them itself).

    Raises
    ------
    InvalidDataError
        The file is binary (NUL bytes, not UTF-16) or one of the formats named in the
        module docstring.
    """
    p = Path(path)
    head = _head(p, _SNIFF_BYTES)
    for magic, what in _NOT_CSV:
        if head.startswith(magic):
            raise data_error(
                f"path='{p}': this is {what}, not a CSV or Parquet file. Export it as CSV "
                "(UTF-8) or Parquet first.",
                problem=f"the file is {what}, not CSV or Parquet",
            )
    if head.startswith((_GZIP_MAGIC, _ZSTD_MAGIC)):
        return "utf-8"
    if head.startswith((b"\xff\xfe", b"\xfe\xff")) or _looks_utf16(head):
        return "utf-16"
    if b"\x00" in head:
        raise data_error(
            f"path='{p}': a binary file (it holds NUL bytes), not CSV text or Parquet.",
            problem="the file is binary, not CSV text or Parquet",
        )
    complete = p.stat().st_size <= len(head)
    return "utf-8" if _valid_utf8(head, complete) else "latin-1"


def sniff(path: str | os.PathLike[str]) -> FileKind:
    """``"parquet"`` or ``"csv"`` from the file's first bytes (refusing non-CSV formats)."""
    if is_parquet(path):
        return "parquet"
    csv_encoding(path)  # raises for an Excel workbook, a PDF, ...
    return "csv"


def scan(
    path: str | os.PathLike[str],
    fmt: FileKind | None = None,
    *,
    file_row_number: bool = False,
    all_varchar: bool = False,
    store_rejects: bool = False,
) -> str:
    """SQL text of the DuckDB table function reading exactly the file ``path``.

    Parameters
    ----------
    path : str or path-like
        An existing file (its name may hold ``[``, ``?``, ``*``, quotes, ...).
    fmt : {"csv", "parquet"} or None, default=None
        ``None`` detects Parquet by its magic bytes and reads anything else as CSV.
    file_row_number : bool, default=False
        Parquet only: add DuckDB's ``file_row_number`` column (0-based row position).
    all_varchar : bool, default=False
        CSV only: read every column as text (``dpfair inspect``).
    store_rejects : bool, default=False
        CSV only: skip malformed lines into DuckDB's ``reject_errors`` table instead of
        failing (``dpfair inspect`` lists them).

    Returns
    -------
    str
        e.g. ``read_csv('/data/x[[]1].csv', hive_partitioning = false, compression =
        'none')``: a complete table function, to use after ``FROM`` (no bound parameters,
        so a ``?`` in a column name elsewhere in the query is harmless). A UTF-16 or
        Latin-1 CSV gets its ``encoding``.
    """
    if fmt is None:
        fmt = "parquet" if is_parquet(path) else "csv"
    lit = sql_string(literal_pattern(path))
    if fmt == "parquet":
        rows = ", file_row_number = true" if file_row_number else ""
        return f"read_parquet({lit}, hive_partitioning = false{rows})"
    if file_row_number:
        raise ValueError("file_row_number is only available for Parquet files")
    comp = sql_string(csv_compression(path))
    encoding = csv_encoding(path)
    extra = "" if encoding == "utf-8" else f", encoding = {sql_string(encoding)}"
    if all_varchar:
        extra += ", all_varchar = true"
    if store_rejects:
        extra += ", store_rejects = true"
    return f"read_csv({lit}, hive_partitioning = false, compression = {comp}{extra})"


def connect() -> duckdb.DuckDBPyConnection:
    """A private in-memory DuckDB connection (use it as a context manager)."""
    import duckdb

    return duckdb.connect(":memory:")


#: (pattern in DuckDB's message, the kind of problem, a hint): first match wins.
_KINDS: tuple[tuple[str, str, str], ...] = (
    ("invalid unicode", "the file is not valid text in its encoding",
     "Save it as UTF-8 (Excel: 'CSV UTF-8'); UTF-16 with a byte-order mark and Latin-1 "
     "are also read."),
    ("not utf-8", "the file is not valid text in its encoding",
     "Save it as UTF-8 (Excel: 'CSV UTF-8'); UTF-16 with a byte-order mark and Latin-1 "
     "are also read."),
    ("expected number of columns", "a row has a different number of fields than the header "
     "(a malformed CSV)", "Fix the file (quoting, stray delimiters) first."),
    ("too many columns", "a row has a different number of fields than the header (a "
     "malformed CSV)", "Fix the file (quoting, stray delimiters) first."),
    ("sniffing", "the CSV layout could not be detected (a malformed row, or a very wide "
     "header)", "Check that the file is a well-formed CSV with one header line."),
    ("maximum line size", "a line is longer than the CSV reader's limit (a very wide "
     "header or a malformed file)", "Check that the file is a CSV with one record per line."),
    ("unterminated quote", "a quoted field is not closed (a malformed CSV)",
     "Fix the file's quoting first."),
    ("could not convert", "values that are not numbers", "Clean the column first."),
    ("conversion error", "values that are not numbers", "Clean the column first."),
    ("magic bytes", "the file is not a valid Parquet file", "Write the file again."),
    ("parquet", "the Parquet file could not be read", "Write the file again."),
    ("out of memory", "the file could not be read in the available memory",
     "Use a machine with more memory."),
    ("no such file", "the file disappeared while it was read", "Check the path."),
)


def translate(
    exc: BaseException,
    path: str | os.PathLike[str],
    *,
    column: str | None = None,
    fmt: FileKind | None = None,
) -> InvalidDataError:
    """One line, no data: what went wrong reading ``path`` (see the module docstring).

    DuckDB's own message is used only to classify the problem; none of its text (which
    quotes lines of the file and their numbers) is kept.
    """
    text = str(exc).lower()
    problem, hint = "the file could not be read as CSV or Parquet", (
        "Check that it is a well-formed CSV (UTF-8, UTF-16 or Latin-1) or Parquet file."
    )
    for needle, kind, tip in _KINDS:
        if needle in text:
            problem, hint = kind, tip
            break
    where = f"column='{column}' of '{Path(path).name}'" if column else f"path='{path}'"
    if fmt is not None:
        where += f" could not be read as {fmt.upper()}"
    return data_error(f"{where}: {problem}. {hint}", problem=problem, column=column)


_HEADER_BYTES = 1 << 20
_DELIMITERS = (",", ";", "\t", "|")


def _header_line(path: Path) -> str | None:
    """The first line of an uncompressed or gzip CSV, decoded (None if not readable)."""
    import gzip

    comp = csv_compression(path)
    if comp == "zstd":
        return None
    try:
        if comp == "gzip":
            with gzip.open(path, "rb") as fh:
                raw = fh.read(_HEADER_BYTES)
            text = raw.decode("utf-8", errors="replace")
        else:
            raw = _head(path, _HEADER_BYTES)
            text = raw.decode(csv_encoding(path), errors="replace")
    except (OSError, EOFError, InvalidDataError):
        return None
    text = text.lstrip("\ufeff")
    end = min((i for i in (text.find("\n"), text.find("\r")) if i >= 0), default=-1)
    return None if end < 0 else text[:end]


def header_disagrees(path: str | os.PathLike[str], names: list[str]) -> bool:
    """Whether DuckDB's sniffed columns ``names`` disagree with the CSV's header line.

    DuckDB detects the delimiter (and so the columns) from the file's *rows*: one
    malformed row can make it read ``x,y`` as a single column. The header line alone is
    the file's layout; a different number of fields there means the sniffer was misled by
    the data, and reading the file is then a failure on the data (charged under a budget),
    not a column-not-found error on the caller's parameters (free, and data-dependent).
    Parquet files, zstd-compressed CSVs and files without a complete first line are not
    checked (False).
    """
    import csv

    p = Path(path)
    if is_parquet(p):
        return False
    line = _header_line(p)
    if line is None or not line.strip():
        return False
    counts = {d: line.count(d) for d in _DELIMITERS}
    delim = max(counts, key=lambda d: counts[d])
    if counts[delim] == 0:
        fields = [line]
    else:
        try:
            fields = next(csv.reader([line], delimiter=delim))
        except (csv.Error, StopIteration):
            return False
    return len(fields) != len(names)


def row_count(path: str | os.PathLike[str], fmt: FileKind | None = None) -> int:
    """Rows of a CSV or Parquet file (Parquet: from its metadata); errors translated."""
    import duckdb

    source = scan(path, fmt)
    try:
        with connect() as con:
            row = con.execute(f"SELECT count(*) FROM {source}").fetchone()
    except duckdb.Error as exc:
        raise translate(exc, path) from None
    return int(row[0]) if row else 0


def read_text_column(path: str | os.PathLike[str], column: str) -> NDArray[np.object_]:
    """One column of a CSV or Parquet file as text (``CAST(... AS VARCHAR)``), in file order.

    For labels that name groups (``Session.quantile_ci(by=...)``): any type reads, and the
    groups are then matched as strings. Errors are translated (one line, no data).
    """
    import duckdb
    import numpy as np

    source = scan(path)
    try:
        with connect() as con:
            sql = f"SELECT CAST({quote(column)} AS VARCHAR) FROM {source}"
            rows = con.execute(sql).fetchall()
    except duckdb.Error as exc:
        raise translate(exc, path, column=column) from None
    return np.array([r[0] for r in rows], dtype=object)
