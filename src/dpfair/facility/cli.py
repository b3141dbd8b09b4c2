"""Typer commands for private facility location: ``facility`` and ``facility-experiment``.

:func:`register` adds both commands to the main ``dpfair`` app. The commands only parse
flags, call the public API (:class:`dpfair.facility.DPExpMed`,
:func:`dpfair.facility.experiments.run_experiment`) and print. User errors
(:class:`dpfair.DPFairError`, file errors) become one line on stderr and exit code 2.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from dpfair._cli_support import emit, fmt, user_errors

__all__ = ["register"]

_LEVEL = 0.95  # quantile level reported with --report-metrics


def facility(
    data: Annotated[
        Path,
        typer.Argument(metavar="DATA", help="CSV (optionally .gz) or Parquet file.",
                       show_default=False),
    ],
    column: Annotated[str, typer.Option("--column", "-c", help="Numeric column of locations.")],
    epsilon: Annotated[float, typer.Option("--epsilon", help="Privacy budget ε > 0 (pure DP).")],
    domain: Annotated[
        tuple[float, float],
        typer.Option(
            "--domain",
            metavar="LO HI",
            help=(
                "Public domain [LO, HI] of the locations. It must come from outside "
                "knowledge, never from the data's min/max (that is itself a release); a "
                "location outside it is an error, not clipped."
            ),
        ),
    ],
    widening: Annotated[
        float | None,
        typer.Option(
            "--widening",
            help=(
                "Widening α ≥ 0 (default 1/(n·ε), Cor. 7.10, which treats n as public; if "
                "the number of agents is private, pass a fixed value; 0 = unwidened)."
            ),
            show_default=False,
        ),
    ] = None,
    seed: Annotated[
        int | None,
        typer.Option(
            "--seed",
            min=0,
            help="Seed for reproducible output (default: OS entropy; use that in deployments).",
            show_default=False,
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = (
        False
    ),
    report_metrics: Annotated[
        bool,
        typer.Option(
            "--report-metrics",
            help=(
                "Also print the exact expected FAIR and SWDIFF of the mechanism on this data "
                "(and their 0.95-quantiles). NOT private: for analysts who hold the data."
            ),
        ),
    ] = False,
) -> None:
    """Place a facility privately on [LO, HI] from the locations in one column.

    Releases one location drawn by DPExpMed_α (paper 000): pure ε-DP under replace-one
    neighbours. Prints the location and the privacy spent; ``--report-metrics`` adds the
    mechanism's exact expected welfare loss (SWDIFF) and worst individual loss (FAIR) on
    this data, which are functions of the private data and are not themselves private.
    """
    import dpfair.data
    from dpfair.facility import DPExpMed

    with user_errors():
        x = dpfair.data.read_column(data, column)
        mech = DPExpMed(epsilon, domain, widening=widening)
        location = mech.sample(x, rng=seed)
        alpha = mech.widening_for(x.size)
        payload: dict[str, Any] = {
            "location": location,
            "n": int(x.size),
            "epsilon": mech.epsilon,
            "domain": list(mech.domain),
            "widening": alpha,
            "widening_rule": "1/(n*epsilon)" if widening is None else "given",
            "privacy": mech.privacy.to_dict(),
            "neighbours": "replace-one",
            "input": {"path": str(data), "column": column},
            "seed": seed,
        }
        rows = [
            ("data", f"{data} [{column}]"),
            ("n", str(x.size)),
            ("location", fmt(location)),
            ("public domain", f"[{fmt(mech.domain[0])}, {fmt(mech.domain[1])}]"),
            ("widening α", f"{fmt(alpha)} ({payload['widening_rule']})"),
            ("privacy spent", f"{mech.privacy} (pure, replace-one neighbours)"),
            ("seed", fmt(seed) if seed is not None else "none (OS entropy)"),
        ]
        if report_metrics:
            dist = mech.distribution(x)
            metrics = {
                "expected_fair": dist.expected_fair(),
                "expected_swdiff": dist.expected_swdiff(),
                "level": _LEVEL,
                "fair_quantile": float(dist.fair_quantile(_LEVEL)),
                "swdiff_quantile": float(dist.swdiff_quantile(_LEVEL)),
                "optimum": dist.optimum,
                "note": "computed from the data: not differentially private",
            }
            payload["metrics"] = metrics
            rows += [
                ("E[FAIR] (not private)", fmt(metrics["expected_fair"])),
                ("E[SWDIFF] (not private)", fmt(metrics["expected_swdiff"])),
                (f"FAIR {_LEVEL:g}-quantile", fmt(metrics["fair_quantile"])),
                (f"SWDIFF {_LEVEL:g}-quantile", fmt(metrics["swdiff_quantile"])),
            ]
    emit(payload, as_json=as_json, title="Private facility location (DPExpMed)", rows=rows)


def facility_experiment(
    name: Annotated[
        str,
        typer.Argument(
            metavar="NAME", help="scaling, widening, impossibility or baselines.",
            show_default=False,
        ),
    ],
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Output directory (created if missing).")
    ] = Path("out/facility"),
    quick: Annotated[
        bool, typer.Option("--quick", help="Small grids: a few seconds per experiment.")
    ] = False,
    seed: Annotated[int, typer.Option("--seed", min=0, help="Seed of the sampled data.")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """Run one facility-location experiment (exact, no Monte Carlo) and write its figures.

    Writes NAME.json and NAME.png into OUT and prints the summary (slopes, bound checks).
    """
    from dpfair.facility.experiments import run_experiment

    with user_errors():
        progress = _progress_printer() if sys.stderr.isatty() else None
        result = run_experiment(name, out, quick=quick, seed=seed, progress=progress)
    if sys.stderr.isatty():
        typer.echo("", err=True)
    json_path = str(Path(out) / f"{result.name}.json")
    payload = {"name": result.name, "summary": result.summary, "figures": result.figures,
               "json": json_path, "seconds": result.seconds}
    rows: list[tuple[str, str]] = [("experiment", result.name),
                                   ("seconds", f"{result.seconds:.1f}")]
    rows += [(k, _short(v)) for k, v in _flatten(result.summary).items()]
    rows += [("figure", f) for f in result.figures]
    rows.append(("results", json_path))
    emit(payload, as_json=as_json, title=f"facility experiment: {result.name}", rows=rows)


def _progress_printer() -> Any:
    def progress(done: int, total: int, label: str) -> None:
        typer.echo(f"\r[{done}/{total}] {label[:60]:<60}", nl=False, err=True)

    return progress


def _flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(_flatten(v, key + "."))
        elif isinstance(v, list) and v and isinstance(v[0], Mapping):
            out[key] = f"{len(v)} entries (see JSON)"
        else:
            out[key] = v
    return out


def _short(value: Any) -> str:
    if isinstance(value, float):
        return fmt(value)
    text = str(value)
    return text if len(text) <= 90 else text[:87] + "..."


def register(app: typer.Typer) -> None:
    """Add ``facility`` and ``facility-experiment`` to the ``dpfair`` Typer app."""
    app.command("facility")(facility)
    app.command("facility-experiment")(facility_experiment)
