"""Share of fits above α in the population: CDP-Fair's certified rule vs the target rule.

Designs: the paper's simulation (§5.1.1, N = 9000, α ∈ {0.05, 0.1}, ε ∈ {1, 4}) with the
population from 200,000 fresh draws, a design the project never tuned to (two uniform
features, A ~ Bern(0.5), η = sigmoid(4(x₁ − ½) + 1.5(2a − 1)), N = 6000, population 10^5),
and the bundled 3-feature Adult (70/30 split, the test split as population).

Run from the repo root::

    .venv/bin/python benchmarks/fairclass_certified_study.py --reps 30 \
        --out docs/results/fairclass_certified.json
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from typing import Any

import numpy as np

from dpfair import UncertifiedFairnessWarning
from dpfair.fairclass import CDPFairClassifier
from dpfair.fairclass.datasets import load_bundled_adult, simulate

ORACLE = {0.05: 0.212, 0.1: 0.198}
#: Population and training sizes; ``--smoke`` shrinks them to check that the study runs.
SIZES = {"paper_pop": 200_000, "unseen_pop": 100_000, "paper": 9000, "unseen": 6000,
         "adult": None}
SMOKE_SIZES = {"paper_pop": 2000, "unseen_pop": 2000, "paper": 800, "unseen": 800,
               "adult": 2000}


def unseen(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    X = rng.uniform(size=(n, 2))
    A = (rng.uniform(size=n) < 0.5).astype(np.int8)
    eta = 1.0 / (1.0 + np.exp(-(4.0 * (X[:, 0] - 0.5) + 1.5 * (2.0 * A - 1.0))))
    y = (rng.uniform(size=n) < eta).astype(np.int64)
    return X, y, A


def pop_metrics(clf: Any, X: np.ndarray, y: np.ndarray, A: np.ndarray) -> tuple[float, float]:
    p = clf.predict_proba(X, sensitive_features=A)[:, 1]
    dd = float(p[A == 1].mean() - p[A == 0].mean())
    err = float(np.mean(np.where(y == 1, 1.0 - p, p)))
    return dd, err


def run(design: str, rule: str, eps: float, alpha: float, reps: int) -> dict[str, Any]:
    if design == "paper":
        big = simulate(SIZES["paper_pop"], rng=987_654)
        popX, popy, popA, bounds = big.X, big.y, big.A, big.feature_bounds
    elif design == "unseen":
        popX, popy, popA = unseen(SIZES["unseen_pop"], np.random.default_rng(987_654))
        bounds = [(0.0, 1.0), (0.0, 1.0)]
    dds, errs, certs, times = [], [], [], []
    for r in range(reps):
        rng = np.random.default_rng(10_000 + r)
        if design == "paper":
            d = simulate(SIZES["paper"], rng=rng)
            X, y, A = d.X, d.y, d.A
            delta = (SIZES["paper"] / 2) ** -2.0
            tX, ty, tA = popX, popy, popA
        elif design == "unseen":
            X, y, A = unseen(SIZES["unseen"], rng)
            delta = (SIZES["unseen"] / 2) ** -2.0
            tX, ty, tA = popX, popy, popA
        else:
            data = load_bundled_adult()
            size = data.y.size if SIZES["adult"] is None else SIZES["adult"]
            perm = rng.permutation(data.y.size)[:size]
            cut = int(0.7 * size)
            tr, te = perm[:cut], perm[cut:]
            X, y, A = data.X[tr], data.y[tr], data.A[tr]
            tX, ty, tA = data.X[te], data.y[te], data.A[te]
            bounds = data.feature_bounds
            delta = (cut / 2) ** -2.0
        clf = CDPFairClassifier(
            epsilon=eps,
            delta=delta,
            alpha=alpha,
            feature_bounds=bounds,
            threshold_rule=rule,
            random_state=r,
        )
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UncertifiedFairnessWarning)
            clf.fit(X, y, sensitive_features=A)
        times.append(time.perf_counter() - t0)
        dd, err = pop_metrics(clf, tX, ty, tA)
        dds.append(dd)
        errs.append(err)
        certs.append(clf.certified_)
    dd_arr = np.abs(np.array(dds))
    out = {
        "design": design,
        "rule": rule,
        "epsilon": eps,
        "alpha": alpha,
        "reps": reps,
        "share_above_alpha": float(np.mean(dd_arr > alpha)),
        "share_above_alpha_certified": float(
            np.mean([(a > alpha) and c is True for a, c in zip(dd_arr, certs, strict=True)])
        ),
        "share_certified": None if certs[0] is None else float(np.mean([c is True for c in certs])),
        "mean_abs_dd": float(dd_arr.mean()),
        "mean_error": float(np.mean(errs)),
        "sd_error": float(np.std(errs)),
        "mean_fit_s": float(np.mean(times)),
    }
    if design == "paper" and alpha in ORACLE:
        out["error_cost_vs_oracle"] = out["mean_error"] - ORACLE[alpha]
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--designs", default="unseen,paper,adult")
    ap.add_argument("--eps", default="1,4")
    ap.add_argument("--alphas", default="0.05,0.1")
    ap.add_argument("--rules", default="certified,target")
    ap.add_argument("--out", default=None)
    ap.add_argument("--smoke", action="store_true", help="tiny sizes: checks that it runs")
    args = ap.parse_args()
    if args.smoke:
        SIZES.update(SMOKE_SIZES)
    rows = []
    for design in args.designs.split(","):
        for rule in args.rules.split(","):
            for eps in (float(e) for e in args.eps.split(",")):
                for alpha in (float(a) for a in args.alphas.split(",")):
                    row = run(design, rule, eps, alpha, args.reps)
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
