"""dpfair benchmark: one command, every number measured side by side in one run.

    .venv/bin/python benchmarks/run.py                     # full run (n = 10^3 … 10^7)
    .venv/bin/python benchmarks/run.py --quick             # smoke run (n ≤ 10^5, no comparators)
    .venv/bin/python benchmarks/run.py --quick --sizes 1000
    .venv/bin/python benchmarks/run.py --json out/bench.json

Part 1 times ``dpfair.median.confidence_interval`` for each method and ``numpy.sort`` of
the same data, one fresh process per (n, method), and reports the ratio and peak memory.
Part 2 times the DP median point estimate of OpenDP, python-dp and diffprivlib at
n = 10^6, each in its own virtual environment under ``benchmarks/.envs/`` (created on
demand from ``benchmarks/requirements-<name>.txt``), on the same ``.npy`` file, as ratios
to dpfair's ExpMech CI and to ``numpy.sort``. See ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import hashlib
import json
import math
import os
import platform
import resource
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DEV_PYTHON = ROOT / ".venv" / "bin" / "python"

try:
    import numpy as np
except ImportError:  # started with a bare interpreter: hand over to the dev venv
    if DEV_PYTHON.exists() and Path(sys.executable).resolve() != DEV_PYTHON.resolve():
        os.execv(str(DEV_PYTHON), [str(DEV_PYTHON), __file__, *sys.argv[1:]])
    raise SystemExit("benchmarks/run.py needs numpy: run it with .venv/bin/python") from None

DATA_DIR = HERE / "_data"
ENVS_DIR = HERE / ".envs"
MARKER = "BENCH_JSON "
SORT = "numpy.sort"
METHODS = ("expmech", "cdf", "binsearch", "binsearch_cdf")
FULL_SIZES = (10**3, 10**4, 10**5, 10**6, 10**7)
QUICK_SIZES = (10**3, 10**4, 10**5)
TEXT_COLUMNS = ("method", "library", "status")
# Log-normal exp(N(ln 1.5, 1)): the paper's design (median 1.5, R = [-5, 15]).
LOG_MEDIAN = math.log(1.5)
LOG_SD = 1.0


@dataclass(frozen=True)
class Comparator:
    """A library measured in its own environment by one worker script."""

    name: str  # environment folder and requirements file suffix
    label: str
    script: str  # under benchmarks/comparators/

    @property
    def requirements(self) -> Path:
        return HERE / f"requirements-{self.name}.txt"

    @property
    def env(self) -> Path:
        return ENVS_DIR / self.name

    @property
    def python(self) -> Path:
        return self.env / "bin" / "python"


COMPARATORS = (
    Comparator("opendp", "OpenDP", "opendp_median.py"),
    Comparator("pydp", "python-dp", "pydp_median.py"),
    Comparator("diffprivlib", "diffprivlib", "diffprivlib_median.py"),
)


# --------------------------------------------------------------------------- arguments


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Time dpfair's median CIs against numpy.sort and other DP libraries.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: n ≤ 10^5, fewer repeats, comparators skipped unless --with-comparators",
    )
    p.add_argument(
        "--sizes",
        type=_size_list,
        default=None,
        help="comma/space separated n (e.g. 1000,1e5); default 10^3…10^7, 10^3…10^5 with --quick",
    )
    p.add_argument(
        "--methods", type=_name_list, default=list(METHODS), help="dpfair methods to time"
    )
    p.add_argument(
        "--repeats",
        type=int,
        default=None,
        help="timed repeats per cell (default: by size, fewer for large n)",
    )
    p.add_argument(
        "--max-seconds",
        type=float,
        default=120.0,
        help="per cell: stop repeating once the timed calls used this long",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=1800.0,
        help="per worker process: give up after this many seconds",
    )
    mem = physical_memory_gb()
    p.add_argument(
        "--memory-limit-gb",
        type=float,
        default=round(0.75 * mem, 1) if mem else None,
        help="address-space cap per worker process (0: none); default 75%% of RAM",
    )
    p.add_argument("--seed", type=int, default=12345, help="data and mechanism seed")
    p.add_argument("--rho", type=float, default=0.5, help="dpfair zCDP budget per CI")
    p.add_argument("--alpha", type=float, default=0.05, help="1 - coverage of the CI")
    p.add_argument(
        "--bounds",
        type=float,
        nargs=2,
        default=(-5.0, 15.0),
        metavar=("LO", "HI"),
        help="public bounds R",
    )
    p.add_argument(
        "--granularity",
        type=float,
        default=None,
        help="dpfair granularity θ (default: the method's own)",
    )
    p.add_argument("--no-memory", action="store_true", help="skip memory measurements")
    cmp = p.add_argument_group("comparators")
    cmp.add_argument(
        "--with-comparators", action="store_true", help="run the comparators in --quick mode too"
    )
    cmp.add_argument("--no-comparators", action="store_true", help="skip the comparators")
    cmp.add_argument(
        "--comparators",
        type=_name_list,
        default=[c.name for c in COMPARATORS],
        help="which comparators: " + ", ".join(c.name for c in COMPARATORS),
    )
    cmp.add_argument(
        "--comparator-n", type=_size, default=10**6, help="n for the comparison of DP medians"
    )
    cmp.add_argument(
        "--epsilon",
        type=float,
        default=1.0,
        help="pure-DP ε for the comparators (ε-DP implies ε²/2-zCDP)",
    )
    cmp.add_argument(
        "--grid-step",
        type=float,
        default=0.005,
        help="OpenDP candidate grid spacing over the bounds",
    )
    cmp.add_argument(
        "--base-python",
        default=None,
        help="interpreter that creates the comparator venvs (default: python3 on PATH)",
    )
    cmp.add_argument(
        "--no-install",
        action="store_true",
        help="never create or update a comparator venv; skip missing ones",
    )
    cmp.add_argument(
        "--reinstall", action="store_true", help="recreate the comparator venvs from scratch"
    )
    p.add_argument(
        "--python",
        default=str(DEV_PYTHON) if DEV_PYTHON.exists() else sys.executable,
        help="interpreter for the dpfair workers (needs dpfair's dependencies; dpfair "
        "itself is taken from src/); default: the dev venv's",
    )
    p.add_argument(
        "--json",
        type=Path,
        default=None,
        metavar="PATH",
        help="also save every measurement as JSON",
    )
    p.add_argument("--plain", action="store_true", help="plain-text tables (no rich)")
    args = p.parse_args(argv)
    if args.sizes is None:
        args.sizes = list(QUICK_SIZES if args.quick else FULL_SIZES)
    unknown = sorted(set(args.comparators) - {c.name for c in COMPARATORS})
    if unknown:
        p.error(
            f"--comparators: unknown {unknown}; choose from "
            + ", ".join(c.name for c in COMPARATORS)
        )
    args.run_comparators = not args.no_comparators and (not args.quick or args.with_comparators)
    return args


def _size(text: str) -> int:
    try:
        value = float(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a size: {text!r}") from exc
    if value < 1 or value != int(value):
        raise argparse.ArgumentTypeError(f"not a positive integer: {text!r}")
    return int(value)


def _size_list(text: str) -> list[int]:
    return sorted({_size(t) for t in text.replace(",", " ").split()})


def _name_list(text: str) -> list[str]:
    return [t for t in text.replace(",", " ").split() if t]


def default_repeats(n: int, quick: bool) -> int:
    if quick:
        return 7 if n <= 10**4 else 3
    if n <= 10**3:
        return 25
    if n <= 10**4:
        return 15
    if n <= 10**5:
        return 9
    if n <= 10**6:
        return 5
    return 3


# --------------------------------------------------------------------------- data


def data_file(n: int, seed: int) -> Path:
    """Write the shared log-normal sample once; every worker reads this file."""
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    path = DATA_DIR / f"lognormal_mu-ln1.5_sd1_n{n}_seed{seed}.npy"
    if path.exists():
        try:
            x = np.load(path, mmap_mode="r")
            if x.shape == (n,) and x.dtype == np.float64:
                return path
        except (OSError, ValueError):
            pass
    rng = np.random.default_rng([seed, n])
    x = np.exp(rng.normal(LOG_MEDIAN, LOG_SD, size=n))
    tmp = path.with_suffix(".tmp.npy")
    np.save(tmp, x)
    tmp.replace(path)
    return path


# --------------------------------------------------------------------------- workers


def physical_memory_gb() -> float | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError, AttributeError):
        return None


def run_worker(
    cmd: list[str], timeout: float, memory_gb: float | None, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """Run one worker; its result, or a status saying why there is none.

    ``memory_gb`` caps the worker's address space (RLIMIT_AS), so that a method whose
    memory outgrows the machine fails with MemoryError instead of swapping or being
    killed by the kernel with everything else on the machine.
    """

    def limit() -> None:
        if memory_gb:
            cap = int(memory_gb * 2**30)
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    try:
        proc = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            cwd=ROOT,
            check=False,
            preexec_fn=limit,  # safe: the runner starts no threads
        )
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "message": f"no result within {timeout:g} s"}
    except OSError as exc:
        return {"status": "error", "message": f"could not start {cmd[0]}: {exc}"}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(MARKER):
            try:
                return json.loads(line[len(MARKER) :])
            except json.JSONDecodeError:
                break
    tail = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-3:]
    return {"status": "error", "message": f"exit {proc.returncode}: " + " | ".join(tail)[-400:]}


def dpfair_env() -> dict[str, str]:
    env = dict(os.environ)
    src = str(ROOT / "src")
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def dpfair_cell(args: argparse.Namespace, n: int, method: str, path: Path) -> dict[str, Any]:
    cmd = [
        args.python,
        str(HERE / "dpfair_worker.py"),
        "--data",
        str(path),
        "--method",
        method,
        "--repeats",
        str(args.repeats or default_repeats(n, args.quick)),
        "--max-seconds",
        str(args.max_seconds),
        "--seed",
        str(args.seed),
        "--lo",
        str(args.bounds[0]),
        "--hi",
        str(args.bounds[1]),
        "--rho",
        str(args.rho),
        "--alpha",
        str(args.alpha),
    ]
    if args.granularity is not None:
        cmd += ["--granularity", str(args.granularity)]
    if args.no_memory:
        cmd.append("--no-memory")
    res = run_worker(cmd, args.timeout, args.memory_limit_gb, env=dpfair_env())
    res.setdefault("method", method)
    res["n"] = n
    return res


def ensure_env(c: Comparator, args: argparse.Namespace, log: Log) -> str | None:
    """Create or update ``c``'s venv; None when ready, else the reason it is not."""
    if not c.requirements.exists():
        return f"missing {c.requirements.relative_to(ROOT)}"
    wanted = hashlib.sha256(c.requirements.read_bytes()).hexdigest()
    stamp = c.env / ".bench-requirements.sha256"
    if args.reinstall and c.env.exists():
        shutil.rmtree(c.env)
    if c.python.exists() and stamp.exists() and stamp.read_text().strip() == wanted:
        return None
    if args.no_install:
        return "environment missing or outdated and --no-install given"
    base = args.base_python or shutil.which("python3") or sys.executable
    ENVS_DIR.mkdir(parents=True, exist_ok=True)
    logfile = ENVS_DIR / f"{c.name}.install.log"
    log(
        f"  installing {c.label} into {c.env.relative_to(ROOT)} (log: "
        f"{logfile.relative_to(ROOT)}) …"
    )
    steps = []
    if not c.python.exists():
        steps.append([base, "-m", "venv", str(c.env)])
    steps.append(
        [
            str(c.python),
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--upgrade",
            "-r",
            str(c.requirements),
        ]
    )
    with logfile.open("w") as fh:
        for cmd in steps:
            fh.write("$ " + " ".join(cmd) + "\n")
            fh.flush()
            try:
                rc = subprocess.run(
                    cmd, stdout=fh, stderr=subprocess.STDOUT, timeout=1200, check=False
                ).returncode
            except (OSError, subprocess.TimeoutExpired) as exc:
                return f"{cmd[0]} {cmd[1]} {cmd[2]}: {exc}"
            if rc != 0:
                fh.flush()
                return f"`{' '.join(cmd[1:4])} …` failed (exit {rc}): " + _last_error(logfile)
    stamp.write_text(wanted + "\n")
    return None


