"""The experiment registry: listing, look-up errors, specification checks."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import dpfair
from dpfair.experiments import (
    EXTENSION_MODULES,
    Experiment,
    UnknownExperimentError,
    get_experiment,
    list_experiments,
    register_experiment,
)

MEDIAN_EXPERIMENTS = {
    "median-width",
    "median-coverage",
    "median-sweep-n",
    "median-sweep-rho",
    "median-sweep-sigma",
    "median-sweep-range",
    "median-smoke",
}


def _noop(params: dict[str, Any], seed: np.random.SeedSequence) -> dict[str, Any]:
    return {"value": float(np.random.default_rng(seed).random())}


def test_listing_holds_the_median_studies_sorted() -> None:
    names = [e.name for e in list_experiments()]
    assert MEDIAN_EXPERIMENTS <= set(names)
    assert names == sorted(names)
    assert "median_width" in EXTENSION_MODULES


def test_paper_width_grid_is_methods_by_rho_at_the_paper_setting() -> None:
    exp = get_experiment("median-width")
    assert exp.reps == 500  # the paper's 100 data sets x 5 runs, as independent trials
    cells = {(c["method"], c["rho"]) for c in exp.grid}
    assert cells == {(m, r) for m in dpfair.median.METHODS for r in (0.1, 0.5, 1.0)}
    for c in exp.grid:
        assert (c["n"], c["sigma"], c["alpha"], c["r_low"], c["r_high"]) == (
            1000, 1.0, 0.05, -5.0, 15.0)
        assert c["theta"] == (0.005 if c["method"] == "expmech" else 0.05)


def test_coverage_grid_spans_designs_methods_and_n() -> None:
    exp = get_experiment("median-coverage")
    assert exp.reps == 5000
    assert {c["design"] for c in exp.grid} <= set(dpfair.data.DESIGNS)
    assert len({c["design"] for c in exp.grid}) == 5
    assert {c["n"] for c in exp.grid} == {50, 1000}
    assert {c["method"] for c in exp.grid} == set(dpfair.median.METHODS)


@pytest.mark.parametrize(
    ("name", "key"),
    [("median-sweep-n", "n"), ("median-sweep-rho", "rho"), ("median-sweep-sigma", "sigma"),
     ("median-sweep-range", "r_high")],
)
def test_sweeps_vary_their_parameter(name: str, key: str) -> None:
    exp = get_experiment(name)
    assert len({c[key] for c in exp.grid}) >= 5
    assert all(c["r_low"] <= 1.5 <= c["r_high"] for c in exp.grid)  # median inside R


def test_unknown_name_lists_the_registered_ones_and_suggests() -> None:
    with pytest.raises(UnknownExperimentError, match=r"experiment='median-widht': not "
                       r"registered\. Did you mean 'median-width'\?.*Available: .*median-smoke"):
        get_experiment("median-widht")
    assert issubclass(UnknownExperimentError, ValueError)


def test_register_as_decorator_keeps_the_function_and_rejects_duplicates() -> None:
    @register_experiment(name="test-registry-dummy", description="d", grid=[{"k": 1}], reps=3,
                         replace=True)
    def run(params: dict[str, Any], seed: np.random.SeedSequence) -> dict[str, Any]:
        return {"v": 1.0}

    assert callable(run) and run.__name__ == "run"
    exp = get_experiment("test-registry-dummy")
    assert exp.run_one is run and exp.reps == 3 and exp.grid == ({"k": 1},)
    with pytest.raises(ValueError, match=r"name='test-registry-dummy': an experiment of that "
                       r"name is already registered"):
        register_experiment(Experiment("test-registry-dummy", "other", ({"k": 2},), _noop))


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"name": "Bad Name"}, r"name='Bad Name': use lower-case"),
        ({"grid": ()}, r"grid=\(\): expected a non-empty sequence"),
        ({"grid": ({"a": 1}, {"b": 1})}, r"grid\[1\] has keys \['b'\], grid\[0\] has \['a'\]"),
        ({"grid": ({"a": [1, 2]},)}, r"grid\[0\]\['a'\]=\[1, 2\]: expected a scalar"),
        ({"grid": ({"rep": 1},)}, r"key 'rep' is reserved"),
        ({"reps": 0}, r"reps=0: expected a positive integer"),
    ],
)
def test_bad_specifications_name_the_argument(kwargs: dict[str, Any], pattern: str) -> None:
    spec: dict[str, Any] = {"name": "x", "description": "d", "grid": ({"a": 1},),
                            "run_one": _noop}
    spec.update(kwargs)
    with pytest.raises(dpfair.InvalidParameterError, match=pattern):
        Experiment(**spec)


def test_numpy_scalars_in_the_grid_become_python_scalars() -> None:
    exp = Experiment("x", "d", ({"n": np.int64(3), "r": np.float32(0.5)},), _noop)
    assert exp.grid == ({"n": 3, "r": 0.5},)
    assert type(exp.grid[0]["n"]) is int
    assert exp.fingerprint() == Experiment("x", "other text", ({"n": 3, "r": 0.5},),
                                           _noop).fingerprint()
    assert exp.fingerprint() != Experiment("x", "d", ({"n": 4, "r": 0.5},), _noop).fingerprint()
