"""Small real data sets shipped inside the package, so demos run on any machine."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from dpfair._errors import InvalidParameterError
from dpfair.data._io import read_column

__all__ = ["BUNDLED", "BundledDataset", "bundled_path", "load_bundled"]


@dataclass(frozen=True, slots=True)
class BundledDataset:
    """Description of one bundled data set.

    Attributes
    ----------
    name : str
        Key for :func:`load_bundled`.
    filename : str
        File inside ``dpfair/data/bundled/``.
    column : str
        The numeric column :func:`load_bundled` returns.
    description : str
        One line on what the values are.
    bounds : tuple of float
        A *public* range for the column, chosen a priori (never the data's min/max).
    unit : str
        Unit of the values.
    licence : str
        Licence of the file; the attribution file sits next to the data.
    attribution : str
        File with the full citation and the changes made.
    """

    name: str
    filename: str
    column: str
    description: str
    bounds: tuple[float, float]
    unit: str
    licence: str
    attribution: str


BUNDLED: dict[str, BundledDataset] = {
    "adult_age": BundledDataset(
        name="adult_age",
        filename="adult_age.csv.gz",
        column="age",
        description="Age of the 48,842 people in the UCI Adult census extract (1994)",
        bounds=(0.0, 100.0),
        unit="years",
        licence="CC BY 4.0 (Becker & Kohavi 1996, UCI Machine Learning Repository)",
        attribution="LICENSE-adult.md",
    ),
}


def _entry(name: str) -> BundledDataset:
    try:
        return BUNDLED[name]
    except (KeyError, TypeError):
        known = ", ".join(repr(k) for k in BUNDLED)
        raise InvalidParameterError(
            f"name={name!r}: no bundled data set by that name. Available: {known}."
        ) from None


def bundled_path(name: str) -> Path:
    """Path of a bundled data file.

    Parameters
    ----------
    name : str
        A key of :data:`BUNDLED` (e.g. ``"adult_age"``).

    Returns
    -------
    pathlib.Path
        The file on disk (the package is installed unzipped, as pip does).
    """
    entry = _entry(name)
    path = Path(str(resources.files("dpfair.data").joinpath("bundled", entry.filename)))
    if not path.is_file():  # pragma: no cover - only on a broken install
        raise InvalidParameterError(
            f"name={name!r}: the bundled file {entry.filename} is missing from the "
            "installation; reinstall dpfair."
        )
    return path


def load_bundled(name: str) -> NDArray[np.float64]:
    """Load the numeric column of a bundled data set.

    Parameters
    ----------
    name : str
        A key of :data:`BUNDLED`. ``"adult_age"``: ages (years) of the 48,842 records of
        UCI Adult, CC BY 4.0; see ``dpfair/data/bundled/LICENSE-adult.md``.

    Returns
    -------
    ndarray of shape (n,), dtype float64

    Examples
    --------
    >>> from dpfair.data import BUNDLED, load_bundled
    >>> age = load_bundled("adult_age")
    >>> len(age), BUNDLED["adult_age"].bounds
    (48842, (0.0, 100.0))
    """
    entry = _entry(name)
    return read_column(bundled_path(name), entry.column, format="csv")
