"""Facility-location benchmark: one command, every number measured side by side in one run.

    .venv/bin/python benchmarks/facility_bench.py                # n = 10^7 (default)
    .venv/bin/python benchmarks/facility_bench.py --n 1e6 --repeats 5
    .venv/bin/python benchmarks/facility_bench.py --no-opendp --json out/facility_bench.json

Data: n draws from the triangular law on [0, 1] peaked (and with its median) at 0.4, seed
12345, saved once to ``benchmarks/_data/facility_triangular_n<N>_seed<S>.npy`` so the
OpenDP worker reads the very same array.

Timed in this process, interleaved round by round so that machine drift hits every row
alike (median of ``--repeats`` rounds):

* ``numpy.sort(x)`` — the yardstick;
* ``DPExpMed(ε).sample(x)`` — one private location (exact, no full sort), ε = 1 and ε = 50;
* ``DPExpMed(ε).distribution(x)`` — the exact output law, including its sort;
* ``DPExpMed(ε).distribution(xs, presorted=True)`` — the same law built from sorted data
  (the O(n) part);
* exact E[FAIR], E[SWDIFF] and their 0.95-quantiles on the built law (first call each);
* the Laplace baseline's noise: ``LaplaceMedian(ε)`` releases ``--laplace-draws`` locations
  from its exact law (exact discrete Laplace on the 2^32-step grid, ``law.sample``) side by
  side with what users would pick, numpy's continuous binary64 Laplace clipped to the
  domain (the release it replaced; diffprivlib's ``Laplace`` draws the same continuous
  law one call at a time), with the ratio — median of ``--laplace-repeats`` interleaved
  rounds, the median computed once outside the timing.

OpenDP's ``make_private_quantile`` (grid of candidates, ε-DP at replace-one distance) runs
in its own environment ``benchmarks/.envs/opendp`` when that exists (created by
``benchmarks/run.py``); otherwise its row says why it was skipped.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DEV_PYTHON = ROOT / ".venv" / "bin" / "python"

try:
    import numpy as np
except ImportError:  # started with a bare interpreter: hand over to the dev venv
    if DEV_PYTHON.exists() and Path(sys.executable).resolve() != DEV_PYTHON.resolve():
        os.execv(str(DEV_PYTHON), [str(DEV_PYTHON), __file__, *sys.argv[1:]])
    raise SystemExit("benchmarks/facility_bench.py needs numpy: use .venv/bin/python") from None

sys.path.insert(0, str(ROOT / "src"))  # always this checkout's dpfair

from dpfair.facility import DPExpMed, LaplaceMedian, triangular_law  # noqa: E402

DATA_DIR = HERE / "_data"
OPENDP_PYTHON = HERE / ".envs" / "opendp" / "bin" / "python"
OPENDP_WORKER = HERE / "facility_opendp_worker.py"
MARKER = "BENCH_JSON "
DOMAIN = (0.0, 1.0)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Time DPExpMed sampling and its exact law against numpy.sort and OpenDP.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--n", type=lambda s: int(float(s)), default=10**7, help="number of agents")
    p.add_argument("--repeats", type=int, default=5, help="interleaved timing rounds")
    p.add_argument("--epsilon", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=12345, help="data seed")
    p.add_argument("--no-opendp", action="store_true", help="skip the OpenDP comparison")
    p.add_argument("--opendp-repeats", type=int, default=3)
    p.add_argument("--timeout", type=float, default=900.0, help="OpenDP worker timeout (s)")
    p.add_argument("--laplace-draws", type=lambda s: int(float(s)), default=10**5,
                   help="locations per Laplace-baseline release timing")
    p.add_argument("--laplace-repeats", type=int, default=21)
    p.add_argument("--json", type=Path, default=None, help="also write all numbers here")
    return p.parse_args(argv)


def data_file(n: int, seed: int) -> Path:
    """The benchmark's data set (created once)."""
    path = DATA_DIR / f"facility_triangular_n{n}_seed{seed}.npy"
    if not path.exists():
        DATA_DIR.mkdir(parents=True, exist_ok=True)
        x = triangular_law(DOMAIN, peak=0.4).sample(n, rng=seed)
        tmp = path.with_suffix(".tmp.npy")
        np.save(tmp, x)
        tmp.replace(path)
    return path


