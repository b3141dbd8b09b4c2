"""``dpfair datasets``: write the example files the README's commands read.

``dpfair datasets export adult --split 0.7 --out DIR`` writes ``DIR/train.csv`` and
``DIR/test.csv`` (bundled UCI Adult, a seeded random split); ``dpfair datasets simulate
--sites 3 --out DIR`` writes ``DIR/h1.csv`` … ``DIR/h3.csv`` and ``DIR/test.csv`` from the
fair-classification paper's simulation design (columns ``x1, x2, a, y``). Neither touches
private data, so neither spends privacy.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from dpfair.cli._support import emit, user_errors

__all__ = ["register"]

datasets_app = typer.Typer(
    name="datasets",
    no_args_is_help=True,
    help="Write example data files: a public data set split in two, or simulated sites.",
    rich_markup_mode="markdown",
)


@datasets_app.command("export")
def export(
    name: Annotated[
        str, typer.Argument(metavar="NAME", help="adult (5 columns) or adult_age (one).")
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory to write into.")],
    split: Annotated[
        float | None,
        typer.Option(
            "--split",
            help="Training fraction in (0, 1): write train.csv and test.csv (seeded random "
            "split) instead of one NAME.csv.",
            show_default=False,
        ),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", min=0, help="Seed of the split.")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = (
        False
    ),
) -> None:
    """Write a bundled public data set as CSV, whole or split into train and test."""
    from dpfair.data.export import EXPORTABLE, export_dataset

    with user_errors():
        files = export_dataset(name, out, split=split, seed=seed)
    payload: dict[str, Any] = {
        "dataset": name,
        "description": EXPORTABLE[name].description,
        "files": {k: str(v) for k, v in files.items()},
        "split": split,
        "seed": seed,
    }
    rows = [(k, str(v)) for k, v in files.items()]
    emit(payload, as_json=as_json, title="Files written", rows=rows)


@datasets_app.command("simulate")
def simulate(
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory to write into.")],
    sites: Annotated[
        int, typer.Option("--sites", min=1, help="Number of sites (files h1.csv, h2.csv, ...).")
    ] = 3,
    n: Annotated[int, typer.Option("--n", min=2, help="Rows per site.")] = 2000,
    test_n: Annotated[int, typer.Option("--test-n", min=1, help="Rows of test.csv.")] = 4000,
    seed: Annotated[int, typer.Option("--seed", min=0, help="Seed of the simulation.")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = (
        False
    ),
) -> None:
    """Simulate sites and a test set from the fair-classification paper's design."""
    import numpy as np

    from dpfair.data.export import write_csv
    from dpfair.fairclass.datasets import simulate as simulate_design

    with user_errors():
        out = out.expanduser()
        out.mkdir(parents=True, exist_ok=True)
        streams = np.random.SeedSequence(seed).spawn(sites + 1)
        files: dict[str, Path] = {}
        names = [f"h{s + 1}" for s in range(sites)] + ["test"]
        sizes = [n] * sites + [test_n]
        for name, size, stream in zip(names, sizes, streams, strict=True):
            d = simulate_design(size, rng=np.random.default_rng(stream))
            block = np.column_stack([d.X, d.A, d.y])
            files[name] = write_csv(out / f"{name}.csv", ["x1", "x2", "a", "y"], block)
    payload: dict[str, Any] = {
        "design": "fair-classification simulation (paper 003, §5.1); columns x1, x2, a, y",
        "files": {k: str(v) for k, v in files.items()},
        "rows_per_site": n,
        "test_rows": test_n,
        "seed": seed,
    }
    rows = [(k, str(v)) for k, v in files.items()]
    emit(payload, as_json=as_json, title="Files written", rows=rows)


def register(app: typer.Typer) -> None:
    """Add the ``datasets`` command group to ``app``."""
    app.add_typer(datasets_app, name="datasets")
