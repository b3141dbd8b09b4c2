"""Reproductions of the paper's Figure 3 (simulation) and Figures 6–7 (Adult, Law School).

Each study returns a :class:`StudyResult`: one row per (method, N, ε, α, repetition) with
the expected test error and the signed test disparity of the (cross-fitted, randomised)
classifier, computed from ``predict_proba`` — the paper draws the randomised labels once
instead, which has the same mean and a larger variance. :meth:`StudyResult.summary` gives
means with exact t-based 95% confidence intervals of the mean (the "95% bands") and the
2.5%/97.5% quantiles over repetitions, and the share of repetitions with |DD| above α and
above α + the paper's offset N^{-1/2} + (Nε)^{-1} (§4.2).

The α sweep reuses S1 per repetition (same η̃, π̃; fresh S2 noise per α): every point on a
curve is a separately (ε, δ)-DP classifier, as in the paper. Data differ between
repetitions but are shared across ε and α within one (common random numbers), so curves
are compared on the same samples.
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
from dpfair.fairclass._estimators import (
    CDPFairClassifier,
    FairPlugInClassifier,
    PlugInClassifier,
    PrivatePlugInClassifier,
    _PlugInBase,
)
from dpfair.fairclass.datasets import (
    FairnessDataset,
    load_bundled_adult,
    load_law_school,
    simulate,
    simulation_oracle,
    train_test_split,
)

__all__ = [
    "ALPHA_GRID_REAL",
    "ALPHA_GRID_SIM",
    "AUTHORS_CODE_BAR",
    "StudyResult",
    "figure3_study",
    "plot_study",
    "real_data_study",
    "reproduce",
]

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


def _evaluate(model: _PlugInBase, test: FairnessDataset) -> tuple[float, float]:
    p = model.predict_proba(test.X, sensitive_features=test.A)[:, 1]
    y = test.y.astype(np.float64)
    err = float(np.mean(p * (1.0 - y) + (1.0 - p) * y))
    dd = float(p[test.A == 1].mean() - p[test.A == 0].mean())
    return err, dd


def _path(
    est: _PlugInBase, train: FairnessDataset, alphas: Sequence[float] | None, margin: float = 0.0
) -> list[_PlugInBase]:
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


def _one_real_rep(
    data: FairnessDataset,
    rep: int,
    eps_list: Sequence[float],
    alphas: Sequence[float],
    test_fraction: float,
    seed: int,
    cross_fit: bool,
) -> list[dict[str, Any]]:
    ss = np.random.SeedSequence([seed, rep])
    kids = ss.spawn(3 + 2 * len(eps_list))
    train, test = train_test_split(data, test_fraction, np.random.default_rng(kids[0]))
    n = train.n
    delta = (n / 2) ** -2
    bounds = data.feature_bounds
    rows = []
    model: _PlugInBase = PlugInClassifier(
        feature_bounds=bounds, cross_fit=cross_fit, random_state=kids[1]
    ).fit(train.X, train.y, sensitive_features=train.A)
    err, dd = _evaluate(model, test)
    rows.append(_row("unconstrained", n, math.nan, math.nan, rep, err, dd))
    fair = FairPlugInClassifier(
        alpha=0.5, feature_bounds=bounds, cross_fit=cross_fit, random_state=kids[2]
    )
    for a, m in zip(alphas, _path(fair, train, alphas), strict=True):
        err, dd = _evaluate(m, test)
        rows.append(_row("fairness_only", n, math.nan, float(a), rep, err, dd))
    for k, eps in enumerate(eps_list):
        model = PrivatePlugInClassifier(
            epsilon=eps,
            delta=delta,
            feature_bounds=bounds,
            cross_fit=cross_fit,
            random_state=kids[3 + 2 * k],
        ).fit(train.X, train.y, sensitive_features=train.A)
        err, dd = _evaluate(model, test)
        rows.append(_row("privacy_only", n, float(eps), math.nan, rep, err, dd))
        est = CDPFairClassifier(
            epsilon=eps,
            delta=delta,
            alpha=0.5,
            threshold_rule="target",  # the paper's rule (reproduction)
            feature_bounds=bounds,
            cross_fit=cross_fit,
            random_state=kids[4 + 2 * k],
        )
        for a, m in zip(alphas, _path(est, train, alphas), strict=True):
            err, dd = _evaluate(m, test)
            rows.append(_row("cdp_fair", n, float(eps), float(a), rep, err, dd))
    return rows


def real_data_study(
    data: FairnessDataset,
    *,
    eps_list: Sequence[float] = (1.0, 2.0, 4.0),
    alphas: Sequence[float] = ALPHA_GRID_REAL,
    reps: int = 200,
    test_fraction: float = 0.3,
    seed: int = 0,
    cross_fit: bool = True,
    n_jobs: int = 1,
    progress: Progress | None = None,
) -> StudyResult:
    """Figures 6–7: CDP-Fair and the three baselines on a real data set.

    70/30 random train/test split per repetition (paper §5.2), δ = (N_train/2)^-2. The
    unconstrained and privacy-only baselines, like CDP-Fair, fit their estimates on half of
    the training rows per fit (paper §5.2: "all unfair classifiers are trained using only
    half of the available training samples").
    """
    if reps < 1:
        raise InvalidParameterError(f"reps={reps!r}: must be >= 1.")
    tasks = [
        (data, rep, tuple(eps_list), tuple(alphas), test_fraction, seed, cross_fit)
        for rep in range(reps)
    ]
    rows = _run_reps(tasks, _one_real_rep, n_jobs, progress, data.name)
    return StudyResult(
        data.name,
        rows,
        {
            "study": f"Figures 6-7 panel: {data.description}",
            "n": data.n,
            "features": list(data.feature_names),
            "feature_bounds": [list(b) for b in data.feature_bounds],
            "eps_list": list(eps_list),
            "alphas": list(alphas),
            "reps": reps,
            "test_fraction": test_fraction,
            "seed": seed,
            "cross_fit": cross_fit,
            "delta": "(N_train/2)^-2",
        },
    )


# --------------------------------------------------------------------------- figures
def plot_study(result: StudyResult, path: str | os.PathLike[str]) -> Path:
    """Draw the study's figure (error and |DD| against α with 95% bands) as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary = result.summary()
    ns = sorted({r["N"] for r in summary if r["method"] == "cdp_fair"})
    is_sim = result.name.startswith("figure3")
    panels = ns if is_sim else [None]
    width = 4.2 * len(panels) if is_sim else 8.0
    fig, axes = plt.subplots(2, len(panels), figsize=(width, 7.5), squeeze=False)
    eps_values = sorted(
        {
            r["epsilon"]
            for r in summary
            if r["method"] == "cdp_fair" and not math.isnan(r["epsilon"])
        }
    )
    cmap = plt.get_cmap("viridis")
    colours = {e: cmap(i / max(len(eps_values) - 1, 1)) for i, e in enumerate(eps_values)}
    oracle = result.meta.get("oracle", {}).get("fair_risk", {})
    for col, n in enumerate(panels):
        ax_err, ax_dd = axes[0, col], axes[1, col]
        sub = [r for r in summary if n is None or r["N"] == n]
        xs_all: list[float] = []
        for eps in eps_values:
            rs = sorted(
                (r for r in sub if r["method"] == "cdp_fair" and r["epsilon"] == eps),
                key=lambda r: r["alpha"],
            )
            xs = [r["alpha"] for r in rs]
            xs_all.extend(xs)
            for ax, key in ((ax_err, "error"), (ax_dd, "abs_dd")):
                ax.plot(
                    xs,
                    [r[f"{key}_mean"] for r in rs],
                    color=colours[eps],
                    label=f"CDP-Fair ε={eps:g}",
                )
                ax.fill_between(
                    xs,
                    [r[f"{key}_ci_low"] for r in rs],
                    [r[f"{key}_ci_high"] for r in rs],
                    color=colours[eps],
                    alpha=0.25,
                )
        fair = sorted((r for r in sub if r["method"] == "fairness_only"), key=lambda r: r["alpha"])
        if fair:
            xs = [r["alpha"] for r in fair]
            for ax, key in ((ax_err, "error"), (ax_dd, "abs_dd")):
                ax.plot(
                    xs,
                    [r[f"{key}_mean"] for r in fair],
                    color="black",
                    ls="--",
                    label=METHOD_LABELS["fairness_only"],
                )
                ax.fill_between(
                    xs,
                    [r[f"{key}_ci_low"] for r in fair],
                    [r[f"{key}_ci_high"] for r in fair],
                    color="black",
                    alpha=0.15,
                )
        for method, style in (("unconstrained", ":"), ("privacy_only", "-.")):
            for r in (r for r in sub if r["method"] == method):
                lab = METHOD_LABELS[method] + (
                    f" ε={r['epsilon']:g}" if not math.isnan(r["epsilon"]) else ""
                )
                colour = colours.get(r["epsilon"], "grey")
                ax_err.axhline(r["error_mean"], color=colour, ls=style, lw=1, label=lab)
                ax_dd.axhline(r["abs_dd_mean"], color=colour, ls=style, lw=1, label=lab)
        if xs_all:
            lo, hi = min(xs_all), max(xs_all)
            ax_dd.plot([lo, hi], [lo, hi], color="grey", ls="--", lw=1, label="y = α")
        if oracle:
            keys = sorted(float(k) for k in oracle)
            ax_err.plot(
                keys,
                [oracle[str(k)] if str(k) in oracle else oracle[k] for k in keys],
                color="grey",
                ls="--",
                lw=1.5,
                label="oracle fair-Bayes risk",
            )
        ax_err.set_title(f"N = {n}" if n is not None else f"{result.name} (70/30 splits)")
        ax_err.set_ylabel("misclassification error")
        ax_dd.set_ylabel("|DD| (test)")
        ax_dd.set_xlabel("α")
    if is_sim:
        axes[0, -1].legend(fontsize=7, loc="best")
    else:
        axes[0, -1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    if is_sim:
        fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return out


# --------------------------------------------------------------------------- entry point
REPRODUCTIONS = ("figure3", "adult", "law_school")


def reproduce(
    name: str,
    out_dir: str | os.PathLike[str] = "out/fairclass",
    *,
    reps: int | None = None,
    quick: bool = False,
    seed: int = 0,
    data_path: str | os.PathLike[str] | None = None,
    n_jobs: int = 1,
    progress: Progress | None = None,
) -> dict[str, Path]:
    """Run one reproduction and write its tables and figure into ``out_dir``.

    Parameters
    ----------
    name : {"figure3", "adult", "law_school"}
    out_dir : path
    reps : int, optional
        Repetitions (default 200 as in the paper; 10 with ``quick``).
    quick : bool
        Smaller grids and fewer repetitions (minutes on a laptop).
    seed : int
    data_path : path, optional
        CSV/Parquet for ``law_school`` (required: it is not bundled) or to override the
        bundled Adult copy.
    n_jobs : int
        Parallel repetitions (joblib).
    """
    if name not in REPRODUCTIONS:
        raise InvalidParameterError(f"name={name!r}: expected one of {', '.join(REPRODUCTIONS)}.")
    r = reps if reps is not None else (10 if quick else 200)
    if name == "figure3":
        kwargs: dict[str, Any] = {}
        if quick:
            kwargs = {
                "n_list": (5000,),
                "eps_list": (1.0, 4.0),
                "alphas": (0.05, 0.1, 0.2, 0.3, 0.4, 0.5),
                "oracle_n": 400_000,
            }
        result = figure3_study(reps=r, seed=seed, n_jobs=n_jobs, progress=progress, **kwargs)
    else:
        if name == "adult":
            data = load_bundled_adult() if data_path is None else _load_adult(data_path)
        else:
            if data_path is None:
                raise InvalidParameterError(
                    "law_school: the Law School data are not bundled (licence); pass the path "
                    "of law_school_xue_yu.csv (e.g. ../shared/data/law_school_xue_yu.csv)."
                )
            data = load_law_school(data_path)
        kwargs = {}
        if quick:
            kwargs = {"eps_list": (1.0, 4.0), "alphas": (0.025, 0.05, 0.1, 0.15, 0.2, 0.3)}
        result = real_data_study(
            data, reps=r, seed=seed, n_jobs=n_jobs, progress=progress, **kwargs
        )
    files = result.write(out_dir)
    files["figure"] = plot_study(result, Path(out_dir) / f"{result.name}.png")
    return files


def _load_adult(path: str | os.PathLike[str]) -> FairnessDataset:
    from dpfair.fairclass.datasets import load_adult

    return load_adult(path)