def _last_error(logfile: Path) -> str:
    lines = [
        ln.strip()
        for ln in logfile.read_text(errors="replace").splitlines()
        if ln.strip() and not ln.startswith("WARNING: Location")
    ]
    errs = [ln for ln in lines if "error" in ln.lower()]
    return (errs or lines or ["(no output)"])[-1][-300:]


def comparator_cell(
    c: Comparator, args: argparse.Namespace, path: Path, log: Log
) -> dict[str, Any]:
    reason = ensure_env(c, args, log)
    base = {
        "library": c.label,
        "env": str(c.env.relative_to(ROOT)),
        "requirements": str(c.requirements.relative_to(ROOT)),
    }
    if reason is not None:
        return {**base, "status": "install failed", "message": reason}
    n = args.comparator_n
    cmd = [
        str(c.python),
        str(HERE / "comparators" / c.script),
        "--data",
        str(path),
        "--repeats",
        str(args.repeats or default_repeats(n, args.quick)),
        "--max-seconds",
        str(args.max_seconds),
        "--seed",
        str(args.seed),
        "--lo",
        str(args.bounds[0]),
        "--hi",
        str(args.bounds[1]),
        "--epsilon",
        str(args.epsilon),
    ]
    if c.name == "opendp":
        cmd += ["--grid-step", str(args.grid_step)]
    if args.no_memory:
        cmd.append("--no-memory")
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    res = run_worker(cmd, args.timeout, args.memory_limit_gb, env=env)
    return {**base, **res, "library": c.label}


