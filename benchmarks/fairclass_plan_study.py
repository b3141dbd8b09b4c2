"""Certification as planned (issue 20): rate, share above α among certified, error vs oracle.

For each design, constraint (demographic parity "dp", equal opportunity "eo"), ε and α:
``reps`` independent CDP-Fair fits (certified rule, defaults), each scored on a fresh
population draw of 200,000 rows (100,000 with ``--pop``):

* ``certified``: share of fits whose certificate passed;
* ``planned``: :func:`dpfair.fairclass.plan_certification`'s predicted rate (public numbers
  only: n, ε, δ, β and the design's smaller share), and its ``min_alpha``;
* ``above_given_certified``: share of certified fits whose population |DD| (or |EOD|) > α
  (guarantee: P(above and certified) ≤ β = 0.05);
* ``error_vs_oracle``: mean population error − the fair-Bayes risk at α (the exact
  group-wise threshold on the true η with the population's own curve);
* ``mean_side_share`` / ``plan_side_share``: the fits' and the planner's side share κ of
  the certificate's β (½: symmetric; ``fairclass/_certify.py``, side allocation).

Designs: ``paper`` (§5.1.1, N = 9000 and ``paper6k`` N = 6000), ``unseen`` (two uniform
features, A ~ Bern(0.5), logistic η; N = 6000), ``wave`` (kernel score, non-linear η =
sigmoid(3 sin(2πx₁) + 2x₂ − 1 + (2a − 1)); N = 6000), ``categorical`` (linear score, two
categorical columns and an integer column, tied scores; N = 6000).

Run from the repo root (about 20 min on a shared 2-core machine)::

    PYTHONPATH=src .venv/bin/python benchmarks/fairclass_plan_study.py --reps 30 \\
        --out docs/results/fairclass_plan.json
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpfair import UncertifiedFairnessWarning
from dpfair.fairclass import CDPFairClassifier, plan_certification
from dpfair.fairclass._rule import opportunity_scores
from dpfair.fairclass._threshold import dd_steps, exact_fair_threshold
from dpfair.fairclass.datasets import simulate, simulation_eta

Arrays = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # X, y, A, eta


def _sigmoid(v: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-v))


def _draw(eta: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return (rng.uniform(size=eta.size) < eta).astype(np.int64)


def paper(n: int, rng: np.random.Generator) -> Arrays:
    d = simulate(n, rng=rng)
    return d.X, d.y.astype(np.int64), d.A, simulation_eta(d.X, d.A)


def unseen(n: int, rng: np.random.Generator) -> Arrays:
    X = rng.uniform(size=(n, 2))
    A = (rng.uniform(size=n) < 0.5).astype(np.int8)
    eta = _sigmoid(4.0 * (X[:, 0] - 0.5) + 1.5 * (2.0 * A - 1.0))
    return X, _draw(eta, rng), A, eta


def wave(n: int, rng: np.random.Generator) -> Arrays:
    X = rng.uniform(size=(n, 2))
    A = (rng.uniform(size=n) < 0.4).astype(np.int8)
    eta = _sigmoid(3.0 * np.sin(2 * np.pi * X[:, 0]) + 2.0 * X[:, 1] - 1.0 + (2.0 * A - 1.0))
    return X, _draw(eta, rng), A, eta


def categorical(n: int, rng: np.random.Generator) -> Arrays:
    c1 = rng.integers(0, 4, n)
    c2 = rng.integers(0, 3, n)
    x = rng.integers(0, 11, n)
    A = (rng.uniform(size=n) < 0.4).astype(np.int8)
    lin = (np.array([-1.0, 0.0, 0.5, 1.2])[c1] + np.array([0.3, -0.4, 0.0])[c2]
           + 0.25 * (x - 5) + 1.0 * (2 * A - 1))
    eta = _sigmoid(lin)
    return np.column_stack([c1, c2, x]).astype(float), _draw(eta, rng), A, eta


@dataclass(frozen=True)
class Design:
    draw: Callable[[int, np.random.Generator], Arrays]
    n: int
    kwargs: dict[str, Any]


DESIGNS = {
    "paper": Design(paper, 9000, {"feature_bounds": [(0.0, 1.0)] * 2}),
    "paper6k": Design(paper, 6000, {"feature_bounds": [(0.0, 1.0)] * 2}),
    "unseen": Design(unseen, 6000, {"feature_bounds": [(0.0, 1.0)] * 2}),
    "wave": Design(wave, 6000, {"feature_bounds": [(0.0, 1.0)] * 2}),
    "categorical": Design(categorical, 6000, {
        "estimator": "linear", "categories": {0: [0.0, 1.0, 2.0, 3.0], 1: [0.0, 1.0, 2.0]},
        "feature_bounds": [None, None, (0.0, 10.0)]}),
}
CONSTRAINT = {"dp": "demographic_parity", "eo": "equal_opportunity"}
POP = {"n": 200_000}


def disparity(kind: str, p: np.ndarray, y: np.ndarray, A: np.ndarray) -> float:
    if kind == "dp":
        return float(p[A == 1].mean() - p[A == 0].mean())
    return float(p[(A == 1) & (y == 1)].mean() - p[(A == 0) & (y == 1)].mean())


def oracle(kind: str, alpha: float, pop: Arrays) -> float:
    """Fair-Bayes risk at α: the exact threshold on the true η's population curve."""
    _X, y, A, eta = pop
    if kind == "dp":
        pi = np.array([np.mean(A == 0), np.mean(A == 1)])
        z = 2.0 * (2.0 * A - 1.0) * pi[A.astype(int)] * (eta - 0.5)
        steps = dd_steps(z[A == 1], z[A == 0])
    else:
        pos = np.array([np.mean((A == 0) & (y == 1)), np.mean((A == 1) & (y == 1))])
        z = opportunity_scores(eta, A, pos)
        keep = y == 1
        steps = dd_steps(z[keep & (A == 1)], z[keep & (A == 0)])
    tau = exact_fair_threshold(steps, alpha).tau
    f = np.where(A == 1, z >= tau, z <= tau).astype(float)
    return float(np.mean(eta * (1.0 - f) + (1.0 - eta) * f))


