"""Figure 3 of paper 003 run per repetition with the paper's seeding, for the statistical tests.

The registered studies (``dpfair reproduce fairclass-simulation``, ``fairclass-adult``,
``fairclass-law``; :mod:`dpfair.experiments._fairclass`) are the reproductions of Figures
3, 6 and 7. This module keeps the grids they share (:data:`ALPHA_GRID_SIM`,
:data:`ALPHA_GRID_REAL`), the paper's disparity offset, the published code's numbers
(:data:`AUTHORS_CODE_BAR`) and :func:`figure3_study`, which runs Figure 3's CDP-Fair arm
and returns every repetition (:class:`StudyResult`) for the statistical tests of
:mod:`dpfair.fairclass`.

:meth:`StudyResult.summary` gives means with exact t-based 95% confidence intervals of the
mean and the 2.5%/97.5% quantiles over repetitions, and the share of repetitions with |DD|
above α and above α + the paper's offset N^{-1/2} + (Nε)^{-1} (§4.2). The α sweep reuses
S1 per repetition (same η̃, π̃; fresh S2 noise per α): every point on a curve is a
separately (ε, δ)-DP classifier, as in the paper. Data differ between repetitions but are
shared across ε and α within one (common random numbers).
"""

from __future__ import annotations

import csv
import json
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import stats

from dpfair._errors import InvalidParameterError
from dpfair.fairclass import (
    CDPFairClassifier,
    FairPlugInClassifier,
    PlugInClassifier,
    PrivatePlugInClassifier,
)
from dpfair.fairclass.datasets import (
    FairnessDataset,
    simulate,
    simulation_oracle,
)

__all__ = [
    "ALPHA_GRID_REAL",
    "ALPHA_GRID_SIM",
    "AUTHORS_CODE_BAR",
    "StudyResult",
    "figure3_study",
    "paper_offset",
]

#: The four plug-in estimators compared in the figures (one base class in the library).
_Model = CDPFairClassifier | FairPlugInClassifier | PlugInClassifier | PrivatePlugInClassifier

#: α grid of the simulation figure (Figure 3): 0.05, 0.10, …, 0.60.
ALPHA_GRID_SIM: tuple[float, ...] = tuple(round(0.05 * k, 2) for k in range(1, 13))
#: α grid of the real-data figures (Figures 6–7): 0.025, 0.05, …, 0.35 (paper §5.2).
ALPHA_GRID_REAL: tuple[float, ...] = tuple(round(0.025 * k, 3) for k in range(1, 15))

#: The authors' published code, run on this project's machine at N = 5000 (issue 4):
#: mean test error, mean |DD| and repetitions above α out of 10.
AUTHORS_CODE_BAR: dict[float, dict[str, float]] = {
    1.0: {"alpha": 0.05, "error": 0.274, "abs_dd": 0.092, "above_alpha": 9 / 10},
    4.0: {"alpha": 0.05, "error": 0.218, "abs_dd": 0.059, "above_alpha": 5 / 10},
}

Progress = Callable[[int, int, str], None]

METHOD_LABELS = {
    "cdp_fair": "CDP-Fair",
    "privacy_only": "privacy only",
    "fairness_only": "fairness only (Zeng et al.)",
    "unconstrained": "unconstrained plug-in",
}


def paper_offset(n: int, epsilon: float) -> float:
    """The disparity offset of paper §4.2 with unit constants: N^{-1/2} + (Nε)^{-1}."""
    return 1.0 / math.sqrt(n) + 1.0 / (n * epsilon)


