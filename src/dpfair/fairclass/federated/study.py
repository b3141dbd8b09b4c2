"""Reproductions for FDP-Fair (paper 003): Figures 4 and 5, §A.2 and the real-data panels.

Run ``python -m dpfair.fairclass.federated.study --out DIR [--quick] [--only fig4,fig5,...]``.
Writes one CSV per study (one row per repetition) and a summary CSV with means, 95% bands
(mean ± 1.96·sd/√reps) and the share of repetitions with test |DD| > α, plus PNG figures.

Two variants are run side by side:

* ``default``: the package defaults — confidence rule (β = 0.05), consistent tails, M = 8,
  no cross-fitting (``docs/proofs/fairclass_fdp_fair.md`` §Threshold);
* ``paper``: the paper's choices — dyadic tail counts, the paper's M rule, cross-fitting,
  Algorithm 6 with ω, target α with band ρ (|DD| may exceed α by up to ρ by design).

Every repetition records the test-sample |DD| and, on the simulation, the *population*
|DD| and risk of the released classifier (its P(Ŷ = 1 | x, a) over a fixed 200,000-row
sample from the design, with the true η): ``pop_abs_dd``, ``pop_risk``.
"""

from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path
from typing import Any

import numpy as np

from dpfair.fairclass.datasets import FairnessDataset, simulate
from dpfair.fairclass.federated._classifier import FDPFairClassifier
from dpfair.fairclass.metrics import demographic_disparity, misclassification_error

__all__ = ["VARIANTS", "effect_of_sites_table", "main", "run_one"]

VARIANTS: dict[str, dict[str, Any]] = {
    "default": {},
    "paper": {
        "tail": "dyadic",
        "threshold_rule": "paper",
        "depth": "paper",
        "cross_fit": True,
    },
}

_BIG: dict[str, FairnessDataset] = {}


def _population() -> FairnessDataset:
    if "sim" not in _BIG:
        _BIG["sim"] = simulate(200_000, rng=987_654_321)
    return _BIG["sim"]


def run_one(
    sites: list[FairnessDataset],
    test: FairnessDataset,
    *,
    epsilon: float,
    alpha: float,
    variant: str,
    seed: int,
    rho: float = 0.03,
    c_omega: float = 0.1,
    population: bool = True,
) -> dict[str, float]:
    """One fit + test evaluation; δ_s = (N_s/2)^-2 as in the paper.

    With ``population=True`` (simulation only) also the population |DD| and risk of the
    released classifier (module docstring).
    """
    from dpfair.fairclass.datasets import simulation_eta

    n_s = sites[0].n
    clf = FDPFairClassifier(
        epsilon=epsilon,
        delta=(n_s / 2) ** -2,
        alpha=alpha,
        feature_bounds=sites[0].feature_bounds,
        rho=rho,
        c_omega=c_omega,
        random_state=seed,
        clip=True,
        **VARIANTS[variant],
    )
    t0 = time.perf_counter()
    clf.fit([d.X for d in sites], [d.y for d in sites], sensitive_features=[d.A for d in sites])
    fit_s = time.perf_counter() - t0
    pred = clf.predict(test.X, sensitive_features=test.A)
    out = {
        "error": misclassification_error(test.y, pred),
        "abs_dd": abs(demographic_disparity(pred, test.A)),
        "fit_seconds": fit_s,
        "site_epsilon_spent": float(clf.privacy_spent_.epsilon or 0.0),
        "uncertified": float(
            sum(t.get("outcome") == "uncertified" for t in (clf.thresholds_ or []))
        ),
    }
    if population:
        big = _population()
        p = clf.predict_proba(big.X, sensitive_features=big.A)[:, 1]
        eta = simulation_eta(big.X, big.A)
        out["pop_abs_dd"] = abs(float(p[big.A == 1].mean() - p[big.A == 0].mean()))
        out["pop_risk"] = float(np.mean(p * (1.0 - eta) + (1.0 - p) * eta))
    return out


def _parallel(tasks: list[tuple[Any, ...]], n_jobs: int) -> list[dict[str, Any]]:
    """Run ``(meta, kwargs)`` tasks through joblib; returns ``{**meta, **run_one(...)}``."""
    from joblib import Parallel, delayed

    def job(meta: dict[str, Any], kw: dict[str, Any]) -> dict[str, Any]:
        sites = _sim_sites(kw.pop("S"), kw.pop("n_s"), kw.pop("site_seed"))
        if "split" in kw:
            parts = kw.pop("split")
            full = sites[0]
            sites = [full.subset(np.asarray(q)) for q in parts]
        test = simulate(kw.pop("n_test"), rng=kw.pop("test_seed"))
        return {**meta, **run_one(sites, test, **kw)}

    res: list[dict[str, Any]] = Parallel(n_jobs=n_jobs)(delayed(job)(m, dict(k)) for m, k in tasks)
    return res


