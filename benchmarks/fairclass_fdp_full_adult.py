"""FDP-Fair on the full Adult data split into 3 sites: RFF (all attributes) vs kernel-3.

    .venv/bin/python benchmarks/fairclass_fdp_full_adult.py --splits 3 \
        --json docs/results/fairclass_fdp_full_adult.json

Setting (issue 12, part 2, federated): the bundled full Adult
(``dpfair.fairclass.adult_full``: 13 features + A = sex, public bounds and categories
there), random 70/30 splits; the training rows are dealt at random to S = 3 sites of equal
size (≈ 11,400 rows each), δ_s = (N_s/2)^-2, ε_s ∈ {1, 4} at every site, α ∈ {0.05, 0.1},
default confidence rule (β = 0.05). Per split and cell: test error, |DD| on the test split
and whether it exceeds α, whether the fit was certified, fit time and fit + predict time.

Methods:

* ``fdp rff (all attributes)`` — FDPFairClassifier(estimator="rff", categories=…), D given
  by ``--features-dim`` (default 2048), public default bandwidth.
* ``fdp kernel-3`` — FDPFairClassifier on (age, workclass code, education-num), the
  paper's 3 features, kernel grid (today's FDP-Fair default).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path
from typing import Any

EPS = (1.0, 4.0)
ALPHAS = (0.05, 0.1)
N_SITES = 3
_WORKCLASS_CODES = (
    "?", "Federal-gov", "Local-gov", "Never-worked", "Private", "Self-emp-inc",
    "Self-emp-not-inc", "State-gov", "Without-pay",
)


def _three_features(X: Any) -> Any:
    import numpy as np

    code = {c: k for k, c in enumerate(_WORKCLASS_CODES)}
    wc = np.array([code[v] for v in X[:, 1]], dtype=np.float64)
    return np.column_stack([X[:, 0].astype(float), wc, X[:, 4].astype(float)])


def run(
    n_splits: int, features_dim: int, n_rows: int | None = None
) -> list[dict[str, Any]]:
    import numpy as np

    from dpfair import UncertifiedFairnessWarning
    from dpfair.fairclass.adult_full import load_full_adult
    from dpfair.fairclass.datasets import ADULT_BOUNDS
    from dpfair.fairclass.federated import FDPFairClassifier

    warnings.simplefilter("ignore", UncertifiedFairnessWarning)
    d = load_full_adult()
    if n_rows is not None:  # --smoke: the first rows only
        d = d.subset(np.arange(n_rows))
    X3 = _three_features(d.X)
    rows: list[dict[str, Any]] = []
    for split in range(n_splits):
        rng = np.random.default_rng(100 + split)
        perm = rng.permutation(d.n)
        cut = round(0.7 * d.n)
        tr, te = np.sort(perm[:cut]), np.sort(perm[cut:])
        sites = [np.sort(s) for s in np.array_split(rng.permutation(tr), N_SITES)]
        delta = (min(s.size for s in sites) / 2) ** -2.0
        yt, At = d.y[te], d.A[te]
        for eps in EPS:
            for alpha in ALPHAS:
                configs = [
                    ("fdp rff (all attributes)", d.X,
                     {"feature_bounds": d.bounds, "categories": d.categories,
                      "estimator": "rff", "features_dim": features_dim}),
                    ("fdp kernel-3", X3, {"feature_bounds": ADULT_BOUNDS,
                                          "estimator": "kernel"}),
                ]
                for name, X, kw in configs:
                    clf = FDPFairClassifier(epsilon=eps, delta=delta, alpha=alpha,
                                            random_state=1000 * split + int(eps * 10), **kw)
                    t0 = time.perf_counter()
                    clf.fit([X[s] for s in sites], [d.y[s] for s in sites],
                            sensitive_features=[d.A[s] for s in sites])
                    fit_s = time.perf_counter() - t0
                    pred = clf.predict(X[te], sensitive_features=At)
                    total = time.perf_counter() - t0
                    p = np.asarray(pred, dtype=float)
                    rows.append({
                        "method": name, "split": split, "epsilon": eps, "alpha": alpha,
                        "error": float(np.mean(p != yt)),
                        "dd": float(p[At == 1].mean() - p[At == 0].mean()),
                        "fit_s": fit_s, "fit_predict_s": total, "certified": clf.certified_,
                        "bandwidth": clf.protocol_.bandwidth,
                    })
        print(f"  split {split + 1}/{n_splits} done", file=sys.stderr, flush=True)
    return rows


def summarise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    import numpy as np

    keys = sorted({(r["method"], r["epsilon"], r["alpha"]) for r in rows})
    out = []
    for method, eps, alpha in keys:
        sel = [r for r in rows if (r["method"], r["epsilon"], r["alpha"]) == (method, eps, alpha)]
        errs = np.array([r["error"] for r in sel])
        dds = np.abs(np.array([r["dd"] for r in sel]))
        out.append({
            "method": method, "epsilon": eps, "alpha": alpha, "splits": len(sel),
            "error": float(errs.mean()),
            "error_sd": float(errs.std(ddof=1)) if len(sel) > 1 else 0.0,
            "mean_abs_dd": float(dds.mean()),
            "above_alpha": int(np.sum(dds > alpha)),
            "certified": float(np.mean([bool(r["certified"]) for r in sel])),
            "fit_s": float(np.median([r["fit_s"] for r in sel])),
            "fit_predict_s": float(np.median([r["fit_predict_s"] for r in sel])),
        })
    return out


def table(summary: list[dict[str, Any]]) -> str:
    lines = [
        "| method | ε | α | test error (sd over splits) | mean test \\|DD\\| | splits with "
        "\\|DD\\| > α | certified | fit s (median) | fit + predict s (median) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for s in summary:
        lines.append(
            f"| {s['method']} | {s['epsilon']:g} | {s['alpha']:g} | {s['error']:.4f} "
            f"({s['error_sd']:.4f}) | {s['mean_abs_dd']:.3f} | {s['above_alpha']}/{s['splits']}"
            f" | {s['certified']:.2f} | {s['fit_s']:.2f} | {s['fit_predict_s']:.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--splits", type=int, default=3)
    ap.add_argument("--features-dim", type=int, default=2048)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--smoke", action="store_true",
                    help="3,000 rows, one split, one (ε, α), D = 64: checks that it runs")
    args = ap.parse_args()
    global EPS, ALPHAS
    if args.smoke:
        EPS, ALPHAS = (1.0,), (0.1,)
        args.splits, args.features_dim = 1, min(args.features_dim, 64)
    rows = run(args.splits, args.features_dim, 3000 if args.smoke else None)
    summary = summarise(rows)
    print(table(summary))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"rows": rows, "summary": summary}, indent=1) + "\n")


if __name__ == "__main__":
    main()
