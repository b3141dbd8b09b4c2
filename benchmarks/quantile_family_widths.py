"""Width and simultaneous coverage of several quantiles from one release (issue 22, item 2).

For each design, ``--reps`` fresh samples; on each, ``dpfair.quantiles.confidence_intervals``
(defaults: the localised path) for the family ``--qs`` at level α = 0.05 (simultaneous).
Width is each interval's width ÷ the exact non-private interval for the same q at the
Bonferroni level α/K on the same sample (``dpfair.quantiles.nonprivate_interval``), averaged
over q and repetitions; coverage is the fraction of repetitions whose K intervals all hold
their population quantiles. Seeds are fixed, so the same command gives the same table.

Before / after a change, run the same command on each checkout::

    PYTHONPATH=src .venv/bin/python benchmarks/quantile_family_widths.py
    PYTHONPATH=/tmp/base/src .venv/bin/python benchmarks/quantile_family_widths.py

Nothing here asserts; ``--json`` saves every number.
"""

from __future__ import annotations

import argparse
import json
import warnings
from typing import Any

import numpy as np
from scipy import stats

import dpfair

DESIGNS: dict[str, tuple[Any, int, float, tuple[float, float]]] = {
    "paper (lognormal, n=1000, rho=0.5)": (stats.lognorm(s=1.0, scale=1.5), 1000, 0.5,
                                           (-5.0, 15.0)),
    "n=1e5 (lognormal, rho=0.5)": (stats.lognorm(s=1.0, scale=1.5), 100_000, 0.5,
                                   (-5.0, 15.0)),
    "ties (poisson 3.5, n=5000, rho=0.5)": (stats.poisson(3.5), 5000, 0.5, (-5.0, 15.0)),
    "gamma wide bounds (n=1e5, rho=0.5)": (stats.gamma(a=2.0, scale=3.0), 100_000, 0.5,
                                           (-1e6, 1e6)),
}
QS = (0.1, 0.25, 0.5, 0.75, 0.9)
ALPHA = 0.05


def family_cell(law: Any, n: int, rho: float, bounds: tuple[float, float],
                qs: tuple[float, ...], method: str, reps: int, seed: int) -> dict[str, Any]:
    """Mean relative width (per q and overall) and simultaneous coverage of one cell."""
    data_rng = np.random.default_rng(seed)
    noise_rng = np.random.default_rng(seed + 1)
    truth = law.ppf(qs)
    rel = np.zeros((reps, len(qs)))
    absw = np.zeros((reps, len(qs)))
    hits = 0
    for r in range(reps):
        x = law.rvs(size=n, random_state=data_rng)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = dpfair.quantiles.confidence_intervals(x, list(qs), rho=rho, bounds=bounds,
                                                        alpha=ALPHA, method=method,
                                                        rng=noise_rng)
        ok = True
        for j, (iv, q, t) in enumerate(zip(res.intervals, qs, truth, strict=True)):
            lo_np, hi_np = dpfair.quantiles.nonprivate_interval(x, q, ALPHA / len(qs))
            # an atom can make the exact interval a point: no ratio there (absolute below)
            rel[r, j] = ((iv.high - iv.low) / (hi_np - lo_np) if hi_np > lo_np else np.nan)
            absw[r, j] = iv.high - iv.low
            ok &= bool(iv.low <= t <= iv.high)
        hits += ok
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns (atoms)
        by_q = np.nanmean(rel, axis=0)
    return {"width": float(np.nanmean(rel)) if np.isfinite(rel).any() else float("nan"),
            "width_by_q": by_q.round(3).tolist(),
            "abs_width": float(absw.mean()), "coverage": hits / reps, "reps": reps}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="few repetitions (smoke test)")
    ap.add_argument("--reps", type=int, default=200)
    # cdf and binsearch_cdf share the localised family path (one tree over the stage-1
    # ranges), so the default reports cdf; ExpMech and BinSearch run per quantile.
    ap.add_argument("--methods", nargs="*", default=["cdf"])
    ap.add_argument("--designs", nargs="*", default=list(DESIGNS))
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    reps = 3 if args.quick else args.reps
    print(f"# quantile_family_widths ({dpfair.__file__}): qs={QS}, alpha={ALPHA}, reps={reps}")
    print("| design | method | width ÷ exact (mean) | by q | mean width | simultaneous "
          "coverage |")
    print("|---|---|---|---|---|---|")
    out: list[dict[str, Any]] = []
    for i, name in enumerate(args.designs):
        law, n, rho, bounds = DESIGNS[name]
        if args.quick:
            n = min(n, 2000)
        for method in args.methods:
            cell = family_cell(law, n, rho, bounds, QS, method, reps, args.seed + 10 * i)
            print(f"| {name} | {method} | {cell['width']:.3f} | {cell['width_by_q']} | "
                  f"{cell['abs_width']:.4g} | {cell['coverage']:.3f} |", flush=True)
            out.append({"design": name, "method": method, **cell})
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
