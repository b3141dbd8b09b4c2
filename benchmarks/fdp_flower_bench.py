"""Wall time of FDP-Fair (S = 3 sites, N_s = 2000, one machine) over three transports.

Run: .venv/bin/python benchmarks/fdp_flower_bench.py [--reps 3] [--flower-reps 2]

* in-process: ``FDPFairClassifier.fit`` (median over ``--reps`` seeds);
* file exchange: the 9 ``dpfair fdp …`` processes of ``fdp_bench.py`` (setup, 3 sites ×
  2 rounds in parallel, aggregate, finalize), wall time of the whole run;
* Flower: a SuperLink and three SuperNodes already running on localhost (``--insecure``;
  their start-up is reported separately, in a deployment they run permanently), then
  ``flwr run flower_app`` → the released model file is written (wall) → ``flwr run`` exits.

Start-up cost of one Flower run, measured right before each run with the same interpreter:
on the critical path are the ``flwr`` CLI process, the ``flwr-serverapp`` process (the
centre) and, for each of the two rounds, a ``flwr-clientapp`` process per site (the 3 sites
start theirs at the same time). The script times ``python -c "import …"`` of exactly those
modules. What remains is Flower's polling (SuperNode: every 3 s when idle; SuperExec: every
1 s; the centre pulls replies every 0.2 s) and the protocol itself.
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
from dpfair.fairclass.federated import FDPFairClassifier, SiteSpec, make_protocol  # noqa: E402
from dpfair.fairclass.federated._keys import generate_keypair, load_signer  # noqa: E402
from dpfair.fairclass.federated._messages import write_message  # noqa: E402
from dpfair.privacy import Budget, LedgerFile  # noqa: E402
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


def _startup() -> tuple[float, float, float]:
    """(flwr CLI, ServerApp, 3 concurrent ClientApps) process start-up, seconds."""
    return (
        _import_time("flwr.cli.app"),
        _import_time("dpfair.fairclass.federated.flower.server_app"),
        _import_time("dpfair.fairclass.federated.flower.client_app", copies=S),
    )


def _flower(sites: list, reps: int, poll: float | None) -> tuple[float, list[dict[str, float]]]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "keys").mkdir()
        parties = ["centre", *(f"site-{s + 1}" for s in range(S))]
        keys = {p: generate_keypair(root / "keys" / p) for p in parties}
        env = {} if poll is None else {"FLWR_SUPEREXEC_TASK_POLL_INTERVAL": str(poll)}
        dep = Deployment(root, env=env)
        try:
            t0 = time.perf_counter()
            dep.start_superlink()
            for s, d in enumerate(sites):
                sid = f"site-{s + 1}"
                (root / sid).mkdir()
                path = root / sid / "data.csv"
                _write(path, d)
                # the site's own ledger: room for `reps` runs of (EPS, DELTA) each
                ledger = root / sid / "site.ledger"
                LedgerFile.create(ledger, Budget.approx(reps * EPS, reps * DELTA), data=path)
                dep.start_supernode(
                    f"node{s + 1}",
                    {
                        "site-id": sid,
                        "data": str(path),
                        "features": "x1,x2",
                        "target": "y",
                        "sensitive": "a",
                        "key": str(keys[sid][0]),
                        "centre-key": str(keys["centre"][1]),
                        "ledger": str(ledger),
                        "max-epsilon": EPS,
                        "max-delta": DELTA,
                    },
                )
            for s in range(S):
                dep.wait_for(f"node{s + 1}", "SuperNode ID", 300.0)
            infra = time.perf_counter() - t0
            runs = []
            centre = load_signer(keys["centre"][0], "centre")
            for r in range(reps):
                cfg = make_protocol(
                    [SiteSpec(f"site-{s + 1}", N_S, EPS, DELTA) for s in range(S)],
                    feature_bounds=[(0.0, 1.0), (0.0, 1.0)],
                    alpha=0.1,
                    keys={p: k[2] for p, k in keys.items()},
                )
                setup = write_message(root / f"setup{r}.json", cfg.to_envelope(), centre)
                out = root / f"released{r}.json"
                t_cli, t_server, t_client3 = _startup()
                conf = {"setup": str(setup), "key": str(keys["centre"][0]), "out": str(out)}
                t0 = time.perf_counter()
                proc = dep.flwr_run(conf, timeout=900)
                while not out.exists():
                    if proc.poll() is not None:
                        raise RuntimeError(f"flwr run ended without a model:\n{proc.stdout.read()}")
                    time.sleep(0.05)
                t_release = time.perf_counter() - t0
                log, _ = proc.communicate(timeout=900)
                t_exit = time.perf_counter() - t0
                done = re.search(r"released model written to .*\(([\d.]+) s\)", log)
                runs.append(
                    {
                        "release": t_release,
                        "exit": t_exit,
                        "in_app": float(done.group(1)) if done else float("nan"),
                        "cli": t_cli,
                        "server": t_server,
                        "client3": t_client3,
                        "startup": t_cli + t_server + 2 * t_client3,
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
    ap.add_argument(
        "--superexec-poll",
        type=float,
        default=None,
        help="FLWR_SUPEREXEC_TASK_POLL_INTERVAL for SuperLink/SuperNodes (Flower default 1 s)",
    )
    ap.add_argument("--flower-only", action="store_true", help="skip in-process and CLI")
    ap.add_argument("--smoke", action="store_true",
                    help="N_s = 400, one repeat of each transport: checks that it runs")
    args = ap.parse_args()
    global N_S
    if args.smoke:
        N_S, args.reps, args.flower_reps = 400, 1, 1
    sites = [simulate(N_S, rng=s) for s in range(S)]
    fit = cli = float("nan")
    if not args.flower_only:
        _inproc(sites, 1)  # warm-up
        fit = _inproc(sites, args.reps)
        cli = float(np.median([_cli_run(sites) for _ in range(max(1, min(args.reps, 3)))]))
    infra, runs = _flower(sites, args.flower_reps, args.superexec_poll)
    print(f"S={S} sites, N_s={N_S}, epsilon={EPS}, delta={DELTA}")
    print(f"in-process FDPFairClassifier.fit: median {fit:.3f} s")
    print(f"file-exchange CLI (9 processes): median wall {cli:.2f} s")
    poll = args.superexec_poll
    print(f"Flower (SuperExec task poll: {'Flower default 1' if poll is None else poll} s):")
    print(f"Flower: SuperLink + 3 SuperNodes up and registered: {infra:.2f} s (once)")
    for i, r in enumerate(runs):
        print(
            f"Flower run {i + 1}: flwr run -> released model {r['release']:.2f} s (flwr run "
            f"exits {r['exit']:.2f} s; ServerApp 2 rounds + write {r['in_app']:.2f} s); "
            f"start-up measured just before: flwr CLI {r['cli']:.2f} + ServerApp "
            f"{r['server']:.2f} + 2 rounds x ClientApp ({S} at once) {r['client3']:.2f} = "
            f"{r['startup']:.2f} s -> beyond start-up {r['release'] - r['startup']:.2f} s"
        )
    over = float(np.median([r["release"] - r["startup"] for r in runs]))
    print(f"Flower run beyond its process start-up (median): {over:.2f} s")


if __name__ == "__main__":
    main()