def smaller_share(kind: str, pop: Arrays) -> tuple[float, float]:
    _X, y, A, _eta = pop
    if kind == "dp":
        s = float(min(np.mean(A == 1), np.mean(A == 0)))
        return s, 1.0 - s
    pos = sorted([float(np.mean((A == a) & (y == 1))) for a in (0, 1)])
    return pos[0], pos[1]


def run(name: str, kind: str, eps: float, alpha: float, reps: int,
        calibration_share: float | str = 0.5) -> dict[str, Any]:
    design = DESIGNS[name]
    pop = design.draw(POP["n"], np.random.default_rng(987_654))
    n = design.n
    delta = (n / 2) ** -2.0
    lo, hi = smaller_share(kind, pop)
    plan = plan_certification(n, eps, delta, lo, constraints=CONSTRAINT[kind],
                              max_group_share=hi, calibration_share=calibration_share,
                              alpha=alpha)
    share = plan.calibration_share  # "auto": the planner's choice for this α
    certs, dds, errs, times, kappas = [], [], [], [], []
    for r in range(reps):
        X, y, A, _ = design.draw(n, np.random.default_rng(50_000 + r))
        clf = CDPFairClassifier(epsilon=eps, delta=delta, alpha=alpha, random_state=r,
                                constraints=CONSTRAINT[kind],
                                calibration_share=share, **design.kwargs)
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UncertifiedFairnessWarning)
            clf.fit(X, y, sensitive_features=A)
        times.append(time.perf_counter() - t0)
        p = clf.predict_proba(pop[0], sensitive_features=pop[2])[:, 1]
        dds.append(disparity(kind, p, pop[1], pop[2]))
        errs.append(float(np.mean(pop[3] * (1.0 - p) + (1.0 - pop[3]) * p)))
        certs.append(bool(clf.certified_))
        kappas.append(float(np.mean([c.side_share for c in clf.certificates_])))
    above = np.abs(np.array(dds)) > alpha
    cert = np.array(certs)
    orc = oracle(kind, alpha, pop)
    return {
        "design": name, "constraint": kind, "epsilon": eps, "alpha": alpha, "reps": reps,
        "n": n, "calibration_share": share, "share_requested": calibration_share,
        "certified": float(cert.mean()),
        "planned": plan.certification_probability(alpha), "plan_min_alpha": plan.min_alpha,
        "plan_margin": plan.margin, "plan_sampling_margin": plan.sampling_margin,
        "plan_side_share": plan.side_choice(alpha).side_share,
        "mean_side_share": float(np.mean(kappas)),
        "above_given_certified": float(above[cert].mean()) if cert.any() else None,
        "n_certified": int(cert.sum()), "n_above_certified": int((above & cert).sum()),
        "above_any": float(above.mean()), "mean_abs_disparity": float(np.mean(np.abs(dds))),
        "mean_error": float(np.mean(errs)), "oracle_error": orc,
        "error_vs_oracle": float(np.mean(errs)) - orc,
        "error_se": float(np.std(errs, ddof=1) / np.sqrt(len(errs))) if len(errs) > 1 else None,
        "mean_fit_s": float(np.mean(times)),
    }


