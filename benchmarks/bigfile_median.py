"""Median CI on a file larger than comfortable memory: time and peak memory.

Writes (once, cached under benchmarks/_data/) a Parquet file of ``--rows`` log-normal
values (exp(N(ln 1.5, 1)), the paper's design) generated inside DuckDB, so the generator
itself never holds the column in memory; then runs ``dpfair median-ci --aggregate always``
in a fresh subprocess per method and prints wall time and the child's peak resident
memory (ru_maxrss). Goal (issue 6): memory well under 2 GiB at 10^8 rows.

    .venv/bin/python benchmarks/bigfile_median.py [--rows 100000000] [--methods cdf,expmech]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / "_data"


def make_file(rows: int, seed: float = 0.42, data: Path = DATA) -> Path:
    """Parquet file with one DOUBLE column ``x`` of ``rows`` log-normal draws."""
    import duckdb

    data.mkdir(exist_ok=True)
    path = data / f"lognormal_{rows}.parquet"
    if path.exists():
        return path
    tmp = path.with_suffix(".tmp.parquet")
    with duckdb.connect(":memory:") as con:
        con.execute("SET memory_limit = '1GB'")
        con.execute(f"SELECT setseed({seed})")
        # Box–Muller from two uniforms; 1 - random() avoids log(0).
        con.execute(
            f"""COPY (SELECT exp(ln(1.5) + sqrt(-2 * ln(1 - random())) * cos(2 * pi() * random()))
                      AS x FROM range({rows}))
                TO '{tmp}' (FORMAT parquet, ROW_GROUP_SIZE 1000000)"""
        )
    os.replace(tmp, path)
    return path


_CHILD = (
    "import resource, sys\n"
    "from dpfair.cli import main\n"
    "try:\n"
    "    main(sys.argv[1:])\n"
    "finally:\n"
    "    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
    "    print(f'PEAK_RSS_KIB {peak}', file=sys.stderr)\n"
)


def run_child(path: Path, method: str, python: str) -> dict[str, object]:
    """Run one CLI call in a fresh interpreter that reports its own peak RSS."""
    cmd = [python, "-c", _CHILD, "median-ci", str(path), "--column", "x", "--rho", "0.5",
           "--bounds", "-5", "15", "--method", method, "--seed", "0", "--json",
           "--aggregate", "always"]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    peak = [ln for ln in proc.stderr.splitlines() if ln.startswith("PEAK_RSS_KIB")]
    if proc.returncode != 0 or not peak:
        return {"method": method, "error": proc.stderr.strip()[-500:]}
    out = json.loads(proc.stdout)
    return {"method": method, "seconds": wall, "peak_rss_mib": int(peak[0].split()[1]) / 1024,
            "low": out["low"], "high": out["high"], "n": out["n"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000_000)
    parser.add_argument("--methods", default="cdf,binsearch,binsearch_cdf,expmech")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--data-dir", type=Path, default=DATA, help="where the file is cached")
    parser.add_argument("--smoke", action="store_true",
                        help="20,000 rows, two methods, a temporary directory: checks that it runs")
    args = parser.parse_args()
    if args.smoke:
        args.rows, args.methods = 20_000, "cdf,expmech"
        args.data_dir = Path(tempfile.mkdtemp(prefix="dpfair-bigfile-"))
    t0 = time.perf_counter()
    path = make_file(args.rows, data=args.data_dir)
    print(f"data: {path} ({path.stat().st_size / 2**20:.0f} MiB, {args.rows:,} rows; "
          f"ready in {time.perf_counter() - t0:.1f} s)")
    print(f"{'method':<14} {'seconds':>8} {'peak RSS MiB':>13}  interval")
    failed = 0
    for method in args.methods.split(","):
        res = run_child(path, method, args.python)
        if "error" in res:
            print(f"{method:<14} failed: {res['error']}")
            failed += 1
            continue
        print(f"{method:<14} {res['seconds']:8.2f} {res['peak_rss_mib']:13.0f}  "
              f"[{res['low']:.5f}, {res['high']:.5f}] (n={res['n']:,})")
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
