"""Every script in ``benchmarks/`` runs to the end at a tiny size (issue 24).

A benchmark is not run by the unit tests otherwise, so an API change could break it
unnoticed (``gp_whitened_sensitivity.py`` crashed at d = 4 once the default estimator
became ``linear`` beyond d = 3, and the figure ``docs/floating_point.md`` quotes could not
be reproduced). Each script is started in a fresh interpreter, from the repository root,
with dpfair taken from this checkout's ``src``, on its ``--smoke``/``--quick`` setting, and
must exit with status 0. Nothing here reads or asserts a time; the per-script timeout is a
hang guard only. Scripts that need an optional comparator package are skipped, with the
package named, when it is not installed; the slowest (many processes, Flower) are marked
``slow``.

A new script in ``benchmarks/`` must be added to :data:`CASES` (or :data:`NOT_SCRIPTS`),
:func:`test_every_benchmark_script_has_a_smoke_case` fails otherwise.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks"
#: Hang guard per script (seconds); not a timing assertion.
HANG_GUARD_S = 900


@dataclass(frozen=True)
class Case:
    """How to run one script at a tiny size."""

    args: tuple[str, ...]
    #: Optional packages the script cannot run without (skipped when missing).
    requires: tuple[str, ...] = ()
    slow: bool = False
    #: Whether ``{data}`` in ``args`` is a tiny log-normal ``.npy`` file (the workers).
    needs_data: bool = False


_WORKER = ("--data", "{data}", "--repeats", "1", "--max-seconds", "5", "--no-memory")

#: Script (relative to ``benchmarks/``) → its smoke run.
CASES: dict[str, Case] = {
    "run.py": Case(("--quick", "--sizes", "1000", "--repeats", "1", "--methods",
                    "expmech,cdf", "--no-comparators", "--plain")),
    "dpfair_worker.py": Case(("--method", "expmech", *_WORKER), needs_data=True),
    "bigfile_median.py": Case(("--smoke",)),
    "cli_startup.py": Case(("--runs", "1")),
    "discrete_gaussian_speed.py": Case(("--smoke",)),
    "median_paper_tables.py": Case(("--datasets", "2", "--runs", "1", "--reps", "10")),
    "facility_bench.py": Case(("--n", "1000", "--repeats", "1", "--no-opendp",
                               "--laplace-draws", "1000", "--laplace-repeats", "1")),
    "facility_opendp_worker.py": Case(("--candidates", "101", *_WORKER), requires=("opendp",),
                                      needs_data=True),
    "gp_whitened_sensitivity.py": Case(("--smoke",)),
    "quantile_speed.py": Case(("--quick",)),
    "quantile_family_widths.py": Case(("--quick", "--designs",
                                       "paper (lognormal, n=1000, rho=0.5)")),
    "quantile_widths.py": Case(("--quick", "--designs", "small n (lognormal, n=50, rho=0.5)",
                                "--methods", "cdf")),
    "fairclass_bench.py": Case(("--n", "500", "--n-test", "200", "--repeats", "1",
                                "--no-comparator"), slow=True),  # one process per method
    "fairclass_bigfile.py": Case(("--smoke",), slow=True),  # CLI in a child process
    "fairclass_certified_study.py": Case(("--smoke", "--reps", "1", "--eps", "1",
                                          "--alphas", "0.1")),
    "fairclass_plan_study.py": Case(("--smoke", "--reps", "1", "--eps", "1", "--alphas", "0.1")),
    "fairclass_error_budget.py": Case(("--smoke", "--reps", "2", "--alphas", "0.1")),
    "fairclass_full_adult.py": Case(("--smoke",)),
    "fairclass_many_features.py": Case(("--smoke",)),
    "fairclass_fdp_full_adult.py": Case(("--smoke",)),
    "fairclass_rff_diagnostics.py": Case(("nw", "--smoke")),
    "fdp_bench.py": Case(("--smoke",), slow=True),  # 9 CLI processes
    "fdp_linear.py": Case(("--smoke",)),
    "fdp_walkthrough.py": Case(("--smoke",), slow=True),  # the README's 15 CLI processes
    "fdp_eo_study.py": Case(("--smoke", "--eps", "4", "--alphas", "0.2")),
    "fdp_flower_bench.py": Case(("--smoke",), requires=("flwr",), slow=True),  # Flower
    "comparators/opendp_median.py": Case(_WORKER, requires=("opendp",), needs_data=True),
    "comparators/pydp_median.py": Case(_WORKER, requires=("pydp",), needs_data=True),
    "comparators/diffprivlib_median.py": Case(_WORKER, requires=("diffprivlib",),
                                              needs_data=True),
}
#: Extra runs of a script in another mode (same script, other arguments).
EXTRA: dict[str, tuple[str, Case]] = {
    "fairclass_rff_diagnostics.py protocol": (
        "fairclass_rff_diagnostics.py", Case(("protocol", "--smoke"))),
    "fdp_bench.py --no-cli": ("fdp_bench.py", Case(("--smoke", "--no-cli"))),
}
#: Python files in ``benchmarks/`` that are not scripts (imported by the workers).
NOT_SCRIPTS = {"comparators/_common.py": "helpers shared by the workers, imported by them",
               "_cli_env.py": "environment of the command-line timing benchmarks"}


def _all_cases() -> list[object]:
    params = []
    for name, (script, case) in [*((n, (n, c)) for n, c in CASES.items()), *EXTRA.items()]:
        marks = [pytest.mark.slow] if case.slow else []
        params.append(pytest.param(script, case, id=name, marks=marks))
    return params


def test_every_benchmark_script_has_a_smoke_case() -> None:
    found = {p.relative_to(BENCH).as_posix() for p in BENCH.rglob("*.py")
             if "_data" not in p.parts and ".envs" not in p.parts and "__pycache__" not in p.parts}
    assert found == set(CASES) | set(NOT_SCRIPTS), (
        f"missing a smoke case: {sorted(found - set(CASES) - set(NOT_SCRIPTS))}; "
        f"listed but gone: {sorted((set(CASES) | set(NOT_SCRIPTS)) - found)}")


@pytest.mark.parametrize(("script", "case"), _all_cases())
def test_benchmark_runs_at_a_tiny_size(script: str, case: Case, tmp_path: Path) -> None:
    missing = [m for m in case.requires if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"{script} needs the optional comparator package(s) {', '.join(missing)} "
                    f"(see benchmarks/requirements-*.txt), not installed")
    args = list(case.args)
    if case.needs_data:
        data = tmp_path / "lognormal.npy"
        np.save(data, np.exp(np.random.default_rng(0).normal(np.log(1.5), 1.0, 2000)))
        args = [a.replace("{data}", str(data)) for a in args]
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), MPLBACKEND="Agg",
               PYTHONWARNINGS="ignore")
    proc = subprocess.run([sys.executable, str(BENCH / script), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=HANG_GUARD_S, check=False)
    assert proc.returncode == 0, (
        f"{script} {' '.join(args)} exited {proc.returncode}\n"
        f"--- stdout (tail)\n{proc.stdout[-3000:]}\n--- stderr (tail)\n{proc.stderr[-3000:]}")
