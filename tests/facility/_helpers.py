"""Shared helpers for the facility tests."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

DOMAIN = (0.0, 1.0)


def random_ctm(rng: np.random.Generator, n: int, domain: tuple[float, float] = DOMAIN,
               lower: bool = True, distinct: bool = False) -> NDArray[np.float64]:
    """A random collapsing-towards-the-median data set (Def. 6.1), with zero gaps (ties)
    unless ``distinct``."""
    k = (n + 1) // 2 if lower else n // 2 + 1
    keep = 1.0 if distinct else 0.8
    gl = np.sort(rng.exponential(size=k - 1) * (rng.random(k - 1) < keep) + distinct * 0.01)
    gl = gl[::-1]
    gr = np.sort(rng.exponential(size=n - k) * (rng.random(n - k) < keep) + distinct * 0.01)
    left = np.cumsum(np.concatenate(([0.0], gl)))
    x = np.concatenate((left, left[-1] + np.cumsum(gr)))
    span = max(float(x.max() - x.min()), 1e-12)
    lo, hi = domain
    width = rng.uniform(0.2, 1.0) * (hi - lo)
    off = lo + rng.uniform(0.0, (hi - lo) - width)
    return np.clip(off + (x - x.min()) / span * width, lo, hi)


def max_log_ratio(p, q) -> float:
    """max |log f_p − log f_q| at every breakpoint of both densities and every midpoint."""
    pts = np.unique(np.concatenate((p.edges, q.edges)))
    t = np.concatenate((pts, 0.5 * (pts[:-1] + pts[1:])))
    lp, lq = p.logpdf(t), q.logpdf(t)
    assert np.all(np.isfinite(lp)) and np.all(np.isfinite(lq))  # full support on the domain
    return float(np.max(np.abs(lp - lq)))
