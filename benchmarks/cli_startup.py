"""Start-up time of the command line: ``--version``, ``--help``, ``median-ci``, ``fdp keygen``.

Each command runs ``--runs`` times in a fresh interpreter (this one's ``python -m dpfair.cli``
or the ``dpfair`` script next to it); prints the median and minimum wall time and the median
CPU time (user + sys, less sensitive to a busy machine than wall time). ``median-ci`` runs on
the 48,842-row Adult ages CSV (``dpfair datasets export adult_age``) and ``fdp keygen``
writes a fresh key pair each run; issue 23's targets are 0.35 s and 0.25 s. The warm
figure is the same median release in a process that has already imported everything.

    .venv/bin/python benchmarks/cli_startup.py [--runs 10]
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


def _time(cmd: list[str], runs: int) -> tuple[float, float, float]:
    """(median wall, min wall, median CPU = user + sys of the child) in seconds.

    ``{k}`` in an argument is replaced by the run's index (a fresh output name per run).
    """
    times, cpu = [], []
    for k in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run([a.replace("{k}", str(k)) for a in cmd], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=True)
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
    work = Path(tempfile.mkdtemp(prefix="dpfair-startup-"))
    subprocess.run([*dpfair, "datasets", "export", "adult_age", "--out", str(work)],
                   stdout=subprocess.DEVNULL, check=True)
    ages = work / "adult_age.csv"
    median = ["median-ci", str(ages), "--column", "age", "--rho", "0.5", "--bounds", "0",
              "120", "--json"]
    cases = {
        "dpfair --version": [*dpfair, "--version"],
        "dpfair --help": [*dpfair, "--help"],
        "dpfair median-ci adult_age.csv": [*dpfair, *median],
        "dpfair fdp keygen": [*dpfair, "fdp", "keygen", "--out", str(work / "key{k}")],
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
    out = subprocess.run([sys.executable, "-c", warm], capture_output=True, text=True,
                         check=True)
    print(f"{'median-ci in a warm process':38s} wall median "
          f"{float(out.stdout.split()[-1]) * 1000:5.0f} ms")
    for label, cmd in cases.items():
        med, best, cpu = _time(cmd, args.runs)
        print(
            f"{label:38s} wall median {med * 1000:5.0f} ms, min {best * 1000:5.0f} ms; "
            f"CPU median {cpu * 1000:5.0f} ms"
        )


if __name__ == "__main__":
    main()
