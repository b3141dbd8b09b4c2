"""Speed of the quantile / median confidence intervals, as ratios to plain baselines.

Every ratio is measured side by side in one run (best of ``--repeats`` calls each, the
baseline and the method interleaved on the same data) and printed with its target
(issue 22, item 8):

* ``single``: any one median (or quantile) CI at n = ``--n`` (10^6) ÷ ``numpy.sort`` of the
  same data, per method (target ≤ 1.5);
* ``single-fresh``: ``dpfair.quantiles.confidence_interval(x, q)`` (defaults: the localised
  path) at q = 0.1, 0.5 and 0.9, with a NEW n in every repeat (n + 1 + 17·r: no public
  table cached by (n, ...) from an earlier call can serve it, as for a user's first
  request at their sample size) ÷ ``numpy.sort`` of the same data; the median of the
  per-repeat ratios (wall, and ``cpu=`` in process CPU time) (target ≤ 1.5);
* ``cdf-big``: the cdf method at n = ``--n-big`` (10^7) ÷ sort (≤ 1.5), and its peak traced
  memory (tracemalloc, in a fresh subprocess) ÷ the input's bytes (≤ 2);
* ``expmech-big``: ExpMech at n = ``--n-big`` ÷ sort (≤ 0.5);
* ``cold-first-call``: a fresh interpreter's ``import dpfair`` plus its FIRST
  ``dpfair.quantiles.confidence_interval(x, 0.5)`` at n = ``--n`` ÷ one ``numpy.sort``
  (imports, rank-target caches and sampler tables included; median of ``--repeats``
  processes; reported, no target);
* ``five-vs-one``: five quantiles served from one noisy tree ÷ one (≤ 1.2), through
  ``dpfair.quantiles.confidence_intervals`` with its defaults (the localised path);
* ``histogram``: the out-of-core DuckDB histogram query (``dpfair.data.histogram_counts``,
  the path of ``Session.median_ci`` / ``dpfair median-ci`` on big files) on a Parquet file
  of ``--rows`` rows ÷ a plain DuckDB scan of the column (``SELECT sum(x)``) (≤ 3).

Each row prints the wall-time ratio (the target's) and ``cpu=``, the same ratio in
process CPU time (all threads; steadier on a shared machine). "engine" rows time the
median API's call sequence (validated copy, clip) with the fast engines — ExpMech by
selection, the tree methods' counts by ``leaf_counts_sorted`` — which is what
``confidence_interval`` runs once its two call sites use them; "api" rows time
``dpfair.median.confidence_interval`` itself, whatever it does in this checkout;
"quantiles-localized" rows time ``dpfair.quantiles.confidence_interval(x, 0.5)`` with its
defaults (granularity=None: the charged private localisation stage, then the method on
the localised range), the path most users call.

Data: log-normal exp(N(ln 1.5, 1)), bounds (−5, 15), ρ = 0.5, α = 0.05 (the paper's
setting), generated in memory (the Parquet file under benchmarks/_data/, gitignored).
With ``--adult`` and /work/shared/data/adult_xue_yu.csv present, the single-CI rows also
run on the Adult ``age`` column resampled to n (realism check; skipped when absent).

    PYTHONPATH=src .venv/bin/python benchmarks/quantile_speed.py            # full (≈ 2 min)
    PYTHONPATH=src .venv/bin/python benchmarks/quantile_speed.py --quick    # CI smoke (s)
    PYTHONPATH=src .venv/bin/python benchmarks/quantile_speed.py --only single-fresh  # one group
    DPFAIR_BENCH_SRC=/path/to/old/src .venv/bin/python benchmarks/quantile_speed.py  # before

Nothing here asserts on time; ``--json`` saves every number.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"
if os.environ.get("DPFAIR_BENCH_SRC"):  # time another checkout (e.g. the code before)
    SRC = Path(os.environ["DPFAIR_BENCH_SRC"]).resolve()
if str(SRC) not in sys.path:
    sys.path.insert(0, str(SRC))

import dpfair  # noqa: E402
from dpfair import _validation  # noqa: E402
from dpfair._validation import check_finite_1d  # noqa: E402
from dpfair.mechanisms import tree as _tree  # noqa: E402
from dpfair.median import _api, _cdf, _expmech  # noqa: E402
from dpfair.median._ranks import nonprivate_ranks  # noqa: E402

#: Whether this checkout has the fast engines (older ones: "engine" rows = the API).
FAST = hasattr(_cdf, "release_cdf_tree") and hasattr(_tree, "leaf_counts_sorted")

BOUNDS = (-5.0, 15.0)
RHO = 0.5
ALPHA = 0.05
METHODS = ("expmech", "cdf", "binsearch", "binsearch_cdf")
QS = (0.1, 0.25, 0.5, 0.75, 0.9)
#: Row groups (``--only``), in the order they run.
GROUPS = ("single", "single-fresh", "cold-first-call", "big", "five-vs-one", "histogram")


def lognormal(n: int, seed: int = 7) -> np.ndarray:
    return np.random.default_rng(seed).lognormal(np.log(1.5), 1.0, n)


def side_by_side(
    base: Callable[[], Any], fn: Callable[[], Any], repeats: int
) -> tuple[float, float]:
    """Best-of wall times of ``base`` and ``fn``, interleaved (same machine state for both).

    The best process-CPU times (all threads) are kept in ``CPU`` for the same calls: on a
    loaded machine they are the steadier ratio (printed as ``cpu``).
    """
    tb = tf = cb = cf = float("inf")
    fn()  # warm caches (lru caches of public tables, imports)
    for _ in range(repeats):
        for which in (0, 1):
            c0, t0 = time.process_time(), time.perf_counter()
            (base if which == 0 else fn)()
            t, c = time.perf_counter() - t0, time.process_time() - c0
            if which == 0:
                tb, cb = min(tb, t), min(cb, c)
            else:
                tf, cf = min(tf, t), min(cf, c)
    CPU[:] = [cb, cf]
    return tb, tf


CPU: list[float] = [1.0, 1.0]


def fresh_ratios(method: str, q: float, n: int, repeats: int, offset: int = 0
                 ) -> tuple[float, float, float, float]:
    """(median wall ratio, median CPU ratio, median sort s, median call s), a fresh n each.

    Repeat r runs on the first n + 1 + 17·r + ``offset`` records of one log-normal sample,
    so every call meets a sample size no earlier call has used (the public rank targets,
    width models and binomial windows are cached by n): what a first request at a new n
    pays, imports and n-free tables aside (one warm-up call at a small n first).
    """
    quantiles = getattr(dpfair, "quantiles", None)
    if quantiles is None or not hasattr(quantiles, "confidence_interval"):
        return float("nan"), float("nan"), float("nan"), float("nan")
    big = lognormal(n + 17 * repeats + offset + 2, seed=11)
    quantiles.confidence_interval(big[:1000], q, rho=RHO, bounds=BOUNDS, alpha=ALPHA,
                                  method=method, rng=1)
    walls, cpus, sorts, calls = [], [], [], []
    for r in range(repeats):
        x = big[: n + 1 + 17 * r + offset].copy()
        c0, t0 = time.process_time(), time.perf_counter()
        np.sort(x)
        ts, cs = time.perf_counter() - t0, time.process_time() - c0
        c0, t0 = time.process_time(), time.perf_counter()
        quantiles.confidence_interval(x, q, rho=RHO, bounds=BOUNDS, alpha=ALPHA,
                                      method=method, rng=1)
        tm, cm = time.perf_counter() - t0, time.process_time() - c0
        walls.append(tm / ts)
        cpus.append(cm / cs if cs > 0 else float("nan"))
        sorts.append(ts)
        calls.append(tm)
    return (float(np.median(walls)), float(np.median(cpus)), float(np.median(sorts)),
            float(np.median(calls)))


# ---------------------------------------------------------------------------- engines
def _prepared(x: np.ndarray) -> np.ndarray:
    """The API's validation: a finite float64 copy, clipped into the public bounds."""
    if hasattr(_validation, "finite_clipped_copy"):  # one pass (the API's since 2026-12)
        data = _validation.finite_clipped_copy("x", x, *BOUNDS)
    else:
        data = check_finite_1d("x", x)
        np.clip(data, *BOUNDS, out=data)
    nonprivate_ranks(data.size, ALPHA)
    return data


