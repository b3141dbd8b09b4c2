"""Issue 20, eighth pass: S1 smoother variants measured against the shipped one (not adopted).

Each variant replaces ``dpfair.fairclass._model.sure_smooth`` for one run of
``benchmarks/fairclass_plan_study.py`` (monkeypatched here; nothing in ``src`` changes).
Every variant reads only the released sums, the public grid and the public noise scale, so
it would be post-processing like the shipped smoother. Measured on commit 34edde1, before
the ninth pass added the directional smoother after ``sure_smooth`` on 2-D grids.
Usage (repo root)::

    PYTHONPATH=src .venv/bin/python tools/s1_smoother_variants.py MODE STUDY-ARGS...

MODE is ``main`` (the shipped smoother) or comma-separated ``key=value`` pairs:

* ``force=S`` (or ``S1/S2``): a fixed width s/h, the same for both groups;
* ``weight=density|sq|bandK|fairW``: per-axis widths minimising a linearised Stein
  estimate of the density-weighted squared error of η̃ against the η of bandwidth h
  (``bandK``: weight (4η(1−η))^K; ``fairW``: a Gaussian band of sd W around the pilot's
  fair-rule thresholds at DD = ``aim``, default 0.04);
* ``bias=1,sr=R``: per-axis widths minimising an estimate of the squared error against the
  true η, with the bias model bias_S = Σ_i (1 + s_i²) b_i and b_i estimated from a
  reference smoother of width R·h on axis i.

Example: ``... tools/s1_smoother_variants.py weight=fair0.1 --reps 100 --designs
unseen,paper6k --constraints dp --eps 1 --alphas 0.1 --calibration-shares 0.5``.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from dpfair.fairclass import _model as M

MODE: dict[str, object] = {"weight": "density", "peraxis": True}


def _noise_left(mats, covs):
    """sqrt(tr(S Σ Sᵀ)/tr(Σ)) for S = ⊗ mats, Σ = ⊗ covs."""
    ratios = [np.trace(m @ cv @ m.T) / np.trace(cv) for m, cv in zip(mats, covs, strict=True)]
    return math.sqrt(float(np.prod(ratios)))


def _diag_kron(parts):
    out = parts[0]
    for v in parts[1:]:
        out = np.multiply.outer(out, v)
    return out


def _keep_better(crit, best, out, widths, factor, SY, ws, left):
    """Per group, keep candidate ``ws`` (smoothed sums ``SY``) where it beats ``best``."""
    for a in np.flatnonzero(crit < best):
        best[a] = crit[a]
        out[..., a, :] = SY[..., a, :]
        widths[a] = ws
        factor[a] = left


def eta_sure_smooth(grid, noisy, noise_sd, ladder=M.SMOOTH_LADDER):
    h = grid.length_scale
    var = float(noise_sd) ** 2
    if var == 0:
        return M._orig_sure_smooth(grid, noisy, noise_sd, ladder)
    covs = [r @ r.T for r in grid.roots]
    d = grid.ndim
    # pilot: the main smoother's output
    pilot, _w, pleft = M._orig_sure_smooth(grid, noisy, noise_sd, ladder)
    lam = M.RIDGE * float(noise_sd)
    pilot[..., 1]
    Dp = pilot[..., 1] + pilot[..., 0]
    eta_p = M.eta_from_sums(pilot, lam * pleft)  # grid + (2,)
    Dp = np.maximum(Dp, 0.0)
    c = (1 - eta_p) ** 2 + eta_p**2
    if MODE["weight"] == "density":
        W = Dp
    elif MODE["weight"].startswith("fair"):
        w = float(MODE["weight"][4:])
        aim = float(MODE.get("aim", 0.04))
        mass = Dp.reshape(-1, 2)
        ep = eta_p.reshape(-1, 2)
        pi = mass.sum(0) / mass.sum()
        taus = np.linspace(-1, 1, 801)
        acc1 = ep[None, :, 1] >= 0.5 + taus[:, None] / (2 * pi[1])
        acc0 = ep[None, :, 0] >= 0.5 - taus[:, None] / (2 * pi[0])
        p1 = (acc1 * mass[None, :, 1]).sum(1) / mass[:, 1].sum()
        p0 = (acc0 * mass[None, :, 0]).sum(1) / mass[:, 0].sum()
        ok = np.abs(p1 - p0) <= aim
        tau = (
            taus[ok][np.argmin(np.abs(taus[ok]))] if ok.any() else taus[np.argmin(np.abs(p1 - p0))]
        )
        t = np.array([0.5 - tau / (2 * pi[0]), 0.5 + tau / (2 * pi[1])])
        W = Dp * np.exp(-0.5 * ((eta_p - t) / w) ** 2)
    elif MODE["weight"].startswith("band"):
        k = float(MODE["weight"][4:])
        W = Dp * (4.0 * eta_p * (1.0 - eta_p)) ** k
    else:
        W = Dp**2 / (Dp + lam)
    eta0 = M.eta_from_sums(noisy, lam)
    [np.diag(cv) for cv in covs]
    {s: M._smoother(ax, s * h) for ax in grid.axes for s in ladder}

    def mats_for(ws):
        return tuple(M._smoother(ax, s * h) for ax, s in zip(grid.axes, ws, strict=True))

    combos = (
        itertools.product(ladder, repeat=d)
        if MODE["peraxis"] and d <= 2
        else ((s,) * d for s in ladder)
    )
    best = np.full(2, np.inf)
    out = np.array(noisy, copy=True)
    widths = np.zeros((2, d))
    factor = np.ones(2)
    for ws in combos:
        mats = mats_for(ws)
        SY = M._apply_axes(mats, noisy)
        left = _noise_left(mats, covs)
        eta_s = M.eta_from_sums(SY, lam * left)
        # diag(S Sigma) as an outer product of per-axis diagonals
        dg = [np.einsum("ij,ji->i", m, cv) for m, cv in zip(mats, covs, strict=True)]
        SS = _diag_kron(dg)
        cov_term = 2.0 * var * c * SS[..., None] / (Dp + lam) ** 2
        crit = np.sum(W * ((eta_s - eta0) ** 2 + cov_term), axis=tuple(range(d)))
        _keep_better(crit, best, out, widths, factor, SY, ws, left)
    return out, widths, factor


def _install(fn):
    if not hasattr(M, "_orig_sure_smooth"):
        M._orig_sure_smooth = M.sure_smooth
    M.sure_smooth = fn


def install():
    _install(eta_sure_smooth)


def forced(grid, noisy, noise_sd, ladder=M.SMOOTH_LADDER):
    ws = [float(v) for v in str(MODE["force"]).split("/")]
    if len(ws) == 1:
        ws = ws * grid.ndim
    mats = tuple(
        M._smoother(ax, s * grid.length_scale) for ax, s in zip(grid.axes, ws, strict=True)
    )
    covs = [r @ r.T for r in grid.roots]
    left = _noise_left(mats, covs)
    return M._apply_axes(mats, noisy), np.array([ws, ws]), np.array([left, left])


def install_forced():
    _install(forced)


def bias_model_smooth(grid, noisy, noise_sd, ladder=M.SMOOTH_LADDER):
    """Per-axis widths minimising a density-weighted estimate of E|eta_S - eta|^2 (true eta),
    with the bias model bias_S = sum_i (1 + s_i^2) b_i, b_i estimated from a reference smooth."""
    h = grid.length_scale
    var = float(noise_sd) ** 2
    if var == 0:
        return M._orig_sure_smooth(grid, noisy, noise_sd, ladder)
    d = grid.ndim
    covs = [r @ r.T for r in grid.roots]
    pilot, _w, pleft = M._orig_sure_smooth(grid, noisy, noise_sd, ladder)
    lam = M.RIDGE * float(noise_sd)
    Dp = np.maximum(pilot[..., 1] + pilot[..., 0], 0.0)
    eta_p = M.eta_from_sums(pilot, lam * pleft)
    c = (1 - eta_p) ** 2 + eta_p**2
    W = Dp if MODE.get("w2", "d") == "d" else Dp * np.exp(-0.5 * ((eta_p - 0.5) / 0.15) ** 2)
    scale = var * c / (Dp + lam) ** 2  # per node, per group
    eta0 = M.eta_from_sums(noisy, lam)
    sr = float(MODE.get("sr", 1.0))
    eye = [np.eye(ax.size) for ax in grid.axes]
    Sr = [M._smoother(ax, sr * h) for ax in grid.axes]
    b = []
    for i in range(d):
        mats = tuple(Sr[k] if k == i else eye[k] for k in range(d))
        SY = M._apply_axes(mats, noisy)
        b.append((M.eta_from_sums(SY, lam) - eta0) / sr**2)

    # E_i = (R_i - I)/sr^2 ; diag(E_i Sigma E_k^T) per node
    def dEE(i, k):
        # R_i Sigma R_k^T - R_i Sigma - Sigma R_k^T + Sigma, each Kronecker over axes
        def op(axis, use_i, use_k):
            P = Sr[axis] if use_i else eye[axis]
            Q = Sr[axis] if use_k else eye[axis]
            return np.einsum("ij,jk,ik->i", P, covs[axis], Q)

        terms = []
        for si, sk, sign in ((1, 1, 1), (1, 0, -1), (0, 1, -1), (0, 0, 1)):
            parts = [op(ax, si and ax == i, sk and ax == k) for ax in range(d)]
            terms.append(sign * _diag_kron(parts))
        return sum(terms) / sr**4

    EE = {(i, k): dEE(i, k) for i in range(d) for k in range(d)}
    combos = itertools.product(ladder, repeat=d) if d <= 2 else ((s,) * d for s in ladder)
    best = np.full(2, np.inf)
    out = np.array(noisy, copy=True)
    widths = np.zeros((2, d))
    factor = np.ones(2)
    axes_sum = tuple(range(d))
    for ws in combos:
        mats = tuple(M._smoother(ax, s * h) for ax, s in zip(grid.axes, ws, strict=True))
        coef = [1.0 + s**2 for s in ws]
        beta = sum(coef[i] * b[i] for i in range(d))
        nb = sum(coef[i] * coef[k] * EE[(i, k)] for i in range(d) for k in range(d))
        sss = _diag_kron(
            [np.einsum("ij,jk,ik->i", m, cv, m) for m, cv in zip(mats, covs, strict=True)]
        )
        crit = np.sum(W * (beta**2 - scale * nb[..., None] + scale * sss[..., None]), axis=axes_sum)
        if (crit < best).any():
            SY = M._apply_axes(mats, noisy)
            _keep_better(crit, best, out, widths, factor, SY, ws, _noise_left(mats, covs))
    return out, widths, factor


def install_bias():
    _install(bias_model_smooth)


def main() -> None:
    import sys

    from _plan_study import read_mode, run_study

    if read_mode(sys.argv[1], MODE):
        if "force" in MODE:
            install_forced()
        elif "bias" in MODE:
            install_bias()
        else:
            install()
    run_study(sys.argv[2:])


if __name__ == "__main__":
    main()
