"""Speed of the exact discrete Gaussian sampler and of the median CIs that use it, A/B.

Each source tree given with ``--src NAME=PATH`` (a ``src`` directory holding ``dpfair``)
is timed in fresh subprocesses, alternating between the trees for ``--rounds`` rounds, so
that all see the same machine load. Reported per case: the median over repeats within a
process, minimum over processes (milliseconds).

    .venv/bin/python benchmarks/discrete_gaussian_speed.py \\
        --src main=/path/to/main/src --src branch=src --rounds 3

Cases: ``sample_discrete_gaussian`` at S = 4097·4096 ≈ 4^12 (σ = 1 on the 2^-12 lattice;
a multiple of the sampler scale, as ``LatticeNoise`` makes it), at S = 4^12 + 65 (not a
multiple: the generic path of the linear estimator) and at S = 2^50 (the GP's lattice),
for 10, 2,000 and 200,000 draws; ``dpfair.median.confidence_interval`` at n = 10^3 on the
log-normal data of ``benchmarks/run.py`` for the four methods. A tree without the
sampler (before issue 11) times the medians only.
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable

_CHILD = "--child"


def _best_med(f: Callable[[], object], reps: int) -> float:
    f()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    ts.sort()
    return ts[len(ts) // 2]


def _child(smoke: bool = False) -> None:
    import numpy as np

    import dpfair.median

    res: dict[str, float] = {}
    try:
        from dpfair.mechanisms.discrete_gaussian import sample_discrete_gaussian
    except ImportError:
        sample_discrete_gaussian = None  # type: ignore[assignment]
    g = np.random.default_rng(0)
    if sample_discrete_gaussian is not None:
        for name, var in (("S=4097*4096", 4097 * 4096), ("S=4^12+65", 4**12 + 65),
                          ("S=2^50", 2**50)):
            for size, reps in ((10, 400), (2000, 100), (200_000, 7)):
                if name == "S=2^50" and size != 200_000:
                    continue
                if smoke:
                    size, reps = min(size, 2000), 1
                res[f"sampler {name} n={size}"] = _best_med(
                    functools.partial(sample_discrete_gaussian, var, size, g), reps
                )
    x = np.exp(np.random.default_rng(0).normal(np.log(1.5), 1.0, 1000))
    for method in ("binsearch", "cdf", "binsearch_cdf", "expmech"):
        call = functools.partial(
            dpfair.median.confidence_interval,
            x, rho=0.5, bounds=(-5.0, 15.0), alpha=0.05, method=method, rng=1,
        )
        res[f"median {method} n=1e3"] = _best_med(call, 1 if smoke else 200)
    print(json.dumps(res))


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == _CHILD:
        _child(smoke="--smoke" in sys.argv[2:])
        return
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--src", action="append", default=[], help="NAME=PATH of a src tree")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--smoke", action="store_true",
                   help="one round, one repeat, at most 2,000 draws: checks that it runs")
    args = p.parse_args()
    if args.smoke:
        args.rounds = 1
    trees = dict(s.split("=", 1) for s in args.src) or {"here": "src"}
    acc: dict[str, dict[str, list[float]]] = collections.defaultdict(
        lambda: collections.defaultdict(list)
    )
    for _ in range(args.rounds):
        for name, path in trees.items():
            env = dict(os.environ, PYTHONPATH=os.path.abspath(path))
            out = subprocess.run(
                [sys.executable, os.path.abspath(__file__), _CHILD,
                 *(["--smoke"] if args.smoke else [])],
                env=env, capture_output=True, text=True, check=True,
            ).stdout
            for key, sec in json.loads(out).items():
                acc[key][name].append(sec)
    names = list(trees)
    print(f"{'case':34s}" + "".join(f"{n:>12s}" for n in names) + "   (ms)")
    for key, per in acc.items():
        cells = "".join(
            f"{min(per[n]) * 1e3:12.4f}" if per.get(n) else f"{'—':>12s}" for n in names
        )
        print(f"{key:34s}{cells}")


if __name__ == "__main__":
    main()
