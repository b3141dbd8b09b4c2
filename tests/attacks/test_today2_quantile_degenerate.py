"""Attack: a one-ulp public range makes the localised ExpMech loop forever.

Claim (``dpfair.quantiles._api.localized_expmech_regular``): when the public (n, R) pass
the check, every stage-2 range R₂ has width ≥ s₁/2 ("distinct stage-1 grid points, or
one step of widening, are ≥ s₁(1 − 2^-7) apart because s₁ ≥ 2^-44·scale"), so the
ExpMech grid θ₂ = |range|/K_E is a normal, positive number. But
:func:`localization_depth` stops at depth 1 even when |R|/2 < 2^-44·scale, so that
premise fails for ranges a few ulps wide. With R = [1, 1 + 2^-52] (one ulp): n = 50
passes the check (s₁ = 2^-53 ≥ 2^-1000), the stage-1 midpoint 1 + 2^-53 rounds to 1, and
with the data at the bottom both stage-1 ends are 1.0; the widening
``min(hi, r_lo + step1)`` = fl(1 + 2^-53) = 1 again, so R₂ = [1, 1], θ₂ = 0 and
``_cell_grid``'s ``while not fits(cell): cell *= 2.0`` never ends (0·2 = 0): the call
hangs (the same in the tree before the change; other methods: BinSearch returns
[1, 1], CDF raises "bounds=(1.0, 1.0)" from inside the release).

The test wraps :meth:`CellGrid.for_bounds` so that a zero-width or zero-θ grid raises
instead of hanging: a correct release never asks for one.

Fix: :func:`dpfair.quantiles._api.localization_regular` (a function of the public n and
bounds only, evaluated before any data are read) is False when even the depth-1 stage-1
step is below 2^-44 of the bounds' magnitude (|R| < 2^-43·scale); ``_release`` then runs
the public-range method of the same name for all four methods (and the entry points on
top of it: ``confidence_intervals``, the out-of-core path, ``Session.quantile_ci`` and
the ``quantile-ci`` command), recorded in ``diagnostics["localize_skipped"]``; and
``_cell_grid`` refuses a degenerate range or θ instead of doubling 0 forever.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import dpfair
from dpfair import InvalidParameterError
from dpfair.median import _expmech
from dpfair.quantiles._api import localization_regular, localized_expmech_regular

METHODS = ["expmech", "binsearch", "cdf", "binsearch_cdf"]

LO = 1.0
HI = float(np.nextafter(1.0, 2.0))


@pytest.fixture
def guarded_grid(monkeypatch):
    original = _expmech.CellGrid.for_bounds.__func__

    def for_bounds(cls, bounds, granularity):
        if not (bounds[1] > bounds[0] and granularity > 0):
            raise AssertionError(f"degenerate ExpMech grid requested: {bounds}, {granularity}")
        return original(cls, bounds, granularity)

    monkeypatch.setattr(_expmech.CellGrid, "for_bounds", classmethod(for_bounds))


def test_one_ulp_range_is_not_regular_by_the_public_check():
    # Formerly True (the attack: the proof's premise s1 >= 2^-44 scale was not checked).
    assert not localization_regular(50, (LO, HI))
    assert not localized_expmech_regular(50, (LO, HI))


def test_public_check_boundary():
    # depth 1 passes iff |R|/2 >= 2^-44 scale: |R| = 2^-43 below 1.0 (scale 1) passes,
    # one ulp (2^-53) less fails.
    assert localization_regular(50, (1.0 - 2.0**-43, 1.0))
    assert not localization_regular(50, (1.0 - 2.0**-43 + 2.0**-53, 1.0))
    assert localization_regular(10**6, (-5.0, 15.0))
    assert localization_regular(50, (0.0, 2.0**-1020))  # tiny but wide for its magnitude
    assert not localized_expmech_regular(50, (0.0, 2.0**-1020))  # (the subnormal rule)


def test_one_ulp_range_release_completes(guarded_grid):
    x = np.full(50, LO)
    for seed in range(3):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = dpfair.quantiles.confidence_interval(x, 0.5, rho=0.5, bounds=(LO, HI),
                                                     method="expmech", rng=seed)
        assert LO <= r.low <= r.high <= HI


def test_one_ulp_range_with_data_on_top_is_fine(guarded_grid):
    # Control: the same bounds with the data at the top keep a one-ulp R₂ (no hang).
    x = np.full(50, HI)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = dpfair.quantiles.confidence_interval(x, 0.5, rho=0.5, bounds=(LO, HI),
                                                 method="expmech", rng=0)
    assert LO <= r.low <= r.high <= HI


@pytest.mark.parametrize("method", ["cdf", "binsearch_cdf"])
def test_one_ulp_range_tree_methods_complete(method):
    x = np.full(50, LO)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = dpfair.quantiles.confidence_interval(x, 0.5, rho=0.5, bounds=(LO, HI),
                                                 method=method, rng=0)
    assert LO <= r.low <= r.high <= HI


DATASETS = {"bottom": np.full(50, LO), "top": np.full(50, HI),
            "both": np.r_[np.full(25, LO), np.full(25, HI)]}


@pytest.mark.parametrize("where", sorted(DATASETS))
@pytest.mark.parametrize("method", METHODS)
def test_narrow_bounds_run_the_public_range_method(guarded_grid, method, where):
    # The choice is public (n, bounds): the same for every data set, and the output is
    # exactly the non-localised method's for the same seed.
    x = DATASETS[where]
    for qs in ([0.5], [0.1, 0.5, 0.9]):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = dpfair.quantiles.confidence_intervals(x, qs, rho=0.5, bounds=(LO, HI),
                                                      method=method, rng=1)
            ref = dpfair.quantiles.confidence_intervals(x, qs, rho=0.5, bounds=(LO, HI),
                                                        method=method, localize=False,
                                                        rng=1)
        assert r.diagnostics["localized"] is False
        assert "too narrow for their magnitude" in r.diagnostics["localize_skipped"]
        assert [(i.low, i.high) for i in r.intervals] == [(i.low, i.high)
                                                          for i in ref.intervals]
        for i in r.intervals:
            assert LO <= i.low <= i.high <= HI
        assert r.privacy.rho <= 0.5 * (1 + 1e-12)


def test_narrow_bounds_far_from_one():
    # the rule is relative: 100 ulps at 1e6 fall back, the same absolute width at 0 does not
    lo = 1e6
    hi = float(lo + 100 * (np.nextafter(lo, 2e6) - lo))
    assert not localization_regular(100, (lo, hi))
    assert localization_regular(100, (0.0, hi - lo))
    x = np.linspace(lo, hi, 100)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for method in METHODS:
            r = dpfair.quantiles.confidence_interval(x, 0.25, rho=1.0, bounds=(lo, hi),
                                                     method=method, rng=0)
            assert lo <= r.low <= r.high <= hi
            assert r.diagnostics["localized"] is False


@pytest.mark.parametrize("method", METHODS)
def test_median_api_one_ulp(guarded_grid, method):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = dpfair.median.confidence_interval(np.full(50, LO), rho=0.5, bounds=(LO, HI),
                                              method=method, rng=0)
    assert LO <= r.low <= r.high <= HI


@pytest.mark.parametrize("method", ["cdf", "binsearch", "binsearch_cdf"])
def test_out_of_core_one_ulp_equals_in_memory(method):
    x = np.full(50, LO)

    def count(g):
        return int(np.count_nonzero(x <= g))

    def hist(rng_, depth):
        return dpfair.mechanisms.leaf_counts_sorted(np.clip(np.sort(x), *rng_), rng_, depth)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = dpfair.quantiles.confidence_intervals_from_queries(
            50, count, hist, [0.5], rho=0.5, bounds=(LO, HI), method=method, rng=2)
        b = dpfair.quantiles.confidence_intervals(x, [0.5], rho=0.5, bounds=(LO, HI),
                                                  method=method, rng=2)
    assert [(i.low, i.high) for i in a.intervals] == [(i.low, i.high) for i in b.intervals]


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("method", METHODS)
def test_session_quantile_ci_one_ulp(guarded_grid, method):
    frame = pd.DataFrame({"v": np.full(60, LO), "g": ["a", "b"] * 30})
    s = dpfair.Session(frame, budget=dpfair.privacy.Budget.zcdp(2.0), reproducible_seed=0)
    r = s.quantile_ci("v", 0.5, rho=0.5, bounds=(LO, HI), method=method)
    assert LO <= r.low <= r.high <= HI
    res = s.quantile_ci("v", 0.5, rho=0.5, bounds=(LO, HI), method=method, by="g",
                        groups=["a", "b"], group_sizes="public")
    assert res is not None


def test_cli_one_ulp(tmp_path):
    from typer.testing import CliRunner

    from dpfair.cli import app

    p = tmp_path / "d.csv"
    p.write_text("v\n" + "1.0\n" * 50)
    res = CliRunner().invoke(app, ["quantile-ci", str(p), "--column", "v", "--q", "0.5",
                                   "--rho", "0.5", "--bounds", "1.0", repr(HI),
                                   "--method", "expmech", "--seed", "0"])
    assert res.exit_code == 0, res.output


def test_cell_grid_refuses_degenerate_input_instead_of_looping():
    grid = _expmech._cell_grid.__wrapped__
    for a, b, theta in [(1.0, 1.0, 0.0), (1.0, 1.0, 1e-3), (0.0, 1.0, 0.0),
                        (0.0, 1.0, float("nan")), (1.0, 0.0, 0.1), (0.0, 1.0, -1.0)]:
        with pytest.raises(InvalidParameterError):
            grid(a, b, theta)
    ok = grid(0.0, 1.0, 0.25)  # unchanged for a regular input
    assert ok.n_cells >= 4


def test_ordinary_bounds_still_localise():
    x = np.random.default_rng(0).lognormal(size=500)
    for method in METHODS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = dpfair.quantiles.confidence_interval(x, 0.5, rho=0.5, bounds=(-5.0, 15.0),
                                                     method=method, rng=0)
        assert r.diagnostics["localized"] is True
        assert "localize_skipped" not in r.diagnostics


def test_public_range_binsearch_cdf_never_collapses():
    # The paper-mode binsearch_cdf widened a narrow stage-1 hull by θ = |R|/400, which
    # rounds back to a point at one-ulp bounds: at R = [1e6, 1e6 + ulp] with the data
    # spread over both ends it raised 'bounds=(1000000.0, 1000000.0)' for 15 of these 25
    # seeds (measured before the fix). A collapsed hull now uses the public range.
    lo = 1e6
    hi = float(np.nextafter(lo, 2e6))
    x = np.linspace(lo, hi, 100)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for seed in range(25):
            r = dpfair.quantiles.confidence_interval(x, 0.25, rho=1.0, bounds=(lo, hi),
                                                     method="binsearch_cdf",
                                                     localize=False, rng=seed)
            assert lo <= r.low <= r.high <= hi
