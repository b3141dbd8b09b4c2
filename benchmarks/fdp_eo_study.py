"""FDP-Fair under equal opportunity vs demographic parity: certification and the population cap.

    .venv/bin/python benchmarks/fdp_eo_study.py --reps 100
    .venv/bin/python benchmarks/fdp_eo_study.py --smoke

Design (issue 20, item 3, federated): the paper's simulation (``simulate``), S = 4 sites of
2,000 rows, δ = 10⁻⁶ per site, the kernel grid and the default confidence rule, one fold.
Per (ε, α) cell and repetition r the sites' data are fresh draws seeded by (ε, r); each
constraint is fitted on the same data with ``random_state=r``. The population EOD (and DD) of
the released classifier is computed from 200,000 fresh draws with the design's true η
(TPR_a = E[p(x, a)·η | a]/E[η | a]), so the only error is Monte Carlo (sd < 0.003).

Reported per cell and constraint: certified fits, certified fits above α in the population
(on the capped disparity: |EOD| for equal opportunity, |DD| for demographic parity), mean
|EOD|, mean risk. The same fits as the slow test
``tests/fairclass/federated/test_eo_fdp.py::test_certified_eod_cap_sweep``.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

import numpy as np

from dpfair import UncertifiedFairnessWarning
from dpfair.fairclass.datasets import simulate, simulation_eta
from dpfair.fairclass.federated import FDPFairClassifier

BOUNDS = [(0.0, 1.0), (0.0, 1.0)]
CONSTRAINTS = ("equal_opportunity", "demographic_parity")


def fit_one(eps: float, alpha: float, rep: int, constraints: str, n_site: int,
            big: object, eta: np.ndarray) -> dict[str, float | bool]:
    """One fit on fresh site data; population EOD, DD and risk of the release."""
    ss = np.random.SeedSequence([round(eps * 1000), rep, 7]).spawn(4)
    data = [simulate(n_site, rng=np.random.default_rng(s)) for s in ss]
    clf = FDPFairClassifier(epsilon=eps, delta=1000.0**-2, alpha=alpha, feature_bounds=BOUNDS,
                            random_state=rep, clip=True, constraints=constraints)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UncertifiedFairnessWarning)
        clf.fit([d.X for d in data], [d.y for d in data], sensitive_features=[d.A for d in data])
    X, A = big.X, big.A  # type: ignore[attr-defined]
    p = clf.predict_proba(X, sensitive_features=A)[:, 1]
    tpr = [float(np.sum((p * eta)[A == a]) / np.sum(eta[A == a])) for a in (0, 1)]
    return {
        "eod": tpr[1] - tpr[0],
        "dd": float(p[A == 1].mean() - p[A == 0].mean()),
        "risk": float(np.mean(p * (1.0 - eta) + (1.0 - p) * eta)),
        "certified": bool(clf.certified_),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--eps", type=float, nargs="*", default=[1.0, 4.0])
    ap.add_argument("--alphas", type=float, nargs="*", default=[0.1, 0.2])
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--smoke", action="store_true", help="1 rep, small population")
    args = ap.parse_args(argv)
    reps = 1 if args.smoke else args.reps
    big = simulate(5_000 if args.smoke else 200_000, rng=654_321)
    eta = simulation_eta(big.X, big.A)
    rows = []
    for eps in args.eps:
        for alpha in args.alphas:
            for c in CONSTRAINTS:
                res = [fit_one(eps, alpha, r, c, 2000, big, eta) for r in range(reps)]
                key = "eod" if c == "equal_opportunity" else "dd"
                cert = [r for r in res if r["certified"]]
                row = {
                    "epsilon": eps, "alpha": alpha, "constraints": c, "reps": reps,
                    "certified": len(cert),
                    "certified_above_alpha": sum(abs(float(r[key])) > alpha for r in cert),
                    "mean_abs_eod": float(np.mean([abs(float(r["eod"])) for r in res])),
                    "mean_risk": float(np.mean([float(r["risk"]) for r in res])),
                }
                rows.append(row)
                print(f"eps={eps:g} alpha={alpha:g} {c:18s} certified {row['certified']}/"
                      f"{reps}, certified above alpha {row['certified_above_alpha']}, mean "
                      f"|EOD| {row['mean_abs_eod']:.3f}, mean risk {row['mean_risk']:.3f}",
                      flush=True)
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
