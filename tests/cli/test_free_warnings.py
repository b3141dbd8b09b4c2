"""Free warnings (``dpfair._advice``): an end on a public bound, a budget with little privacy.

They are post-processing: computed from the released interval and the public parameters
only, so they cost nothing (the ledger is charged exactly the release's ρ) and cannot
depend on the data beyond the release (the helper never sees the data).
"""

from __future__ import annotations

import inspect
import json
import warnings
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from dpfair._advice import LARGE_EPSILON, little_privacy, on_public_bound, warn_free
from dpfair._warnings import DPFairWarning, FreeWarning
from dpfair.cli import app
from dpfair.privacy import Budget


def test_an_end_on_a_bound_is_named() -> None:
    assert on_public_bound(50.0, 50.02, (50, 100)).startswith("the lower end sits on")
    assert "upper end" in on_public_bound(90.0, 100.0, (50, 100))
    assert "lower and upper ends sit" in on_public_bound(0.0, 100.0, (0, 100))
    assert on_public_bound(36.9, 37.1, (0, 100)) is None
    assert "the quantile" in on_public_bound(0.0, 1.0, (0, 5), what="quantile")


def test_little_privacy_in_each_unit() -> None:
    assert little_privacy(Budget.zcdp(0.5)) is None
    assert little_privacy(Budget.zcdp(1.0)) is None  # (7.77, 1e-6)-DP
    big = little_privacy(Budget.zcdp(1e6))
    assert big is not None and "rho=1e+06" in big and "little privacy" in big
    assert little_privacy(Budget.pure(LARGE_EPSILON)) is None
    assert "epsilon=50" in (little_privacy(Budget.pure(50.0)) or "")
    assert "epsilon=12" in (little_privacy(Budget.approx(12.0, 1e-6)) or "")


def test_warn_free_issues_free_warnings_and_returns_their_texts() -> None:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        msgs = warn_free(Budget.zcdp(1e6), low=50.0, high=50.02, bounds=(50, 100))
    assert len(msgs) == 2 and [str(w.message) for w in seen] == list(msgs)
    assert all(issubclass(w.category, FreeWarning) for w in seen)
    assert issubclass(FreeWarning, DPFairWarning)
    assert warn_free(Budget.zcdp(0.5), low=1.0, high=2.0, bounds=(0, 3)) == ()


def test_the_helpers_never_see_data() -> None:
    """Post-processing by construction: only released ends, public bounds and the budget."""
    for fn in (on_public_bound, little_privacy, warn_free):
        params = set(inspect.signature(fn).parameters)
        assert params <= {"low", "high", "bounds", "what", "budget", "privacy", "stacklevel"}


@pytest.fixture
def ages(tmp_path: Path) -> Path:
    x = np.random.default_rng(0).integers(20, 55, 4000)  # median about 37
    path = tmp_path / "ages.csv"
    path.write_text("age\n" + "".join(f"{v}\n" for v in x))
    return path


def _run(*args: str):
    return CliRunner().invoke(app, list(args))


def test_median_ci_warns_when_the_bounds_miss_the_median(ages: Path) -> None:
    res = _run("median-ci", str(ages), "--column", "age", "--rho", "0.5", "--bounds", "50",
               "100", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["low"] == 50.0  # the interval sits on the lower bound
    assert any("may not contain the median" in w for w in out["warnings"])
    assert "dpfair: warning: the lower end sits on a public bound" in res.stderr


def test_median_ci_warns_on_a_huge_rho_and_not_otherwise(ages: Path) -> None:
    res = _run("median-ci", str(ages), "--column", "age", "--rho", "1e6", "--bounds", "0",
               "100", "--json")
    assert res.exit_code == 0, res.output
    assert any("little privacy" in w for w in json.loads(res.stdout)["warnings"])
    assert res.stderr.count("dpfair: warning: rho=1e+06 is large") == 1
    quiet = _run("median-ci", str(ages), "--column", "age", "--rho", "0.5", "--bounds", "0",
                 "100", "--json")
    assert quiet.exit_code == 0 and json.loads(quiet.stdout)["warnings"] == []
    assert "warning" not in quiet.stderr


def test_the_warning_is_free(ages: Path, tmp_path: Path) -> None:
    ledger = tmp_path / "ages.ledger"
    assert _run("ledger", "init", str(ledger), "--data", str(ages), "--rho", "1").exit_code == 0
    res = _run("median-ci", str(ages), "--column", "age", "--rho", "0.5", "--bounds", "50",
               "100", "--ledger", str(ledger), "--json")
    assert res.exit_code == 0, res.output
    assert "may not contain the median" in res.stderr
    show = json.loads(_run("ledger", "show", str(ledger), "--json").stdout)
    assert show["spent"]["rho"] == pytest.approx(0.5)  # exactly the release, nothing more


def test_facility_warns_on_a_huge_epsilon(ages: Path) -> None:
    res = _run("facility", str(ages), "--column", "age", "--epsilon", "50", "--domain", "0",
               "100")
    assert res.exit_code == 0, res.output
    assert "dpfair: warning: epsilon=50 is large" in res.stderr