def _theta(method: str) -> float:
    return (BOUNDS[1] - BOUNDS[0]) * dpfair.median.DEFAULT_GRANULARITY_FRACTION[method]


def engine_call(method: str, x: np.ndarray, seed: int = 1) -> Any:
    """The median API's call sequence with the fast engines (what it runs once it uses them).

    Validation as in ``confidence_interval``; ExpMech by selection
    (``expmech_interval(presorted=False)``, no sort); the tree methods sort once and read
    their counts by binary search (``leaf_counts_sorted``) instead of binning a clipped copy.
    """
    if not FAST:
        return api_call(method, x, seed)
    data = _prepared(x)
    gen = np.random.default_rng(seed)
    if method == "expmech":
        return _expmech.expmech_interval(data, RHO, BOUNDS, ALPHA, _theta(method), gen,
                                         presorted=False)
    data.sort()
    return _api._run(_SortedSource(data), RHO, BOUNDS, ALPHA, method, _theta(method), gen)


class _SortedSource(_api._ArraySource):
    def leaves(self, bounds: tuple[float, float], depth: int) -> Any:
        return _tree.leaf_counts_sorted(self.x, bounds, depth, check=False)


def api_call(method: str, x: np.ndarray, seed: int = 1) -> Any:
    return dpfair.median.confidence_interval(x, rho=RHO, bounds=BOUNDS, alpha=ALPHA,
                                             method=method, rng=seed)


