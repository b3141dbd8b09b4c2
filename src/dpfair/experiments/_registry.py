"""The experiment specification and the process-wide registry of experiments."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias, overload

import numpy as np

from dpfair._errors import InvalidParameterError

__all__ = [
    "EXTENSION_MODULES",
    "Experiment",
    "RunOne",
    "Scalar",
    "UnknownExperimentError",
    "get_experiment",
    "list_experiments",
    "register_experiment",
]

#: A value of one grid parameter or of one output of a repetition.
Scalar: TypeAlias = bool | int | float | str

#: ``run_one(params, seed) -> {output name: scalar}``: one repetition of one grid cell.
RunOne: TypeAlias = Callable[[dict[str, Any], np.random.SeedSequence], Mapping[str, Any]]

#: Modules of :mod:`dpfair.experiments` that register experiments when imported: one
#: module per study, named after it (``median_width`` registers ``median-width``). A module
#: that does not exist (yet) is skipped; an error inside an existing one is raised.
EXTENSION_MODULES: tuple[str, ...] = (
    # paper 004: private median confidence intervals (helpers in _median.py)
    "median_width", "median_coverage", "median_sweep_n", "median_sweep_rho",
    "median_sweep_sigma", "median_sweep_range", "median_smoke",
    # paper 000: private facility location (helpers in _facility.py)
    "facility_scaling", "facility_widening", "facility_impossibility", "facility_baselines",
    "facility_smoke",
    # paper 003: CDP-Fair (helpers in _fairclass.py) and FDP-Fair (helpers in _fdp.py)
    "fairclass_simulation", "fairclass_adult", "fairclass_law", "fairclass_smoke",
    "fairclass_full_adult",
    "fdp_figure4", "fdp_figure5", "fdp_sensitivity", "fdp_adult", "fdp_law", "fdp_smoke",
)

#: Column names the runner and the store use; neither parameters nor outputs may use them.
RESERVED_COLUMNS: frozenset[str] = frozenset({"cell", "rep", "filename"})

_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")
_COLUMN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class UnknownExperimentError(InvalidParameterError):
    """No experiment is registered under the requested name."""


def _as_scalar(where: str, value: Any) -> Scalar:
    """``value`` as a plain Python scalar (numpy scalars unwrapped), or raise."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, (bool, int, float, str)):
        return value
    raise InvalidParameterError(
        f"{where}={value!r}: expected a scalar (bool, int, float or str), got "
        f"{type(value).__name__}. Store lists or arrays as several scalar entries."
    )


def _check_column(where: str, key: Any) -> str:
    if not isinstance(key, str) or not _COLUMN.match(key):
        raise InvalidParameterError(
            f"{where}: key {key!r} is not a valid column name (letters, digits and _, not "
            "starting with a digit)."
        )
    if key in RESERVED_COLUMNS:
        raise InvalidParameterError(
            f"{where}: key {key!r} is reserved (the result store uses the columns 'cell', "
            "'rep' and 'filename'). Rename it."
        )
    return key


