"""diffprivlib (IBM) worker: ε-DP median.

Natural API: ``diffprivlib.tools.median(x, epsilon=ε, bounds=(lo, hi), random_state=s)``,
the exponential mechanism over the intervals between sorted data points (pure ε-DP).
diffprivlib 0.6.6 imports only with scikit-learn < 1.8, hence its own environment.
Its privacy-leak warnings and the default accountant (infinite budget) are left as they
are; warnings are silenced so that they do not flood the output.
"""

from __future__ import annotations

import warnings

import _common
import numpy as np


def main() -> None:
    p = _common.base_parser(__doc__ or "")
    p.add_argument("--epsilon", type=float, default=1.0)
    args = p.parse_args()
    warnings.simplefilter("ignore")
    try:
        import diffprivlib
        import sklearn
        from diffprivlib.tools import median
    except Exception as exc:
        _common.fail("import failed", f"{type(exc).__name__}: {exc}")

    x = _common.load(args.data)
    bounds = (args.lo, args.hi)

    def call(data: np.ndarray, seed: int) -> float:
        return float(median(data, epsilon=args.epsilon, bounds=bounds, random_state=seed))

    result = _common.run_benchmark(args, x, call)
    result.update(
        status="ok",
        library="diffprivlib",
        version=diffprivlib.__version__,
        api="diffprivlib.tools.median(x, epsilon, bounds)",
        budget=f"ε = {args.epsilon:g} pure DP",
        epsilon=args.epsilon,
        extra_versions={"scikit-learn": sklearn.__version__},
        estimate=result.pop("output"),
        numpy_sort_s_in_env=_common.sort_seconds(x),
        env=_common.environment(),
    )
    _common.emit(result)


if __name__ == "__main__":
    main()
