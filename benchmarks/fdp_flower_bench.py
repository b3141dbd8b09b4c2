"""Wall time of FDP-Fair (S = 3 sites, N_s = 2000, one machine) over three transports.

Run: .venv/bin/python benchmarks/fdp_flower_bench.py [--reps 3] [--flower-reps 2]

* in-process: ``FDPFairClassifier.fit`` (median over ``--reps`` seeds);
* file exchange: the 9 ``dpfair fdp …`` processes of ``fdp_bench.py`` (setup, 3 sites ×
  2 rounds in parallel, aggregate, finalize), wall time of the whole run;
* Flower: a SuperLink and three SuperNodes already running on localhost (``--insecure``;
  their start-up is reported separately, in a deployment they run permanently), then
  ``flwr run flower_app`` → the released model file is written (wall) → ``flwr run`` exits.

Start-up cost of one Flower run, measured here with the same interpreter: on the critical
path are the ``flwr`` CLI process, the ``flwr-serverapp`` process (the centre) and, for each
of the 3 request/reply steps (discovery, round 1, round 2), a ``flwr-clientapp`` process per
site (the 3 sites start theirs at the same time). The script times ``python -c "import …"``
of exactly those modules. What remains is Flower's polling (SuperNode: every 3 s when idle;
SuperExec: every 1 s) and the protocol itself.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests/…/_deploy.py: the localhost deployment helper
sys.path.insert(0, str(Path(__file__).resolve().parent))

from tests.fairclass.federated._deploy import Deployment  # noqa: E402

from dpfair.fairclass.datasets import simulate  # noqa: E402
from dpfair.fairclass.federated import (  # noqa: E402
    FDPFairClassifier,
    SiteSpec,
    make_protocol,
    write_message,
)
from fdp_bench import _cli_run, _write  # noqa: E402

N_S, S, EPS, DELTA = 2000, 3, 1.0, 1e-6


def _import_time(module: str, copies: int = 1) -> float:
    """Wall time of ``copies`` concurrent fresh interpreters importing ``module``."""
    t0 = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-c", f"import {module}"]) for _ in range(copies)]
    for p in procs:
        if p.wait():
            raise RuntimeError(f"import {module} failed")
    return time.perf_counter() - t0


def _inproc(sites: list, reps: int) -> float:
    times = []
    for r in range(reps):
        clf = FDPFairClassifier(
            epsilon=EPS,
            delta=DELTA,
            alpha=0.1,
            feature_bounds=sites[0].feature_bounds,
            random_state=r,
        )
        t0 = time.perf_counter()
        clf.fit([d.X for d in sites], [d.y for d in sites], sensitive_features=[d.A for d in sites])
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def _flower(sites: list, reps: int) -> tuple[float, list[dict[str, float]]]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        dep = Deployment(root)
        try:
            t0 = time.perf_counter()
            dep.start_superlink()
            for s, d in enumerate(sites):
                path = root / f"site{s + 1}.csv"
                _write(path, d)
                dep.start_supernode(
                    f"node{s + 1}",
                    {
                        "site-id": f"site-{s + 1}",
                        "data": str(path),
                        "features": "x1,x2",
                        "target": "y",
                        "sensitive": "a",
                        "max-epsilon": EPS,
                        "max-delta": DELTA,
                    },
                )
            for s in range(S):
                dep.wait_for(f"node{s + 1}", "SuperNode ID", 300.0)
            infra = time.perf_counter() - t0
            runs = []
            for r in range(reps):
                cfg = make_protocol(
                    [SiteSpec(f"site-{s + 1}", N_S, EPS, DELTA) for s in range(S)],
                    feature_bounds=[(0.0, 1.0), (0.0, 1.0)],
                    alpha=0.1,
                )
                setup = write_message(root / f"setup{r}.json", cfg.to_envelope())
                out = root / f"released{r}.json"
                t0 = time.perf_counter()
                proc = dep.flwr_run(
                    {"setup": str(setup), "out": str(out), "round-timeout": 600.0}, timeout=900
                )
                while not out.exists():
                    if proc.poll() is not None:
                        raise RuntimeError(f"flwr run ended without a model:\n{proc.stdout.read()}")
                    time.sleep(0.05)
                t_release = time.perf_counter() - t0
                log, _ = proc.communicate(timeout=900)
                t_exit = time.perf_counter() - t0
                disc = re.search(r"on nodes .*\(([\d.]+) s\)", log)
                done = re.search(r"released model written to .*\(([\d.]+) s\)", log)
                runs.append(
                    {
                        "release": t_release,
                        "exit": t_exit,
                        "discovery": float(disc.group(1)) if disc else float("nan"),
                        "in_app": float(done.group(1)) if done else float("nan"),
                    }
                )
            return infra, runs
        finally:
            dep.stop()


def main() -> None:
    """Print the timings (see the module docstring)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--flower-reps", type=int, default=2)
    args = ap.parse_args()
    sites = [simulate(N_S, rng=s) for s in range(S)]
    _inproc(sites, 1)  # warm-up
    fit = _inproc(sites, args.reps)
    cli = float(np.median([_cli_run(sites) for _ in range(max(1, min(args.reps, 3)))]))
    infra, runs = _flower(sites, args.flower_reps)
    t_cli = _import_time("flwr.cli.app")
    t_server = _import_time("dpfair.fairclass.federated.flower.server_app")
    t_client3 = _import_time("dpfair.fairclass.federated.flower.client_app", copies=S)
    startup = t_cli + t_server + 3 * t_client3
    release = float(np.median([r["release"] for r in runs]))
    print(f"S={S} sites, N_s={N_S}, epsilon={EPS}, delta={DELTA}")
    print(f"in-process FDPFairClassifier.fit: median {fit:.3f} s")
    print(f"file-exchange CLI (9 processes): median wall {cli:.2f} s")
    print(f"Flower: SuperLink + 3 SuperNodes up and registered: {infra:.2f} s (once)")
    for i, r in enumerate(runs):
        print(
            f"Flower run {i + 1}: flwr run -> released model {r['release']:.2f} s, flwr run "
            f"exits {r['exit']:.2f} s; inside the ServerApp: discovery {r['discovery']:.2f} s, "
            f"discovery + 2 rounds + write {r['in_app']:.2f} s"
        )
    print(
        f"process start-up on the critical path: flwr CLI {t_cli:.2f} s + ServerApp "
        f"{t_server:.2f} s + 3 steps x ClientApp ({S} at once) {t_client3:.2f} s = {startup:.2f} s"
    )
    print(
        f"Flower run (median, to the released model) {release:.2f} s = start-up {startup:.2f} s "
        f"+ {release - startup:.2f} s (Flower polling + protocol {fit:.3f} s)"
    )


if __name__ == "__main__":
    main()