@dataclass(frozen=True)
class Experiment:
    """A reproducible study: a parameter grid, one repetition, and a default count.

    The runner (:func:`dpfair.experiments.run_experiment`) calls ``run_one(params, seed)``
    once per (cell, repetition) pair, where ``params`` is the cell's entry of ``grid`` and
    ``seed`` a :class:`numpy.random.SeedSequence` derived from the run's seed, the cell
    index and the repetition index only.

    Parameters
    ----------
    name : str
        Registry key: lower case letters, digits, ``-``, ``_`` and ``.``, e.g.
        ``"median-width"``.
    description : str
        One or two sentences: what is measured, at which setting, after which paper.
    grid : sequence of dict
        The cells, in a fixed order (the order defines the cell index and hence the seeds).
        Every cell has the same keys; values are scalars (bool, int, float or str).
    run_one : callable
        ``run_one(params, seed) -> dict[str, scalar]``. It must draw all of its randomness
        from ``seed`` and call only the public API of dpfair's packages. Define it at module
        level so that worker processes (and remote Dask workers) can import it.
    reps : int, default=100
        Default number of repetitions per cell.
    metrics : tuple of str, default=()
        Outputs shown in the printed summary (mean and 95% interval per cell); by default
        every numeric or boolean output.
    reference : str, default=""
        Where the study comes from, e.g. ``"paper 004, §5, Fig. 6(a)"``.

    Raises
    ------
    InvalidParameterError
        For a bad name, an empty or ragged grid, a non-scalar value, a reserved column name
        (``cell``, ``rep``, ``filename``) or ``reps < 1``.
    """

    name: str
    description: str
    grid: tuple[dict[str, Scalar], ...]
    run_one: RunOne = field(repr=False, compare=False)
    reps: int = 100
    metrics: tuple[str, ...] = ()
    reference: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise InvalidParameterError(
                f"name={self.name!r}: use lower-case letters, digits, '-', '_' and '.', "
                "starting with a letter or digit, e.g. 'median-width'."
            )
        if not callable(self.run_one):
            raise InvalidParameterError(f"run_one={self.run_one!r}: expected a callable.")
        cells = tuple(self.grid) if isinstance(self.grid, Iterable) else None
        if not cells:
            raise InvalidParameterError(
                f"grid={self.grid!r}: expected a non-empty sequence of dicts (one per cell)."
            )
        keys: tuple[str, ...] | None = None
        clean: list[dict[str, Scalar]] = []
        for i, cell in enumerate(cells):
            if not isinstance(cell, Mapping):
                raise InvalidParameterError(f"grid[{i}]={cell!r}: expected a dict of scalars.")
            row = {
                _check_column(f"grid[{i}]", k): _as_scalar(f"grid[{i}][{k!r}]", v)
                for k, v in cell.items()
            }
            if keys is None:
                keys = tuple(row)
            elif set(row) != set(keys):
                raise InvalidParameterError(
                    f"grid[{i}] has keys {sorted(row)}, grid[0] has {sorted(keys)}: every cell "
                    "needs the same keys (the table has one column per key)."
                )
            clean.append({k: row[k] for k in keys})
        if isinstance(self.reps, bool) or not isinstance(self.reps, (int, np.integer)) or (
            self.reps < 1
        ):
            raise InvalidParameterError(f"reps={self.reps!r}: expected a positive integer.")
        object.__setattr__(self, "grid", tuple(clean))
        object.__setattr__(self, "reps", int(self.reps))
        object.__setattr__(self, "metrics", tuple(self.metrics))

    @property
    def parameters(self) -> tuple[str, ...]:
        """The grid's keys, in column order."""
        return tuple(self.grid[0])

    @property
    def n_cells(self) -> int:
        """Number of grid cells."""
        return len(self.grid)

    def fingerprint(self) -> str:
        """A digest of the name and the grid: a result store belongs to one fingerprint.

        Changing the grid (values or order) changes the cell indices and hence the seeds, so
        results stored under another grid must not be mixed in.
        """

        def default(v: Any) -> Any:
            if isinstance(v, float) and not math.isfinite(v):
                return repr(v)
            raise TypeError(type(v).__name__)

        text = json.dumps({"name": self.name, "grid": self.grid}, sort_keys=True,
                          default=default)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


_REGISTRY: dict[str, Experiment] = {}
_loaded = False


def _same_function(a: RunOne, b: RunOne) -> bool:
    """True for the same module-level function (e.g. a module imported twice)."""
    key = ("__module__", "__qualname__")
    return a is b or all(getattr(a, k, None) == getattr(b, k, object()) for k in key)


def _add(experiment: Experiment, replace: bool) -> Experiment:
    old = _REGISTRY.get(experiment.name)
    if old is not None and not replace and not _same_function(old.run_one, experiment.run_one):
        raise InvalidParameterError(
            f"name={experiment.name!r}: an experiment of that name is already registered "
            f"(run_one={getattr(old.run_one, '__qualname__', old.run_one)!r}). Choose another "
            "name, or pass replace=True."
        )
    _REGISTRY[experiment.name] = experiment
    return experiment


