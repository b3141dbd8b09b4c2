"""Diagnostics behind the FDP-Fair RFF section of docs/fairclass_full_adult.md (one split).

    .venv/bin/python benchmarks/fairclass_rff_diagnostics.py nw
    .venv/bin/python benchmarks/fairclass_rff_diagnostics.py protocol --eps 1 --dim 2048 \
        --alpha 0.1 --h 0.8 1.0 1.2

``nw``: non-private Nadaraya–Watson group score on the public one-hot map of full Adult
(70/30 split with seed 100, the first 1,500 test rows), exact Gaussian kernel vs its random
Fourier approximation with D = 1024 and 4096 (frequency seed 1), no fairness threshold:
test error of 1{η̂_a(x) > 1/2}. ``protocol``: FDPFairClassifier(estimator="rff") with the
given ε, D, α and bandwidths, training rows dealt to 3 sites (seed 7). ``--smoke`` keeps
the first 3,000 rows of full Adult and D ≤ 64 (checks that the script runs).
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np


def _split(n: int) -> tuple[np.ndarray, np.ndarray]:
    perm = np.random.default_rng(100).permutation(n)
    cut = round(0.7 * n)
    return perm[:cut], perm[cut:]


def _load(rows: int | None):  # type: ignore[no-untyped-def]
    """Full Adult, or its first ``rows`` rows (``--smoke``)."""
    from dpfair.fairclass.adult_full import load_full_adult

    d = load_full_adult()
    return d if rows is None else d.subset(np.arange(rows))


def nw(rows: int | None = None, dims: tuple[int, ...] = (1024, 4096)) -> None:
    from dpfair.fairclass._linear import FeatureMap
    from dpfair.fairclass._rff import rff_features, rff_frequencies

    d = _load(rows)
    U = FeatureMap.build(d.bounds, d.categories, d.X.shape[1]).transform(d.X)
    tr, te = _split(d.n)
    te = te[:1500]
    Atr, ytr, Ate = d.A[tr], d.y[tr], d.A[te]
    sq = (U[te] ** 2).sum(1)[:, None] + (U[tr] ** 2).sum(1)[None, :] - 2 * U[te] @ U[tr].T
    for h in (0.3, 0.5, 0.7, 1.0):
        K = np.exp(-np.maximum(sq, 0) / (2 * h * h))
        pred = np.empty(te.size)
        for a in (0, 1):
            r = Ate == a
            G = K[r][:, (Atr == a) & (ytr == 1)].sum(1)
            H = K[r][:, (Atr == a) & (ytr == 0)].sum(1)
            pred[r] = G / (G + H + 1e-12) > 0.5
        res = []
        for D in dims:
            W = rff_frequencies(U.shape[1], D, h, 1)
            Ptr, Pte = rff_features(U[tr], W), rff_features(U[te], W)
            pr = np.empty(te.size)
            for a in (0, 1):
                r = Ate == a
                G = np.maximum(Pte[r] @ Ptr[(Atr == a) & (ytr == 1)].sum(0), 0)
                H = np.maximum(Pte[r] @ Ptr[(Atr == a) & (ytr == 0)].sum(0), 0)
                pr[r] = G / (G + H + 1e-12) > 0.5
            res.append(f"D={D}: {np.mean(pr != d.y[te]):.4f}")
        print(f"h={h}: exact NW {np.mean(pred != d.y[te]):.4f}; RFF " + ", ".join(res),
              flush=True)


def protocol(eps: float, dim: int, alpha: float, hs: list[float], rows: int | None = None) -> None:
    from dpfair import UncertifiedFairnessWarning
    from dpfair.fairclass.federated import FDPFairClassifier

    warnings.simplefilter("ignore", UncertifiedFairnessWarning)
    d = _load(rows)
    tr, te = _split(d.n)
    tr, te = np.sort(tr), np.sort(te)
    sites = np.array_split(np.random.default_rng(7).permutation(tr), 3)
    delta = (len(sites[0]) / 2) ** -2.0
    for h in hs:
        clf = FDPFairClassifier(
            epsilon=eps, delta=delta, alpha=alpha, feature_bounds=d.bounds,
            categories=d.categories, estimator="rff", bandwidth=h, features_dim=dim,
            random_state=1,
        )
        t = time.perf_counter()
        clf.fit([d.X[s] for s in sites], [d.y[s] for s in sites],
                sensitive_features=[d.A[s] for s in sites])
        p = clf.predict(d.X[te], sensitive_features=d.A[te])
        yt, At = d.y[te], d.A[te]
        print(f"eps={eps} D={dim} h={h}: error {np.mean(p != yt):.4f}, "
              f"DD {p[At == 1].mean() - p[At == 0].mean():+.3f}, certified {clf.certified_}, "
              f"{time.perf_counter() - t:.1f} s", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mode", choices=("nw", "protocol"))
    ap.add_argument("--eps", type=float, default=1.0)
    ap.add_argument("--dim", type=int, default=2048)
    ap.add_argument("--alpha", type=float, default=0.1)
    ap.add_argument("--h", type=float, nargs="+", default=[0.8, 1.0, 1.2])
    ap.add_argument("--smoke", action="store_true", help="tiny sizes: checks that it runs")
    args = ap.parse_args()
    rows = 3000 if args.smoke else None
    if args.mode == "nw":
        nw(rows, (32, 64) if args.smoke else (1024, 4096))
    else:
        protocol(args.eps, min(args.dim, 64) if args.smoke else args.dim, args.alpha,
                 args.h[:1] if args.smoke else args.h, rows)


if __name__ == "__main__":
    main()
