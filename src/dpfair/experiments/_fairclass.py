"""Trials and grids of the studies of paper 003 (single server): CDP-Fair and 3 baselines.

Every repetition draws one train/test pair (simulation) or one random 70/30 split of a real
data set, fits one method on it and evaluates the expected test error and |DD| of the
(cross-fitted, randomised) classifier from ``predict_proba``, with
:func:`dpfair.fairclass.misclassification_error` and
:func:`dpfair.fairclass.demographic_disparity`. Only the public API of
:mod:`dpfair.fairclass` is used.

The α sweep reuses S1. For the two fair methods one repetition fits S1 once and runs S2
once per α of the cell's ``alphas`` (:func:`dpfair.fairclass.fit_alpha_path`): the row holds
one ``error_a…``/``abs_dd_a…`` pair per α (column suffix: α with ``.`` written ``p``, e.g.
``error_a0p05``). Each point is a separately (ε, δ)-DP classifier; the points of one row
share the S1 release (as in the paper's figures). The unconstrained methods do not depend
on α: their rows repeat the same value in every α column, so every row has the same keys.

Data sets and seeds (common random numbers)
--------------------------------------------
The data of repetition ``rep`` come from ``SeedSequence(root, spawn_key=(0xFA1C, N, rep))``
(simulation: train from its first child, test from its second) or
``SeedSequence(root, spawn_key=(0xFA1C, code(dataset), rep))`` (the 70/30 split): a function
of the run's root seed, N (or the data set) and ``rep`` only. Every method and every ε
therefore sees the same data in repetition ``rep``, and the curves are compared on the same
samples. The noise (split into halves, S1 and S2 noise) comes from the repetition's own
seed. Rows depend only on (seed, cell, rep), so tables do not depend on ``--jobs``.

Non-private methods have ``epsilon = inf`` in the grid (ε = ∞: no privacy) and NaN in
``epsilon_spent``/``delta_spent``. Private fits use δ = (N_train/2)^-2 (the paper's choice).

Real data
---------
``fairclass-adult`` reads the Adult copy bundled with dpfair, or the file named by the
environment variable ``DPFAIR_ADULT_PATH``. ``fairclass-law`` reads
``DPFAIR_LAW_SCHOOL_PATH`` or, by default, ``../shared/data/law_school_xue_yu.csv``
(relative to the working directory); the Law School data are not bundled (licence), and when
the file is absent the study raises :class:`DataUnavailableError` with the fix, and
:func:`law_school_path` returns ``None`` (tests and the report skip on it).

Registered experiments
----------------------
Each is registered by its own module of :mod:`dpfair.experiments`, named after it
(``my-study`` in ``my_study.py``).

``fairclass-simulation``
    Figure 3's design: N ∈ {5000, 7000, 9000}, ε ∈ {0.75, 1, 2, 3, 4}, α ∈ {0.05, …, 0.6},
    4000 test points, the four methods; 200 repetitions (the paper's count).
``fairclass-adult``, ``fairclass-law``
    Figures 6–7: the four methods at ε ∈ {1, 2, 4}, α ∈ {0.025, 0.05, …, 0.35}, 70/30
    splits, 200 repetitions.
``fairclass-smoke``
    Seconds: N = 2000, ε = 1, α ∈ {0.1, 0.3}, the four methods, 3 repetitions.
"""

from __future__ import annotations

import functools
import math
import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dpfair import UncertifiedFairnessWarning
from dpfair._errors import InvalidParameterError
from dpfair.experiments._fairclass_paper import ALPHA_GRID_REAL, ALPHA_GRID_SIM
from dpfair.fairclass import (
    CDPFairClassifier,
    FairPlugInClassifier,
    PlugInClassifier,
    PrivatePlugInClassifier,
    demographic_disparity,
    fit_alpha_path,
    misclassification_error,
)
from dpfair.fairclass.datasets import (
    FairnessDataset,
    load_adult,
    load_bundled_adult,
    load_law_school,
    simulate,
    train_test_split,
)

# The public names are listed once, in :mod:`dpfair.experiments.fairclass`, which
# re-exports them.

