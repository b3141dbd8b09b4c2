"""Issue 23 attacks on a Session's randomness and failure accounting (THREATS.md 9, 10).

* A ``numpy.random.Generator`` subclass passed as ``rng`` saw the mechanism's
  data-dependent calls and aborted them; only ``InvalidDataError`` was charged, so 50
  aborts cost nothing and told neighbours apart. Now any Generator (subclasses included),
  int or SeedSequence is refused *before the data are touched*.
* ``rng=7`` was accepted and charged as private, yet a known seed makes the output a fixed
  function of the data. A seed is now accepted only by ``Session(...,
  reproducible_seed=S)``, which warns on every release and records the mode in the ledger.
* Any exception raised after the data were touched (a warning turned into an error by
  the caller's filters, an interrupt) charges the planned cost.

Each test fails on the code before issue 23 (``PYTHONPATH=/work/main/src``).
"""

from __future__ import annotations

import warnings
from collections.abc import Hashable

import numpy as np
import pytest

import dpfair
from dpfair import InvalidParameterError, Session
from dpfair.privacy import Budget
from dpfair.session import ReproducibleSeedWarning
from dpfair.session._sources import MemorySource

BOUNDS = (0.0, 20.0)


@pytest.fixture()
def x() -> np.ndarray:
    return np.random.default_rng(3).normal(10.0, 2.0, 3000)


class CountingSource(MemorySource):
    """Counts how often the release reads the data."""

    def __init__(self, data: np.ndarray) -> None:
        super().__init__(data)
        self.reads = 0

    def column(self, name: Hashable) -> np.ndarray:
        self.reads += 1
        return super().column(name)


class AbortingGenerator(np.random.Generator):
    """The attack: sees the mechanism's data-dependent arguments and raises."""

    def __init__(self) -> None:
        super().__init__(np.random.PCG64(0))
        self.calls = 0

    def integers(self, *args, **kwargs):  # type: ignore[no-untyped-def,override]
        self.calls += 1
        raise RuntimeError(f"saw {args!r}")

    def random(self, *args, **kwargs):  # type: ignore[no-untyped-def,override]
        self.calls += 1
        raise RuntimeError("saw a draw")


@pytest.mark.parametrize("rng", [AbortingGenerator(), np.random.default_rng(0), 7,
                                 np.random.SeedSequence(7), np.int64(7)],
                         ids=["subclass", "generator", "int", "seedsequence", "np-int"])
def test_every_caller_randomness_is_refused_before_the_data(x: np.ndarray, rng: object) -> None:
    src = CountingSource(x)
    s = Session(src, budget=Budget.zcdp(1.0))
    for call in (
        lambda: s.median_ci(rho=0.1, bounds=BOUNDS, rng=rng),  # type: ignore[arg-type]
        lambda: s.place_facility(epsilon=0.5, domain=BOUNDS, rng=rng),  # type: ignore[arg-type]
    ):
        with pytest.raises(InvalidParameterError, match="reproducible_seed"):
            call()
    assert src.reads == 0 and s.records == []  # nothing read, nothing charged
    if isinstance(rng, AbortingGenerator):
        assert rng.calls == 0  # the subclass never saw a call


def test_fifty_aborted_releases_no_longer_cost_nothing(x: np.ndarray) -> None:
    """The review's attack, replayed: 50 tries either are refused up front (Generator) or,
    if they fail after the data were touched, each costs its planned ρ."""
    s = Session(x, budget=Budget.zcdp(50 * 0.01 + 1e-9))
    gen = AbortingGenerator()
    for _ in range(50):
        with pytest.raises(InvalidParameterError):
            s.median_ci(rho=0.01, bounds=BOUNDS, rng=gen)  # type: ignore[arg-type]
    assert gen.calls == 0


