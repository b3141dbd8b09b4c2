"""Fixed-seed cases whose outputs were recorded BEFORE the speed work (issue 22, item 8).

``speed_reference.json`` holds, for every case below, the released interval, the DP CDF of
the cdf method and the next draw of the generator after the call (so the number of random
draws consumed is pinned too), computed by the implementation as of commit 169084b. The
fast paths must reproduce every value bit for bit (``test_speed_identical.py``).

Regenerate only on purpose (it overwrites the reference):

    PYTHONPATH=src python -m tests.median.speed_cases --write
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

import dpfair
from dpfair.mechanisms import leaf_counts

REFERENCE = Path(__file__).with_name("speed_reference.json")
BOUNDS = (-5.0, 15.0)


def _designs() -> dict[str, np.ndarray]:
    g = np.random.default_rng(2024)
    logn = g.lognormal(np.log(1.5), 1.0, 4000)
    ties = np.round(g.lognormal(np.log(1.5), 1.0, 3000))  # integer atoms, on grid points
    clipped = np.concatenate([g.normal(14.0, 3.0, 1500), [-50.0] * 30, [15.0] * 40])
    small = g.lognormal(np.log(1.5), 1.0, 80)
    atoms = np.concatenate([np.full(700, 2.0), g.uniform(-5.0, 15.0, 600)])
    return {"logn": logn, "ties": ties, "clipped": clipped, "small": small, "atoms": atoms}


def cases() -> list[dict[str, Any]]:
    out = []
    for design in ("logn", "ties", "clipped", "small", "atoms"):
        for method in ("expmech", "cdf", "binsearch", "binsearch_cdf"):
            for seed in (0, 1, 2):
                rho = (0.5, 0.1, 2.0)[seed]
                alpha = (0.05, 0.1, 0.2)[seed]
                out.append({"design": design, "method": method, "seed": seed, "rho": rho,
                            "alpha": alpha, "path": "raw"})
                if method != "expmech" or seed == 0:
                    out.append({"design": design, "method": method, "seed": seed, "rho": rho,
                                "alpha": alpha, "path": "counts"})
    return out


def _digest(arr: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(arr, dtype=np.float64).tobytes()).hexdigest()


def run_case(case: dict[str, Any], data: dict[str, np.ndarray] | None = None) -> dict[str, Any]:
    x = (data or _designs())[case["design"]]
    gen = np.random.default_rng(case["seed"])
    kw = {"rho": case["rho"], "bounds": BOUNDS, "alpha": case["alpha"],
          "method": case["method"], "rng": gen}
    try:
        res = _call(case, x, kw)
    except dpfair.InsufficientDataError:
        return {"error": "InsufficientDataError", "next": float(gen.random())}
    rec: dict[str, Any] = {"low": res.low, "high": res.high, "next": float(gen.random())}
    if res.cdf is not None:
        rec["cdf_values"] = _digest(res.cdf.values)
        rec["cdf_std"] = _digest(res.cdf.std)
    return rec


def _call(case: dict[str, Any], x: np.ndarray, kw: dict[str, Any]) -> Any:
    if case["path"] == "raw":
        res = dpfair.median.confidence_interval(x, **kw)
    else:
        depth = dpfair.median.aggregation_depth(case["method"], BOUNDS)

        def refine(bounds: tuple[float, float], d: int) -> np.ndarray:
            return leaf_counts(np.clip(x, *bounds), bounds, d)

        counts = leaf_counts(np.clip(x, *BOUNDS), BOUNDS, depth)
        res = dpfair.median.confidence_interval_from_counts(counts, refine=refine, **kw)
    return res


def main(argv: list[str]) -> None:
    if "--write" not in argv:
        raise SystemExit("pass --write to overwrite " + str(REFERENCE))
    data = _designs()
    rows = [{"case": c, "out": run_case(c, data)} for c in cases()]
    REFERENCE.write_text(json.dumps(rows, indent=1) + "\n")
    print(f"wrote {len(rows)} cases to {REFERENCE}")


if __name__ == "__main__":
    main(sys.argv[1:])