#: Methods, in display order (names as in :mod:`dpfair.experiments._fairclass_paper`).
METHODS: tuple[str, ...] = ("cdp_fair", "privacy_only", "fairness_only", "unconstrained")
#: Methods with a privacy budget (the others have ``epsilon = inf`` in the grid).
PRIVATE_METHODS: frozenset[str] = frozenset({"cdp_fair", "privacy_only"})
#: CDP-Fair with its default, certified threshold rule (issue 20): not in the registered
#: grids (the paper reproductions use the paper's target rule, ``cdp_fair``), accepted by the
#: trial functions for the report's headline figure. Adds ``certified_a…`` per α.
CERTIFIED_METHOD = "cdp_fair_certified"
_FAIR_METHODS = frozenset({"cdp_fair", "fairness_only", CERTIFIED_METHOD})
_PRIVATE = PRIVATE_METHODS | {CERTIFIED_METHOD}

#: Figure 3's sample sizes and budgets.
SIM_NS: tuple[int, ...] = (5000, 7000, 9000)
SIM_EPSILONS: tuple[float, ...] = (0.75, 1.0, 2.0, 3.0, 4.0)
#: Budgets of the real-data panels (Figures 6–7).
REAL_EPSILONS: tuple[float, ...] = (1.0, 2.0, 4.0)

ADULT_ENV = "DPFAIR_ADULT_PATH"
LAW_SCHOOL_ENV = "DPFAIR_LAW_SCHOOL_PATH"
LAW_SCHOOL_DEFAULT = Path("..") / "shared" / "data" / "law_school_xue_yu.csv"
#: Codes of the real data sets in the data-split streams.
DATASET_CODES: dict[str, int] = {"adult": 1, "law_school": 2}

_DATA_STREAM = 0xFA1C
_REF = "paper 003 (Xue & Yu, federated fairness-aware classification under DP)"


class DataUnavailableError(InvalidParameterError):
    """A data set that is not bundled (Law School) was not found."""


# --------------------------------------------------------------------------- helpers
def alphas_text(alphas: Sequence[float]) -> str:
    """The grid value of an α list: ``"0.05,0.1"`` (a scalar, so it can sit in a grid)."""
    return ",".join(f"{float(a):g}" for a in alphas)


def parse_alphas(text: str) -> tuple[float, ...]:
    """Inverse of :func:`alphas_text`; every α must lie in (0, 1)."""
    try:
        values = tuple(float(t) for t in str(text).split(",") if t.strip())
    except ValueError:
        raise InvalidParameterError(
            f"alphas={text!r}: expected comma-separated numbers, e.g. '0.05,0.1'."
        ) from None
    if not values or not all(0.0 < a < 1.0 for a in values):
        raise InvalidParameterError(f"alphas={text!r}: expected one or more α in (0, 1).")
    return values


def alpha_column(metric: str, alpha: float) -> str:
    """Output column of ``metric`` at ``alpha``: ``alpha_column("error", 0.05)`` is
    ``"error_a0p05"``."""
    return f"{metric}_a{float(alpha):g}".replace(".", "p").replace("-", "m")


def data_seed(seed: np.random.SeedSequence, key: int) -> np.random.SeedSequence:
    """The data stream of the repetition of ``seed``: ``(root, (0xFA1C, key, rep))``.

    ``key`` is N for the simulation and :data:`DATASET_CODES` for a real data set. A seed
    without a spawn key counts as repetition 0.
    """
    rep = int(seed.spawn_key[-1]) if seed.spawn_key else 0
    return np.random.SeedSequence(seed.entropy, spawn_key=(_DATA_STREAM, int(key), rep))


def law_school_path() -> Path | None:
    """The Law School file (``$DPFAIR_LAW_SCHOOL_PATH`` or the shared default), if present."""
    path = Path(os.environ.get(LAW_SCHOOL_ENV) or LAW_SCHOOL_DEFAULT).expanduser()
    return path if path.is_file() else None


@functools.lru_cache(maxsize=4)
def _load(dataset: str, path: str | None) -> FairnessDataset:
    if dataset == "adult":
        return load_bundled_adult() if path is None else load_adult(path)
    return load_law_school(str(path))


