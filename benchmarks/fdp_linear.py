"""FDP-Fair's linear estimator across sites vs CDP-Fair's linear model on the pooled data.

    .venv/bin/python benchmarks/fdp_linear.py --reps 5 --json docs/results/fdp_linear.json
    .venv/bin/python benchmarks/fdp_linear.py --smoke

Settings (issue 19, item 3):

* ``synthetic`` — d = 20 standard-normal features clipped to the public box [−4, 4]^20,
  A ~ Bernoulli(sigmoid(0.8·x₁ − 0.2)), η linear in (x, a) (logit −0.3 + Σ_j 0.9 j^-1/2 x_j
  + 0.6a); 4 sites of 1,500 / 3,000 / 6,000 / 10,000 rows, every site at (ε, δ) =
  (1, 10⁻⁵); α = 0.1; test set 50,000 fresh rows per repetition.
* ``adult-S`` — the bundled full Adult (13 attributes, public bounds and categories),
  random 70/30 splits, the training rows dealt at random to S ∈ {3, 10} equal sites,
  δ_s = (N_s/2)^-2, ε_s = 1, α ∈ {0.05, 0.1}.

Methods (the same α, ε and δ everywhere):

* ``fdp linear`` — ``FDPFairClassifier(estimator="linear")`` over the sites (the real
  signed protocol in one process), default radius ``"auto"``: each site releases its own
  clip radius (noisy median of its row norms, 4% of its round-1 μ₁², charged to its
  ledger); ``fdp linear (radius box)``: r = √(k + c), no clipping (the default before the
  private radius); on the synthetic design also ``fdp linear (r = √d/4)``: the public
  radius of a design whose features have sd ≈ box/8 (a public fact of this design, not
  read from the data), and the same at ε = 1000 per site (the quadratic surrogate's own
  bias, nearly without privacy noise).
* ``cdp linear (pooled)`` — ``CDPFairClassifier(estimator="linear")`` on all sites' rows
  pooled in one server at the sites' (ε, δ) (today's main: objective perturbation with the
  unit-box map).
* ``non-private LR + exact thresholds`` — scikit-learn logistic regression (C = 1) on the
  pooled rows with the exact fair threshold (``dpfair.experiments.fairclass_full_adult``).
  Not private.

Reported per (setting, method, α): mean test error and its sd over repetitions, mean |DD|,
share of fits above α, share certified, median fit and fit + predict seconds.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import warnings
from pathlib import Path
from typing import Any

SYN_SIZES = (1500, 3000, 6000, 10000)
SYN_D = 20


def _synthetic(rng: Any, n: int) -> tuple[Any, Any, Any]:
    import numpy as np
    from scipy.special import expit

    beta = 0.9 / np.sqrt(np.arange(1, SYN_D + 1))
    X = np.clip(rng.standard_normal((n, SYN_D)), -4.0, 4.0)
    A = (rng.random(n) < expit(0.8 * X[:, 0] - 0.2)).astype(np.int8)
    y = (rng.random(n) < expit(-0.3 + X @ beta + 0.6 * A)).astype(np.int8)
    return X, A, y


def _metrics(y: Any, A: Any, pred: Any) -> tuple[float, float]:
    import numpy as np

    err = float(np.mean(pred != y))
    dd = float(pred[A == 1].mean() - pred[A == 0].mean())
    return err, dd


def _run_methods(
    setting: str, sites: list[tuple[Any, Any, Any]], test: tuple[Any, Any, Any],
    U_pool: Any, U_test: Any, *, eps: float, delta: float, alphas: tuple[float, ...],
    fdp_variants: list[tuple[str, dict[str, Any]]], cdp_kw: dict[str, Any], seed: int,
) -> list[dict[str, Any]]:
    import numpy as np

    from dpfair.experiments.fairclass_full_adult import nonprivate_lr_predict
    from dpfair.fairclass import CDPFairClassifier
    from dpfair.fairclass.federated import FDPFairClassifier

    Xt, At, yt = test
    Xp = np.concatenate([s[0] for s in sites])
    Ap = np.concatenate([s[1] for s in sites])
    yp = np.concatenate([s[2] for s in sites])
    rows: list[dict[str, Any]] = []

    def record(method: str, alpha: float, pred: Any, fit_s: float, total: float,
               cert: Any) -> None:
        err, dd = _metrics(yt, At, pred)
        rows.append({"setting": setting, "method": method, "alpha": alpha, "error": err,
                     "dd": dd, "fit_s": fit_s, "fit_predict_s": total, "certified": cert,
                     "seed": seed})

    for alpha in alphas:
        for name, kw in fdp_variants:
            clf = FDPFairClassifier(**{"estimator": "linear", "epsilon": eps, "delta": delta,
                                       "alpha": alpha, "random_state": seed, **kw})
            t0 = time.perf_counter()
            clf.fit([s[0] for s in sites], [s[2] for s in sites],
                    sensitive_features=[s[1] for s in sites])
            fit_s = time.perf_counter() - t0
            pred = clf.predict(Xt, sensitive_features=At)
            record(name, alpha, pred, fit_s, time.perf_counter() - t0, clf.certified_)
        cdp = CDPFairClassifier(estimator="linear", epsilon=eps, delta=delta, alpha=alpha,
                                random_state=seed, **cdp_kw)
        t0 = time.perf_counter()
        cdp.fit(Xp, yp, sensitive_features=Ap)
        fit_s = time.perf_counter() - t0
        pred = cdp.predict(Xt, sensitive_features=At)
        record("cdp linear (pooled)", alpha, pred, fit_s, time.perf_counter() - t0,
               cdp.certified_)
    t0 = time.perf_counter()
    preds = nonprivate_lr_predict(U_pool, Ap, yp, U_test, At, alphas)
    total = time.perf_counter() - t0
    for alpha, pred in zip(alphas, preds, strict=True):
        record("non-private LR + exact thresholds", alpha, pred, total, total, None)
    return rows


def run_synthetic(reps: int, scale: float = 1.0, n_test: int = 50_000) -> list[dict[str, Any]]:
    import numpy as np

    sizes = [max(40, round(n * scale)) for n in SYN_SIZES]
    bounds = [(-4.0, 4.0)] * SYN_D
    radius = math.sqrt(SYN_D) / 4.0
    rows: list[dict[str, Any]] = []
    for rep in range(reps):
        rng = np.random.default_rng(7000 + rep)
        sites = [_synthetic(rng, n) for n in sizes]
        test = _synthetic(rng, n_test)
        U_pool = (np.concatenate([s[0] for s in sites]) + 4.0) / 8.0
        U_test = (test[0] + 4.0) / 8.0
        rows += _run_methods(
            "synthetic d=20, 4 sites", sites, test, U_pool, U_test, eps=1.0, delta=1e-5,
            alphas=(0.1,),
            fdp_variants=[("fdp linear", {"feature_bounds": bounds}),
                          ("fdp linear (radius box)", {"feature_bounds": bounds,
                                                       "radius": "box"}),
                          (f"fdp linear (r = sqrt(d)/4 = {radius:.3f})",
                           {"feature_bounds": bounds, "radius": radius}),
                          ("fdp linear (same r, eps = 1000)",
                           {"feature_bounds": bounds, "radius": radius, "epsilon": 1000.0})],
            cdp_kw={"feature_bounds": bounds}, seed=rep,
        )
        print(f"  synthetic rep {rep + 1}/{reps} done", file=sys.stderr, flush=True)
    return rows


def run_adult(n_splits: int, n_sites: int, n_rows: int | None = None) -> list[dict[str, Any]]:
    import numpy as np

    from dpfair.fairclass._linear import FeatureMap
    from dpfair.fairclass.adult_full import load_full_adult

    d = load_full_adult()
    if n_rows is not None:
        d = d.subset(np.arange(n_rows))
    fmap = FeatureMap.build(d.bounds, d.categories, d.X.shape[1])
    U = fmap.transform(d.X)
    kw = {"feature_bounds": d.bounds, "categories": d.categories}
    rows: list[dict[str, Any]] = []
    for split in range(n_splits):
        rng = np.random.default_rng(100 + split)
        perm = rng.permutation(d.n)
        cut = round(0.7 * d.n)
        tr, te = np.sort(perm[:cut]), np.sort(perm[cut:])
        parts = [np.sort(s) for s in np.array_split(rng.permutation(tr), n_sites)]
        delta = (min(s.size for s in parts) / 2) ** -2.0
        sites = [(d.X[s], d.A[s], d.y[s]) for s in parts]
        pool = np.concatenate(parts)
        rows += _run_methods(
            f"adult, {n_sites} sites", sites, (d.X[te], d.A[te], d.y[te]), U[pool], U[te],
            eps=1.0, delta=delta, alphas=(0.05, 0.1),
            fdp_variants=[("fdp linear", kw), ("fdp linear (radius box)", {**kw, "radius": "box"})],
            cdp_kw=kw, seed=split,
        )
        print(f"  adult S={n_sites} split {split + 1}/{n_splits} done", file=sys.stderr,
              flush=True)
    return rows


def summarise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    import numpy as np

    keys: list[tuple[str, str, float]] = []
    for r in rows:
        k = (r["setting"], r["method"], r["alpha"])
        if k not in keys:
            keys.append(k)
    out = []
    for setting, method, alpha in keys:
        sel = [r for r in rows if (r["setting"], r["method"], r["alpha"]) == (setting, method,
                                                                            alpha)]
        errs = np.array([r["error"] for r in sel])
        dds = np.abs(np.array([r["dd"] for r in sel]))
        certs = [r["certified"] for r in sel if r["certified"] is not None]
        out.append({
            "setting": setting, "method": method, "alpha": alpha, "reps": len(sel),
            "error": float(errs.mean()),
            "error_sd": float(errs.std(ddof=1)) if len(sel) > 1 else 0.0,
            "mean_abs_dd": float(dds.mean()), "share_above_alpha": float(np.mean(dds > alpha)),
            "share_certified": float(np.mean(certs)) if certs else None,
            "fit_s": float(np.median([r["fit_s"] for r in sel])),
            "fit_predict_s": float(np.median([r["fit_predict_s"] for r in sel])),
        })
    return out


def _table(summary: list[dict[str, Any]]) -> str:
    head = (f"{'setting':<26} {'method':<34} {'alpha':>5} {'error':>7} {'sd':>6} "
            f"{'|DD|':>6} {'>a':>4} {'cert':>5} {'fit s':>7}")
    lines = [head, "-" * len(head)]
    for s in summary:
        cert = "-" if s["share_certified"] is None else f"{s['share_certified']:.2f}"
        lines.append(
            f"{s['setting']:<26} {s['method']:<34} {s['alpha']:>5.2f} {s['error']:>7.4f} "
            f"{s['error_sd']:>6.4f} {s['mean_abs_dd']:>6.3f} {s['share_above_alpha']:>4.2f} "
            f"{cert:>5} {s['fit_s']:>7.2f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=5, help="synthetic repetitions")
    p.add_argument("--splits", type=int, default=3, help="Adult splits per site count")
    p.add_argument("--sites", type=int, nargs="*", default=[3, 10], help="Adult site counts")
    p.add_argument("--no-adult", action="store_true")
    p.add_argument("--no-synthetic", action="store_true")
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--smoke", action="store_true",
                   help="tiny sizes, one repetition: checks that it runs")
    args = p.parse_args(argv)
    warnings.simplefilter("ignore")
    rows: list[dict[str, Any]] = []
    if args.smoke:
        rows += run_synthetic(1, scale=0.2, n_test=2000)
        rows += run_adult(1, 3, n_rows=3000)
    else:
        if not args.no_synthetic:
            rows += run_synthetic(args.reps)
        if not args.no_adult:
            for s in args.sites:
                rows += run_adult(args.splits, s)
    summary = summarise(rows)
    print(_table(summary))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"summary": summary, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
