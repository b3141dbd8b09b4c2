"""Where the certified CDP-Fair classifier's error above the fair-Bayes oracle comes from.

For each design, ε and α: ``reps`` fits of the default certified classifier (demographic
parity), each scored on its own *fresh* population draw of ``--pop`` rows (default 100,000),
and three counterfactual fits that share its split and its calibration half:

* ``full``: the default private fit (private S1, private S2 and certificate);
* ``np_s1``: the same kernel estimator *without* S1's noise (same bandwidth, grid and
  training half, exact counts), then the private S2 on the same calibration half; for a
  linear-score design (``categorical``) an unpenalised logistic fit on the same public
  feature map and the group;
* ``true_eta``: the true η (and the population's group shares) in place of S1, then the
  private S2 on the same calibration half.

Each S2 is run by :func:`dpfair.fairclass._pipeline.s2_threshold` with the fit's budget plan
(fresh S2 noise for the counterfactuals). With ``R*(a)`` the fair-Bayes risk at level a (the
exact group-wise threshold on the true η, on the scoring population) and α_t the private
fit's aim (its certificate's ``target`` = α − t − g), the excess error of ``full`` splits as

    err(full) − R*(α) = [err(full) − err(true_eta)]            (a) S1 estimation
                      + [R*(α_t) − R*(α)]                      (b) aim shortfall
                      + [err(true_eta) − R*(α_t)]              (c) S2 randomness/certificate

and (a) = [err(full) − err(np_s1)] (a1, S1's privacy noise) + [err(np_s1) − err(true_eta)]
(a2, the kernel estimate's bias and sampling error at the private bandwidth). The
counterfactuals are diagnostics only (non-private); nothing here is a release.

Run from the repo root (a few minutes)::

    PYTHONPATH=src .venv/bin/python benchmarks/fairclass_error_budget.py --reps 30 \\
        --designs unseen,paper6k,paper,wave,categorical --eps 0.5,1,4 \\
        --out docs/results/fairclass_error_budget.json
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sklearn.linear_model import LogisticRegression

from dpfair import UncertifiedFairnessWarning
from dpfair.fairclass import CDPFairClassifier
from dpfair.fairclass._model import ReleasedFold, release_s1
from dpfair.fairclass._pipeline import CalibrationScores, s2_threshold
from dpfair.fairclass._split import draw_split
from fairclass_plan_study import DESIGNS, Arrays, Design, oracle


def _error(eta: np.ndarray, f: np.ndarray) -> float:
    return float(np.mean(eta * (1.0 - f) + (1.0 - eta) * f))


def _decide(z: np.ndarray, A: np.ndarray, tau: float) -> np.ndarray:
    return np.where(A == 1, z >= tau, z <= tau).astype(float)


def _true_scores(eta: np.ndarray, A: np.ndarray, pi: np.ndarray) -> np.ndarray:
    return 2.0 * (2.0 * A - 1.0) * pi[A.astype(np.intp)] * (eta - 0.5)


def one_rep(design: Design, eps: float, alpha: float, rep: int, pop_n: int,
            share: float, clf_kwargs: dict[str, Any]) -> dict[str, float]:
    """The four errors and the oracle terms of one fit (see the module docstring)."""
    n = design.n
    delta = (n / 2) ** -2.0
    X, y, A, eta = design.draw(n, np.random.default_rng(50_000 + rep))
    pop: Arrays = design.draw(pop_n, np.random.default_rng(7_000_000 + rep))
    Xp, _yp, Ap, etap = pop
    clf = CDPFairClassifier(epsilon=eps, delta=delta, alpha=alpha, random_state=rep,
                            calibration_share=share, **design.kwargs, **clf_kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UncertifiedFairnessWarning)
        clf.fit(X, y, sensitive_features=A)
    err_full = _error(etap, clf.predict_proba(Xp, sensitive_features=Ap)[:, 1])
    cert = clf.certificates_[0]
    plan, grid = clf.budget_plan_, clf.grid_
    beta = float(clf.fail_prob)

    # The fit's split: its generator's first draw (``_pipeline`` module docstring).
    split = draw_split("permutation", np.random.default_rng(rep), n, share)
    tr, cal = split.rows(n)
    s2_rng = np.random.default_rng(10_000_000 + rep)
    if grid is not None:
        # np_s1: the same kernel estimate without S1's noise, private S2.
        lows = np.array([b[0] for b in design.kwargs["feature_bounds"]], dtype=float)
        highs = np.array([b[1] for b in design.kwargs["feature_bounds"]], dtype=float)
        U, Up = (X - lows) / (highs - lows), (Xp - lows) / (highs - lows)
        eta_g, pi_np = release_s1(grid, U[tr], A[tr], y[tr], sigma_count=None,
                                  mechanism=None, rng=s2_rng)
        fold = ReleasedFold(eta=eta_g, pi=pi_np, tau=0.0)
        z_cal, z_pop = fold.scores(grid, U[cal], A[cal]), fold.scores(grid, Up, Ap)
    else:
        # np_s1: an unpenalised logistic fit on the same public feature map (and a).
        fmap = clf.feature_map_
        V, Vp = (np.column_stack([fmap.transform(M, None), B])
                 for M, B in ((X, A), (Xp, Ap)))
        lr = LogisticRegression(C=1e6, max_iter=2000).fit(V[tr], y[tr])
        p1 = float(np.mean(A[tr] == 1))
        pi_np = np.array([1.0 - p1, p1])
        z_cal = _true_scores(lr.predict_proba(V[cal])[:, 1], A[cal], pi_np)
        z_pop = _true_scores(lr.predict_proba(Vp)[:, 1], Ap, pi_np)
    tau_np, _ = s2_threshold(CalibrationScores(z_cal, A[cal]), pi_np, (alpha, 0.0), plan,
                             s2_rng, beta)
    err_np = _error(etap, _decide(z_pop, Ap, tau_np))

    # true_eta: η and the population's π in place of S1, private S2.
    pi_true = np.array([np.mean(Ap == 0), np.mean(Ap == 1)])
    z_true_cal = _true_scores(eta[cal], A[cal], pi_true)
    tau_t, _ = s2_threshold(CalibrationScores(z_true_cal, A[cal]), pi_true, (alpha, 0.0),
                            plan, s2_rng, beta)
    err_true = _error(etap, _decide(_true_scores(etap, Ap, pi_true), Ap, tau_t))

    r_alpha = oracle("dp", alpha, pop)
    r_aim = oracle("dp", cert.target, pop)
    return {
        "err_full": err_full, "err_np_s1": err_np, "err_true_eta": err_true,
        "oracle_alpha": r_alpha, "oracle_aim": r_aim, "aim": cert.target,
        "margin_t": cert.margin, "certified": float(cert.certified),
        "bandwidth": float("nan") if clf.bandwidth_ is None else float(clf.bandwidth_),
    }


def run(name: str, eps: float, alpha: float, reps: int, pop_n: int, share: float,
        clf_kwargs: dict[str, Any] | None = None) -> dict[str, Any]:
    design = DESIGNS[name]
    rows = [one_rep(design, eps, alpha, r, pop_n, share, clf_kwargs or {})
            for r in range(reps)]
    m = {k: float(np.mean([row[k] for row in rows])) for k in rows[0]}
    full, true, ra = (np.array([row[k] for row in rows])
                      for k in ("err_full", "err_true_eta", "oracle_alpha"))
    se = {"se_excess": float(np.std(full - ra, ddof=1) / np.sqrt(reps)),
          "se_a_s1": float(np.std(full - true, ddof=1) / np.sqrt(reps))}
    return {
        "design": name, "epsilon": eps, "alpha": alpha, "reps": reps, "pop": pop_n,
        "calibration_share": share, "n": design.n,
        **{k: (None if np.isnan(v) else v) for k, v in m.items()},  # JSON: no NaN
        "excess": m["err_full"] - m["oracle_alpha"],
        "a_s1": m["err_full"] - m["err_true_eta"],
        "a1_s1_noise": m["err_full"] - m["err_np_s1"],
        "a2_s1_bias": m["err_np_s1"] - m["err_true_eta"],
        "b_aim": m["oracle_aim"] - m["oracle_alpha"],
        "c_s2": m["err_true_eta"] - m["oracle_aim"],
        **se,
    }


def markdown(rows: list[dict[str, Any]]) -> str:
    out = ["| design | ε | α | error − oracle | (a) S1 | (a1) S1 noise | (a2) S1 bias | "
           "(b) aim α−t−g | (c) S2 | mean aim | h | certified |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(
            f"| {r['design']} | {r['epsilon']:g} | {r['alpha']:g} | "
            f"{r['excess']:+.4f} ± {r['se_excess']:.4f} | {r['a_s1']:+.4f} | "
            f"{r['a1_s1_noise']:+.4f} | {r['a2_s1_bias']:+.4f} | {r['b_aim']:+.4f} | "
            f"{r['c_s2']:+.4f} | {r['aim']:.4f} | "
            f"{'—' if r['bandwidth'] is None else format(r['bandwidth'], '.3f')} | "
            f"{r['certified']:.2f} |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--designs", default="unseen,paper6k",
                    help="comma-separated designs of fairclass_plan_study.py")
    ap.add_argument("--eps", default="1")
    ap.add_argument("--alphas", default="0.05,0.1")
    ap.add_argument("--pop", type=int, default=100_000, help="rows of each fresh population")
    ap.add_argument("--calibration-share", type=float, default=0.5)
    ap.add_argument("--out", default=None)
    ap.add_argument("--smoke", action="store_true", help="tiny sizes: checks that it runs")
    args = ap.parse_args()
    reps, pop_n = args.reps, args.pop
    if args.smoke:
        reps, pop_n = min(reps, 2), 5000
        for key, d in list(DESIGNS.items()):
            DESIGNS[key] = Design(d.draw, 1500, d.kwargs)
    rows = []
    for name in args.designs.split(","):
        for eps in (float(e) for e in args.eps.split(",")):
            for alpha in (float(a) for a in args.alphas.split(",")):
                row = run(name, eps, alpha, reps, pop_n, args.calibration_share)
                rows.append(row)
                print(json.dumps(row), flush=True)
    print(markdown(rows))
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