def load_dataset(dataset: str) -> FairnessDataset:
    """The real data set of a study (cached per process).

    Raises
    ------
    DataUnavailableError
        Law School not found (it is not bundled).
    """
    if dataset == "adult":
        env = os.environ.get(ADULT_ENV)
        return _load("adult", str(Path(env).expanduser()) if env else None)
    if dataset == "law_school":
        path = law_school_path()
        if path is None:
            raise DataUnavailableError(
                "dataset='law_school': the Law School data are not bundled (licence) and "
                f"were not found at {os.environ.get(LAW_SCHOOL_ENV) or LAW_SCHOOL_DEFAULT}. "
                f"Set {LAW_SCHOOL_ENV}=/path/to/law_school_xue_yu.csv."
            )
        return _load("law_school", str(path.resolve()))
    raise InvalidParameterError(
        f"dataset={dataset!r}: expected one of {', '.join(DATASET_CODES)}."
    )


def _method(params: dict[str, Any]) -> str:
    method = str(params["method"])
    if method not in (*METHODS, CERTIFIED_METHOD):
        raise InvalidParameterError(
            f"method={method!r}: expected one of {', '.join((*METHODS, CERTIFIED_METHOD))}."
        )
    eps = float(params["epsilon"])
    if method in _PRIVATE and not (math.isfinite(eps) and eps > 0):
        raise InvalidParameterError(f"epsilon={eps!r}: {method} needs a finite ε > 0.")
    if method not in _PRIVATE and eps != math.inf:
        raise InvalidParameterError(
            f"epsilon={eps!r}: {method} is not private; its grid cells have epsilon=inf."
        )
    return method


def _fit_and_score(
    method: str,
    epsilon: float,
    alphas: tuple[float, ...],
    train: FairnessDataset,
    test: FairnessDataset,
    noise: np.random.SeedSequence,
) -> dict[str, Any]:
    """Fit ``method`` on ``train`` (S1 once, S2 per α) and score it on ``test``."""
    n_train = train.n
    delta = (n_train / 2) ** -2
    common: dict[str, Any] = {"feature_bounds": train.feature_bounds, "random_state": noise}
    est: Any
    if method == "cdp_fair":
        # The paper's rule (reproduction); the certified default is studied in
        # benchmarks/fairclass_certified_study.py.
        est = CDPFairClassifier(epsilon=epsilon, delta=delta, threshold_rule="target", **common)
    elif method == CERTIFIED_METHOD:
        est = CDPFairClassifier(epsilon=epsilon, delta=delta, **common)  # certified default
    elif method == "privacy_only":
        est = PrivatePlugInClassifier(epsilon=epsilon, delta=delta, **common)
    elif method == "fairness_only":
        est = FairPlugInClassifier(**common)
    else:
        est = PlugInClassifier(**common)
    fair = method in _FAIR_METHODS
    with warnings.catch_warnings():  # the certificate's verdict is recorded per α below
        warnings.simplefilter("ignore", UncertifiedFairnessWarning)
        models = fit_alpha_path(
            est, train.X, train.y, sensitive_features=train.A, alphas=alphas if fair else None
        )
    out: dict[str, Any] = {"train_rows": n_train, "test_rows": test.n}
    scores: list[tuple[float, float]] = []
    for model in models:
        p = model.predict_proba(test.X, sensitive_features=test.A)[:, 1]
        scores.append((misclassification_error(test.y, p), abs(demographic_disparity(p, test.A))))
    if not fair:  # one classifier, whatever α: the same value in every α column
        scores = scores * len(alphas)
    for a, (err, add) in zip(alphas, scores, strict=True):
        out[alpha_column("error", a)] = err
        out[alpha_column("abs_dd", a)] = add
    if method == CERTIFIED_METHOD:
        for a, model in zip(alphas, models, strict=True):
            out[alpha_column("certified", a)] = float(bool(model.certified_))
    spent = models[0].privacy_spent_
    out["epsilon_spent"] = math.nan if spent is None else float(spent.epsilon)
    out["delta_spent"] = math.nan if spent is None else float(spent.delta)
    out["delta"] = delta if method in _PRIVATE else math.nan
    out["bandwidth"] = float(models[0].bandwidth_)
    return out


