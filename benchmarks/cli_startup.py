"""Start-up time of the command line: ``--version``, ``--help``, ``median-ci``, ``quantile-ci``,
``fdp keygen``.

Each command runs ``--runs`` times in a fresh interpreter (``python -m dpfair.cli``); prints
the median and minimum wall time and the median CPU time (user + sys, less sensitive to a
busy machine than wall time). ``median-ci`` and ``quantile-ci`` run on the 48,842-row Adult
ages CSV (``dpfair datasets export adult_age``, bundled with the package; a synthetic CSV of
48,842 ages if that export fails) and ``fdp keygen`` writes a fresh key pair each run;
issue 23's targets are 0.35 s for ``median-ci`` and 0.25 s for ``fdp keygen``. The warm
figure is the same median release in a process that has already imported everything.

Compiled bytecode: by default the children may cache it (under a temporary
``PYTHONPYCACHEPREFIX``, filled by one untimed run of each command), as an installed package
does; ``--no-bytecode-cache`` makes every process compile dpfair's sources afresh (what an
environment with ``PYTHONDONTWRITEBYTECODE=1`` and no ``__pycache__`` pays). ``--src DIR``
times another checkout's ``src`` (e.g. ``git archive 78ebd82 src | tar -x -C /tmp/base``).

    .venv/bin/python benchmarks/cli_startup.py [--runs 10] [--src DIR] [--no-bytecode-cache]
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

import numpy as np

from _cli_env import add_arguments, environment

ADULT_ROWS = 48_842


def _time(cmd: list[str], runs: int, env: dict[str, str]) -> tuple[float, float, float]:
    """(median wall, min wall, median CPU = user + sys of the child) in seconds.

    ``{k}`` in an argument is replaced by the run's index (a fresh output name per run).
    """
    times, cpu = [], []
    for k in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run([a.replace("{k}", str(k)) for a in cmd], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=True, env=env)
        times.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(times), min(times), statistics.median(cpu)


def _ages_csv(work: Path, dpfair: list[str], env: dict[str, str]) -> Path:
    """The bundled Adult ages as a CSV, or a synthetic stand-in of the same size."""
    done = subprocess.run([*dpfair, "datasets", "export", "adult_age", "--out", str(work)],
                          capture_output=True, env=env)
    ages = work / "adult_age.csv"
    if done.returncode == 0 and ages.exists():
        return ages
    print("(bundled Adult ages not exported: using a synthetic CSV of 48,842 ages)")
    x = np.random.default_rng(0).integers(17, 91, ADULT_ROWS)
    ages.write_text("age\n" + "".join(f"{v}\n" for v in x))
    return ages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    add_arguments(parser)
    args = parser.parse_args()
    env, cache, src = environment(args)  # keep `cache` alive while timing
    dpfair_cmd = [sys.executable, "-m", "dpfair.cli"]
    work = Path(tempfile.mkdtemp(prefix="dpfair-startup-"))
    ages = _ages_csv(work, dpfair_cmd, env)
    median = ["median-ci", str(ages), "--column", "age", "--rho", "0.5", "--bounds", "0",
              "120", "--json"]
    cases = {
        "dpfair --version": [*dpfair_cmd, "--version"],
        "dpfair --help": [*dpfair_cmd, "--help"],
        "dpfair median-ci adult_age.csv --json": [*dpfair_cmd, *median],
        "dpfair median-ci adult_age.csv (table)": [*dpfair_cmd, *median[:-1]],
        "dpfair quantile-ci adult_age.csv": [*dpfair_cmd, "quantile-ci", str(ages), "--column",
                                             "age", "--rho", "0.5", "--bounds", "0", "120",
                                             "--q", "0.25", "0.5", "0.75", "--json"],
        "dpfair fdp keygen": [*dpfair_cmd, "fdp", "keygen", "--out", str(work / "key{k}")],
        "python -c 'import dpfair'": [sys.executable, "-c", "import dpfair"],
        "python -c 'pass' (interpreter alone)": [sys.executable, "-c", "pass"],
    }
    warm = (
        "import time, contextlib, io\n"
        "from dpfair.cli import main\n"
        "def run():\n"
        "    with contextlib.redirect_stdout(io.StringIO()):\n"
        "        try:\n"
        f"            main({median!r})\n"
        "        except SystemExit:\n"
        "            pass\n"
        "run()\n"
        "t = []\n"
        "for _ in range(5):\n"
        "    s = time.perf_counter(); run(); t.append(time.perf_counter() - s)\n"
        "print(sorted(t)[2])\n"
    )
    if not args.no_bytecode_cache:  # fill the bytecode cache (not timed)
        for cmd in cases.values():
            _time([a.replace("{k}", "warm") for a in cmd], 1, env)
    out = subprocess.run([sys.executable, "-c", warm], capture_output=True, text=True,
                         check=True, env=env)
    print(f"src {src}; bytecode {'not cached' if args.no_bytecode_cache else 'cached'}; "
          f"{args.runs} run(s) each")
    print(f"{'median-ci in a warm process':40s} wall median "
          f"{float(out.stdout.split()[-1]) * 1000:5.0f} ms")
    for label, cmd in cases.items():
        med, best, cpu = _time(cmd, args.runs, env)
        print(
            f"{label:40s} wall median {med * 1000:5.0f} ms, min {best * 1000:5.0f} ms; "
            f"CPU median {cpu * 1000:5.0f} ms"
        )
    cache.cleanup()


if __name__ == "__main__":
    main()
