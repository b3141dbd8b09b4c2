"""Time the README's FDP-Fair file-exchange walkthrough: its 15 command-line processes.

``dpfair datasets simulate --sites 3``, four ``fdp keygen``, ``fdp centre setup``, three
``fdp site round1``, ``fdp centre aggregate``, three ``fdp site round2``, ``fdp centre
finalize`` and ``fdp predict``, run one after another as the README's block runs them
(README, "Running FDP-Fair between institutions"), each in a fresh interpreter, in a fresh
directory with a fresh state directory (``DPFAIR_STATE_DIR``: the site caps are registered
by the data's fingerprint, so a second run on the same data would be refused). Prints the
median total wall time over ``--runs`` and each command's median wall and CPU time. Issue
23, item 7: the walkthrough took 34 s before the command line imported only what it uses.

Compiled bytecode: by default the children may cache it (under a temporary
``PYTHONPYCACHEPREFIX``, filled by one untimed warm-up run), as an installed package does;
``--no-bytecode-cache`` makes every process compile dpfair's sources afresh (what an
environment with ``PYTHONDONTWRITEBYTECODE=1`` and no ``__pycache__`` pays).

``--src DIR`` times another checkout's ``src`` (e.g. ``git archive 78ebd82 src | tar -x -C
/tmp/base`` and ``--src /tmp/base/src``); the default is the dpfair this interpreter imports.

    .venv/bin/python benchmarks/fdp_walkthrough.py [--runs 3] [--src DIR] [--no-bytecode-cache]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _cli_env import add_arguments, environment

SITES = ("h1", "h2", "h3")


def _commands() -> list[tuple[str, list[str], str]]:
    """(label, dpfair arguments, working directory relative to the run's root)."""
    site_decl = [a for s in SITES for a in ("--site", f"{s}:2000:1:1e-6")]
    site_keys = [a for s in SITES for a in ("--site-key", f"{s}=keys/{s}.pub")]
    bounds = ["--bounds", "0", "--bounds", "1", "--bounds", "0", "--bounds", "1"]
    common = ["--centre-key", "keys/centre.pub", "--max-epsilon", "1", "--max-delta", "1e-6",
              "--features", "x1,x2", "--target", "y", "--sensitive", "a"]
    cmds: list[tuple[str, list[str], str]] = [
        ("datasets simulate", ["datasets", "simulate", "--sites", "3", "--out", "sites"], "."),
        ("fdp keygen (centre)", ["fdp", "keygen", "--out", "keys/centre"], "sites"),
    ]
    cmds += [(f"fdp keygen ({s})", ["fdp", "keygen", "--out", f"keys/{s}"], "sites")
             for s in SITES]
    cmds.append(("fdp centre setup", ["fdp", "centre", "setup", "--key", "keys/centre.key",
                                      *site_decl, *site_keys, *bounds, "--alpha", "0.1",
                                      "--out", "setup.json"], "sites"))
    cmds += [(f"fdp site round1 ({s})",
              ["fdp", "site", "round1", f"{s}.csv", "--setup", "setup.json", "--site-id", s,
               "--key", f"keys/{s}.key", *common, "--state", f"{s}.state.json",
               "--out", f"{s}.r1.json"], "sites") for s in SITES]
    cmds.append(("fdp centre aggregate",
                 ["fdp", "centre", "aggregate", *(f"{s}.r1.json" for s in SITES),
                  "--setup", "setup.json", "--key", "keys/centre.key", "--out", "model.json"],
                 "sites"))
    cmds += [(f"fdp site round2 ({s})",
              ["fdp", "site", "round2", f"{s}.csv", "--setup", "setup.json", "--site-id", s,
               "--key", f"keys/{s}.key", *common, "--state", f"{s}.state.json",
               "--model", "model.json", "--out", f"{s}.r2.json"], "sites") for s in SITES]
    cmds.append(("fdp centre finalize",
                 ["fdp", "centre", "finalize", *(f"{s}.r2.json" for s in SITES),
                  "--setup", "setup.json", "--key", "keys/centre.key", "--model", "model.json",
                  "--out", "released.json"], "sites"))
    cmds.append(("fdp predict", ["fdp", "predict", "released.json", "test.csv",
                                 "--centre-key", "keys/centre.pub", "--features", "x1,x2",
                                 "--sensitive", "a", "--target", "y"], "sites"))
    return cmds


def _run_once(env: dict[str, str]) -> list[tuple[float, float]]:
    """One walkthrough in a fresh directory: (wall, CPU) seconds per command."""
    out = []
    with tempfile.TemporaryDirectory(prefix="dpfair-walkthrough-") as tmp:
        root = Path(tmp)
        (root / "sites" / "keys").mkdir(parents=True)
        run_env = {**env, "DPFAIR_STATE_DIR": str(root / "state")}
        for label, args, cwd in _commands():
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            done = subprocess.run([sys.executable, "-m", "dpfair.cli", *args], cwd=root / cwd,
                                  env=run_env, capture_output=True, text=True)
            wall = time.perf_counter() - start
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            if done.returncode:
                raise SystemExit(f"{label} failed ({done.returncode}):\n{done.stderr[-2000:]}")
            cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
            out.append((wall, cpu))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    add_arguments(parser)
    parser.add_argument("--smoke", action="store_true", help="one run, no warm-up")
    args = parser.parse_args()
    env, cache, src = environment(args)  # keep `cache` alive while timing
    runs = 1 if args.smoke else args.runs
    if not args.smoke and not args.no_bytecode_cache:
        _run_once(env)  # warm-up: fills the bytecode cache (not timed)
    results = [_run_once(env) for _ in range(runs)]
    labels = [label for label, _, _ in _commands()]
    print(f"src {src}; bytecode {'not cached' if args.no_bytecode_cache else 'cached'}; "
          f"{len(labels)} processes, {runs} run(s)")
    for i, label in enumerate(labels):
        wall = statistics.median(r[i][0] for r in results)
        cpu = statistics.median(r[i][1] for r in results)
        print(f"  {label:26s} wall {wall * 1000:6.0f} ms   CPU {cpu * 1000:6.0f} ms")
    totals = [sum(w for w, _ in r) for r in results]
    cpus = [sum(c for _, c in r) for r in results]
    print(f"walkthrough total: wall median {statistics.median(totals):.2f} s "
          f"(min {min(totals):.2f} s), CPU median {statistics.median(cpus):.2f} s")
    cache.cleanup()


if __name__ == "__main__":
    main()
