"""The median tables of ``docs/results/`` (paper 004's design: data sets × runs).

Usage (from the repository root)::

    .venv/bin/python benchmarks/median_paper_tables.py            # width table, seed 2024
    .venv/bin/python benchmarks/median_paper_tables.py --coverage --reps 5000 --workers 2

Prints the table, or with ``--json PATH`` writes it (the files
``docs/results/median_widths_paper_setting_seed2024.json`` and
``docs/results/median_coverage_reps5000_seed0.json`` were written this way). The registered
studies ``dpfair reproduce median-width`` / ``median-coverage`` run the same settings as
independent trials in the resumable result store.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from dpfair.experiments._median_paper import coverage_table, paper_width_table


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the flags, run one table and print or write it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=int, default=100)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seed", type=int, default=None,
                        help="default 2024 (width table) or 0 (coverage)")
    parser.add_argument("--json", type=Path, default=None, help="write the table here")
    parser.add_argument("--coverage", action="store_true",
                        help="run the coverage sweep instead of the width table")
    parser.add_argument("--reps", type=int, default=5000)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args(argv)
    if args.coverage:
        seed = 0 if args.seed is None else args.seed
        rows = coverage_table(reps=args.reps, seed=seed, workers=args.workers)
    else:
        seed = 2024 if args.seed is None else args.seed
        rows = paper_width_table(n_datasets=args.datasets, runs_per_dataset=args.runs,
                                 seed=seed)
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
        return
    if args.coverage:
        print(f"{'n':>5} {'rho':>4} {'design':<17} {'method':<14} {'coverage':>9} "
              f"{'lower(1e-6)':>11}")
        for row in rows:
            print(f"{row['n']:>5} {row['rho']:>4} {row['design']:<17} {row['method']:<14} "
                  f"{row['coverage']:9.4f} {row['lower_bound_1e-6']:11.4f}")
        return
    print(f"{'rho':>5} {'method':<14} {'q25':>6} {'median':>7} {'q75':>6} {'coverage':>9}")
    for row in rows:
        q = row["relative_width_quartiles"]
        print(f"{row['rho']:>5} {row['method']:<14} {q[0]:6.3f} {q[1]:7.3f} {q[2]:6.3f} "
              f"{row['coverage']:9.3f}")


if __name__ == "__main__":
    main()
