"""Issue 20, ninth pass: the true squared error of η̃ for the S1 post-smoothers.

For fits of the plan study's designs (ε = 1, α = 0.1, halves) it captures the released
cell sums and compares, against the design's true η on the grid, the density-weighted and
the "band" (weight exp(−(η − ½)²/(2·0.15²))) squared error of η̃ for: the unsmoothed
release, the equal-width smoother (``_model.sure_smooth``), the shipped
``_model.smooth_release`` and every fixed directional candidate of ``_oriented``. Usage
(repo root)::

    PYTHONPATH=src .venv/bin/python tools/s1_true_mse_oriented.py [REPS] [DESIGNS]

(defaults: 8 fits, ``paper6k,unseen``).
"""

from __future__ import annotations

import runpy
import sys
import warnings
from pathlib import Path

import numpy as np

from dpfair.data.designs import simulation_eta
from dpfair.fairclass import CDPFairClassifier
from dpfair.fairclass import _model as M
from dpfair.fairclass import _oriented as O

ROOT = Path(__file__).resolve().parents[1]


def true_eta(design: str, U: np.ndarray) -> np.ndarray:
    """η_a at the grid nodes, shape (nodes, 2)."""
    out = []
    for a in (0, 1):
        if design.startswith("paper"):
            out.append(simulation_eta(U, np.full(len(U), a)))
        elif design == "unseen":
            out.append(1 / (1 + np.exp(-(4.0 * (U[:, 0] - 0.5) + 1.5 * (2 * a - 1)))))
        elif design == "wave":
            v = 3.0 * np.sin(2 * np.pi * U[:, 0]) + 2.0 * U[:, 1] - 1.0 + (2.0 * a - 1.0)
            out.append(1 / (1 + np.exp(-v)))
        else:
            raise SystemExit(f"{design}: no true eta on a 2-D grid")
    return np.stack(out, -1)


def captured(design, seed: int):
    cap = []
    orig = M.smooth_release

    def hook(grid, noisy, sd):
        cap.append((grid, noisy.copy(), sd))
        return orig(grid, noisy, sd)

    X, y, A, _ = design.draw(design.n, np.random.default_rng(50_000 + seed))
    M.smooth_release = hook
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            CDPFairClassifier(epsilon=1, delta=(design.n / 2) ** -2.0, alpha=0.1,
                              random_state=seed, **design.kwargs).fit(X, y, sensitive_features=A)
    finally:
        M.smooth_release = orig
    return cap[0]


def main() -> None:
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    names = (sys.argv[2] if len(sys.argv) > 2 else "paper6k,unseen").split(",")
    study = runpy.run_path(str(ROOT / "benchmarks" / "fairclass_plan_study.py"), run_name="x")
    for name in names:
        rows: dict[str, list[list[float]]] = {}
        for r in range(reps):
            grid, noisy, sd = captured(study["DESIGNS"][name], r)
            g0, g1 = np.meshgrid(*grid.axes, indexing="ij")
            eta = true_eta(name, np.column_stack([g0.ravel(), g1.ravel()])).reshape(
                *grid.shape, 2)
            pilot, _w, pf = M.sure_smooth(grid, noisy, sd)
            dens = np.maximum(pilot.sum(-1), 0.0)
            band = dens * np.exp(-0.5 * ((eta - 0.5) / 0.15) ** 2)
            lam = M.RIDGE * sd

            def record(label, smoothed, factor, eta=eta, dens=dens, band=band, lam=lam,
                       rows=rows):
                err = (M.eta_from_sums(smoothed, lam * factor) - eta) ** 2
                rows.setdefault(label, []).append(
                    [float(np.sum(dens * err) / dens.sum()),
                     float(np.sum(band * err) / band.sum())])

            record("unsmoothed release", noisy, np.ones(2))
            record("equal width (sure_smooth)", pilot, pf)
            record("shipped (smooth_release)", *M.smooth_release(grid, noisy, sd))
            cands = O._Candidates(grid, ())
            Y = np.moveaxis(noisy.reshape(*grid.shape, 4), -1, 0)
            for (theta, along, across), kernel in cands:
                conv = O._conv(np.concatenate([Y, np.ones((1, *grid.shape))]), kernel)
                sm = np.moveaxis(conv[:4] / conv[4], 0, -1).reshape(noisy.shape)
                f = O._noise_factor(grid, kernel)
                record(f"direction {theta:5.1f}, along {along}, across {across}", sm,
                       np.array([f, f]))
        print(f"{name} ({reps} fits; density-weighted MSE, band MSE)")
        fixed = ["unsmoothed release", "equal width (sure_smooth)", "shipped (smooth_release)"]
        for label in fixed:
            v = np.mean(rows.pop(label), axis=0)
            print(f"  {label:38s} {v[0]:.5f}  {v[1]:.5f}")
        best = sorted(rows.items(), key=lambda kv: np.mean(kv[1], axis=0)[0])[:3]
        for label, vals in best:
            v = np.mean(vals, axis=0)
            print(f"  best fixed: {label:26s} {v[0]:.5f}  {v[1]:.5f}")


if __name__ == "__main__":
    main()
