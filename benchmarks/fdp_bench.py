"""Time the in-process FDP-Fair protocol (S = 6, N_s = 2000) and predict (4000 rows).

Run: .venv/bin/python benchmarks/fdp_bench.py
"""

from __future__ import annotations

import time

import numpy as np

from dpfair.fairclass.datasets import simulate
from dpfair.fairclass.federated import FDPFairClassifier


def main() -> None:
    sites = [simulate(2000, rng=s) for s in range(6)]
    test = simulate(4000, rng=99)
    fits, preds = [], []
    for r in range(5):
        clf = FDPFairClassifier(
            epsilon=1.0,
            delta=1000.0**-2,
            alpha=0.1,
            feature_bounds=sites[0].feature_bounds,
            random_state=r,
        )
        t0 = time.perf_counter()
        clf.fit([d.X for d in sites], [d.y for d in sites], sensitive_features=[d.A for d in sites])
        t1 = time.perf_counter()
        clf.predict(test.X, sensitive_features=test.A)
        t2 = time.perf_counter()
        fits.append(t1 - t0)
        preds.append(t2 - t1)
    print(
        f"S=6, N_s=2000: fit median {np.median(fits):.3f} s, "
        f"predict(4000) median {np.median(preds):.4f} s, grid {clf.protocol_.grid_shape}, "
        f"M={clf.protocol_.depth}"
    )


if __name__ == "__main__":
    main()