def test_random_state_of_the_fair_classifier_is_refused() -> None:
    from dpfair.fairclass.datasets import simulate

    d = simulate(500, rng=1)
    data = {"x1": d.X[:, 0], "x2": d.X[:, 1], "a": d.A, "y": d.y}
    s = Session(data, budget=Budget.approx(2.0, 1e-5))
    with pytest.raises(InvalidParameterError, match="random_state"):
        s.fit_fair_classifier(features=["x1", "x2"], target="y", sensitive="a", epsilon=1.0,
                              delta=1e-6, alpha=0.1, feature_bounds=[(0, 1), (0, 1)],
                              random_state=0)  # type: ignore[arg-type]
    assert s.records == []


def test_fresh_entropy_by_default(x: np.ndarray) -> None:
    """Two sessions on the same data, no seed: independent noise (ExpMech draws differ
    except with probability far below 1e-6 for a continuous output)."""
    a = Session(x, budget=Budget.zcdp(1.0)).median_ci(rho=0.5, bounds=BOUNDS)
    b = Session(x, budget=Budget.zcdp(1.0)).median_ci(rho=0.5, bounds=BOUNDS)
    assert (a.low, a.high) != (b.low, b.high)


def test_reproduction_mode_warns_every_release_and_is_recorded(x: np.ndarray) -> None:
    def run() -> tuple[list[float], Session]:
        s = Session(x, budget=Budget.zcdp(1.0), reproducible_seed=11)
        out = []
        for _ in range(3):
            with pytest.warns(ReproducibleSeedWarning, match="reproducible_seed"):
                out.append(s.median_ci(rho=0.1, bounds=BOUNDS).low)
        return out, s

    first, s = run()
    again, _ = run()
    assert first == again  # reproducible
    assert len(set(first)) == 3  # a fresh stream per release, never the same noise twice
    assert [r.params["stream"] for r in s.records] == [0, 1, 2]
    assert all(r.params["reproducible"] is True for r in s.records)
    assert all(11 not in r.params.values() for r in s.records)  # the seed itself is not stored
    plain = Session(x, budget=Budget.zcdp(1.0))
    plain.median_ci(rho=0.1, bounds=BOUNDS)
    assert plain.records[0].params["reproducible"] is False


@pytest.mark.parametrize("seed", [-1, 1.5, True, "7"])
def test_bad_reproducible_seed(x: np.ndarray, seed: object) -> None:
    with pytest.raises(InvalidParameterError, match="reproducible_seed"):
        Session(x, budget=Budget.zcdp(1.0), reproducible_seed=seed)  # type: ignore[arg-type]


class WarningSource(MemorySource):
    """Data whose reading warns (as a real reader may, e.g. a lossy cast)."""

    def column(self, name: Hashable) -> np.ndarray:
        warnings.warn("a data-dependent warning", UserWarning, stacklevel=2)
        return super().column(name)


def test_a_warning_turned_into_an_error_after_the_data_is_charged(x: np.ndarray) -> None:
    s = Session(WarningSource(x), budget=Budget.zcdp(1.0))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        with pytest.raises(UserWarning):
            s.median_ci(rho=0.3, bounds=BOUNDS)
    assert s.spent.rho == pytest.approx(0.3)
    assert s.records[-1].label == "median_ci (failed on the data)"


class InterruptedSource(MemorySource):
    def column(self, name: Hashable) -> np.ndarray:
        raise KeyboardInterrupt


def test_an_interrupt_after_the_data_is_charged(x: np.ndarray) -> None:
    s = Session(InterruptedSource(x), budget=Budget.zcdp(1.0))
    with pytest.raises(KeyboardInterrupt):
        s.place_facility(epsilon=1.0, domain=BOUNDS)
    assert s.spent.rho == pytest.approx(1.0 / 8)  # ε²/8, the planned bounded-range cost


def test_session_results_are_typed() -> None:
    """No ``Any`` on the public methods' return values."""
    import typing

    from dpfair.session import _session

    hints = {
        name: typing.get_type_hints(getattr(Session, name), vars(_session) | {
            "MedianInterval": dpfair.median.MedianInterval,
            "CDPFairClassifier": dpfair.fairclass.CDPFairClassifier,
        }).get("return")
        for name in ("median_ci", "place_facility", "fit_fair_classifier", "summary")
    }
    assert all(h is not None and h is not typing.Any for h in hints.values()), hints
