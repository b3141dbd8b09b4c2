"""Width and coverage of dpfair.quantiles intervals, before (paper defaults) and after
(private localisation, the default), on the issue-22 designs.

    PYTHONPATH=src python benchmarks/quantile_widths.py --quick      # minutes
    PYTHONPATH=src python benchmarks/quantile_widths.py              # full size

Width is reported relative to the exact non-private interval on the same sample and α
(mean over repetitions); coverage is the fraction of repetitions whose interval contains
the population quantile. The samples come from one stream (``--seed``), each
(method, mode)'s noise from its own stream, so a change to one method's randomness
leaves every other cell as it was. "before" = ``localize=False`` (the median's paper defaults:
θ = |R|/4000 for ExpMech, |R|/400 for the trees), "after" = ``localize=None`` (default).
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np
from scipy import stats

import dpfair

DESIGNS = {
    # name: (law, n, bounds, rho)
    "paper (lognormal s=1, n=1000)": (stats.lognorm(s=1.0, scale=1.5), 1000, (-5.0, 15.0), 0.5),
    "wide bounds (gamma 2, n=1e5, +-1e6)": (stats.gamma(a=2.0), 100_000, (-1e6, 1e6), 0.5),
    "large n (lognormal, n=2e6, (0,50), rho=0.1)": (stats.lognorm(s=1.0, scale=1.5),
                                                    2_000_000, (0.0, 50.0), 0.1),
    "small n (lognormal, n=50, rho=0.5)": (stats.lognorm(s=1.0, scale=1.5), 50,
                                           (-5.0, 15.0), 0.5),
}


#: Ablations of the localised ExpMech (``--expmech-variant``): the design before issue 22
#: item 4's last step (unpadded, one range, K_E = 128), padding alone, padding with the
#: width-model K_E but no split, and the default (padding, split, width-model K_E).
EXPMECH_VARIANTS: dict[str, dict[str, object]] = {
    "default": {},
    "unpadded-128": {"split": False, "padded": False, "steps": 128},
    "padded-128": {"split": False, "steps": 128},
    "padded-model": {"split": False},
}


def run(design: str, q: float, reps: int, seed: int, methods: list[str]) -> list[dict]:
    law, n, bounds, rho = DESIGNS[design]
    truth = float(law.ppf(q))
    rng = np.random.default_rng(seed)  # the samples
    # One noise stream per (method, mode), independent of the sample stream: a method
    # that draws more or fewer random numbers changes no other method's cells.
    noise = {(m, mode): np.random.default_rng([seed, i, j])
             for i, m in enumerate(dpfair.median.METHODS) for j, mode in enumerate(
                 ("before", "after"))}
    rows: dict[tuple[str, str], list[tuple[float, bool]]] = {}
    for _ in range(reps):
        x = law.rvs(size=n, random_state=rng)
        lo_np, hi_np = dpfair.quantiles.nonprivate_interval(x, q, 0.05)
        ref = hi_np - lo_np
        for method in methods:
            for mode, loc in (("before", False), ("after", None)):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    try:
                        r = dpfair.quantiles.confidence_interval(
                            x, q, rho=rho, bounds=bounds, method=method, localize=loc,
                            rng=noise[(method, mode)])
                    except dpfair.InsufficientDataError:
                        continue
                rel = r.width / ref if np.isfinite(ref) and ref > 0 else float("nan")
                rows.setdefault((method, mode), []).append((rel, r.contains(truth)))
    out = []
    for (method, mode), vals in rows.items():
        arr = np.array(vals, dtype=float)
        out.append({"design": design, "q": q, "method": method, "mode": mode,
                    "reps": len(vals), "rel_width": float(np.nanmean(arr[:, 0])),
                    "coverage": float(arr[:, 1].mean())})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", default=None)
    ap.add_argument("--designs", nargs="*", default=list(DESIGNS))
    ap.add_argument("--qs", nargs="*", type=float, default=[0.5])
    ap.add_argument("--methods", nargs="*", default=list(dpfair.median.METHODS))
    ap.add_argument("--seed", type=int, default=20261201)
    ap.add_argument("--reps", type=int, default=None, help="repetitions (default by n)")
    ap.add_argument("--expmech-variant", choices=list(EXPMECH_VARIANTS), default="default",
                    help="ablation of the localised ExpMech design (docs/quantiles.md)")
    args = ap.parse_args()
    dpfair.quantiles._api._EXPMECH_VARIANT.clear()
    dpfair.quantiles._api._EXPMECH_VARIANT.update(EXPMECH_VARIANTS[args.expmech_variant])
    results = []
    for design in args.designs:
        n = DESIGNS[design][1]
        reps = (40 if n <= 1000 else 6 if n <= 100_000 else 3) if args.quick else (
            500 if n <= 1000 else 60 if n <= 100_000 else 12)
        reps = args.reps or reps
        for q in args.qs:
            t = time.time()
            res = run(design, q, reps, args.seed, args.methods)
            results += res
            print(f"\n{design}, q={q}  ({reps} reps, {time.time() - t:.0f}s)")
            print(f"{'method':15s} {'before':>16s} {'after':>16s}")
            by = {(r['method'], r['mode']): r for r in res}
            for m in args.methods:
                cells = []
                for mode in ("before", "after"):
                    r = by.get((m, mode))
                    cells.append(f"{r['rel_width']:6.3f} ({r['coverage']:.2f})" if r
                                 else "       -        ")
                print(f"{m:15s} {cells[0]:>16s} {cells[1]:>16s}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1)


if __name__ == "__main__":
    main()
