"""Shared cases of the ExpMech exact-law tests: the claimed worst-case miss bound and the
adversarial datasets (clumps, ties on cell edges, records outside the range) on [0, 1]."""

from __future__ import annotations

import numpy as np

#: The public range and granularity the datasets are built for.
BOUNDS = (0.0, 1.0)
GRAN = 0.25


def miss_bound(t: np.ndarray, c: float, eps: float) -> np.ndarray:
    """The claimed bound on P(miss by ≥ t ranks): x/(1 + x) with x = C·e^{−ε·max(t, 1)/2},
    and 1 at t ≤ 0."""
    x = c * np.exp(-eps * np.maximum(t, 1) / 2.0)
    return np.where(t <= 0, 1.0, x / (1.0 + x))


def adversarial_datasets(rng: np.random.Generator, *,
                         outside: bool = False) -> dict[str, np.ndarray]:
    """Sorted small datasets that attain or approach the bound (``outside``: add records
    below, inside and above the range)."""
    out = {
        "n1_low": np.array([0.0]),
        "n1_high": np.array([1.0]),
        "n2_split": np.array([0.0, 1.0]),
        "all_equal_mid": np.full(9, 0.5),
        "all_at_low": np.zeros(9),
        "all_at_high": np.ones(9),
        "clump_far_end": np.concatenate([np.full(4, 0.1), np.full(12, 1.0)]),
        "clump_near_end": np.concatenate([np.zeros(12), np.full(4, 0.9)]),
        "two_clumps": np.concatenate([np.zeros(8), np.ones(8)]),
        "ties_on_edges": np.repeat(np.arange(0, 1.01, GRAN / 64 * 7)[:10], 2),
    }
    if outside:
        out["outside"] = np.concatenate([np.full(5, -3.0), np.full(5, 0.4), np.full(5, 7.0)])
    out["uniform"] = rng.uniform(size=15)
    return {k: np.sort(v) for k, v in out.items()}