# --------------------------------------------------------------------------- output


class Log:
    """Progress on stderr, so that stdout holds only the tables."""

    def __call__(self, msg: str, end: str = "\n") -> None:
        print(msg, file=sys.stderr, end=end, flush=True)


def fmt_s(v: float | None) -> str:
    if v is None:
        return "—"
    if v >= 100:
        return f"{v:.0f}"
    if v >= 1:
        return f"{v:.2f}"
    if v >= 1e-3:
        return f"{v:.4f}"
    return f"{v:.2e}"


def fmt_ratio(v: float | None) -> str:
    if v is None:
        return "—"
    return f"{v:.3g}×" if v < 1000 else f"{v:.0f}×"


def fmt_mb(v: float | None) -> str:
    return "—" if v is None else f"{v:.1f}"


def fmt_n(n: int) -> str:
    e = math.log10(n)
    return f"10^{round(e)}" if n > 0 and abs(e - round(e)) < 1e-12 else f"{n:,}"


def short(text: str, width: int = 70) -> str:
    """One table cell's worth of a message (the JSON keeps it whole)."""
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b <= 0:
        return None
    return a / b


def render(
    title: str, headers: list[str], rows: list[list[str]], notes: list[str], plain: bool
) -> None:
    print()
    try:
        if plain:
            raise ImportError
        from rich.console import Console
        from rich.markup import escape
        from rich.table import Table
    except ImportError:
        print(title)
        widths = [
            max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
            for i, h in enumerate(headers)
        ]

        def line(cells: list[str]) -> str:
            return "  ".join(
                c.ljust(w) if h in TEXT_COLUMNS else c.rjust(w)
                for c, h, w in zip(cells, headers, widths, strict=True)
            ).rstrip()

        print(line(headers))
        print(line(["-" * w for w in widths]))
        for r in rows:
            print(line(r))
        for note in notes:
            print(f"  {note}")
        return
    table = Table(
        title=escape(title),
        title_justify="left",
        caption=escape("\n".join(notes)) or None,
        caption_justify="left",
    )
    for h in headers:
        table.add_column(
            escape(h),
            justify="left" if h in TEXT_COLUMNS else "right",
        )
    prev = None
    for r in rows:
        if prev is not None and r[0] and r[0] != prev:
            table.add_section()
        prev = r[0] or prev
        table.add_row(*(escape(c) for c in r))
    Console(width=max(100, shutil.get_terminal_size((160, 24)).columns)).print(table)