@dataclass
class StudyResult:
    """Long-format results of one study.

    Attributes
    ----------
    name : str
    rows : list of dict
        Keys: method, N, epsilon (NaN if not private), alpha (NaN if not fair), rep,
        error, dd, abs_dd.
    meta : dict
        Settings, oracle numbers and notes.
    """

    name: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> list[dict[str, Any]]:
        """Per (method, N, ε, α): means, exact t 95% CIs, quantiles and exceedance shares."""
        groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
        for r in self.rows:
            # NaN ≠ NaN: key on a normalised value so that unpickled NaNs group together.
            key = (r["method"], int(r["N"]), _key(r["epsilon"]), _key(r["alpha"]))
            groups.setdefault(key, []).append(r)
        out = []
        for (method, n, eps_k, alpha_k), rs in sorted(groups.items(), key=_sort_key):
            eps = math.nan if eps_k is None else eps_k
            alpha = math.nan if alpha_k is None else alpha_k
            err = np.array([r["error"] for r in rs])
            add = np.array([r["abs_dd"] for r in rs])
            row: dict[str, Any] = {
                "method": method,
                "N": n,
                "epsilon": eps,
                "alpha": alpha,
                "reps": len(rs),
            }
            for label, v in (("error", err), ("abs_dd", add)):
                lo, hi = _t_interval(v)
                row[f"{label}_mean"] = float(v.mean())
                row[f"{label}_ci_low"] = lo
                row[f"{label}_ci_high"] = hi
                row[f"{label}_q025"] = float(np.quantile(v, 0.025))
                row[f"{label}_q975"] = float(np.quantile(v, 0.975))
            if not math.isnan(alpha):
                row["share_above_alpha"] = float(np.mean(add > alpha))
                if not math.isnan(eps):
                    off = paper_offset(int(n), float(eps))
                    row["paper_offset"] = off
                    row["share_above_alpha_plus_offset"] = float(np.mean(add > alpha + off))
            out.append(row)
        return out

    @classmethod
    def read(cls, out_dir: str | os.PathLike[str], name: str) -> StudyResult:
        """Load a study written by :meth:`write` (runs CSV and JSON metadata)."""
        folder = Path(out_dir)
        with (folder / f"{name}_runs.csv").open(newline="") as fh:
            rows: list[dict[str, Any]] = []
            for r in csv.DictReader(fh):
                rows.append(
                    {
                        "method": r["method"],
                        "N": int(r["N"]),
                        "epsilon": float(r["epsilon"]),
                        "alpha": float(r["alpha"]),
                        "rep": int(r["rep"]),
                        "error": float(r["error"]),
                        "dd": float(r["dd"]),
                        "abs_dd": float(r["abs_dd"]),
                    }
                )
        meta = json.loads((folder / f"{name}.json").read_text()).get("meta", {})
        return cls(name, rows, meta)

    def write(self, out_dir: str | os.PathLike[str]) -> dict[str, Path]:
        """Write ``<name>_runs.csv``, ``<name>_summary.csv`` and ``<name>.json``."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        files = {
            "runs": out / f"{self.name}_runs.csv",
            "summary": out / f"{self.name}_summary.csv",
            "json": out / f"{self.name}.json",
        }
        _write_csv(files["runs"], self.rows)
        summary = self.summary()
        _write_csv(files["summary"], summary)
        with files["json"].open("w") as fh:
            json.dump(
                {"name": self.name, "meta": self.meta, "summary": summary},
                fh,
                indent=1,
                default=_json_default,
            )
        return files


def _key(value: Any) -> float | None:
    v = float(value)
    return None if math.isnan(v) else v


def _sort_key(item: tuple[tuple[Any, ...], Any]) -> tuple[Any, ...]:
    method, n, eps, alpha = item[0]
    order = list(METHOD_LABELS).index(method) if method in METHOD_LABELS else 99
    return (order, n, -1.0 if eps is None else eps, -1.0 if alpha is None else alpha)


def _t_interval(v: NDArray[np.float64]) -> tuple[float, float]:
    m = float(v.mean())
    if v.size < 2:
        return m, m
    half = float(stats.t.ppf(0.975, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size))
    return m - half, m + half


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if hasattr(value, "to_dict"):
        return value.to_dict()
    return str(value)


def _write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    keys: list[str] = []
    for r in rows:
        keys.extend(k for k in r if k not in keys)
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=keys)
        writer.writeheader()
        for r in rows:
            writer.writerow({k: r.get(k, "") for k in keys})


def _evaluate(model: _Model, test: FairnessDataset) -> tuple[float, float]:
    p = model.predict_proba(test.X, sensitive_features=test.A)[:, 1]
    y = test.y.astype(np.float64)
    err = float(np.mean(p * (1.0 - y) + (1.0 - p) * y))
    dd = float(p[test.A == 1].mean() - p[test.A == 0].mean())
    return err, dd


def _path(
    est: _Model, train: FairnessDataset, alphas: Sequence[float] | None, margin: float = 0.0
) -> list[_Model]:
    """Fit S1 once and S2 per α; one fitted estimator per α (or one, without α)."""
    entries: list[tuple[float, float] | None] = (
        [None] if alphas is None else [(float(a), margin) for a in alphas]
    )
    states = est._fit_path(train.X, train.y, train.A, entries)
    models = []
    for st in states:
        m = type(est)(**est.get_params())
        m.n_features_in_ = est.n_features_in_
        m.__dict__.update(st)
        models.append(m)
    return models


def _row(
    method: str, n: int, eps: float, alpha: float, rep: int, err: float, dd: float
) -> dict[str, Any]:
    return {
        "method": method,
        "N": n,
        "epsilon": eps,
        "alpha": alpha,
        "rep": rep,
        "error": err,
        "dd": dd,
        "abs_dd": abs(dd),
    }


def _one_sim_rep(
    n: int,
    rep: int,
    eps_list: Sequence[float],
    alphas: Sequence[float],
    n_test: int,
    seed: int,
    cross_fit: bool,
    margin_offset: bool,
) -> list[dict[str, Any]]:
    data_ss = np.random.SeedSequence([seed, n, rep])
    train = simulate(n, np.random.default_rng(data_ss))
    test = simulate(n_test, np.random.default_rng(data_ss.spawn(1)[0]))
    rows = []
    for k, eps in enumerate(eps_list):
        margin = paper_offset(n, eps) if margin_offset else 0.0
        usable = [a for a in alphas if a > margin]
        est = CDPFairClassifier(
            epsilon=eps,
            delta=(n / 2) ** -2,
            alpha=0.5,
            threshold_rule="target",  # the paper's rule (reproduction)
            feature_bounds=train.feature_bounds,
            cross_fit=cross_fit,
            random_state=np.random.SeedSequence([seed, n, rep, 1000 + k]),
        )
        for a, model in zip(usable, _path(est, train, usable, margin), strict=True):
            err, dd = _evaluate(model, test)
            rows.append(_row("cdp_fair", n, float(eps), float(a), rep, err, dd))
    return rows


def _run_reps(
    tasks: list[tuple[Any, ...]],
    func: Callable[..., list[dict[str, Any]]],
    n_jobs: int,
    progress: Progress | None,
    label: str,
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    total = len(tasks)
    if n_jobs == 1:
        for i, t in enumerate(tasks):
            rows.extend(func(*t))
            if progress is not None:
                progress(i + 1, total, label)
        return rows
    from joblib import Parallel, delayed

    done = 0
    for chunk in Parallel(n_jobs=n_jobs, return_as="generator")(delayed(func)(*t) for t in tasks):
        rows.extend(chunk)
        done += 1
        if progress is not None:
            progress(done, total, label)
    return rows


def figure3_study(
    *,
    n_list: Sequence[int] = (5000, 7000, 9000),
    eps_list: Sequence[float] = (0.75, 1.0, 2.0, 3.0, 4.0),
    alphas: Sequence[float] = ALPHA_GRID_SIM,
    reps: int = 200,
    n_test: int = 4000,
    seed: int = 0,
    cross_fit: bool = True,
    alpha_margin_offset: bool = False,
    n_jobs: int = 1,
    progress: Progress | None = None,
    oracle_n: int = 2_000_000,
) -> StudyResult:
    """Figure 3: CDP-Fair on the simulation for N × ε × α, ``reps`` repetitions.

    δ = (N/2)^-2 and a fresh test set of ``n_test`` points per repetition, as in the paper.
    ``alpha_margin_offset=True`` runs CDP-Fair with ``alpha_margin`` = the paper's offset
    (targets α − offset, to hold the cap on the population disparity).
    """
    if reps < 1:
        raise InvalidParameterError(f"reps={reps!r}: must be >= 1.")
    tasks = [
        (int(n), rep, tuple(eps_list), tuple(alphas), n_test, seed, cross_fit, alpha_margin_offset)
        for n in n_list
        for rep in range(reps)
    ]
    rows = _run_reps(tasks, _one_sim_rep, n_jobs, progress, "figure 3")
    oracle = simulation_oracle(tuple(alphas), n=oracle_n)
    name = "figure3" + ("_margin" if alpha_margin_offset else "")
    return StudyResult(
        name,
        rows,
        {
            "study": "Figure 3 (CDP-Fair, simulation design of ALGORITHMS.md C)",
            "n_list": list(n_list),
            "eps_list": list(eps_list),
            "alphas": list(alphas),
            "reps": reps,
            "n_test": n_test,
            "seed": seed,
            "cross_fit": cross_fit,
            "alpha_margin": "paper offset" if alpha_margin_offset else 0.0,
            "delta": "(N/2)^-2",
            "oracle": oracle.to_dict(),
            "authors_code_bar": {str(k): v for k, v in AUTHORS_CODE_BAR.items()},
        },
    )