def effect_of_sites_table(
    *,
    n_total: int = 7200,
    sites: tuple[int, ...] = (1, 2, 3, 4, 5),
    epsilon: float = 1.0,
    alpha: float = 0.1,
    reps: int = 5,
    variant: str = "default",
    n_jobs: int = 1,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """Error and |DD| versus the number of sites S for a fixed total sample (Figure 5 style).

    N_total rows drawn from the paper's simulation are split evenly over S sites (each with
    its own (ε, δ = (N_s/2)^-2)); FDP-Fair with ``variant`` runs on them, ``reps`` times.

    Returns
    -------
    list of dict
        One row per S: ``S``, ``reps``, ``error`` (test), ``pop_risk``, ``pop_abs_dd``
        (mean population |DD|), ``share_above_alpha`` (population), ``abs_dd`` (test).
    """
    tasks = []
    for S in sites:
        for r in range(reps):
            parts = [p.tolist() for p in np.array_split(np.arange(n_total), S)]
            tasks.append(
                (
                    {"S": S, "rep": r},
                    {
                        "S": 1,
                        "n_s": n_total,
                        "site_seed": seed * 1_000_003 + 700_000 + r,
                        "split": parts,
                        "n_test": 2500,
                        "test_seed": seed * 1_000_003 + 800_000 + r,
                        "epsilon": epsilon,
                        "alpha": alpha,
                        "variant": variant,
                        "seed": r,
                    },
                )
            )
    rows = _parallel(tasks, n_jobs)
    out = []
    for S in sites:
        rs = [r for r in rows if r["S"] == S]
        pop = np.array([r["pop_abs_dd"] for r in rs])
        out.append(
            {
                "S": S,
                "reps": len(rs),
                "error": float(np.mean([r["error"] for r in rs])),
                "pop_risk": float(np.mean([r["pop_risk"] for r in rs])),
                "pop_abs_dd": float(pop.mean()),
                "share_above_alpha": float(np.mean(pop > alpha)),
                "abs_dd": float(np.mean([r["abs_dd"] for r in rs])),
            }
        )
    return out


def _sim_sites(S: int, n_s: int, seed: int) -> list[FairnessDataset]:
    ss = np.random.SeedSequence(seed).spawn(S)
    return [simulate(n_s, rng=np.random.default_rng(s)) for s in ss]


def _write(rows: list[dict[str, Any]], path: Path) -> None:
    if not rows:
        return
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def _half_width(x: np.ndarray) -> float:
    n = x.size
    return float(1.96 * x.std(ddof=1) / np.sqrt(n)) if n > 1 else float("nan")


def summarise(rows: list[dict[str, Any]], keys: list[str]) -> list[dict[str, Any]]:
    """Means, 95% bands and share above α per group of ``keys``."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(tuple(r[k] for k in keys), []).append(r)
    out = []
    for key, rs in sorted(groups.items(), key=lambda kv: tuple(str(x) for x in kv[0])):
        err = np.array([r["error"] for r in rs])
        dd = np.array([r["abs_dd"] for r in rs])
        alpha = float(rs[0]["alpha"])
        n = len(rs)
        out.append(
            {
                **dict(zip(keys, key, strict=True)),
                "reps": n,
                "error": round(float(err.mean()), 4),
                "error_band": round(float(_half_width(err)), 4),
                "abs_dd": round(float(dd.mean()), 4),
                "abs_dd_band": round(float(_half_width(dd)), 4),
                "share_above_alpha": round(float(np.mean(dd > alpha)), 3),
                "share_above_alpha_plus_0.05": round(float(np.mean(dd > alpha + 0.05)), 3),
                **_population_summary(rs, alpha),
                "fit_seconds": round(float(np.mean([r["fit_seconds"] for r in rs])), 3),
            }
        )
    return out


def _population_summary(rs: list[dict[str, Any]], alpha: float) -> dict[str, Any]:
    if "pop_abs_dd" not in rs[0]:
        return {}
    pop = np.array([r["pop_abs_dd"] for r in rs])
    return {
        "pop_risk": round(float(np.mean([r["pop_risk"] for r in rs])), 4),
        "pop_abs_dd": round(float(pop.mean()), 4),
        "pop_share_above_alpha": round(float(np.mean(pop > alpha)), 3),
        "pop_share_above_alpha_plus_0.05": round(float(np.mean(pop > alpha + 0.05)), 3),
        "uncertified_folds": round(float(np.mean([r["uncertified"] for r in rs])), 3),
    }


def _plot(summary: list[dict[str, Any]], panel: str, line: str, path: Path, title: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover - optional
        return
    panels = sorted({r[panel] for r in summary}, key=str)
    fig, axes = plt.subplots(2, len(panels), figsize=(3.2 * len(panels), 5.5), squeeze=False)
    for j, pv in enumerate(panels):
        for lv in sorted({r[line] for r in summary if r[panel] == pv}, key=str):
            rs = sorted(
                (r for r in summary if r[panel] == pv and r[line] == lv), key=lambda r: r["alpha"]
            )
            a = np.array([r["alpha"] for r in rs])
            for i, m in enumerate(("error", "abs_dd")):
                y = np.array([r[m] for r in rs])
                b = np.array([r[m + "_band"] for r in rs])
                axes[i, j].plot(a, y, marker="o", label=f"{line}={lv}")
                axes[i, j].fill_between(a, y - b, y + b, alpha=0.2)
        axes[1, j].plot(
            [0, max(r["alpha"] for r in summary)],
            [0, max(r["alpha"] for r in summary)],
            ls="--",
            c="grey",
        )
        axes[0, j].set_title(f"{panel}={pv}")
        axes[1, j].set_xlabel("alpha")
    axes[0, 0].set_ylabel("test error")
    axes[1, 0].set_ylabel("test |DD|")
    axes[0, -1].legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def figure4(
    reps: int,
    alphas: list[float],
    eps_list: list[float],
    S_list: list[int],
    variants: list[str],
    n_jobs: int = 1,
) -> list[dict[str, Any]]:
    """N_s = 2000, S ∈ {4, 5, 6}, ε ∈ {0.75, 1, 2, 3, 4, 10}, C_ω = 0.1, ρ = 0.03; test 2000."""
    tasks = []
    for S in S_list:
        for eps in eps_list:
            for r in range(reps):
                for alpha in alphas:
                    for v in variants:
                        meta = {"S": S, "epsilon": eps, "alpha": alpha, "variant": v, "rep": r}
                        kw = {
                            "S": S,
                            "n_s": 2000,
                            "site_seed": 10_000 * S + r,
                            "n_test": 2000,
                            "test_seed": 900_000 + r,
                            "epsilon": eps,
                            "alpha": alpha,
                            "variant": v,
                            "seed": r,
                        }
                        tasks.append((meta, kw))
    return _parallel(tasks, n_jobs)


def figure5(
    reps: int, alphas: list[float], eps: float, variants: list[str], n_jobs: int = 1
) -> list[dict[str, Any]]:
    """N_total = 7200 over S = 1..5 (test 2500), with CDP-Fair at S = 1."""
    from dpfair.fairclass import CDPFairClassifier
    from dpfair.fairclass.datasets import simulation_eta

    tasks = []
    for r in range(reps):
        for S in range(1, 6):
            parts = [p.tolist() for p in np.array_split(np.arange(7200), S)]
            for alpha in alphas:
                for v in variants:
                    meta = {"S": S, "method": f"FDP-{v}", "alpha": alpha, "rep": r}
                    kw = {
                        "S": 1,
                        "n_s": 7200,
                        "site_seed": 700_000 + r,
                        "split": parts,
                        "n_test": 2500,
                        "test_seed": 800_000 + r,
                        "epsilon": eps,
                        "alpha": alpha,
                        "variant": v,
                        "seed": r,
                    }
                    tasks.append((meta, kw))
    rows = _parallel(tasks, n_jobs)
    big = _population()
    eta = simulation_eta(big.X, big.A)
    for r in range(reps):
        full = _sim_sites(1, 7200, 700_000 + r)[0]
        test = simulate(2500, rng=800_000 + r)
        for alpha in alphas:
            t0 = time.perf_counter()
            clf = CDPFairClassifier(
                epsilon=eps,
                delta=3600.0**-2,
                alpha=alpha,
                threshold_rule="target",  # as published before the certified rule
                feature_bounds=full.feature_bounds,
                random_state=r,
            )
            clf.fit(full.X, full.y, sensitive_features=full.A)
            fit_s = time.perf_counter() - t0
            p = clf.predict(test.X, sensitive_features=test.A)
            q = clf.predict(big.X, sensitive_features=big.A).astype(np.float64)
            rows.append(
                {
                    "S": 1,
                    "method": "CDP-Fair",
                    "alpha": alpha,
                    "rep": r,
                    "error": misclassification_error(test.y, p),
                    "abs_dd": abs(demographic_disparity(p, test.A)),
                    "fit_seconds": fit_s,
                    "site_epsilon_spent": float(clf.privacy_spent_.epsilon),
                    "uncertified": 0.0,
                    "pop_abs_dd": abs(float(q[big.A == 1].mean() - q[big.A == 0].mean())),
                    "pop_risk": float(np.mean(q * (1.0 - eta) + (1.0 - q) * eta)),
                }
            )
    return rows


def sensitivity(
    reps: int, eps: float, variants: list[str], n_jobs: int = 1
) -> list[dict[str, Any]]:
    """§A.2: S = 3, N_s = 2000, test 2000, α = 0.3; vary ρ (C_ω = 0.1) and C_ω (ρ = 0.03)."""
    tasks = []
    for r in range(reps):
        base = {
            "S": 3,
            "n_s": 2000,
            "site_seed": 60_000 + r,
            "n_test": 2000,
            "test_seed": 610_000 + r,
            "epsilon": eps,
            "alpha": 0.3,
            "seed": r,
        }
        for v in variants:
            for rho in (0.0, 0.01, 0.02, 0.03, 0.05, 0.08):
                meta = {"what": "rho", "value": rho, "variant": v, "alpha": 0.3, "rep": r}
                tasks.append((meta, {**base, "variant": v, "rho": rho}))
            for cw in (0.01, 0.05, 0.1, 0.2, 0.5):
                meta = {"what": "c_omega", "value": cw, "variant": v, "alpha": 0.3, "rep": r}
                tasks.append((meta, {**base, "variant": v, "c_omega": cw}))
    return _parallel(tasks, n_jobs)


def real_data(
    name: str,
    data: FairnessDataset,
    reps: int,
    alphas: list[float],
    eps: float,
    variants: list[str],
) -> list[dict[str, Any]]:
    """FDP-Fair with S = 1 on Adult / Law School (70/30 split, ρ = 0.02)."""
    from dpfair.fairclass.datasets import train_test_split

    rows = []
    for r in range(reps):
        train, test = train_test_split(data, 0.3, rng=r)
        for alpha in alphas:
            for v in variants:
                res = run_one(
                    [train],
                    test,
                    epsilon=eps,
                    alpha=alpha,
                    variant=v,
                    seed=r,
                    rho=0.02,
                    population=False,
                )
                rows.append({"data": name, "variant": v, "alpha": alpha, "rep": r, **res})
    return rows


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point (see the module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--only", default="fig4,fig5,sens,real")
    ap.add_argument("--adult", type=Path, default=None)
    ap.add_argument("--law", type=Path, default=None)
    ap.add_argument("--n-jobs", type=int, default=1)
    ap.add_argument("--alphas", default=None, help="comma-separated α grid")
    ap.add_argument("--eps", default=None, help="comma-separated ε grid (Figure 4)")
    args = ap.parse_args(argv)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    only = set(args.only.split(","))
    variants = list(VARIANTS)
    reps = args.reps or (5 if args.quick else 200)
    alphas = [0.05, 0.1, 0.2, 0.3] if args.quick else [0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35]
    if args.alphas:
        alphas = [float(a) for a in args.alphas.split(",")]
    nj = int(args.n_jobs)
    if "fig4" in only:
        eps_list = [1.0, 4.0] if args.quick else [0.75, 1.0, 2.0, 3.0, 4.0, 10.0]
        if args.eps:
            eps_list = [float(e) for e in args.eps.split(",")]
        S_list = [4] if args.quick else [4, 5, 6]
        rows = figure4(reps, alphas, eps_list, S_list, variants, nj)
        _write(rows, out / "fdp_figure4_reps.csv")
        summ = summarise(rows, ["S", "epsilon", "variant", "alpha"])
        _write(summ, out / "fdp_figure4_summary.csv")
        for v in variants:
            for S in S_list:
                _plot(
                    [r for r in summ if r["variant"] == v and r["S"] == S],
                    "S",
                    "epsilon",
                    out / f"fdp_figure4_{v}_S{S}.png",
                    f"FDP-Fair ({v}), N_s = 2000, S = {S}",
                )
    if "fig5" in only:
        rows = figure5(reps, alphas, 1.0, variants, nj)
        _write(rows, out / "fdp_figure5_reps.csv")
        summ = summarise(rows, ["S", "method", "alpha"])
        _write(summ, out / "fdp_figure5_summary.csv")
        _plot(summ, "method", "S", out / "fdp_figure5.png", "N_total = 7200, eps = 1")
    if "sens" in only:
        rows = sensitivity(reps, 1.0, variants, nj)
        _write(rows, out / "fdp_sensitivity_reps.csv")
        _write(summarise(rows, ["what", "value", "variant"]), out / "fdp_sensitivity_summary.csv")
    if "real" in only:
        from dpfair.fairclass.datasets import load_adult, load_law_school

        for name, path, loader in (
            ("adult", args.adult, load_adult),
            ("law", args.law, load_law_school),
        ):
            if path is None:
                continue
            rows = real_data(name, loader(path), reps, alphas, 1.0, variants)
            _write(rows, out / f"fdp_{name}_reps.csv")
            summ = summarise(rows, ["data", "variant", "alpha"])
            _write(summ, out / f"fdp_{name}_summary.csv")
            _plot(summ, "data", "variant", out / f"fdp_{name}.png", f"FDP-Fair (S = 1), {name}")


if __name__ == "__main__":
    main()
