"""CDP-Fair with many features: the centred, radius-clipped linear score (issue 19).

    .venv/bin/python benchmarks/fairclass_many_features.py                  # everything
    .venv/bin/python benchmarks/fairclass_many_features.py --no-comparator  # dpfair + sklearn
    .venv/bin/python benchmarks/fairclass_many_features.py --part speed     # one part
    .venv/bin/python benchmarks/fairclass_many_features.py --smoke          # tiny (CI)
    .venv/bin/python benchmarks/fairclass_many_features.py --json out/many_features.json

Three parts (``--part synthetic|adult|speed|all``):

* ``synthetic`` — the issue's design: 20 standard-normal features clipped to the public
  box [−4, 4], A ~ Bern(0.5) shifting the first feature by ±0.5, η = sigmoid(1.5·Σx_j/√20
  + 0.5(2a − 1)); N = 20,000 training rows, 10^5 fresh test rows (the population), ε = 1,
  δ = (N/2)^-2, α = 0.1, ``--reps`` repetitions (fresh data and seeds).
* ``adult`` — the bundled full Adult (13 attributes + A = sex; public bounds and categories
  of ``dpfair.fairclass.adult_full``), ``--splits`` random 70/30 splits, ε = 1,
  α ∈ {0.05, 0.1}; the test split is the population.
* ``speed`` — d = 50 standard-normal features, N = 2·10^5, fit + predict on the same rows,
  dpfair against scikit-learn's ``LogisticRegression`` (lbfgs, C = 1) on the same data in the
  same process, interleaved, ``--repeats`` times; medians and the ratio of medians.

Methods of the error tables:

* ``dpfair linear`` — ``CDPFairClassifier(estimator="linear")`` with its defaults
  (``radius="auto"``: an ε-DP median row norm, 4% of S1's ε; certified rule); (ε, δ)-DP.
* ``dpfair linear radius=box`` — the public worst-case radius (no row clipped).
* ``non-private LR + exact thresholds`` — scikit-learn LR (C = 1) on all training rows and
  the exact fair threshold on them (``nonprivate_lr_predict``). Not private.
* ``diffprivlib LR + Fairlearn`` — diffprivlib ``LogisticRegression`` (ε, trained on half
  of the rows) + Fairlearn ``ThresholdOptimizer`` (demographic parity) on the other half,
  in its own venv (``benchmarks/.envs/fairclass-compare``, as ``fairclass_bench.py``).
  Its thresholding is **not private** and targets exact parity. On the synthetic design it
  runs twice: with ``data_norm`` the box's half-diagonal (the public worst case, 4√20) and
  with ``data_norm`` = √20 (the typical row norm of the design — knowledge a private
  pipeline would have to pay for; favourable to the comparator). On Adult it sees the same
  public one-hot design as the non-private LR, ``data_norm`` = √(features + 1).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
ENV_NAME = "fairclass-compare"
D_SYN = 20


def synthetic(n: int, seed: int, d: int = D_SYN) -> tuple[Any, Any, Any]:
    """(X, y, A) of the many-feature design (``simulate_many_features`` of
    :mod:`dpfair.fairclass.datasets`)."""
    import numpy as np

    from dpfair.fairclass.datasets import simulate_many_features

    return simulate_many_features(n, np.random.default_rng(seed), d=d)


def _metrics(y: Any, a: Any, p: Any) -> tuple[float, float]:
    import numpy as np

    p = np.asarray(p, dtype=float)
    return float(np.mean(p != y)), float(p[a == 1].mean() - p[a == 0].mean())


# --------------------------------------------------------------------------- dpfair side
def run_synthetic(reps: int, n: int, n_test: int, alpha: float,
                  shared: dict[str, Any]) -> list[dict[str, Any]]:
    from dpfair import UncertifiedFairnessWarning
    from dpfair.experiments.fairclass_full_adult import nonprivate_lr_predict
    from dpfair.fairclass import CDPFairClassifier

    warnings.simplefilter("ignore", UncertifiedFairnessWarning)
    Xt, yt, At = synthetic(n_test, 999)
    shared.update(syn_Xt=Xt, syn_yt=yt, syn_At=At, syn_reps=reps, syn_alpha=alpha)
    rows = []
    for rep in range(reps):
        X, y, A = synthetic(n, rep + 1)
        shared[f"syn_X_{rep}"], shared[f"syn_y_{rep}"], shared[f"syn_A_{rep}"] = X, y, A
        for name, kw in (("dpfair linear", {}), ("dpfair linear radius=box", {"radius": "box"})):
            clf = CDPFairClassifier(epsilon=1.0, delta=(n / 2) ** -2.0, alpha=alpha,
                                    feature_bounds=[(-4.0, 4.0)] * D_SYN, estimator="linear",
                                    random_state=rep, **kw)
            t0 = time.perf_counter()
            clf.fit(X, y, sensitive_features=A)
            pred = clf.predict(Xt, sensitive_features=At)
            total = time.perf_counter() - t0
            err, dd = _metrics(yt, At, pred)
            rows.append({"part": "synthetic", "method": name, "rep": rep, "epsilon": 1.0,
                         "alpha": alpha, "error": err, "dd": dd, "fit_predict_s": total,
                         "certified": clf.certified_,
                         "radius": clf.folds_[0].design_map.radius})
        t0 = time.perf_counter()
        pred = nonprivate_lr_predict(X, A, y, Xt, At, [alpha])[0]
        total = time.perf_counter() - t0
        err, dd = _metrics(yt, At, pred)
        rows.append({"part": "synthetic", "method": "non-private LR + exact thresholds",
                     "rep": rep, "epsilon": None, "alpha": alpha, "error": err, "dd": dd,
                     "fit_predict_s": total, "certified": None, "radius": None})
        print(f"  synthetic rep {rep + 1}/{reps} done", file=sys.stderr, flush=True)
    return rows


def run_adult(splits: int, alphas: tuple[float, ...], n_rows: int | None,
              shared: dict[str, Any]) -> list[dict[str, Any]]:
    import numpy as np

    from dpfair import UncertifiedFairnessWarning
    from dpfair.experiments.fairclass_full_adult import nonprivate_lr_predict, public_design
    from dpfair.fairclass import CDPFairClassifier
    from dpfair.fairclass.adult_full import load_full_adult

    warnings.simplefilter("ignore", UncertifiedFairnessWarning)
    d = load_full_adult()
    if n_rows is not None:
        d = d.subset(np.arange(n_rows))
    U = public_design(d.X, d.bounds, d.categories)
    shared.update(adult_U=U, adult_A=d.A, adult_y=d.y, adult_splits=splits,
                  adult_norm=float(np.sqrt(13 + 1.0)))
    rows = []
    for split in range(splits):
        perm = np.random.default_rng(100 + split).permutation(d.n)
        cut = round(0.7 * d.n)
        tr, te = np.sort(perm[:cut]), np.sort(perm[cut:])
        shared[f"adult_train_{split}"], shared[f"adult_test_{split}"] = tr, te
        delta = (tr.size / 2) ** -2.0
        yt, At = d.y[te], d.A[te]
        for alpha in alphas:
            clf = CDPFairClassifier(epsilon=1.0, delta=delta, alpha=alpha,
                                    feature_bounds=d.bounds, categories=d.categories,
                                    estimator="linear", random_state=1000 * split + 10)
            t0 = time.perf_counter()
            clf.fit(d.X[tr], d.y[tr], sensitive_features=d.A[tr])
            pred = clf.predict(d.X[te], sensitive_features=At)
            total = time.perf_counter() - t0
            err, dd = _metrics(yt, At, pred)
            rows.append({"part": "adult", "method": "dpfair linear", "rep": split,
                         "epsilon": 1.0, "alpha": alpha, "error": err, "dd": dd,
                         "fit_predict_s": total, "certified": clf.certified_,
                         "radius": clf.folds_[0].design_map.radius})
        t0 = time.perf_counter()
        preds = nonprivate_lr_predict(U[tr], d.A[tr], d.y[tr], U[te], At, alphas)
        total = time.perf_counter() - t0
        for alpha, pred in zip(alphas, preds, strict=True):
            err, dd = _metrics(yt, At, pred)
            rows.append({"part": "adult", "method": "non-private LR + exact thresholds",
                         "rep": split, "epsilon": None, "alpha": alpha, "error": err,
                         "dd": dd, "fit_predict_s": total, "certified": None, "radius": None})
        print(f"  adult split {split + 1}/{splits} done", file=sys.stderr, flush=True)
    return rows


def speed_data(n: int, d: int) -> tuple[Any, Any, Any]:
    import numpy as np

    rng = np.random.default_rng(2024)
    X = np.clip(rng.normal(size=(n, d)), -4.0, 4.0)
    A = (rng.uniform(size=n) < 0.5).astype(np.int8)
    logit = X @ np.full(d, 1.0 / math.sqrt(d)) + (A - 0.5)
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-logit))).astype(np.int64)
    return X, y, A


def run_speed(n: int, d: int, repeats: int) -> dict[str, Any]:
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    from dpfair import UncertifiedFairnessWarning
    from dpfair.fairclass import CDPFairClassifier

    warnings.simplefilter("ignore", UncertifiedFairnessWarning)
    X, y, A = speed_data(n, d)
    XA = np.column_stack([A, X])

    def sk() -> None:
        model = LogisticRegression(C=1.0, max_iter=1000).fit(XA, y)
        model.predict(XA)

    def dp() -> None:
        clf = CDPFairClassifier(epsilon=1.0, delta=(n / 2) ** -2.0, alpha=0.1,
                                feature_bounds=[(-4.0, 4.0)] * d, estimator="linear",
                                random_state=0)
        clf.fit(X, y, sensitive_features=A)
        clf.predict(X, sensitive_features=A)

    sk(), dp()  # warm-up (imports, caches)
    t_sk, t_dp = [], []
    for _ in range(repeats):
        for fn, out in ((sk, t_sk), (dp, t_dp)):
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
    med_sk, med_dp = statistics.median(t_sk), statistics.median(t_dp)
    return {"n": n, "d": d, "repeats": repeats, "sklearn_s": t_sk, "dpfair_s": t_dp,
            "sklearn_median_s": med_sk, "dpfair_median_s": med_dp,
            "ratio_of_medians": med_dp / med_sk,
            "ratios": [a / b for a, b in zip(t_dp, t_sk, strict=True)]}


# --------------------------------------------------------------------------- comparator
def worker_compare(args: argparse.Namespace) -> None:
    """diffprivlib LR + Fairlearn ThresholdOptimizer on the saved data (comparator venv)."""
    import numpy as np
    from diffprivlib.models import LogisticRegression
    from fairlearn.postprocessing import ThresholdOptimizer

    warnings.filterwarnings("ignore")
    with np.load(args.data) as z:
        d = {k: z[k] for k in z.files}
    out: list[dict[str, Any]] = []

    def pipeline(Z: Any, y: Any, A: Any, Zt: Any, At: Any, norm: float, seed: int) -> Any:
        idx = np.random.default_rng(seed).permutation(y.size)
        half, cal = idx[: idx.size // 2], idx[idx.size // 2:]
        model = LogisticRegression(epsilon=1.0, data_norm=norm, random_state=seed)
        model.fit(Z[half], y[half])
        post = ThresholdOptimizer(estimator=model, constraints="demographic_parity",
                                  objective="accuracy_score", prefit=True,
                                  predict_method="predict_proba")
        post.fit(Z[cal], y[cal], sensitive_features=A[cal])
        return post.predict(Zt, sensitive_features=At, random_state=seed)

    if "syn_reps" in d:
        Xt, yt, At = d["syn_Xt"], d["syn_yt"], d["syn_At"]
        Zt = np.column_stack([Xt, At])
        half_diag = float(np.sqrt(4.0**2 * Xt.shape[1] + 1.0))
        for rep in range(int(d["syn_reps"])):
            X, y, A = d[f"syn_X_{rep}"], d[f"syn_y_{rep}"], d[f"syn_A_{rep}"]
            for label, norm in (("box half-diagonal", half_diag),
                                ("sqrt(d), typical norm", float(np.sqrt(Xt.shape[1] + 1.0)))):
                t0 = time.perf_counter()
                pred = pipeline(np.column_stack([X, A]), y, A, Zt, At, norm, rep)
                total = time.perf_counter() - t0
                err, dd = _metrics(yt, At, pred)
                out.append({"part": "synthetic",
                            "method": f"diffprivlib LR + Fairlearn (data_norm {label})",
                            "rep": rep, "epsilon": 1.0, "alpha": None, "error": err,
                            "dd": dd, "fit_predict_s": total, "certified": None,
                            "radius": None})
    if "adult_splits" in d:
        Z = np.column_stack([d["adult_U"], d["adult_A"]])
        for split in range(int(d["adult_splits"])):
            tr, te = d[f"adult_train_{split}"], d[f"adult_test_{split}"]
            t0 = time.perf_counter()
            pred = pipeline(Z[tr], d["adult_y"][tr], d["adult_A"][tr], Z[te],
                            d["adult_A"][te], float(d["adult_norm"]), split)
            total = time.perf_counter() - t0
            err, dd = _metrics(d["adult_y"][te], d["adult_A"][te], pred)
            out.append({"part": "adult", "method": "diffprivlib LR + Fairlearn", "rep": split,
                        "epsilon": 1.0, "alpha": None, "error": err, "dd": dd,
                        "fit_predict_s": total, "certified": None, "radius": None})
    print("BENCH_JSON " + json.dumps(out))


def run_comparator(args: argparse.Namespace, shared: dict[str, Any]) -> list[dict[str, Any]]:
    import numpy as np

    sys.path.insert(0, str(HERE))
    from run import Comparator, Log, ensure_env, run_worker

    comp = Comparator(ENV_NAME, "diffprivlib + Fairlearn", Path(__file__).name)
    ns = argparse.Namespace(reinstall=args.reinstall, no_install=args.no_install,
                            base_python=args.base_python)
    reason = ensure_env(comp, ns, Log())
    if reason is not None:
        print(f"comparator not run: {reason}", file=sys.stderr)
        return []
    data = ROOT / "benchmarks" / "_data" / "fairclass_many_features.npz"
    data.parent.mkdir(parents=True, exist_ok=True)
    np.savez(data, **shared)
    cenv = dict(os.environ)
    cenv.pop("PYTHONPATH", None)
    res = run_worker([str(comp.python), __file__, "--worker", "compare", "--data", str(data)],
                     args.timeout, None, env=cenv)
    if isinstance(res, list):
        return res
    if isinstance(res, dict) and "rows" in res:
        return list(res["rows"])
    print(f"comparator failed: {res}", file=sys.stderr)
    return []


# --------------------------------------------------------------------------- report
def summarise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    import numpy as np

    keys = sorted({(r["part"], r["method"], r["alpha"] or 0.0) for r in rows})
    out = []
    for part, method, alpha in keys:
        sel = [r for r in rows if r["part"] == part and r["method"] == method
               and (r["alpha"] or 0.0) == alpha]
        errs = np.array([r["error"] for r in sel])
        dds = np.abs(np.array([r["dd"] for r in sel]))
        certs = [r["certified"] for r in sel if r["certified"] is not None]
        radii = [r["radius"] for r in sel if r.get("radius") is not None]
        out.append({
            "part": part, "method": method, "alpha": alpha or None, "reps": len(sel),
            "error": float(errs.mean()),
            "error_sd": float(errs.std(ddof=1)) if len(sel) > 1 else 0.0,
            "mean_abs_dd": float(dds.mean()),
            "share_certified": float(np.mean(certs)) if certs else None,
            "median_radius": float(np.median(radii)) if radii else None,
            "fit_predict_s": float(np.median([r["fit_predict_s"] for r in sel])),
        })
    return out


def _print(summary: list[dict[str, Any]], speed: dict[str, Any] | None) -> None:
    def f(v: Any, fmt: str) -> str:
        return "—" if v is None else format(v, fmt)

    for part in ("synthetic", "adult"):
        sel = [s for s in summary if s["part"] == part]
        if not sel:
            continue
        title = ("Synthetic, 20 features in [-4, 4], N = 20,000, eps = 1"
                 if part == "synthetic" else "Full Adult (13 attributes), 70/30 splits, eps = 1")
        head = (f"{'method':<52} {'alpha':>5} {'reps':>4} {'error':>7} {'sd':>6} {'|DD|':>6} "
                f"{'cert':>5} {'radius':>6} {'fit+pred s':>10}")
        print(f"\n{title}\n\n{head}\n{'-' * len(head)}")
        for s in sel:
            print(f"{s['method']:<52} {f(s['alpha'], 'g'):>5} {s['reps']:>4} "
                  f"{s['error']:>7.4f} {s['error_sd']:>6.4f} {s['mean_abs_dd']:>6.3f} "
                  f"{f(s['share_certified'], '.2f'):>5} {f(s['median_radius'], '.3f'):>6} "
                  f"{s['fit_predict_s']:>10.2f}")
    if speed:
        print(f"\nSpeed, d = {speed['d']}, N = {speed['n']:,}, fit + predict, "
              f"{speed['repeats']} interleaved repeats (medians)\n")
        print(f"  scikit-learn LogisticRegression  {speed['sklearn_median_s']:.3f} s")
        print(f"  dpfair CDPFairClassifier linear  {speed['dpfair_median_s']:.3f} s")
        print(f"  ratio of medians                 {speed['ratio_of_medians']:.2f}x")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--worker", choices=("compare",), help=argparse.SUPPRESS)
    p.add_argument("--data", help=argparse.SUPPRESS)
    p.add_argument("--part", choices=("synthetic", "adult", "speed", "all"), default="all")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--splits", type=int, default=3)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--no-comparator", action="store_true")
    p.add_argument("--no-install", action="store_true")
    p.add_argument("--reinstall", action="store_true")
    p.add_argument("--base-python", default=None)
    p.add_argument("--timeout", type=float, default=1800.0)
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--smoke", action="store_true",
                   help="tiny sizes, one repetition, no comparator: checks that it runs")
    args = p.parse_args(argv)
    if args.worker == "compare":
        worker_compare(args)
        return 0
    sys.path.insert(0, str(ROOT / "src"))
    parts = ("synthetic", "adult", "speed") if args.part == "all" else (args.part,)
    n_syn, n_test, n_adult, n_speed, d_speed = 20_000, 100_000, None, 200_000, 50
    if args.smoke:
        args.reps, args.splits, args.repeats, args.no_comparator = 1, 1, 1, True
        n_syn, n_test, n_adult, n_speed, d_speed = 2_000, 2_000, 3_000, 4_000, 10
    shared: dict[str, Any] = {}
    rows: list[dict[str, Any]] = []
    if "synthetic" in parts:
        rows += run_synthetic(args.reps, n_syn, n_test, 0.1, shared)
    if "adult" in parts:
        rows += run_adult(args.splits, (0.05, 0.1), n_adult, shared)
    speed = run_speed(n_speed, d_speed, args.repeats) if "speed" in parts else None
    if not args.no_comparator and shared:
        rows += run_comparator(args, shared)
    summary = summarise(rows)
    _print(summary, speed)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"summary": summary, "speed": speed, "rows": rows},
                                        indent=1, default=float))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