def _timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def measure(x: np.ndarray, args: argparse.Namespace) -> dict[str, Any]:
    mech = DPExpMed(args.epsilon, DOMAIN)
    mech50 = DPExpMed(50.0, DOMAIN)
    xs = np.sort(x)
    rows: dict[str, Callable[[], Any]] = {
        "numpy.sort(x)": lambda: np.sort(x),
        f"DPExpMed(eps={args.epsilon:g}).sample(x)": lambda: mech.sample(x, rng=1),
        "DPExpMed(eps=50).sample(x)": lambda: mech50.sample(x, rng=1),
        "DPExpMed.distribution(x) [incl. sort]": lambda: mech.distribution(x),
        "DPExpMed.distribution(sorted x, presorted=True)": lambda: mech.distribution(
            xs, presorted=True
        ),
    }
    # warm-up on a slice (imports, caches)
    small = x[: min(x.size, 1000)]
    mech.sample(small, rng=0)
    mech.distribution(small)
    times: dict[str, list[float]] = {k: [] for k in rows}
    for r in range(max(1, args.repeats)):
        order = list(rows) if r % 2 == 0 else list(reversed(rows))
        for name in order:
            times[name].append(_timed(rows[name]))
    dist = mech.distribution(xs, presorted=True)
    metric_times = {
        "E[FAIR]": _timed(dist.expected_fair),
        "E[SWDIFF]": _timed(dist.expected_swdiff),
        "FAIR 0.95-quantile": _timed(lambda: dist.fair_quantile(0.95)),
        "SWDIFF 0.95-quantile": _timed(lambda: dist.swdiff_quantile(0.95)),
    }
    values = {
        "location(seed=1)": mech.sample(x, rng=1),
        "optimum": dist.optimum,
        "E[FAIR]": dist.expected_fair(),
        "E[SWDIFF]": dist.expected_swdiff(),
        "FAIR q95": float(dist.fair_quantile(0.95)),
        "SWDIFF q95": float(dist.swdiff_quantile(0.95)),
    }
    return {
        "median_s": {k: statistics.median(v) for k, v in times.items()},
        "all_s": times,
        "metric_first_call_s": metric_times,
        "values": values,
    }


def measure_laplace(x: np.ndarray, args: argparse.Namespace) -> dict[str, Any]:
    """Exact discrete-Laplace release vs numpy's continuous Laplace (same median, same size)."""
    lap = LaplaceMedian(args.epsilon, DOMAIN)
    law = lap.distribution(x).law  # exact law of the release (its centre: the median's index)
    lo, hi = DOMAIN
    centre = float(law.location(law.center))
    scale = (hi - lo) / args.epsilon
    size = args.laplace_draws
    gen = np.random.default_rng(7)
    rows: dict[str, Callable[[], Any]] = {
        "exact": lambda: law.sample(size=size, rng=gen),
        "numpy": lambda: np.clip(centre + gen.laplace(0.0, scale, size=size), lo, hi),
    }
    for fn in rows.values():  # warm-up
        fn()
    times: dict[str, list[float]] = {k: [] for k in rows}
    for r in range(max(1, args.laplace_repeats)):
        for name in (list(rows) if r % 2 == 0 else list(reversed(rows))):
            times[name].append(_timed(rows[name]))
    med = {k: statistics.median(v) for k, v in times.items()}
    return {"draws": size, "median_s": med, "all_s": times,
            "ratio": med["exact"] / med["numpy"], "noise_scale_t": lap.noise_scale,
            "grid_steps": lap.steps}


