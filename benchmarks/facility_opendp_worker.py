"""OpenDP worker for the facility benchmark: ε-DP median over a grid of candidates.

Run inside ``benchmarks/.envs/opendp`` by ``benchmarks/facility_bench.py``. API timed:
``make_private_quantile`` (``then_private_quantile``) on
``vector_domain(atom_domain(T=float, nan=False))`` with the symmetric distance,
``max_divergence()``, ``alpha=0.5`` and an evenly spaced grid of candidates over the public
domain. The scale is calibrated once (outside the timing) with ``binary_search_param`` so
that ε is reached at d_in = 2: replacing one record is one removal plus one addition under
the symmetric distance, so this is the same replace-one ε as dpfair's DPExpMed. Prints one
``BENCH_JSON`` line (see ``benchmarks/comparators/_common.py``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent / "comparators"))

import _common
import numpy as np


def main() -> None:
    p = _common.base_parser(__doc__ or "")
    p.add_argument("--epsilon", type=float, default=1.0)
    p.add_argument("--candidates", type=int, default=1001, help="grid size over [lo, hi]")
    args = p.parse_args()
    try:
        import opendp
        import opendp.prelude as dp
    except Exception as exc:  # any import failure is reported, not raised
        _common.fail("import failed", f"{type(exc).__name__}: {exc}")
    dp.enable_features("contrib")
    version = getattr(opendp, "__version__", None)
    if version is None:
        from importlib.metadata import version as _v

        version = _v("opendp")
    x = _common.load(args.data)
    candidates = np.linspace(args.lo, args.hi, args.candidates).tolist()
    space = (dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.symmetric_distance())

    def build(scale: float) -> Any:
        return space >> dp.m.then_private_quantile(
            dp.max_divergence(), candidates=candidates, alpha=0.5, scale=scale
        )

    scale = dp.binary_search_param(build, d_in=2, d_out=args.epsilon)
    eps_replace_one = float(build(scale).map(2))
    meas = build(scale)

    def call(data: np.ndarray, _seed: int) -> float:
        return float(meas(data))

    result = _common.run_benchmark(args, x, call)
    result.update(
        status="ok",
        library="opendp",
        version=version,
        api="make_private_quantile(max_divergence, alpha=0.5, grid candidates)",
        budget=f"ε = {eps_replace_one:g} pure DP (replace-one = symmetric distance 2)",
        candidates=args.candidates,
        scale=scale,
        estimate=result.pop("output"),
        numpy_sort_s_in_env=_common.sort_seconds(x),
        env=_common.environment(),
    )
    _common.emit(result)


if __name__ == "__main__":
    main()