def _se(row: dict[str, Any]) -> str:
    """The " ± s.e." of the mean error over the fits (the population is fixed), if recorded."""
    se = row.get("error_se")
    return "" if se is None else f" ± {se:.4f}"


def markdown(rows: list[dict[str, Any]]) -> str:
    """The rows as the table of ``docs/fairclass_certified.md``."""
    out = ["| design | constraint | ε | α | share | certified | planned | min α (plan) | "
           "t₀ (plan) | above α / certified | error − oracle | mean \\|disparity\\| |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        above = (f"{r['n_above_certified']}/{r['n_certified']}" if r["n_certified"] else "—")
        req = r.get("share_requested", r.get("calibration_share", 0.5))
        share = f"{r.get('calibration_share', 0.5):g}" + (" (auto)" if req == "auto" else "")
        out.append(
            f"| {r['design']} | {r['constraint'].upper()} | {r['epsilon']:g} | {r['alpha']:g} | "
            f"{share} | {r['certified']:.2f} | {r['planned']:.2f} | "
            f"{r['plan_min_alpha']:.3f} | {r.get('plan_sampling_margin', float('nan')):.3f} | "
            f"{above} | {r['error_vs_oracle']:+.4f}{_se(r)} | {r['mean_abs_disparity']:.3f} |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--designs", default="paper,paper6k,unseen,wave,categorical")
    ap.add_argument("--constraints", default="dp,eo")
    ap.add_argument("--eps", default="1,4")
    ap.add_argument("--alphas", default="0.05,0.1")
    ap.add_argument("--pop", type=int, default=200_000)
    ap.add_argument("--calibration-shares", default="0.5",
                    help="comma-separated calibration shares (the estimator's "
                         "calibration_share) or 'auto' (plan_certification's choice for "
                         "the cell's alpha), each a separate run of every cell")
    ap.add_argument("--out", default=None)
    ap.add_argument("--smoke", action="store_true", help="tiny sizes: checks that it runs")
    ap.add_argument("--table", default=None,
                    help="print the rows of this JSON file as a markdown table and exit")
    args = ap.parse_args()
    if args.table:
        with open(args.table) as fh:
            print(markdown(json.load(fh)))
        return
    POP["n"] = args.pop
    if args.smoke:
        POP["n"] = 5000
        for key, d in list(DESIGNS.items()):
            DESIGNS[key] = Design(d.draw, 1500, d.kwargs)
    rows = []
    for name in args.designs.split(","):
        for kind in args.constraints.split(","):
            for eps in (float(e) for e in args.eps.split(",")):
                for alpha in (float(a) for a in args.alphas.split(",")):
                    for share in (c if c == "auto" else float(c)
                                  for c in args.calibration_shares.split(",")):
                        row = run(name, kind, eps, alpha, args.reps, share)
                        rows.append(row)
                        print(json.dumps(row), flush=True)
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
