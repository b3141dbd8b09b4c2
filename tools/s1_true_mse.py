"""Issue 20, eighth pass: the true density-weighted squared error of η̃ per fixed S1 width.

12 fits per design (paper6k, unseen; ε = 1, α = 0.1, halves). Usage (repo root)::

    PYTHONPATH=src .venv/bin/python tools/s1_true_mse.py
"""

import math
import runpy
import warnings
from pathlib import Path

import numpy as np

from dpfair.data.designs import simulation_eta
from dpfair.fairclass import CDPFairClassifier
from dpfair.fairclass import _model as M

cap = []
orig = M.sure_smooth


def _noise_left(mats, covs):
    """sqrt(tr(S Σ Sᵀ)/tr(Σ)) for S = ⊗ mats, Σ = ⊗ covs."""
    ratios = [np.trace(m @ cv @ m.T) / np.trace(cv) for m, cv in zip(mats, covs, strict=True)]
    return math.sqrt(float(np.prod(ratios)))


def hook(grid, noisy, sd, ladder=M.SMOOTH_LADDER):
    cap.append((grid, noisy.copy(), sd))
    return orig(grid, noisy, sd, ladder)


M.sure_smooth = hook
mod = runpy.run_path(
    str(Path(__file__).resolve().parents[1] / "benchmarks" / "fairclass_plan_study.py"),
    run_name="x",
)


def sig(v):
    return 1 / (1 + np.exp(-v))


for name in ["paper6k", "unseen"]:
    des = mod["DESIGNS"][name]
    res = {}
    for r in range(12):
        cap.clear()
        X, y, A, _ = des.draw(des.n, np.random.default_rng(50_000 + r))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            CDPFairClassifier(
                epsilon=1, delta=(des.n / 2) ** -2.0, alpha=0.1, random_state=r, **des.kwargs
            ).fit(X, y, sensitive_features=A)
        grid, noisy, sd = cap[0]
        g1, g2 = np.meshgrid(*grid.axes, indexing="ij")
        U = np.column_stack([g1.ravel(), g2.ravel()])
        et = []
        for a in (0, 1):
            Aa = np.full(U.shape[0], a)
            et.append(
                simulation_eta(U, Aa)
                if name.startswith("paper")
                else sig(4 * (U[:, 0] - 0.5) + 1.5 * (2 * a - 1))
            )
        et = np.stack(et, -1).reshape(*grid.shape, 2)
        lam = M.RIDGE * sd
        dens = np.maximum(orig(grid, noisy, sd)[0].sum(-1), 0)
        for s in M.SMOOTH_LADDER:
            mats = tuple(M._smoother(ax, s * grid.length_scale) for ax in grid.axes)
            covs = [rr @ rr.T for rr in grid.roots]
            left = _noise_left(mats, covs)
            e = M.eta_from_sums(M._apply_axes(mats, noisy), lam * left)
            err = (e - et) ** 2
            band = np.exp(-0.5 * ((et - 0.5) / 0.15) ** 2)
            res.setdefault(s, []).append(
                [np.sum(dens * err) / np.sum(dens), np.sum(dens * band * err) / np.sum(dens * band)]
            )
    print(name)
    for s, v in res.items():
        v = np.mean(v, 0)
        print(f"  s={s}: dens-MSE {v[0]:.5f}  band-MSE {v[1]:.5f}")