def quantiles_call(method: str, x: np.ndarray, seed: int = 1) -> Any:
    """``dpfair.quantiles.confidence_interval(x, 0.5, ...)`` with its defaults: the
    localised path (a charged private localisation stage, then the method on the localised
    range). ``None`` in a checkout without :mod:`dpfair.quantiles`."""
    quantiles = getattr(dpfair, "quantiles", None)
    if quantiles is None or not hasattr(quantiles, "confidence_interval"):
        return None
    return quantiles.confidence_interval(x, 0.5, rho=RHO, bounds=BOUNDS, alpha=ALPHA,
                                         method=method, rng=seed)


def many_quantiles(x: np.ndarray, qs: tuple[float, ...], seed: int = 1) -> Any:
    """Quantile CIs for every q in ``qs`` (simultaneous level α) from ONE noisy tree (cdf).

    Uses ``dpfair.quantiles.confidence_intervals`` when that API exists; otherwise the
    engine it is built on: validate, sort once, :func:`dpfair.median._cdf.release_cdf_tree`
    once, then one cheap query per q at level α/len(qs).
    """
    quantiles = getattr(dpfair, "quantiles", None)
    if quantiles is not None and hasattr(quantiles, "confidence_intervals"):
        return quantiles.confidence_intervals(x, qs, rho=RHO, bounds=BOUNDS, alpha=ALPHA,
                                              method="cdf", rng=seed)
    data = _prepared(x)
    data.sort()
    depth = dpfair.median.aggregation_depth("cdf", BOUNDS)
    if not FAST:  # the code before: one tree (and one budget) per quantile
        leaves = _tree.leaf_counts(data, BOUNDS, depth)
        return [_cdf.cdf_interval(leaves, RHO, BOUNDS, ALPHA / len(qs), depth,
                                  np.random.default_rng(seed)) for _ in qs]
    leaves = _tree.leaf_counts_sorted(data, BOUNDS, depth, check=False)
    tree = _cdf.release_cdf_tree(leaves, RHO, BOUNDS, depth, np.random.default_rng(seed))
    return [tree.interval(q, ALPHA / len(qs)) for q in qs]


# ---------------------------------------------------------------------------- memory
_MEM_CHILD = r"""
import json, sys, tracemalloc
sys.path.insert(0, sys.argv[1])
sys.path.insert(0, sys.argv[2])
import numpy as np
import quantile_speed as qs
n, method, mode = int(sys.argv[3]), sys.argv[4], sys.argv[5]
x = qs.lognormal(n)
call = qs.engine_call if mode == "engine" else qs.api_call
call(method, x[:1000])  # imports and caches outside the trace
tracemalloc.start()
call(method, x)
_, peak = tracemalloc.get_traced_memory()
tracemalloc.stop()
print(json.dumps({"peak": peak, "input": x.nbytes}))
"""


