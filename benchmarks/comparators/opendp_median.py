"""OpenDP worker: ε-DP median by the exponential mechanism over a grid of candidates.

Natural API (OpenDP ≥ 0.12): ``make_private_quantile`` (``then_private_quantile``) on a
``vector_domain(atom_domain(T=float, nan=False))`` under the symmetric distance, output
measure ``max_divergence()`` (pure ε-DP), ``alpha=0.5``, candidates an evenly spaced grid
over the public bounds. The noise scale is calibrated once (outside the timing) with
``binary_search_param`` so that the measurement's privacy map gives ε at d_in = 1
(one record added or removed). The timed call builds the measurement with that scale and
applies it to the numpy array, as a user releasing one median would.
"""

from __future__ import annotations

from typing import Any

import _common
import numpy as np


def main() -> None:
    p = _common.base_parser(__doc__ or "")
    p.add_argument("--epsilon", type=float, default=1.0)
    p.add_argument("--grid-step", type=float, default=0.005, help="candidate spacing")
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
    k = round((args.hi - args.lo) / args.grid_step) + 1
    candidates = np.linspace(args.lo, args.hi, k).tolist()
    space = (dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.symmetric_distance())

    def build(scale: float) -> Any:
        return space >> dp.m.then_private_quantile(
            dp.max_divergence(), candidates=candidates, alpha=0.5, scale=scale
        )

    scale = dp.binary_search_param(build, d_in=1, d_out=args.epsilon)
    epsilon_spent = float(build(scale).map(1))

    def call(data: np.ndarray, _seed: int) -> float:
        return float(build(scale)(data))

    result = _common.run_benchmark(args, x, call)
    result.update(
        status="ok",
        library="opendp",
        version=version,
        api="make_private_quantile(max_divergence, alpha=0.5, grid candidates)",
        budget=f"ε = {epsilon_spent:g} pure DP (add/remove one)",
        epsilon=epsilon_spent,
        candidates=k,
        scale=scale,
        estimate=result.pop("output"),
        numpy_sort_s_in_env=_common.sort_seconds(x),
        env=_common.environment(),
    )
    _common.emit(result)


if __name__ == "__main__":
    main()