def dpfair_table(results: list[dict[str, Any]], args: argparse.Namespace) -> None:
    sort_by_n = {
        r["n"]: r.get("wall_s") for r in results if r["method"] == SORT and r.get("status") == "ok"
    }
    headers = [
        "n",
        "method",
        "s / CI",
        "CPU s",
        "× sort",
        "peak MB",
        "B / elem",
        "ΔRSS MB",
        "reps",
        "CI [low, high]",
        "status",
    ]
    rows = []
    for r in results:
        ok = r.get("status") == "ok"
        n = r["n"]
        wall = r.get("wall_s") if ok else None
        peak = r.get("peak_traced_mb")
        ci = "—"
        if ok and r.get("low") is not None and r.get("high") is not None:
            ci = f"[{r['low']:.4g}, {r['high']:.4g}]"
        rows.append(
            [
                "",  # n: filled in below, on the first row of each size
                r["method"],
                fmt_s(wall),
                fmt_s(r.get("cpu_s") if ok else None),
                "1×" if r["method"] == SORT and ok else fmt_ratio(ratio(wall, sort_by_n.get(n))),
                fmt_mb(peak if ok else None),
                f"{peak * 2**20 / n:.1f}" if ok and peak is not None else "—",
                fmt_mb(r.get("rss_peak_delta_mb") if ok else None),
                str(r.get("repeats", "—")) if ok else "—",
                ci,
                "ok" if ok else short(r.get("message", r.get("status", "?"))),
            ]
        )
    last = None
    for row, r in zip(rows, results, strict=True):
        row[0] = fmt_n(r["n"]) if r["n"] != last else ""
        last = r["n"]
    notes = [
        f"Data: log-normal exp(N(ln 1.5, 1)), bounds R = [{args.bounds[0]:g}, "
        f"{args.bounds[1]:g}], ρ = {args.rho:g} zCDP per CI, α = {args.alpha:g}, "
        f"granularity = {args.granularity if args.granularity is not None else 'default'}.",
        "s / CI: median wall seconds (perf_counter) over `reps` calls; × sort: ratio to "
        "numpy.sort of the same array in the same run.",
        "peak MB: tracemalloc peak of one call (numpy buffers + Python objects); B / elem = "
        "peak / n (flat in n ⇔ O(n) memory); ΔRSS: resident-set high-water mark above the "
        "process's resident set before the call (input array excluded).",
    ]
    expm = next(
        (
            r
            for r in results
            if r["method"] == "expmech" and r["n"] == 10**6 and r.get("status") == "ok"
        ),
        None,
    )
    if expm is not None:
        q = ratio(expm["wall_s"], sort_by_n.get(10**6))
        if q is not None:
            notes.append(
                f"Goal ExpMech ≤ 3× numpy.sort at n = 10^6: {q:.2f}× → "
                + ("met." if q <= 3 else "NOT met.")
            )
    render(
        "dpfair median confidence intervals: seconds per CI and ratio to numpy.sort",
        headers,
        rows,
        notes,
        args.plain,
    )


