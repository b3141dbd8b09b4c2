"""Write example data files: the bundled public data sets, whole or split in two.

These are the files the README's command-line examples read (``dpfair datasets export``).
Rows are copied verbatim (no re-formatting of numbers); a split is a seeded random
permutation of the rows, so ``--seed`` reproduces it. Every file is written atomically.
"""

from __future__ import annotations

import gzip
import os
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from dpfair._atomic import atomic_open
from dpfair._errors import InvalidParameterError

__all__ = ["EXPORTABLE", "ExportableDataset", "export_dataset", "write_csv"]


@dataclass(frozen=True, slots=True)
class ExportableDataset:
    """A public data set shipped inside the package.

    Attributes
    ----------
    name : str
        Name on the command line.
    resource : str
        Path of the gzipped CSV inside the ``dpfair`` package.
    description : str
        What the rows are, with the licence.
    """

    name: str
    resource: str
    description: str


EXPORTABLE: dict[str, ExportableDataset] = {
    "adult": ExportableDataset(
        "adult",
        "data/bundled/adult_xue_yu.csv.gz",
        "UCI Adult (48,842 rows): Age, Workclass, Education-Num, Sensitive (1 = male), Label "
        "(1 = income > 50K). CC BY 4.0, Becker & Kohavi (1996).",
    ),
    "adult_age": ExportableDataset(
        "adult_age",
        "data/bundled/adult_age.csv.gz",
        "Ages of the 48,842 people of UCI Adult (column 'age'). CC BY 4.0.",
    ),
}


def _lines(ds: ExportableDataset) -> tuple[bytes, list[bytes]]:
    ref = resources.files("dpfair").joinpath(ds.resource)
    with ref.open("rb") as raw, gzip.open(raw, "rb") as fh:
        text = fh.read()
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith(b"\n"):
        lines[-1] += b"\n"
    return lines[0], lines[1:]


def _write_lines(path: Path, header: bytes, rows: Sequence[bytes]) -> Path:
    with atomic_open(path) as fh:
        fh.write(header)
        fh.writelines(rows)
    return path


def export_dataset(
    name: str,
    out_dir: str | os.PathLike[str],
    *,
    split: float | None = None,
    seed: int = 0,
) -> dict[str, Path]:
    """Write a bundled data set as CSV, whole or split into a training and a test file.

    Parameters
    ----------
    name : str
        A key of :data:`EXPORTABLE` (``"adult"``, ``"adult_age"``).
    out_dir : str or path-like
        Directory to write into (created if missing).
    split : float in (0, 1), optional
        Fraction of rows for ``train.csv``; the rest go to ``test.csv``. ``None`` writes all
        rows to ``<name>.csv``.
    seed : int, default=0
        Seed of the random permutation that makes the split.

    Returns
    -------
    dict of str to Path
        ``{"train": ..., "test": ...}`` or ``{name: ...}``.
    """
    if name not in EXPORTABLE:
        raise InvalidParameterError(
            f"name={name!r}: unknown data set; choose one of {', '.join(sorted(EXPORTABLE))}."
        )
    if split is not None and not (isinstance(split, (int, float)) and 0.0 < split < 1.0):
        raise InvalidParameterError(
            f"split={split!r}: expected the training fraction in (0, 1), e.g. 0.7."
        )
    out = Path(out_dir).expanduser()
    out.mkdir(parents=True, exist_ok=True)
    header, rows = _lines(EXPORTABLE[name])
    if split is None:
        return {name: _write_lines(out / f"{name}.csv", header, rows)}
    order = np.random.default_rng(seed).permutation(len(rows))
    n_train = round(split * len(rows))
    if not 0 < n_train < len(rows):
        raise InvalidParameterError(f"split={split!r}: leaves one of the two files empty.")
    train = [rows[i] for i in np.sort(order[:n_train])]
    test = [rows[i] for i in np.sort(order[n_train:])]
    return {
        "train": _write_lines(out / "train.csv", header, train),
        "test": _write_lines(out / "test.csv", header, test),
    }


def write_csv(
    path: str | os.PathLike[str], columns: Sequence[str], values: NDArray[np.float64]
) -> Path:
    """Write a numeric table as CSV (header + rows, shortest exact decimal), atomically.

    Parameters
    ----------
    path : str or path-like
        Destination file.
    columns : sequence of str
        Header names, one per column of ``values``.
    values : ndarray of shape (n, len(columns))
        The rows. Integral values are written without a decimal point.

    Returns
    -------
    pathlib.Path
        ``path``.
    """
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[1] != len(columns):
        raise InvalidParameterError(
            f"values: expected shape (n, {len(columns)}), got {arr.shape}."
        )
    text = ",".join(columns) + "\n" + "".join(
        ",".join(repr(int(v)) if v.is_integer() else repr(v) for v in row) + "\n"
        for row in arr.tolist()
    )
    with atomic_open(path) as fh:
        fh.write(text.encode("utf-8"))
    return Path(path)
