"""Timing and memory helpers shared by every benchmark worker.

Each worker is a small script run in its own process (and, for the comparator libraries,
in its own virtual environment), so this module may import only the standard library
and numpy. A worker prints exactly one line starting with :data:`MARKER` followed by a
JSON object; anything else it prints (library warnings, pip noise) is ignored by the
runner.

Memory is measured two ways on one untimed call, after a warm-up on a small slice:

* ``peak_traced_mb``: the peak of :mod:`tracemalloc`, which sees Python objects and
  numpy's data buffers (numpy reports them to tracemalloc) but not memory that compiled
  code allocates on its own (Rust, C++ or Fortran heaps);
* ``rss_peak_delta_mb``: the process's resident-set high-water mark (``VmHWM``, reset
  through ``/proc/self/clear_refs`` just before the call) minus its resident set just
  before the call. This sees every allocation that was touched, from any language.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import resource
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np

MARKER = "BENCH_JSON "


def base_parser(description: str) -> argparse.ArgumentParser:
    """Arguments every worker accepts."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--data", required=True, help="path of the .npy file (float64, 1-d)")
    p.add_argument("--repeats", type=int, default=5, help="timed repeats (median reported)")
    p.add_argument(
        "--max-seconds",
        type=float,
        default=120.0,
        help="stop repeating once the timed calls have used this long (at least one runs)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--lo", type=float, default=-5.0, help="public lower bound")
    p.add_argument("--hi", type=float, default=15.0, help="public upper bound")
    p.add_argument("--no-memory", action="store_true", help="skip the memory measurement")
    return p


def load(path: str) -> np.ndarray:
    """The shared data set, as a contiguous float64 array in memory."""
    x = np.load(path)
    if x.ndim != 1 or x.dtype != np.float64:
        raise SystemExit(f"{path}: expected a 1-d float64 array, got {x.dtype} {x.shape}")
    return np.ascontiguousarray(x)


def _status_kb(field: str) -> float | None:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return float(line.split()[1])
    except OSError:
        return None
    return None


def _reset_hwm() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        return False
    return True


def measure_memory(call: Callable[[], Any]) -> dict[str, Any]:
    """Peak memory of one call (see the module docstring)."""
    gc.collect()
    base_kb = _status_kb("VmRSS")
    hwm_reset = _reset_hwm()
    tracemalloc.start()
    tracemalloc.reset_peak()
    try:
        call()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    out: dict[str, Any] = {"peak_traced_mb": peak / 2**20}
    hwm_kb = _status_kb("VmHWM") if hwm_reset else None
    if base_kb is not None and hwm_kb is not None:
        out["rss_peak_delta_mb"] = max(0.0, hwm_kb - base_kb) / 1024
        out["rss_base_mb"] = base_kb / 1024
    out["max_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def time_calls(
    call: Callable[[int], Any], repeats: int, max_seconds: float
) -> tuple[dict[str, Any], Any]:
    """Time ``call(i)`` for i = 0, 1, …: wall (perf_counter) and CPU (process_time).

    Returns the summary and the last call's output.
    """
    walls: list[float] = []
    cpus: list[float] = []
    out: Any = None
    spent = 0.0
    for i in range(max(1, repeats)):
        gc.collect()
        c0 = time.process_time()
        t0 = time.perf_counter()
        out = call(i)
        t1 = time.perf_counter()
        c1 = time.process_time()
        walls.append(t1 - t0)
        cpus.append(c1 - c0)
        spent += t1 - t0
        if spent > max_seconds:
            break
    summary = {
        "wall_s": statistics.median(walls),
        "cpu_s": statistics.median(cpus),
        "wall_min_s": min(walls),
        "wall_all_s": walls,
        "cpu_all_s": cpus,
        "repeats": len(walls),
    }
    return summary, out


def run_benchmark(
    args: argparse.Namespace,
    x: np.ndarray,
    call: Callable[[np.ndarray, int], Any],
    warmup_n: int = 1000,
) -> dict[str, Any]:
    """Warm up on a slice, measure memory on one call, then time the repeats."""
    call(x[: min(x.size, warmup_n)], 10**6)
    result: dict[str, Any] = {"n": int(x.size)}
    if not args.no_memory:
        result.update(measure_memory(lambda: call(x, 10**6 + 1)))
    timing, out = time_calls(lambda i: call(x, args.seed + i), args.repeats, args.max_seconds)
    result.update(timing)
    result["output"] = out
    return result


def sort_seconds(x: np.ndarray, repeats: int = 3) -> float:
    """Median wall time of ``numpy.sort`` on ``x`` in this process (a local yardstick)."""
    np.sort(x[: min(x.size, 1000)])
    walls = []
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        np.sort(x)
        walls.append(time.perf_counter() - t0)
    return statistics.median(walls)


def environment() -> dict[str, Any]:
    """Where this worker ran."""
    return {
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "numpy": np.__version__,
        "platform": platform.platform(),
        "pid": os.getpid(),
    }


def emit(payload: dict[str, Any]) -> None:
    """Print the one line the runner reads."""
    sys.stdout.flush()
    print(MARKER + json.dumps(payload, default=_jsonable), flush=True)


def fail(status: str, message: str, **extra: Any) -> None:
    """Report a failure the runner should show (and exit 0: the run goes on)."""
    emit({"status": status, "message": message, "env": environment(), **extra})
    raise SystemExit(0)


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    return repr(obj)
