"""Time FDP-Fair: the in-process protocol (S = 6, N_s = 2000) and the multi-process CLI (S = 3).

Run: .venv/bin/python benchmarks/fdp_bench.py [--reps 5] [--no-cli]

* In-process: ``FDPFairClassifier.fit`` (setup → round 1 → aggregate → round 2 → finalize,
  every message encoded/decoded as bytes) and ``predict`` on 4000 rows, for the default
  (confidence) rule and the paper rule; median over ``--reps`` seeds.
* Multi-process: the same protocol for S = 3 as separate ``python -m
  dpfair.fairclass.federated.cli fdp …`` processes exchanging message files (sites of a
  round in parallel), wall time of the whole run; compared with the in-process fit at
  S = 3. The difference is interpreter start-up + imports per process, file I/O and JSON.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from dpfair.fairclass.datasets import FairnessDataset, simulate
from dpfair.fairclass.federated import FDPFairClassifier
from dpfair.fairclass.federated._keys import generate_keypair

CLI = [sys.executable, "-m", "dpfair.fairclass.federated.cli", "fdp"]
PAPER: dict[str, Any] = {
    "threshold_rule": "paper",
    "tail": "dyadic",
    "depth": "paper",
    "cross_fit": True,
}


def _inproc(
    sites: list[FairnessDataset], test: FairnessDataset, reps: int, **kw: Any
) -> tuple[float, float, FDPFairClassifier]:
    fits, preds = [], []
    clf = None
    for r in range(reps):
        clf = FDPFairClassifier(
            epsilon=1.0,
            delta=1000.0**-2,
            alpha=0.1,
            feature_bounds=sites[0].feature_bounds,
            random_state=r,
            **kw,
        )
        t0 = time.perf_counter()
        clf.fit([d.X for d in sites], [d.y for d in sites], sensitive_features=[d.A for d in sites])
        t1 = time.perf_counter()
        clf.predict(test.X, sensitive_features=test.A)
        t2 = time.perf_counter()
        fits.append(t1 - t0)
        preds.append(t2 - t1)
    assert clf is not None
    return float(np.median(fits)), float(np.median(preds)), clf


def _write(path: Path, d: FairnessDataset) -> None:
    np.savetxt(
        path,
        np.column_stack([d.X, d.A, d.y]),
        delimiter=",",
        header="x1,x2,a,y",
        comments="",
        fmt="%.12g",
    )


def _cli_run(sites: list[FairnessDataset]) -> float:
    S = len(sites)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for s, d in enumerate(sites):
            (root / f"s{s + 1}").mkdir()
            _write(root / f"s{s + 1}" / "data.csv", d)
        # One-off per party (not timed): signing keys (dpfair fdp keygen).
        (root / "keys").mkdir()
        for party in ["centre", *(f"site-{s + 1}" for s in range(S))]:
            generate_keypair(root / "keys" / party)
        t0 = time.perf_counter()
        site_args = [a for s in range(S) for a in ("--site", f"site-{s + 1}:{sites[s].n}:1:1e-6")]
        site_args += [
            a for s in range(S) for a in ("--site-key", f"site-{s + 1}=keys/site-{s + 1}.pub")
        ]
        bounds = ["--bounds", "0", "--bounds", "1", "--bounds", "0", "--bounds", "1"]
        ckey = ["--key", "keys/centre.key"]
        setup = [*CLI, "centre", "setup", *ckey, *site_args, *bounds, "--alpha", "0.1"]
        subprocess.run(
            [*setup, "--out", "setup.json"],
            cwd=root,
            check=True,
            capture_output=True,
        )
        common = ["--features", "x1,x2", "--target", "y", "--sensitive", "a"]
        common += ["--centre-key", "../keys/centre.pub"]
        common += ["--max-epsilon", "1", "--max-delta", "1e-6"]
        for rnd in (1, 2):
            procs = []
            for s in range(S):
                sid = f"site-{s + 1}"
                extra = [] if rnd == 1 else ["--model", "../model.json"]
                cmd = [*CLI, "site", f"round{rnd}", "data.csv", "--setup", "../setup.json"]
                cmd += ["--site-id", sid, "--key", f"../keys/{sid}.key", *common]
                cmd += ["--state", "state.json", "--out", f"../{sid}.r{rnd}.json", *extra]
                procs.append(subprocess.Popen(cmd, cwd=root / f"s{s + 1}", stdout=subprocess.PIPE))
            for p in procs:
                p.communicate()
                if p.returncode:
                    raise RuntimeError(f"site process failed in round {rnd}")
            msgs = [f"site-{s + 1}.r{rnd}.json" for s in range(S)]
            if rnd == 1:
                cmd = [*CLI, "centre", "aggregate", *msgs, "--setup", "setup.json", *ckey]
                cmd += ["--out", "model.json"]
            else:
                cmd = [*CLI, "centre", "finalize", *msgs, "--setup", "setup.json", *ckey]
                cmd += ["--model", "model.json", "--out", "released.json", "--seed", "0"]
            subprocess.run(cmd, cwd=root, check=True, capture_output=True)
        return time.perf_counter() - t0


def main() -> None:
    """Print the timings (see the module docstring)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--no-cli", action="store_true")
    ap.add_argument("--smoke", action="store_true",
                    help="N_s = 400, 1,000 test rows, one repeat: checks that it runs")
    args = ap.parse_args()
    n_site, n_test = (400, 1000) if args.smoke else (2000, 4000)
    if args.smoke:
        args.reps = 1
    sites = [simulate(n_site, rng=s) for s in range(6)]
    test = simulate(n_test, rng=99)
    _inproc(sites, test, 1)  # warm-up (imports, caches)
    for name, kw in (("default (confidence)", {}), ("paper rule", PAPER)):
        fit, pred, clf = _inproc(sites, test, args.reps, **kw)
        print(
            f"in-process S=6, N_s={n_site}, {name}: fit median {fit:.3f} s, "
            f"predict({n_test}) median {pred:.4f} s, grid {clf.protocol_.grid_shape}, "
            f"M={clf.protocol_.depth}, folds={clf.protocol_.n_folds}"
        )
    if not args.no_cli:
        three = sites[:3]
        fit3, _, _ = _inproc(three, test, args.reps)
        walls = [_cli_run(three) for _ in range(max(1, min(args.reps, 3)))]
        wall = float(np.median(walls))
        print(
            f"multi-process CLI S=3 (setup + 2 rounds x 3 site processes + aggregate + "
            f"finalize = 9 processes): wall median {wall:.2f} s vs in-process fit {fit3:.3f} s "
            f"-> overhead {wall - fit3:.2f} s"
        )
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import dpfair.fairclass.federated.cli"], check=True)
        print(f"one interpreter start + CLI import: {time.perf_counter() - t0:.2f} s")


if __name__ == "__main__":
    main()
