"""CDP-Fair on a big training file, out of core: time and peak memory.

Writes (once, cached under benchmarks/_data/) a Parquet training file of ``--rows`` rows of
the paper's simulation design (:func:`dpfair.fairclass.datasets.simulate`), generated in
chunks of 10^6 rows so the generator never holds the file, plus a 10^5-row test file; then
runs ``dpfair fair-classify … --aggregate always`` in a fresh interpreter and prints wall
time and the child's own peak resident memory (ru_maxrss), with the test error and |DD|
(and |EOD| with ``--constraints opportunity``, whose S2 streams the calibration half's
positive-label rows once more per fold).

    .venv/bin/python benchmarks/fairclass_bigfile.py [--rows 10000000] [--no-cross-fit]
        [--constraints parity|opportunity]
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
CHUNK = 1_000_000


def _write(path: Path, rows: int, seed: int) -> Path:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from dpfair.fairclass.datasets import simulate

    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.parquet")
    schema = pa.schema([("x1", pa.float64()), ("x2", pa.float64()), ("a", pa.int8()),
                        ("y", pa.int8())])
    with pq.ParquetWriter(tmp, schema) as writer:
        for k, start in enumerate(range(0, rows, CHUNK)):
            m = min(CHUNK, rows - start)
            d = simulate(m, rng=np.random.SeedSequence([seed, k]))
            writer.write_table(pa.table({"x1": d.X[:, 0], "x2": d.X[:, 1],
                                         "a": d.A.astype(np.int8), "y": d.y.astype(np.int8)},
                                        schema=schema))
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


def run_child(train: Path, test: Path, python: str, cross_fit: bool,
              constraints: str = "parity") -> dict[str, object]:
    """One ``fair-classify --aggregate always`` in a fresh interpreter."""
    cmd = [python, "-c", _CHILD, "fair-classify", str(train), str(test), "--target", "y",
           "--sensitive", "a", "--features", "x1", "x2", "--bounds", "0", "1", "0", "1",
           "--epsilon", "1", "--delta", "1e-9", "--alpha", "0.1", "--seed", "0", "--json",
           "--aggregate", "always", "--cross-fit" if cross_fit else "--no-cross-fit",
           "--constraints", constraints]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    peak = [ln for ln in proc.stderr.splitlines() if ln.startswith("PEAK_RSS_KIB")]
    if proc.returncode != 0 or not peak:
        return {"error": proc.stderr.strip()[-800:]}
    out = json.loads(proc.stdout)
    return {"seconds": wall, "peak_rss_mib": int(peak[0].split()[1]) / 1024, **out}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--no-cross-fit", dest="cross_fit", action="store_false")
    parser.add_argument("--constraints", choices=("parity", "opportunity"), default="parity",
                        help="the gap alpha caps (demographic parity or equal opportunity)")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--data-dir", type=Path, default=DATA, help="where the files are cached")
    parser.add_argument("--smoke", action="store_true",
                        help="20,000 training and 5,000 test rows in a temporary directory")
    args = parser.parse_args()
    n_test = 100_000
    if args.smoke:
        args.rows, n_test = 20_000, 5000
        args.data_dir = Path(tempfile.mkdtemp(prefix="dpfair-fairclass-bigfile-"))
    t0 = time.perf_counter()
    train = _write(args.data_dir / f"fairclass_sim_{args.rows}.parquet", args.rows, seed=0)
    test = _write(args.data_dir / f"fairclass_sim_test_{n_test}.parquet", n_test, seed=1)
    print(f"data: {train} ({train.stat().st_size / 2**20:.0f} MiB, {args.rows:,} rows; "
          f"ready in {time.perf_counter() - t0:.1f} s)")
    res = run_child(train, test, args.python, args.cross_fit, args.constraints)
    if "error" in res:
        print(f"failed: {res['error']}")
        sys.exit(1)
    print(f"fair-classify --aggregate always (cross_fit={args.cross_fit}, "
          f"constraints={args.constraints}): "
          f"{res['seconds']:.1f} s, peak RSS {res['peak_rss_mib']:.0f} MiB")
    eod = res.get("test_abs_eod")
    gap = "" if eod is None else f", test |EOD| {eod:.4f}"
    print(f"  test error {res['test_error']:.4f}, test |DD| {res['test_abs_dd']:.4f}{gap} "
          f"(alpha 0.1), tau {res['tau']}, certified {res.get('certified')}, "
          f"privacy {res['privacy_spent']}")


if __name__ == "__main__":
    main()