def comparator_table(
    rows_in: list[dict[str, Any]], ref: dict[str, Any], args: argparse.Namespace
) -> None:
    n = args.comparator_n
    expm = ref.get("expmech", {})
    sort = ref.get(SORT, {})
    expm_s = expm.get("wall_s") if expm.get("status") == "ok" else None
    sort_s = sort.get("wall_s") if sort.get("status") == "ok" else None
    headers = [
        "library",
        "version",
        "s / median",
        "CPU s",
        "× dpfair ExpMech CI",
        "× sort",
        "sort in env s",
        "ΔRSS MB",
        "estimate",
        "status",
    ]
    rows = [
        [
            "dpfair ExpMech CI",
            expm.get("dpfair_version", "—") if expm_s else "—",
            fmt_s(expm_s),
            fmt_s(expm.get("cpu_s") if expm_s else None),
            "1×" if expm_s else "—",
            fmt_ratio(ratio(expm_s, sort_s)),
            "—",
            fmt_mb(expm.get("rss_peak_delta_mb") if expm_s else None),
            f"{expm['estimate']:.4g}" if expm_s and expm.get("estimate") is not None else "—",
            "ok" if expm_s else expm.get("message", expm.get("status", "not run")),
        ],
        [
            SORT,
            np.__version__,
            fmt_s(sort_s),
            fmt_s(sort.get("cpu_s") if sort_s else None),
            fmt_ratio(ratio(sort_s, expm_s)),
            "1×" if sort_s else "—",
            "—",
            fmt_mb(sort.get("rss_peak_delta_mb") if sort_s else None),
            "—",
            "ok" if sort_s else sort.get("message", sort.get("status", "not run")),
        ],
    ]
    for r in rows_in:
        ok = r.get("status") == "ok"
        wall = r.get("wall_s") if ok else None
        version = r.get("version", "—")
        if ok and r.get("extra_versions"):
            version += " (" + ", ".join(f"{k} {v}" for k, v in r["extra_versions"].items()) + ")"
        rows.append(
            [
                r["library"],
                version if ok else "—",
                fmt_s(wall),
                fmt_s(r.get("cpu_s") if ok else None),
                fmt_ratio(ratio(wall, expm_s)),
                fmt_ratio(ratio(wall, sort_s)),
                fmt_s(r.get("numpy_sort_s_in_env") if ok else None),
                fmt_mb(r.get("rss_peak_delta_mb") if ok else None),
                f"{r['estimate']:.4g}" if ok and r.get("estimate") is not None else "—",
                "ok" if ok else short(f"{r.get('status')}: {r.get('message', '')}"),
            ]
        )
    notes = [
        f"n = {fmt_n(n)}, same .npy file for every library; s / median: median wall seconds "
        "per DP median (CPU s: process time, all threads).",
        f"Comparators spend ε = {args.epsilon:g} pure DP on a point estimate; ε-DP implies "
        f"(ε²/2)-zCDP, i.e. ρ = {args.epsilon**2 / 2:g}. dpfair spends ρ = {args.rho:g} zCDP "
        "on a whole CI (interval + estimate).",
        "× dpfair ExpMech CI and × sort use this run's dpfair and numpy.sort timings "
        "(dev venv); 'sort in env' is numpy.sort of the same data inside that library's venv.",
        f"dpfair: dpfair.median.confidence_interval(x, rho={args.rho:g}, method='expmech'), "
        f"ρ = {args.rho:g} zCDP.",
    ]
    for r in rows_in:
        if r.get("status") == "ok":
            notes.append(f"{r['library']}: {r.get('api', '?')}, {r.get('budget', '?')}.")
        else:
            notes.append(
                f"{r['library']}: {r.get('status')}: {r.get('message', '')} (environment "
                f"{r.get('env', '?')} from {r.get('requirements', '?')})."
            )
    render(
        f"DP median point estimates at n = {fmt_n(n)}: other libraries, each in its own venv",
        headers,
        rows,
        notes,
        args.plain,
    )