@overload
def register_experiment(experiment: Experiment, /, *, replace: bool = ...) -> Experiment: ...


@overload
def register_experiment(
    experiment: None = ...,
    /,
    *,
    name: str,
    description: str,
    grid: Iterable[Mapping[str, Any]],
    reps: int = ...,
    metrics: Iterable[str] = ...,
    reference: str = ...,
    replace: bool = ...,
) -> Callable[[RunOne], RunOne]: ...


def register_experiment(
    experiment: Experiment | None = None,
    /,
    *,
    name: str | None = None,
    description: str = "",
    grid: Iterable[Mapping[str, Any]] = (),
    reps: int = 100,
    metrics: Iterable[str] = (),
    reference: str = "",
    replace: bool = False,
) -> Experiment | Callable[[RunOne], RunOne]:
    """Add an experiment to the registry; usable as a call or as a decorator.

    Parameters
    ----------
    experiment : Experiment, optional
        A ready specification (positional). Without it, the keyword arguments describe
        the experiment and the call returns a decorator for its ``run_one`` function.
    name, description, grid, reps, metrics, reference
        As in :class:`Experiment` (decorator form only).
    replace : bool, default=False
        Overwrite an experiment registered under the same name by another function.

    Returns
    -------
    Experiment or decorator
        The registered experiment; in decorator form, the decorated function unchanged (so
        that it still pickles by reference).

    Examples
    --------
    >>> import dpfair
    >>> from dpfair.experiments import register_experiment
    >>> @register_experiment(name="doc-example", description="Coverage of ExpMech.",
    ...                      grid=[{"n": 200}, {"n": 1000}], reps=50)
    ... def doc_example(params, seed):
    ...     data_seed, noise_seed = seed.spawn(2)  # independent streams
    ...     x = dpfair.data.lognormal_sample(params["n"], rng=data_seed)
    ...     r = dpfair.median.confidence_interval(x, rho=0.5, bounds=(-5, 15), rng=noise_seed)
    ...     return {"covered": bool(r.low <= 1.5 <= r.high)}
    """
    if experiment is not None:
        if not isinstance(experiment, Experiment):
            raise InvalidParameterError(
                f"experiment={experiment!r}: expected an Experiment (or use keyword arguments "
                "and decorate the run_one function)."
            )
        return _add(experiment, replace)
    if name is None:
        raise InvalidParameterError(
            "name=None: register_experiment needs an Experiment or name=..., "
            "description=..., grid=... to decorate a run_one function."
        )
    spec_name = name

    def decorate(run_one: RunOne) -> RunOne:
        _add(
            Experiment(
                name=spec_name,
                description=description,
                grid=tuple(dict(c) for c in grid),
                run_one=run_one,
                reps=reps,
                metrics=tuple(metrics),
                reference=reference,
            ),
            replace,
        )
        return run_one

    return decorate


def _load_extensions() -> None:
    """Import the modules of :data:`EXTENSION_MODULES` that exist (once per process)."""
    global _loaded
    if _loaded:
        return
    for module in EXTENSION_MODULES:
        qualified = f"dpfair.experiments.{module}"
        if importlib.util.find_spec(qualified) is not None:
            importlib.import_module(qualified)  # errors propagate: a broken module is a bug
    _loaded = True


def list_experiments() -> list[Experiment]:
    """Every registered experiment, sorted by name (built-in modules are loaded first)."""
    _load_extensions()
    return [_REGISTRY[k] for k in sorted(_REGISTRY)]


def get_experiment(name: str) -> Experiment:
    """The experiment registered as ``name``.

    Raises
    ------
    UnknownExperimentError
        If there is none; the message lists the registered names and suggests the closest.
    """
    _load_extensions()
    if isinstance(name, str) and name in _REGISTRY:
        return _REGISTRY[name]
    import difflib

    known = sorted(_REGISTRY)
    close = difflib.get_close_matches(str(name), known, n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise UnknownExperimentError(
        f"experiment={name!r}: not registered.{hint} Available: {', '.join(known) or 'none'}. "
        "`dpfair reproduce --list` describes them."
    )