def peak_memory_ratio(n: int, method: str, mode: str) -> float:
    out = subprocess.run(
        [sys.executable, "-c", _MEM_CHILD, str(SRC), str(HERE), str(n), method, mode],
        check=True, capture_output=True, text=True,
    )
    rec = json.loads(out.stdout.strip().splitlines()[-1])
    return float(rec["peak"]) / float(rec["input"])


# ---------------------------------------------------------------------------- cold call
_COLD_CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import numpy as np
n, method = int(sys.argv[2]), sys.argv[3]
x = np.random.default_rng(7).lognormal(np.log(1.5), 1.0, n)
t0, c0 = time.perf_counter(), time.process_time()
import dpfair
dpfair.quantiles.confidence_interval(x, 0.5, rho=0.5, bounds=(-5.0, 15.0), method=method,
                                     rng=1)
t1, c1 = time.perf_counter(), time.process_time()
np.sort(x)
t2, c2 = time.perf_counter(), time.process_time()
print(json.dumps({"first": t1 - t0, "sort": t2 - t1, "first_cpu": c1 - c0,
                  "sort_cpu": c2 - c1}))
"""


def cold_first_call(n: int, method: str, repeats: int) -> dict[str, float]:
    """Fresh interpreter: ``import dpfair`` + the first quantile CI, ÷ one numpy sort.

    Everything a first call pays for (imports, rank-target caches, sampler tables) is
    inside; the median over ``repeats`` fresh processes (the machine's load varies).
    """
    runs = []
    for _ in range(max(1, repeats)):
        out = subprocess.run([sys.executable, "-c", _COLD_CHILD, str(SRC), str(n), method],
                             check=True, capture_output=True, text=True)
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    med = {k: float(np.median([r[k] for r in runs])) for k in runs[0]}
    return med


# ---------------------------------------------------------------------------- histogram
def parquet_file(rows: int, folder: Path) -> Path:
    import duckdb

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"quantile_speed_lognormal_{rows}.parquet"
    if path.exists():
        return path
    tmp = path.with_suffix(".tmp.parquet")
    with duckdb.connect(":memory:") as con:
        con.execute("SELECT setseed(0.42)")
        con.execute(
            f"""COPY (SELECT exp(ln(1.5) + sqrt(-2 * ln(1 - random())) * cos(2 * pi() * random()))
                      AS x FROM range({rows}))
                TO '{tmp}' (FORMAT parquet, ROW_GROUP_SIZE 1000000)"""
        )
    os.replace(tmp, path)
    return path


def plain_scan(path: Path) -> float:
    import duckdb

    with duckdb.connect(":memory:") as con:
        con.execute("SET enable_progress_bar = false")
        return float(con.execute(f"SELECT sum(x) FROM read_parquet('{path}')").fetchone()[0])


# ---------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="tiny sizes, 1 repeat (CI smoke)")
    ap.add_argument("--n", type=float, default=1e6, help="n of the single-CI rows")
    ap.add_argument("--n-big", type=float, default=1e7, help="n of the cdf/ExpMech big rows")
    ap.add_argument("--rows", type=float, default=1e7, help="rows of the Parquet file")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--no-memory", action="store_true", help="skip the subprocess memory row")
    ap.add_argument("--adult", action="store_true", help="also Adult ages (if present)")
    ap.add_argument("--data-dir", type=Path, default=HERE / "_data")
    ap.add_argument("--json", type=Path, help="save every number here")
    ap.add_argument("--only", default="", metavar="GROUPS",
                    help="comma-separated row groups to run (default: all): "
                         + ", ".join(GROUPS))
    args = ap.parse_args(argv)
    only = {g.strip() for g in args.only.split(",") if g.strip()}
    if only - set(GROUPS):
        ap.error(f"--only: unknown group(s) {sorted(only - set(GROUPS))}; choose from {GROUPS}")

    def wanted(group: str) -> bool:
        return not only or group in only

    if args.quick:
        args.n, args.n_big, args.rows, args.repeats = 2e4, 5e4, 5e4, 1
    n, n_big, rows = int(args.n), int(args.n_big), int(args.rows)
    results: list[dict[str, Any]] = []

    def row(name: str, value: float, target: str, cpu: bool = True, **extra: Any) -> None:
        if cpu:
            extra = {"cpu": CPU[1] / CPU[0] if CPU[0] > 0 else float("nan"), **extra}
        results.append({"name": name, "ratio": value, "target": target, **extra})
        print(f"{name:<52} {value:8.3f}   target {target:<6} "
              + " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                         for k, v in extra.items()), flush=True)

    print(f"# quantile_speed ({dpfair.__file__}, fast engines: {FAST}): n={n:.3g}, "
          f"n_big={n_big:.3g}, rows={rows:.3g}, repeats={args.repeats}, "
          f"numpy {np.__version__}", flush=True)
    samples = {"lognormal": lognormal(n)}
    adult = Path("/work/shared/data/adult_xue_yu.csv")
    if args.adult and adult.exists():
        ages = dpfair.data.read_column(adult, "age")
        samples["adult_age"] = np.random.default_rng(3).choice(ages, n)
    for label, x in samples.items() if wanted("single") else ():
        for method in METHODS:
            for mode, call in (("engine", engine_call), ("api", api_call),
                               ("quantiles-localized", quantiles_call)):
                ts, tm = side_by_side(lambda x=x: np.sort(x),
                                      lambda m=method, c=call, x=x: c(m, x), args.repeats)
                row(f"single/{label}/{method}/{mode}", tm / ts, "<=1.5", sort_s=ts, method_s=tm)

    for i, method in enumerate(METHODS if wanted("single-fresh") else ()):
        for j, q in enumerate((0.1, 0.5, 0.9)):
            wall, cpu, ts, tm = fresh_ratios(method, q, n, max(3, args.repeats),
                                             offset=5 * (3 * i + j))
            row(f"single-fresh/lognormal/{method}/q={q:g}", wall, "<=1.5", cpu=False,
                cpu_ratio=cpu, sort_s=ts, method_s=tm)

    for method in METHODS if wanted("cold-first-call") else ():
        cold = cold_first_call(n, method, args.repeats)
        row(f"cold-first-call/{method}/quantiles-localized", cold["first"] / cold["sort"],
            "report", cpu=False, cpu_ratio=cold["first_cpu"] / max(cold["sort_cpu"], 1e-9),
            first_s=cold["first"], sort_s=cold["sort"])

    xb = lognormal(n_big) if wanted("big") else np.zeros(0)
    for method, target in (("cdf", "<=1.5"), ("expmech", "<=0.5")) if wanted("big") else ():
        for mode, call in (("engine", engine_call), ("api", api_call)):
            ts, tm = side_by_side(lambda xb=xb: np.sort(xb),
                                  lambda m=method, c=call, xb=xb: c(m, xb),
                                  max(1, args.repeats // 2))
            row(f"big/{method}/{mode}", tm / ts, target, n=n_big, sort_s=ts, method_s=tm)
    if not args.no_memory and wanted("big"):
        for mode in ("engine", "api"):
            row(f"big/cdf/{mode}/peak_memory", peak_memory_ratio(n_big, "cdf", mode), "<=2",
                cpu=False, n=n_big)
    del xb

    x = samples["lognormal"]
    if wanted("five-vs-one"):
        t1, t5 = side_by_side(lambda: many_quantiles(x, (0.5,)),
                              lambda: many_quantiles(x, QS), args.repeats)
        row("five-vs-one/cdf/quantiles-localized", t5 / t1, "<=1.2", one_s=t1, five_s=t5)

    if wanted("histogram"):
        path = parquet_file(rows, args.data_dir)
        depth = dpfair.median.aggregation_depth("cdf", BOUNDS)
        ts, th = side_by_side(lambda: plain_scan(path),
                              lambda: dpfair.data.histogram_counts(path, "x", BOUNDS, depth),
                              max(1, args.repeats // 2))
        row("histogram/duckdb", th / ts, "<=3", rows=rows, depth=depth, scan_s=ts, hist_s=th)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2))
    return {"results": results}


if __name__ == "__main__":
    main()
