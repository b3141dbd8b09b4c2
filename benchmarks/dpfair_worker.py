"""dpfair worker: seconds and peak memory of one median CI method (or of numpy.sort).

Run by ``benchmarks/run.py`` in a fresh process per (n, method), so that each memory
measurement starts from the same clean state. Prints one ``BENCH_JSON`` line.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent / "comparators"))

import _common
import numpy as np

SORT = "numpy.sort"


def main() -> None:
    p = _common.base_parser(__doc__ or "")
    p.add_argument("--method", required=True, help=f"a dpfair method or {SORT!r}")
    p.add_argument("--rho", type=float, default=0.5)
    p.add_argument("--alpha", type=float, default=0.05)
    p.add_argument("--granularity", type=float, default=None)
    args = p.parse_args()
    x = _common.load(args.data)

    if args.method == SORT:

        def call(data: np.ndarray, _seed: int) -> Any:
            np.sort(data)

        result = _common.run_benchmark(args, x, call)
        result.pop("output")
        result.update(status="ok", method=SORT, env=_common.environment())
        _common.emit(result)
        return

    try:
        import dpfair
        import dpfair.median
    except Exception as exc:
        _common.fail("import failed", f"dpfair not importable: {type(exc).__name__}: {exc}")
    ci = getattr(dpfair.median, "confidence_interval", None)
    if ci is None:
        _common.fail("unavailable", "dpfair median API not available", method=args.method)
    version = getattr(dpfair, "__version__", "?")
    bounds = (args.lo, args.hi)

    def call(data: np.ndarray, seed: int) -> Any:
        return ci(
            data,
            rho=args.rho,
            bounds=bounds,
            alpha=args.alpha,
            method=args.method,
            granularity=args.granularity,
            rng=seed,
        )

    try:
        result = _common.run_benchmark(args, x, call)
    except Exception as exc:
        _common.fail("error", f"{type(exc).__name__}: {exc}", method=args.method)
    r = result.pop("output")
    result.update(
        status="ok",
        method=args.method,
        dpfair_version=version,
        dpfair_path=str(Path(dpfair.__file__).parent),
        low=_float(getattr(r, "low", None)),
        high=_float(getattr(r, "high", None)),
        estimate=_float(getattr(r, "estimate", None)),
        privacy=repr(getattr(r, "privacy", None)),
        env=_common.environment(),
    )
    _common.emit(result)


def _float(v: Any) -> float | None:
    try:
        return None if v is None else float(v)
    except (TypeError, ValueError):
        return None


if __name__ == "__main__":
    main()