# --------------------------------------------------------------------------- run_one
def simulation_trial(params: dict[str, Any], seed: np.random.SeedSequence) -> dict[str, Any]:
    """One repetition of Figure 3's design for one method and ε, every α of the cell.

    ``params``: ``method``, ``n`` (training size N), ``epsilon`` (``inf`` for the
    non-private methods), ``n_test``, ``alphas`` (:func:`alphas_text`). The training and
    test sets are ``simulate(N, rng=train_ss)`` and ``simulate(n_test, rng=test_ss)`` with
    ``train_ss, test_ss = data_seed(seed, N).spawn(2)``; the estimator's ``random_state`` is
    ``seed`` itself.

    Outputs: ``error_a…`` and ``abs_dd_a…`` per α, ``epsilon_spent``, ``delta_spent`` (the
    fit's ``privacy_spent_``; NaN if not private), ``delta`` (the requested δ = (N/2)^-2),
    ``bandwidth``, ``train_rows``, ``test_rows``.
    """
    method = _method(params)
    n, n_test = int(params["n"]), int(params["n_test"])
    alphas = parse_alphas(params["alphas"])
    train_ss, test_ss = data_seed(seed, n).spawn(2)
    train = simulate(n, np.random.default_rng(train_ss))
    test = simulate(n_test, np.random.default_rng(test_ss))
    return _fit_and_score(method, float(params["epsilon"]), alphas, train, test, seed)


def real_trial(params: dict[str, Any], seed: np.random.SeedSequence) -> dict[str, Any]:
    """One repetition of a Figures 6–7 panel: a random split, one method, every α.

    ``params``: ``dataset`` (``"adult"`` or ``"law_school"``), ``method``, ``epsilon``,
    ``test_fraction``, ``alphas``. The split is
    ``train_test_split(data, test_fraction, rng=data_seed(seed, code))``; the estimator's
    ``random_state`` is ``seed``. Outputs as :func:`simulation_trial`.
    """
    method = _method(params)
    dataset = str(params["dataset"])
    if dataset not in DATASET_CODES:
        raise InvalidParameterError(
            f"dataset={dataset!r}: expected one of {', '.join(DATASET_CODES)}."
        )
    alphas = parse_alphas(params["alphas"])
    data = load_dataset(dataset)
    split = np.random.default_rng(data_seed(seed, DATASET_CODES[dataset]))
    train, test = train_test_split(data, float(params["test_fraction"]), split)
    return _fit_and_score(method, float(params["epsilon"]), alphas, train, test, seed)


# --------------------------------------------------------------------------- registry
def _method_cells(epsilons: Sequence[float]) -> list[tuple[str, float]]:
    return [
        (m, float(e))
        for m in METHODS
        for e in (epsilons if m in PRIVATE_METHODS else (math.inf,))
    ]


def simulation_grid(
    ns: Sequence[int] = SIM_NS,
    epsilons: Sequence[float] = SIM_EPSILONS,
    alphas: Sequence[float] = ALPHA_GRID_SIM,
    n_test: int = 4000,
) -> list[dict[str, Any]]:
    """Cells (method, n, ε) of the simulation study, every cell with the same α list."""
    return [
        {"method": m, "n": int(n), "epsilon": e, "n_test": int(n_test),
         "alphas": alphas_text(alphas)}
        for n in ns
        for m, e in _method_cells(epsilons)
    ]


def real_grid(
    dataset: str,
    epsilons: Sequence[float] = REAL_EPSILONS,
    alphas: Sequence[float] = ALPHA_GRID_REAL,
    test_fraction: float = 0.3,
) -> list[dict[str, Any]]:
    """Cells (method, ε) of a real-data study."""
    return [
        {"dataset": dataset, "method": m, "epsilon": e, "test_fraction": float(test_fraction),
         "alphas": alphas_text(alphas)}
        for m, e in _method_cells(epsilons)
    ]


def _metrics(alphas: Sequence[float]) -> tuple[str, ...]:
    return tuple(alpha_column(k, a) for a in alphas for k in ("error", "abs_dd"))
