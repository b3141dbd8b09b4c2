"""Floating-point attacks on FDP-Fair's linear estimator (THREATS.md rule 6, issue 19).

An attacker who controls one record chooses values whose *computed* row map w(x)/r is as
large as rounding allows: numeric values one ulp inside or at the box edges, rows whose
norm sits within an ulp of the radius (so the clipping's division rounds up), and
neighbours that differ from a record only in the last bits of its values. Through the
site's own round-1 code path (``Site._linear_training_stats``), the exact integer gap of
every released block between such neighbours must stay within the sensitivity the noise
is calibrated to, and the released numbers must lie exactly on their public lattices.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpfair.fairclass.federated import Site, make_protocol
from dpfair.fairclass.federated._linear import (
    CELL_BITS,
    LINEAR_LATTICE_BITS,
    linear_sigmas,
    release_linear_stats,
)

Q = LINEAR_LATTICE_BITS
D = 5
N = 64


def _cfg(radius: float):
    return make_protocol([("h0", N, 1.0, 1e-6)], feature_bounds=[(-1.0, 3.0)] * D,
                         alpha=0.1, estimator="linear", radius=radius)


def _stats(cfg, X, y, A):
    site = Site("h0", X, y, A, config=cfg, random_state=0)
    half = 0
    rows = site._halves[half]
    _n1, (sums, cells, moments), _n = site._linear_training_stats(half)
    return rows, [x.astype(object) for x in (sums, cells, moments)]


def _gap2(a, b, p):
    s = sum(int(v) ** 2 for v in (a[0] - b[0]).ravel())
    c = sum(int(v) ** 2 for v in (a[1] - b[1]).ravel())
    j = np.arange(p)
    diag = np.zeros(p * (p + 1) // 2, dtype=bool)
    diag[j * p - j * (j - 1) // 2] = True
    dm = a[2] - b[2]
    m = sum(int(v) ** 2 for v in dm[diag]) + 2 * sum(int(v) ** 2 for v in dm[~diag])
    return s, c, m


def _adversarial_rows(rng, radius):
    """Rows at the box edges (± one ulp), and rows scaled to within an ulp of the radius."""
    out = []
    for _ in range(20):
        x = rng.choice([-1.0, 3.0], size=D)
        out.append(np.array([np.nextafter(v, 1.0) if rng.random() < 0.5 else v for v in x]))
    for _ in range(20):
        w = rng.standard_normal(D)
        w *= radius / math.sqrt(float(w @ w))  # ‖w‖ = r up to rounding
        w = np.clip(w, -1.0, 1.0)
        out.append(np.clip(1.0 + 2.0 * w, -1.0, 3.0))  # x = mid + half-width·w
    return out


@pytest.mark.parametrize("radius", [0.3, 1.0, math.sqrt(D)])
def test_last_bit_and_edge_neighbours_stay_within_the_sensitivity(radius):
    rng = np.random.default_rng(int(radius * 1000))
    cfg = _cfg(radius)
    p = cfg.linear_width
    X = rng.uniform(-1.0, 3.0, size=(N, D))
    y = rng.integers(0, 2, N)
    A = np.tile([0, 1], N // 2)
    rows, base = _stats(cfg, X, y, A)
    victims = [int(i) for i in rows[:6]]
    for k, adv in enumerate(_adversarial_rows(rng, radius)):
        i = victims[k % len(victims)]
        X2 = X.copy()
        X2[i] = adv
        # ... and the same record with the last bit of every value moved (and, every other
        # time, its label flipped: a change of cell as well)
        X3 = X2.copy()
        X3[i] = [np.nextafter(v, 3.0 if v < 3.0 else -1.0) for v in adv]
        y3 = y.copy()
        if k % 2:
            y3[i] = 1 - y[i]
        _r2, s2 = _stats(cfg, X2, y, A)
        _r3, s3 = _stats(cfg, X3, y3, A)
        for a, b in ((base, s2), (s2, s3)):
            gs, gc, gm = _gap2(a, b, p)
            assert gs <= 8 * 4**Q and gc <= 2 and gm <= 2 * 16**Q


def test_released_blocks_lie_exactly_on_their_lattices():
    cfg = _cfg(1.0)
    rng = np.random.default_rng(3)
    X = rng.uniform(-1.0, 3.0, size=(N, D))
    y, A = rng.integers(0, 2, N), np.tile([0, 1], N // 2)
    site = Site("h0", X, y, A, config=cfg, random_state=0)
    _n1, stats, n = site._linear_training_stats(0)
    sig = linear_sigmas(cfg.plan("h0").sigma_function)
    s, c, m = release_linear_stats(*stats, n, sig, np.random.default_rng(1))
    assert np.all(np.mod(s * 2.0**Q, 1.0) == 0.0)
    assert np.all(np.mod(c * 2.0**CELL_BITS, 1.0) == 0.0)
    assert np.all(np.mod(m * 4.0**Q, 1.0) == 0.0)
