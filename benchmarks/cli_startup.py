"""Start-up time of the command line: ``dpfair --version``, ``dpfair --help``, ``import dpfair``.

Each command runs ``--runs`` times in a fresh interpreter (this one's ``python -m dpfair.cli``
or the ``dpfair`` script next to it); prints the median and minimum wall time and the median
CPU time (user + sys, less sensitive to a busy machine than wall time).

    .venv/bin/python benchmarks/cli_startup.py [--runs 10]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path


def _time(cmd: list[str], runs: int) -> tuple[float, float, float]:
    """(median wall, min wall, median CPU = user + sys of the child) in seconds."""
    times, cpu = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(times), min(times), statistics.median(cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    script = Path(sys.executable).with_name("dpfair")
    dpfair = [str(script)] if script.exists() else [sys.executable, "-m", "dpfair.cli"]
    cases = {
        "dpfair --version": [*dpfair, "--version"],
        "dpfair --help": [*dpfair, "--help"],
        "python -c 'import dpfair'": [sys.executable, "-c", "import dpfair"],
        "python -c 'pass' (interpreter alone)": [sys.executable, "-c", "pass"],
    }
    for label, cmd in cases.items():
        med, best, cpu = _time(cmd, args.runs)
        print(
            f"{label:38s} wall median {med * 1000:5.0f} ms, min {best * 1000:5.0f} ms; "
            f"CPU median {cpu * 1000:5.0f} ms"
        )


if __name__ == "__main__":
    main()