def machine_info() -> dict[str, Any]:
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as feats

        simd = [k for k in ("AVX2", "AVX512F", "AVX512_SKX", "ASIMD") if feats.get(k)]
    except ImportError:
        simd = []
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "src"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
    except OSError:
        rev, dirty = "", ""
    return {
        "timestamp": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "numpy_simd": simd,
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "git": rev + (" (src modified)" if dirty else ""),
        "env_vars": {
            k: os.environ[k]
            for k in (
                "OPENBLAS_CORETYPE",
                "OPENBLAS_L2_SIZE",
                "OMP_NUM_THREADS",
                "OPENBLAS_NUM_THREADS",
            )
            if k in os.environ
        },
    }


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    log = Log()
    t_start = time.perf_counter()
    meta = machine_info()
    log(
        f"dpfair benchmark on {meta['cpu']} ({meta['cores']} cores), numpy {meta['numpy']}, "
        f"git {meta['git'] or '?'}"
    )

    results: list[dict[str, Any]] = []
    gave_up: dict[str, int] = {}
    for n in args.sizes:
        path = data_file(n, args.seed)
        for method in [SORT, *args.methods]:
            if method in gave_up:
                res = {
                    "n": n,
                    "method": method,
                    "status": "skipped",
                    "message": f"skipped: timed out at n = {fmt_n(gave_up[method])}",
                }
            else:
                log(f"  n = {fmt_n(n):>5}  {method:<14} ", end="")
                res = dpfair_cell(args, n, method, path)
                if res.get("status") == "timeout":
                    gave_up[method] = n
                log(
                    f"{fmt_s(res['wall_s'])} s"
                    if res.get("status") == "ok"
                    else res.get("message", res.get("status", "?"))
                )
            results.append(res)

    comparisons: list[dict[str, Any]] = []
    ref: dict[str, Any] = {}
    if args.run_comparators:
        n = args.comparator_n
        path = data_file(n, args.seed)
        for r in results:
            if r["n"] == n and r["method"] in (SORT, "expmech"):
                ref[r["method"]] = r
        for method in (SORT, "expmech"):
            if method not in ref:
                log(f"  reference at n = {fmt_n(n)}: {method} …")
                ref[method] = dpfair_cell(args, n, method, path)
        wanted = [c for c in COMPARATORS if c.name in args.comparators]
        for c in wanted:
            log(f"  comparator {c.label} at n = {fmt_n(n)} …")
            try:
                res = comparator_cell(c, args, path, log)
            except Exception as exc:  # never let one comparator end the run
                res = {
                    "library": c.label,
                    "status": "error",
                    "message": f"{type(exc).__name__}: {exc}",
                }
            log(
                f"  comparator {c.label}: "
                + (
                    f"{fmt_s(res['wall_s'])} s"
                    if res.get("status") == "ok"
                    else f"{res.get('status')}: {res.get('message', '')}"
                )
            )
            comparisons.append(res)

    dpfair_table(results, args)
    if args.run_comparators:
        comparator_table(comparisons, ref, args)
    elif args.quick:
        print("\n(comparators skipped in --quick mode; add --with-comparators to run them)")
    elapsed = time.perf_counter() - t_start
    print(f"\nTotal benchmark time {elapsed:.1f} s.")

    if args.json is not None:
        payload = {
            "meta": meta,
            "config": {
                k: (str(v) if isinstance(v, Path) else v)
                for k, v in vars(args).items()
                if k != "json"
            },
            "dpfair": results,
            "comparator_reference": ref,
            "comparators": comparisons,
            "elapsed_s": elapsed,
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(payload, indent=2) + "\n")
        print(f"Saved {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
