"""Issue 20, ninth pass: the dense reference of the directional S1 post-smoother.

This is the implementation the ninth pass measured first (dense n × n smoothers on the
2-D grid); ``src/dpfair/fairclass/_oriented.py`` ships the same criterion and candidates
with FFT convolutions (``tests/fairclass/test_oriented_smooth.py`` checks them against
dense matrices). Running it replaces the shipped ``_model.smooth_release`` for one run of
``benchmarks/fairclass_plan_study.py``, e.g. to try other ladders.

The released cell sums of one group are smoothed by an anisotropic Gaussian of width
``along``·h along the direction θ and ``across``·h across it (a dense, row-normalised
smoother on the public 2-D grid). Where η is constant along θ, smoothing G and H by the
same weights leaves η unchanged and only removes noise, even where the density varies
along θ. The direction and the along-width are chosen per group by a linearised Stein
estimate of the density-weighted squared error of η̃ (as ``weight=density`` of
``tools/s1_smoother_variants.py``); ``across`` is fixed (the Stein estimate cannot see the
bias that η at bandwidth h already carries across a steep boundary). Everything is read off
the released sums, the public grid and the public noise scale: post-processing.

Usage (repo root)::

    PYTHONPATH=src .venv/bin/python tools/s1_oriented_smoother.py MODE STUDY-ARGS...

MODE is ``main`` or comma-separated ``key=value`` pairs: ``across=0.25`` (fixed across
width, or several separated by ``/``), ``along=1/1.5/2/3``, ``angles=8`` (number of
directions in [0, π)), ``axis=1`` (also the shipped family's equal widths as candidates).
"""

from __future__ import annotations

import math
import sys

import numpy as np
from _plan_study import read_mode, run_study

from dpfair.fairclass import _model as M

MODE: dict[str, str] = {"across": "0.25", "along": "1/1.5/2/3", "angles": "8", "axis": "1"}
_ORIG = M.sure_smooth


def _floats(key: str) -> list[float]:
    return [float(v) for v in MODE[key].split("/")]


def _nodes(grid) -> np.ndarray:
    g1, g2 = np.meshgrid(*grid.axes, indexing="ij")
    return np.column_stack([g1.ravel(), g2.ravel()])


def candidates(grid):
    """Yield (label, dense smoother) pairs."""
    h = grid.length_scale
    if MODE["axis"] == "1":
        for s in M.SMOOTH_LADDER:
            mats = [M._smoother(ax, s * h) for ax in grid.axes]
            yield ("axis", s, s), np.kron(mats[0], mats[1])
    U = _nodes(grid)
    d0 = U[:, None, 0] - U[None, :, 0]
    d1 = U[:, None, 1] - U[None, :, 1]
    k = int(MODE["angles"])
    for j in range(k):
        th = math.pi * j / k
        u2 = (d0 * math.cos(th) + d1 * math.sin(th)) ** 2
        v2 = (-d0 * math.sin(th) + d1 * math.cos(th)) ** 2
        for wa in _floats("along"):
            for wc in _floats("across"):
                K = np.exp(-0.5 * (u2 / (wa * h) ** 2 + v2 / (wc * h) ** 2))
                yield (round(math.degrees(th), 1), wa, wc), K / K.sum(axis=1, keepdims=True)


def oriented_smooth(grid, noisy, noise_sd, ladder=M.SMOOTH_LADDER):
    var = float(noise_sd) ** 2
    if grid.ndim != 2 or var == 0:
        return _ORIG(grid, noisy, noise_sd, ladder)
    n = int(np.prod(grid.shape))
    Y = noisy.reshape(n, 2, 2)
    C = np.kron(grid.roots[0] @ grid.roots[0].T, grid.roots[1] @ grid.roots[1].T)
    L = np.kron(grid.roots[0], grid.roots[1])
    pilot, _w, pleft = _ORIG(grid, noisy, noise_sd, ladder)
    lam = M.RIDGE * float(noise_sd)
    P = pilot.reshape(n, 2, 2)
    dens = np.maximum(P.sum(-1), 0.0)
    eta_p = M.eta_from_sums(P, lam * pleft)
    c = (1 - eta_p) ** 2 + eta_p**2
    eta0 = M.eta_from_sums(Y, lam)
    best = np.full(2, np.inf)
    chosen: list[object] = [None, None]
    mats: list[np.ndarray | None] = [None, None]
    for label, S in candidates(grid):
        SY = np.einsum("ij,jay->iay", S, Y)
        diag = np.einsum("ij,ji->i", S, C)
        # the noise left by S (its ridge) enters only through the chosen one's λ; use λ at
        # the pilot's factor for the criterion (a small effect on the ranking)
        eta_s = M.eta_from_sums(SY, lam * pleft)
        crit = np.sum(dens * ((eta_s - eta0) ** 2 + 2.0 * var * c * diag[:, None]
                              / (dens + lam) ** 2), axis=0)
        for a in np.flatnonzero(crit < best):
            best[a] = crit[a]
            chosen[a] = label
            mats[a] = S
    out = np.array(noisy, dtype=np.float64, copy=True)
    factor = np.ones(2)
    tr = float(np.sum(L * L))
    for a in (0, 1):
        S = mats[a]
        out[..., a, :] = np.einsum("ij,jy->iy", S, Y[:, a, :]).reshape(*grid.shape, 2)
        factor[a] = math.sqrt(float(np.sum((S @ L) ** 2)) / tr)
    if MODE.get("verbose") == "1":
        print("  oriented picks", chosen, np.round(factor, 3), file=sys.stderr, flush=True)
    return out, np.zeros(2), factor


def _as_release(grid, noisy, noise_sd):
    out, _w, factor = oriented_smooth(grid, noisy, noise_sd)
    return out, factor


def main() -> None:
    if read_mode(sys.argv[1], MODE):
        M.smooth_release = _as_release
    run_study(sys.argv[2:])


if __name__ == "__main__":
    main()
