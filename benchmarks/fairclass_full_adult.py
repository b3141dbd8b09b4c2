"""CDP-Fair on the full Adult data (all 14 attributes) vs the 3-feature model and baselines.

    .venv/bin/python benchmarks/fairclass_full_adult.py                  # everything
    .venv/bin/python benchmarks/fairclass_full_adult.py --no-comparator  # dpfair only
    .venv/bin/python benchmarks/fairclass_full_adult.py --smoke          # tiny (CI)
    .venv/bin/python benchmarks/fairclass_full_adult.py \
        --json docs/results/fairclass_full_adult.json

Setting (issue 12): the bundled full Adult (48,842 rows; ``dpfair.fairclass.adult_full``:
13 features + A = sex, public bounds and categories documented there), 10 random 70/30
splits, ε ∈ {1, 4}, δ = (n_train/2)^-2, α ∈ {0.05, 0.1}. Per split and cell: test error,
|DD| on the test split (the "population" here) and whether it exceeds α, fit time and
fit + predict time (34,189 training rows, 14,653 test rows).

Methods:

* ``linear`` — CDPFairClassifier(estimator="linear"), all attributes, certified rule
  (default); (ε, δ)-DP.
* ``kernel-3 (today)`` — today's CDP-Fair on (age, workclass code, education-num), the
  paper's 3 features, default before issue 12 (``threshold_rule="target"``, cross-fit).
* ``kernel-3 certified`` — the same 3 features with the certified rule.
* ``non-private LR + exact thresholds`` — logistic regression (scikit-learn, C = 1) on all
  attributes, the exact fair threshold argmin{|τ| : |DD̂(τ)| ≤ α} on the training split. Not private.
  Shared with the registered study ``fairclass-full-adult``
  (``dpfair.experiments.fairclass_full_adult.nonprivate_lr_predict``); one fit serves both
  α, and its time (fit + test predictions) is reported in both time columns.
* ``diffprivlib LR + Fairlearn`` — diffprivlib ``LogisticRegression`` (ε, on half the
  rows, the same public one-hot design) + Fairlearn ``ThresholdOptimizer`` (demographic
  parity) on the other half. Run in its own venv (``benchmarks/.envs/fairclass-compare``,
  as ``fairclass_bench.py``). **Its thresholding is not private** (raw data), and it
  targets exact parity (no α).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
ENV_NAME = "fairclass-compare"
EPS = (1.0, 4.0)
ALPHAS = (0.05, 0.1)


def _metrics(y: Any, a: Any, p: Any) -> tuple[float, float]:
    import numpy as np

    p = np.asarray(p, dtype=float)
    return float(np.mean(p != y)), float(p[a == 1].mean() - p[a == 0].mean())


def worker_compare(args: argparse.Namespace) -> None:
    """diffprivlib LR + Fairlearn ThresholdOptimizer on the saved design (comparator venv)."""
    import numpy as np
    from diffprivlib.models import LogisticRegression
    from fairlearn.postprocessing import ThresholdOptimizer

    warnings.filterwarnings("ignore")
    out = []
    with np.load(args.data) as z:
        d = {k: z[k] for k in z.files}
    for split in range(int(d["n_splits"])):
        tr, te = d[f"train_{split}"], d[f"test_{split}"]
        Z = np.column_stack([d["U"], d["A"]])
        rng = np.random.default_rng(split)
        idx = rng.permutation(tr)
        half, cal = idx[: idx.size // 2], idx[idx.size // 2 :]
        for eps in EPS:
            t0 = time.perf_counter()
            model = LogisticRegression(
                epsilon=eps, data_norm=float(d["data_norm"]), random_state=split
            )
            model.fit(Z[half], d["y"][half])
            post = ThresholdOptimizer(
                estimator=model, constraints="demographic_parity", objective="accuracy_score",
                prefit=True, predict_method="predict_proba",
            )
            post.fit(Z[cal], d["y"][cal], sensitive_features=d["A"][cal])
            fit_s = time.perf_counter() - t0
            pred = post.predict(Z[te], sensitive_features=d["A"][te], random_state=split)
            total = time.perf_counter() - t0
            err, dd = _metrics(d["y"][te], d["A"][te], pred)
            out.append({"method": "diffprivlib LR + Fairlearn", "split": split, "epsilon": eps,
                        "alpha": None, "error": err, "dd": dd, "fit_s": fit_s,
                        "fit_predict_s": total, "certified": None})
    print("BENCH_JSON " + json.dumps(out))


def run_dpfair(
    n_splits: int, n_rows: int | None = None
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    import numpy as np

    from dpfair import UncertifiedFairnessWarning
    from dpfair.experiments.fairclass_full_adult import nonprivate_lr_predict, three_features
    from dpfair.fairclass import CDPFairClassifier
    from dpfair.fairclass._linear import FeatureMap
    from dpfair.fairclass.adult_full import load_full_adult
    from dpfair.fairclass.datasets import ADULT_BOUNDS

    warnings.simplefilter("ignore", UncertifiedFairnessWarning)
    d = load_full_adult()
    if n_rows is not None:  # --smoke: the first rows only
        d = d.subset(np.arange(n_rows))
    X3 = three_features(d.X)
    fmap = FeatureMap.build(d.bounds, d.categories, d.X.shape[1])
    U = fmap.transform(d.X)
    rows: list[dict[str, Any]] = []
    shared: dict[str, Any] = {"U": U, "A": d.A, "y": d.y, "n_splits": n_splits,
                              "data_norm": float(np.sqrt(fmap.n_numeric + fmap.n_categorical
                                                         + 1.0))}
    for split in range(n_splits):
        perm = np.random.default_rng(100 + split).permutation(d.n)
        cut = round(0.7 * d.n)
        tr, te = np.sort(perm[:cut]), np.sort(perm[cut:])
        shared[f"train_{split}"], shared[f"test_{split}"] = tr, te
        delta = (tr.size / 2) ** -2.0
        yt, At = d.y[te], d.A[te]
        for eps in EPS:
            for alpha in ALPHAS:
                configs = [
                    ("linear (all attributes, certified)", d.X,
                     {"feature_bounds": d.bounds, "categories": d.categories,
                      "estimator": "linear"}),
                    ("kernel-3 (today: target rule, cross-fit)", X3,
                     {"feature_bounds": ADULT_BOUNDS, "threshold_rule": "target"}),
                    ("kernel-3 certified", X3, {"feature_bounds": ADULT_BOUNDS}),
                ]
                for name, X, kw in configs:
                    clf = CDPFairClassifier(epsilon=eps, delta=delta, alpha=alpha,
                                            random_state=1000 * split + int(eps * 10), **kw)
                    t0 = time.perf_counter()
                    clf.fit(X[tr], d.y[tr], sensitive_features=d.A[tr])
                    fit_s = time.perf_counter() - t0
                    pred = clf.predict(X[te], sensitive_features=At)
                    total = time.perf_counter() - t0
                    err, dd = _metrics(yt, At, pred)
                    rows.append({"method": name, "split": split, "epsilon": eps,
                                 "alpha": alpha, "error": err, "dd": dd, "fit_s": fit_s,
                                 "fit_predict_s": total, "certified": clf.certified_})
        # (c) non-private logistic regression + exact group thresholds (training split),
        # shared with the registered study fairclass-full-adult; one fit for both α.
        t0 = time.perf_counter()
        preds = nonprivate_lr_predict(U[tr], d.A[tr], d.y[tr], U[te], At, ALPHAS)
        total = time.perf_counter() - t0
        for alpha, pred in zip(ALPHAS, preds, strict=True):
            err, dd = _metrics(yt, At, pred)
            rows.append({"method": "non-private LR + exact thresholds", "split": split,
                         "epsilon": None, "alpha": alpha, "error": err, "dd": dd,
                         "fit_s": total, "fit_predict_s": total, "certified": None})
        print(f"  split {split + 1}/{n_splits} done", file=sys.stderr, flush=True)
    return rows, shared


def summarise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    import numpy as np

    keys = sorted({(r["method"], r["epsilon"] or 0.0, r["alpha"] or 0.0) for r in rows},
                  key=lambda k: (k[0], k[1], k[2]))
    out = []
    for method, eps, alpha in keys:
        sel = [r for r in rows if r["method"] == method and (r["epsilon"] or 0.0) == eps
               and (r["alpha"] or 0.0) == alpha]
        errs = np.array([r["error"] for r in sel])
        dds = np.abs(np.array([r["dd"] for r in sel]))
        certs = [r["certified"] for r in sel if r["certified"] is not None]
        cap = alpha if alpha else None
        out.append({
            "method": method, "epsilon": eps or None, "alpha": alpha or None, "splits": len(sel),
            "error": float(errs.mean()), "error_sd": float(errs.std(ddof=1)) if len(sel) > 1
            else 0.0, "mean_abs_dd": float(dds.mean()),
            "share_above_alpha": None if cap is None else float(np.mean(dds > cap)),
            "share_certified": float(np.mean(certs)) if certs else None,
            "fit_s": float(np.median([r["fit_s"] for r in sel])),
            "fit_predict_s": float(np.median([r["fit_predict_s"] for r in sel])),
        })
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--worker", choices=("compare",), help=argparse.SUPPRESS)
    p.add_argument("--data", help=argparse.SUPPRESS)
    p.add_argument("--splits", type=int, default=10)
    p.add_argument("--no-comparator", action="store_true")
    p.add_argument("--no-install", action="store_true")
    p.add_argument("--reinstall", action="store_true")
    p.add_argument("--base-python", default=None)
    p.add_argument("--timeout", type=float, default=1800.0)
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--smoke", action="store_true",
                   help="3,000 rows, one split, one (ε, α), no comparator: checks that it runs")
    args = p.parse_args(argv)
    global EPS, ALPHAS
    if args.smoke:
        EPS, ALPHAS = (1.0,), (0.1,)
        args.splits, args.no_comparator = 1, True
    if args.worker == "compare":
        worker_compare(args)
        return 0
    sys.path.insert(0, str(ROOT / "src"))
    import numpy as np

    rows, shared = run_dpfair(args.splits, 3000 if args.smoke else None)
    if not args.no_comparator:
        sys.path.insert(0, str(HERE))
        from run import Comparator, Log, ensure_env, run_worker

        log = Log()
        comp = Comparator(ENV_NAME, "diffprivlib + Fairlearn", Path(__file__).name)
        ns = argparse.Namespace(reinstall=args.reinstall, no_install=args.no_install,
                                base_python=args.base_python)
        reason = ensure_env(comp, ns, log)
        if reason is None:
            data = ROOT / "benchmarks" / "_data" / "fairclass_full_adult_design.npz"
            data.parent.mkdir(parents=True, exist_ok=True)
            np.savez(data, **shared)
            cenv = dict(os.environ)
            cenv.pop("PYTHONPATH", None)
            res = run_worker([str(comp.python), __file__, "--worker", "compare", "--data",
                              str(data)], args.timeout, None, env=cenv)
            if isinstance(res, dict) and res.get("status", "ok") != "ok":
                print(f"comparator failed: {res}", file=sys.stderr)
            elif isinstance(res, list):
                rows.extend(res)
            elif isinstance(res, dict) and "rows" in res:
                rows.extend(res["rows"])
        else:
            print(f"comparator not run: {reason}", file=sys.stderr)
    summary = summarise(rows)
    head = (f"{'method':<44} {'eps':>4} {'alpha':>5} {'error':>7} {'|DD|':>6} {'>alpha':>6} "
            f"{'cert':>5} {'fit s':>6} {'fit+pred s':>10}")
    print(f"\nFull Adult, {args.splits} splits 70/30 (test split as population)\n")
    print(head)
    print("-" * len(head))
    for s in summary:
        def f(v: Any, fmt: str) -> str:
            return "—" if v is None else format(v, fmt)
        print(f"{s['method']:<44} {f(s['epsilon'], 'g'):>4} {f(s['alpha'], 'g'):>5} "
              f"{s['error']:>7.4f} {s['mean_abs_dd']:>6.3f} {f(s['share_above_alpha'], '.2f'):>6} "
              f"{f(s['share_certified'], '.2f'):>5} {s['fit_s']:>6.2f} {s['fit_predict_s']:>10.2f}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"summary": summary, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
