"""Paper 003's data: the simulation design, Adult, Law School, a bundled Adult copy.

The data layer's home for fair classification's designs and loaders (no classifier here;
:mod:`dpfair.fairclass.datasets` re-exports them beside the simulation's oracle, which
needs the fair threshold).


* :func:`simulate` — the simulation design of Xue & Yu (paper 003, §5.1.1) as restated in
  ALGORITHMS.md §C (the printed formula has a typo; this design reproduces the paper's oracle
  numbers); :func:`simulation_eta` is its true regression function
  (:func:`dpfair.fairclass.datasets.simulation_oracle` computes the oracle risks from it).
* :func:`load_adult`, :func:`load_law_school` — the two real data sets of §5.2 from a path
  (the copies prepared for the paper), with *public* feature bounds documented below.
* :func:`load_bundled_adult` — the same Adult data shipped inside the package
  (``data/bundled/adult_xue_yu.csv.gz``, CC BY 4.0, attribution in
  ``data/bundled/LICENSE-adult-fairclass.md``), so that demos and the Adult reproduction run on any
  machine.

Every loader returns a :class:`FairnessDataset`: features X, sensitive attribute A, label y,
names, and the public box to pass as ``feature_bounds``.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfair._errors import InvalidParameterError
from dpfair._rng import RandomLike, as_generator
from dpfair._validation import check_positive_int
from dpfair.data.fairclass_sql import read_columns

__all__ = [
    "ADULT_BOUNDS",
    "LAW_SCHOOL_BOUNDS",
    "SIMULATION_BOUNDS",
    "SIMULATION_PAPER_ORACLE",
    "FairnessDataset",
    "load_adult",
    "load_bundled_adult",
    "load_law_school",
    "simulate",
    "simulation_eta",
    "train_test_split",
]

#: The simulation's feature box (both features live in [0, 1]).
SIMULATION_BOUNDS: tuple[tuple[float, float], ...] = ((0.0, 1.0), (0.0, 1.0))

#: Oracle numbers stated in ALGORITHMS.md §C (paper §5.1.1): Bayes risk, DD of the
#: unconstrained Bayes classifier, and the fair-Bayes risk by α.
SIMULATION_PAPER_ORACLE: dict[str, Any] = {
    "bayes_risk": 0.106,
    "bayes_dd": -0.559,
    "fair_risk": {0.05: 0.212, 0.10: 0.198, 0.20: 0.172, 0.30: 0.148, 0.40: 0.126},
}

#: Public feature box for Adult (age, workclass code, education-num), from the coding of
#: the data, never from its min/max: the Adult extraction kept people older than 16 and the
#: census public-use files top-code age at 90; workclass is a label code 0–8 (nine
#: categories, alphabetical); education-num codes 16 education levels as 1–16.
ADULT_BOUNDS: tuple[tuple[float, float], ...] = ((17.0, 90.0), (0.0, 8.0), (1.0, 16.0))

#: Public feature box for Law School (LSAT, GPA, resident): the LSAT score scale is 120–180
#: (since 1991); undergraduate GPA as reported by LSAC's Credential Assembly Service is on a
#: 0–4.33 scale (A+ = 4.33; the file has values up to 4.23, so a 0–4 box would be wrong);
#: resident is 0/1.
LAW_SCHOOL_BOUNDS: tuple[tuple[float, float], ...] = ((120.0, 180.0), (0.0, 4.33), (0.0, 1.0))

_ADULT_COLUMNS = ("Age", "Workclass", "Education-Num")
_LAW_COLUMNS = ("LSAT", "GPA", "resident")
_ADULT_DESCRIPTION = "UCI Adult (1994 census): income > 50K; A = sex (1 = male)"
_LAW_DESCRIPTION = "Law School (LSAC): admission label; A = race (1 = white)"
_ETA_CLIP = 1e-3


@dataclass(frozen=True, eq=False)
class FairnessDataset:
    """Features, sensitive attribute and label, with the public feature box.

    Attributes
    ----------
    X : ndarray of shape (n, d)
    A : ndarray of shape (n,), values 0/1
    y : ndarray of shape (n,), values 0/1
    feature_names : tuple of str
    feature_bounds : tuple of (lo, hi)
        Public bounds to pass as ``feature_bounds`` (documented per loader).
    name : str
    description : str
    """

    X: NDArray[np.float64]
    A: NDArray[np.int8]
    y: NDArray[np.int8]
    feature_names: tuple[str, ...]
    feature_bounds: tuple[tuple[float, float], ...]
    name: str = ""
    description: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def n(self) -> int:
        """Number of rows."""
        return int(self.X.shape[0])

    def subset(self, rows: NDArray[np.intp]) -> FairnessDataset:
        """The same data set restricted to ``rows``."""
        return FairnessDataset(
            self.X[rows],
            self.A[rows],
            self.y[rows],
            self.feature_names,
            self.feature_bounds,
            self.name,
            self.description,
            dict(self.extra),
        )


# --------------------------------------------------------------------------- simulation
def simulation_eta(X: NDArray[np.float64], A: NDArray[np.integer[Any]]) -> NDArray[np.float64]:
    """True η_a(x) = 1/2 + arctan{12(x1 + x2 − 1) − 3.6(2a − 1)}/π, clipped to [1e-3, 1 − 1e-3].

    Parameters
    ----------
    X : array of shape (n, 2)
    A : array of shape (n,), 0/1
    """
    x = np.asarray(X, dtype=np.float64)
    a = np.asarray(A, dtype=np.float64)
    eta = 0.5 + np.arctan(12.0 * (x[:, 0] + x[:, 1] - 1.0) - 3.6 * (2.0 * a - 1.0)) / math.pi
    return np.clip(eta, _ETA_CLIP, 1.0 - _ETA_CLIP)


def simulate(n: int, rng: RandomLike = None, *, p_a: float = 0.3) -> FairnessDataset:
    """Draw n records from the paper's simulation design (ALGORITHMS.md §C).

    A ~ Bernoulli(0.3); X1 | A=1 ~ Beta(4, 2), X1 | A=0 ~ Beta(4.5, 2); X2 ~ U(0, 1);
    Y | X, A ~ Bernoulli(η_A(X)) with :func:`simulation_eta`. Feature box [0, 1]².

    Parameters
    ----------
    n : int
    rng : seed or Generator
    p_a : float, default=0.3
        P(A = 1).
    """
    m = check_positive_int("n", n)
    gen = as_generator(rng)
    A = (gen.random(m) < p_a).astype(np.int8)
    x1 = np.where(A == 1, gen.beta(4.0, 2.0, m), gen.beta(4.5, 2.0, m))
    x2 = gen.random(m)
    X = np.column_stack((x1, x2))
    y = (gen.random(m) < simulation_eta(X, A)).astype(np.int8)
    return FairnessDataset(
        X,
        A,
        y,
        ("x1", "x2"),
        SIMULATION_BOUNDS,
        "simulation",
        "Xue & Yu (2025) §5.1.1 design (ALGORITHMS.md §C)",
    )


# --------------------------------------------------------------------------- real data
def _read_dataset(
    path: str | os.PathLike[str],
    features: tuple[str, ...],
    bounds: tuple[tuple[float, float], ...],
    name: str,
    description: str,
) -> FairnessDataset:
    """Read ``features`` and the 0/1 columns Sensitive and Label of the file ``path``."""
    cols = read_columns(path, (*features, "Sensitive", "Label"))
    source = str(path)
    X = np.column_stack([cols[c] for c in features])
    A = cols["Sensitive"]
    y = cols["Label"]
    for label, arr in (("Sensitive", A), ("Label", y)):
        if not np.all((arr == 0) | (arr == 1)):
            raise InvalidParameterError(f"{source}: column {label!r} must be 0/1.")
    return FairnessDataset(
        X,
        A.astype(np.int8),
        y.astype(np.int8),
        features,
        bounds,
        name,
        description,
        {"source": source},
    )


def load_adult(path: str | os.PathLike[str]) -> FairnessDataset:
    """UCI Adult as prepared for the paper (``adult_xue_yu.csv``; CSV or Parquet).

    Columns: Age, Workclass (label code 0–8), Education-Num, Sensitive (1 = male), Label
    (1 = income > 50K). Features: age, workclass, education-num (§5.2.1); A = sex.
    Public box :data:`ADULT_BOUNDS`. Source data: Becker & Kohavi (1996), UCI Machine
    Learning Repository, CC BY 4.0.
    """
    return _read_dataset(path, _ADULT_COLUMNS, ADULT_BOUNDS, "adult", _ADULT_DESCRIPTION)


def load_law_school(path: str | os.PathLike[str]) -> FairnessDataset:
    """Law School (LSAC bar passage study subset prepared for the paper).

    Columns: LSAT, GPA, resident, Sensitive (1 = white), Label. Public box
    :data:`LAW_SCHOOL_BOUNDS`. Source: Wightman (1998), LSAC National Longitudinal Bar
    Passage Study; the 40,000-row subset of the paper's code.
    """
    return _read_dataset(path, _LAW_COLUMNS, LAW_SCHOOL_BOUNDS, "law_school", _LAW_DESCRIPTION)


def bundled_adult_path() -> Path:
    """Path of the Adult copy shipped inside the package."""
    ref = resources.files("dpfair.data").joinpath("bundled/adult_xue_yu.csv.gz")
    return Path(str(ref))


def load_bundled_adult() -> FairnessDataset:
    """The full Adult data (48,842 rows, 5 columns) shipped with dpfair.

    Identical to :func:`load_adult` on the shared copy; licence CC BY 4.0 (UCI), see
    ``dpfair/data/bundled/LICENSE-adult-fairclass.md``.
    """
    data = load_adult(bundled_adult_path())
    return FairnessDataset(
        data.X,
        data.A,
        data.y,
        data.feature_names,
        data.feature_bounds,
        "adult",
        data.description + " [bundled copy]",
        {"source": "bundled", "licence": "CC BY 4.0"},
    )


def train_test_split(
    data: FairnessDataset, test_fraction: float, rng: RandomLike = None
) -> tuple[FairnessDataset, FairnessDataset]:
    """A random split of the rows (the paper uses 70/30 on the real data)."""
    if not 0.0 < float(test_fraction) < 1.0:
        raise InvalidParameterError(f"test_fraction={test_fraction!r}: must lie in (0, 1).")
    gen = as_generator(rng)
    perm = gen.permutation(data.n)
    n_test = round(data.n * float(test_fraction))
    return data.subset(np.sort(perm[n_test:])), data.subset(np.sort(perm[:n_test]))