def run_opendp(path: Path, args: argparse.Namespace) -> dict[str, Any]:
    if args.no_opendp:
        return {"status": "skipped", "message": "--no-opendp"}
    if not OPENDP_PYTHON.exists():
        return {
            "status": "skipped",
            "message": f"{OPENDP_PYTHON.relative_to(ROOT)} not found (create it with "
            "`.venv/bin/python benchmarks/run.py --comparators opendp`)",
        }
    cmd = [str(OPENDP_PYTHON), str(OPENDP_WORKER), "--data", str(path), "--lo", "0", "--hi",
           "1", "--epsilon", str(args.epsilon), "--repeats", str(args.opendp_repeats),
           "--no-memory"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout,
                              check=False)
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "message": f"over {args.timeout:g} s"}
    for line in proc.stdout.splitlines():
        if line.startswith(MARKER):
            out: dict[str, Any] = json.loads(line[len(MARKER):])
            return out
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
    return {"status": "failed", "message": f"exit {proc.returncode}: {tail[0]}"}


def report(n: int, res: dict[str, Any], odp: dict[str, Any], args: argparse.Namespace) -> None:
    med = res["median_s"]
    sort_s = med["numpy.sort(x)"]
    print(f"\nDPExpMed at n = {n:,} (triangular data on [0, 1], {args.repeats} interleaved "
          "rounds, median)")
    print(f"{'what':<52} {'seconds':>9} {'x sort':>8}")
    for name, s in med.items():
        print(f"{name:<52} {s:9.3f} {s / sort_s:8.2f}")
    if odp.get("status") == "ok":
        s = odp["wall_s"]
        print(f"{'OpenDP make_private_quantile (' + str(odp['candidates']) + ' candidates)':<52}"
              f" {s:9.3f} {s / sort_s:8.2f}   (opendp {odp['version']}, {odp['budget']};"
              f" numpy.sort in its env {odp['numpy_sort_s_in_env']:.3f} s)")
    else:
        print(f"{'OpenDP make_private_quantile':<52} {'-':>9} {'-':>8}   "
              f"{odp.get('status')}: {odp.get('message', '')}")
    print("\nexact metrics on the built law (first call, seconds):")
    for name, s in res["metric_first_call_s"].items():
        print(f"  {name:<22} {s:8.3f}")
    lap = res["laplace"]
    print(f"\nLaplace baseline noise, {lap['draws']:,} locations per call "
          f"({args.laplace_repeats} interleaved rounds, median, ms):")
    exact_name = f"LaplaceMedian law.sample (exact discrete Laplace, t = {lap['noise_scale_t']})"
    print(f"  {exact_name:<66} {1e3 * lap['median_s']['exact']:8.3f}")
    print(f"  {'numpy clip(T + Generator.laplace) (continuous binary64, replaced)':<66}"
          f" {1e3 * lap['median_s']['numpy']:8.3f}")
    print(f"  exact / numpy = {lap['ratio']:.2f}")
    samp = med[f"DPExpMed(eps={args.epsilon:g}).sample(x)"]
    print(f"\nsampling / numpy.sort = {samp / sort_s:.2f}  (goal: within 2x) -> "
          f"{'met' if samp <= 2 * sort_s else 'NOT met'}")
    print("values:", {k: float(f"{v:.6g}") for k, v in res["values"].items()})


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    path = data_file(args.n, args.seed)
    x = np.load(path)
    print(f"data: {path.relative_to(ROOT)} ({x.size:,} values)", file=sys.stderr)
    res = measure(x, args)
    res["laplace"] = measure_laplace(x, args)
    odp = run_opendp(path, args)
    report(x.size, res, odp, args)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        payload = {"n": int(x.size), "epsilon": args.epsilon, "dpfair": res, "opendp": odp,
                   "machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                               "python": sys.version.split()[0], "numpy": np.__version__}}
        args.json.write_text(json.dumps(payload, indent=2, default=float))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
