"""python-dp (PyDP, Google's differential-privacy library) worker: ε-DP median.

Natural API: ``pydp.algorithms.laplacian.Median(epsilon, lower_bound, upper_bound,
dtype="float")`` and ``quick_result(data)``, which consumes the whole budget in one
release. Google's bounded quantile algorithm clamps to the bounds and adds Laplace noise
to the counts of a quantile tree (pure ε-DP, one record added or removed,
``l0_sensitivity = linf_sensitivity = 1``). The timed call creates the algorithm object
and passes it the numpy array (pybind11 converts it).
"""

from __future__ import annotations

import _common
import numpy as np


def main() -> None:
    p = _common.base_parser(__doc__ or "")
    p.add_argument("--epsilon", type=float, default=1.0)
    args = p.parse_args()
    try:
        from importlib.metadata import version

        from pydp.algorithms.laplacian import Median
    except Exception as exc:
        _common.fail("import failed", f"{type(exc).__name__}: {exc}")

    x = _common.load(args.data)

    def call(data: np.ndarray, _seed: int) -> float:
        algo = Median(epsilon=args.epsilon, lower_bound=args.lo, upper_bound=args.hi, dtype="float")
        return float(algo.quick_result(data))

    result = _common.run_benchmark(args, x, call)
    result.update(
        status="ok",
        library="python-dp",
        version=version("python-dp"),
        api="pydp.algorithms.laplacian.Median(...).quick_result(x)",
        budget=f"ε = {args.epsilon:g} pure DP (add/remove one)",
        epsilon=args.epsilon,
        estimate=result.pop("output"),
        numpy_sort_s_in_env=_common.sort_seconds(x),
        env=_common.environment(),
    )
    _common.emit(result)


if __name__ == "__main__":
    main()
