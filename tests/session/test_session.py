"""dpfair.Session: every release charged before it is returned, in the right measure, and a
refused release computes, releases and charges nothing."""

from __future__ import annotations

import math
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import dpfair
from dpfair import (
    BudgetExceededError,
    IncompatibleBudgetError,
    InvalidDataError,
    InvalidParameterError,
    LedgerError,
    Session,
)
from dpfair.fairclass import CDPFairClassifier
from dpfair.fairclass.datasets import simulate
from dpfair.privacy import Budget, LedgerFile, cost_in_measure, zcdp_to_approx_epsilon
from dpfair.session._sources import MemorySource

# Sessions opened with reproducible_seed warn on every release (tested in test_randomness)
pytestmark = pytest.mark.filterwarnings("ignore::dpfair.session.ReproducibleSeedWarning")


def stream(seed: int, k: int = 0) -> np.random.Generator:
    """The generator of release k of a session opened with reproducible_seed=seed."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(k,)))

BOUNDS = (0.0, 20.0)
DOMAIN = (-100.0, 100.0)


@pytest.fixture(scope="module")
def x() -> np.ndarray:
    return np.random.default_rng(3).normal(10.0, 2.0, 3000)


@pytest.fixture(scope="module")
def fair_frame() -> pd.DataFrame:
    d = simulate(2000, rng=1)
    return pd.DataFrame({"x1": d.X[:, 0], "x2": d.X[:, 1], "y": d.y, "a": d.A})


FAIR = dict(features=["x1", "x2"], target="y", sensitive="a", epsilon=1.0, delta=1e-6,
            alpha=0.1, feature_bounds=[(0.0, 1.0), (0.0, 1.0)])


class CountingSource(MemorySource):
    """Counts every read of the data: a refused request must read nothing."""

    def __init__(self, data: Any) -> None:
        super().__init__(data)
        self.reads = 0

    def column(self, name: Hashable) -> np.ndarray:
        self.reads += 1
        return super().column(name)


# ------------------------------------------------------------------ each release
def test_median_ci_charges_the_release_own_privacy(x: np.ndarray) -> None:
    s = Session(x, budget=Budget.zcdp(1.0), reproducible_seed=1)
    res = s.median_ci(rho=0.4, bounds=BOUNDS)
    expected = dpfair.median.confidence_interval(x, rho=0.4, bounds=BOUNDS, rng=stream(1))
    assert (res.low, res.high) == (expected.low, expected.high)  # the wrapped function
    rec = s.records[-1]
    assert rec.label == "median_ci"
    assert rec.cost == res.privacy  # what the release says it spent, not the request
    assert rec.charged.rho == res.privacy.rho
    assert s.spent.rho == pytest.approx(res.privacy.rho, rel=0, abs=0)
    assert s.remaining.rho == pytest.approx(1.0 - res.privacy.rho, rel=1e-12)
    assert rec.params["rho"] == 0.4 and rec.params["n"] == x.size
    # the mode and the stream are recorded, never the seed (THREATS.md rule 2)
    assert rec.params["reproducible"] is True and rec.params["stream"] == 0
    assert "seed" not in rec.params and "rng" not in rec.params


def test_place_facility_is_bounded_range_in_zcdp(x: np.ndarray) -> None:
    s = Session(x, budget=Budget.zcdp(1.0), reproducible_seed=5)
    loc = s.place_facility(epsilon=2.0, domain=DOMAIN)
    mech = dpfair.facility.DPExpMed(2.0, DOMAIN)
    assert loc == mech.sample(x, rng=stream(5))
    rec = s.records[-1]
    assert rec.cost == mech.privacy  # pure ε in its own measure
    assert rec.charged.rho == pytest.approx(mech.privacy_zcdp.rho)  # ε²/8 = 0.5
    assert s.spent.rho == pytest.approx(0.5)


def test_fit_fair_classifier_charges_privacy_spent(fair_frame: pd.DataFrame) -> None:
    s = Session(fair_frame, budget=Budget.approx(3.0, 1e-5), reproducible_seed=0)
    clf = s.fit_fair_classifier(**FAIR)
    assert isinstance(clf, CDPFairClassifier)
    ref = CDPFairClassifier(epsilon=1.0, delta=1e-6, alpha=0.1,
                            feature_bounds=FAIR["feature_bounds"], random_state=stream(0))
    ref.fit(fair_frame[["x1", "x2"]].to_numpy(), fair_frame["y"].to_numpy(),
            sensitive_features=fair_frame["a"].to_numpy())
    np.testing.assert_array_equal(clf.tau_, ref.tau_)
    rec = s.records[-1]
    assert rec.cost == clf.privacy_spent_
    assert s.spent.epsilon == clf.privacy_spent_.epsilon
    assert s.spent.delta == clf.privacy_spent_.delta


# ------------------------------------------------------------------ refusal
def test_refusal_costs_no_compute_releases_and_charges_nothing(x: np.ndarray) -> None:
    src = CountingSource(x)
    s = Session(src, budget=Budget.zcdp(1.0))
    s.median_ci(rho=0.75, bounds=BOUNDS)
    assert src.reads == 1
    before = (s.spent, list(s.records))
    with pytest.raises(BudgetExceededError, match="remains") as err:
        s.median_ci(rho=0.3, bounds=BOUNDS)
    assert "0.3-zCDP" in str(err.value)
    with pytest.raises(BudgetExceededError):
        s.place_facility(epsilon=2.0, domain=DOMAIN)  # 0.5 > 0.25
    assert src.reads == 1  # neither refused request read the data
    assert (s.spent, list(s.records)) == before
    s.place_facility(epsilon=1.0, domain=DOMAIN)  # 0.125 fits
    assert len(s.records) == 2


def test_charge_refused_after_compute_returns_nothing(tmp_path: Path, x: np.ndarray) -> None:
    """Another process spends the shared ledger while this release computes: the charge
    (re-checked under the lock) refuses it and the result never leaves the session."""
    data = tmp_path / "d.csv"
    pd.DataFrame({"x": x}).to_csv(data, index=False)
    path = tmp_path / "l.jsonl"
    s = Session(data, budget=Budget.zcdp(1.0), ledger=path)
    other = LedgerFile.open(path)
    original = s.data.column

    def racing_read(name: Hashable) -> np.ndarray:
        other.charge(Budget.zcdp(0.8), label="other process")
        return original(name)

    s.data.column = racing_read  # type: ignore[method-assign]
    with pytest.raises(BudgetExceededError, match="nothing was released"):
        s.median_ci("x", rho=0.5, bounds=BOUNDS)
    assert [r.label for r in LedgerFile.open(path).records] == ["other process"]


def test_uncertified_warning_is_released_only_after_the_charge(
    tmp_path: Path, fair_frame: pd.DataFrame
) -> None:
    """Whether a fit is certified depends on the data: a fit refused at the charge must not
    leak it through an UncertifiedFairnessWarning; a charged fit issues it afterwards."""
    import warnings

    from dpfair import UncertifiedFairnessWarning

    data = tmp_path / "fair.csv"
    fair_frame.to_csv(data, index=False)
    path = tmp_path / "l.jsonl"
    request = {**FAIR, "alpha": 0.02}  # far too small to certify at n = 2000, eps = 1
    s = Session(data, budget=Budget.approx(1.5, 1e-5), ledger=path)
    other = LedgerFile.open(path)
    original = s.data.columns

    def racing_read(names):  # type: ignore[no-untyped-def]
        other.charge(Budget.approx(1.0, 0.0), label="other process")
        return original(names)

    s.data.columns = racing_read  # type: ignore[method-assign]
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with pytest.raises(BudgetExceededError, match="nothing was released"):
            s.fit_fair_classifier(**request)
    assert not [w for w in seen if issubclass(w.category, UncertifiedFairnessWarning)]
    s.data.columns = original  # type: ignore[method-assign]
    s2 = Session(fair_frame, budget=Budget.approx(3.0, 1e-5))
    with pytest.warns(UncertifiedFairnessWarning):
        clf = s2.fit_fair_classifier(**request)
    assert clf.certified_ is False and len(s2.records) == 1


def test_incompatible_measures_refused_before_compute(x: np.ndarray,
                                                      fair_frame: pd.DataFrame) -> None:
    s = Session(fair_frame, budget=Budget.zcdp(5.0))
    with pytest.raises(IncompatibleBudgetError, match="no zCDP equivalent"):
        s.fit_fair_classifier(**FAIR)
    assert s.records == []
    src = CountingSource(x)
    approx = Session(src, budget=Budget.approx(3.0, 1e-5))
    with pytest.raises(IncompatibleBudgetError, match="convert_delta"):
        approx.median_ci(rho=0.1, bounds=BOUNDS)
    pure = Session(src, budget=Budget.pure(3.0))
    with pytest.raises(IncompatibleBudgetError):
        pure.median_ci(rho=0.1, bounds=BOUNDS)
    assert src.reads == 0 and approx.records == [] and pure.records == []
    pure.place_facility(epsilon=1.0, domain=DOMAIN)
    assert pure.spent.epsilon == 1.0


def test_mixed_measures_follow_the_table(x: np.ndarray, fair_frame: pd.DataFrame) -> None:
    frame = fair_frame.assign(v=np.resize(x, len(fair_frame)))
    s = Session(frame, budget=Budget.approx(4.0, 1e-5), convert_delta=1e-7)
    med = s.median_ci("v", rho=0.05, bounds=BOUNDS, method="cdf")
    s.place_facility("v", epsilon=0.5, domain=DOMAIN)
    clf = s.fit_fair_classifier(**FAIR)
    eps_med = zcdp_to_approx_epsilon(med.privacy.rho, 1e-7)
    charged = [r.charged for r in s.records]
    assert charged[0] == cost_in_measure(med.privacy, s.budget, convert_delta=1e-7)
    assert charged[0].epsilon == pytest.approx(eps_med) and charged[0].delta == 1e-7
    assert charged[1].epsilon == 0.5 and charged[1].delta == 0.0  # pure ε: ε adds
    assert s.spent.epsilon == pytest.approx(eps_med + 0.5 + clf.privacy_spent_.epsilon)
    assert s.spent.delta == pytest.approx(1e-7 + clf.privacy_spent_.delta)


def test_zcdp_session_composes_rho_and_bounded_range(x: np.ndarray) -> None:
    s = Session({"v": x}, budget=Budget.zcdp(1.0))
    for _ in range(3):
        s.median_ci("v", rho=0.25, bounds=BOUNDS, method="cdf")
    s.place_facility("v", epsilon=1.0, domain=DOMAIN)  # 1/8
    assert s.spent.rho == pytest.approx(0.875)
    with pytest.raises(BudgetExceededError):
        s.median_ci("v", rho=0.25, bounds=BOUNDS)
    s.median_ci("v", rho=0.125, bounds=BOUNDS, method="cdf")  # exactly the rest
    assert s.remaining.rho == pytest.approx(0.0, abs=1e-12)


# ------------------------------------------------------------------ bad input
@pytest.mark.parametrize("bad", [
    Budget("zcdp", rho=math.nan), Budget("zcdp", rho=-1.0), Budget("approx", epsilon=1.0,
                                                                   delta=math.nan),
    Budget("pure", epsilon=math.inf), Budget.zcdp(0.0), "1.0", 1.0,
])
def test_bad_budgets(x: np.ndarray, bad: Any) -> None:
    with pytest.raises(InvalidParameterError, match="budget"):
        Session(x, budget=bad)


def test_budget_constructors_refuse_nan_and_negative() -> None:
    for bad in (math.nan, -0.5):
        with pytest.raises(InvalidParameterError):
            Budget.zcdp(bad)
        with pytest.raises(InvalidParameterError):
            Budget.approx(bad, 1e-6)


def test_missing_budget(x: np.ndarray) -> None:
    with pytest.raises(InvalidParameterError, match="total budget"):
        Session(x)


@pytest.mark.parametrize("rho", [math.nan, -0.1, 0.0])
def test_bad_release_parameters_charge_nothing(x: np.ndarray, rho: float) -> None:
    s = Session(x, budget=Budget.zcdp(1.0))
    with pytest.raises(InvalidParameterError, match="rho"):
        s.median_ci(rho=rho, bounds=BOUNDS)
    with pytest.raises(InvalidParameterError, match="epsilon"):
        s.place_facility(epsilon=rho, domain=DOMAIN)
    assert s.records == [] and s.spent.rho == 0.0


def test_a_failure_on_the_data_is_charged_and_names_no_value() -> None:
    """A data-dependent error is a release (attack review of issue 11): its message must
    not name rows, values or counts, and probing by errors must cost budget."""
    s = Session({"v": np.array([1.0, np.nan, 3.0] * 50)}, budget=Budget.zcdp(1.0))
    with pytest.raises(InvalidDataError) as err:
        s.median_ci("v", rho=0.1, bounds=BOUNDS)
    msg = str(err.value)
    assert "withheld" in msg and "nan" not in msg.lower() and "index" not in msg
    # nothing chained: the original is emptied in place, not hidden on __context__
    assert err.value.__cause__ is None and err.value.__context__ is None
    assert s.spent.rho == pytest.approx(0.1)
    assert s.records[-1].label == "median_ci (failed on the data)"


def test_out_of_domain_locations_are_clamped_not_reported() -> None:
    """Before: ``place_facility`` refused out-of-domain data naming the first such value,
    so repeated free calls recovered max(x) by bisection. Now the values are clamped."""
    x = np.random.default_rng(0).uniform(0.0, 0.8, 1000)
    s = Session({"v": x}, budget=Budget.pure(10.0))
    loc = s.place_facility("v", epsilon=1.0, domain=(0.0, 0.2))
    assert 0.0 <= loc <= 0.2
    assert s.spent.epsilon == pytest.approx(1.0)


@pytest.mark.filterwarnings("ignore::dpfair.UncertifiedFairnessWarning")
def test_out_of_box_features_are_clamped_in_a_session(fair_frame: pd.DataFrame) -> None:
    frame = fair_frame.copy()
    frame.loc[:4, "x1"] = 7.5  # outside the public box [0, 1]
    s = Session(frame, budget=Budget.approx(2.0, 1e-5))
    clf = s.fit_fair_classifier(**FAIR)  # clamped, no refusal
    assert clf.privacy_spent_.epsilon == pytest.approx(1.0)
    s2 = Session(frame, budget=Budget.approx(2.0, 1e-5))
    with pytest.raises(InvalidDataError) as err:
        s2.fit_fair_classifier(**FAIR, clip=False)
    assert "7.5" not in str(err.value) and "withheld" in str(err.value)
    assert s2.spent.epsilon == pytest.approx(1.0)


def test_columns_and_sources(tmp_path: Path, x: np.ndarray) -> None:
    two = np.column_stack([x, x + 1])
    s = Session(two, budget=Budget.zcdp(1.0), reproducible_seed=2)
    with pytest.raises(InvalidParameterError, match="2 columns"):
        s.median_ci(rho=0.1, bounds=BOUNDS)
    with pytest.raises(InvalidParameterError, match="Available columns"):
        s.median_ci("nope", rho=0.1, bounds=BOUNDS)
    a = s.median_ci(1, rho=0.1, bounds=BOUNDS, method="cdf")
    path = tmp_path / "d.parquet"
    pd.DataFrame({"v": x + 1}).to_parquet(path)
    b = Session(path, budget=Budget.zcdp(1.0), reproducible_seed=2).median_ci(
        "v", rho=0.1, bounds=BOUNDS, method="cdf")
    c = Session(str(path), budget=Budget.zcdp(1.0), reproducible_seed=2).median_ci(
        "v", rho=0.1, bounds=BOUNDS, method="cdf", aggregate="always")
    assert (a.low, a.high) == (b.low, b.high) == (c.low, c.high)
    with pytest.raises(InvalidParameterError, match="data"):
        Session(object(), budget=Budget.zcdp(1.0))
    with pytest.raises(InvalidParameterError, match="aggregate"):
        Session(path, budget=Budget.zcdp(1.0)).median_ci("v", rho=0.1, bounds=BOUNDS,
                                                         aggregate="sometimes")


# ------------------------------------------------------------------ file-backed sessions
def test_file_backed_session_shares_one_budget(tmp_path: Path, x: np.ndarray) -> None:
    data = tmp_path / "d.csv"
    pd.DataFrame({"v": x}).to_csv(data, index=False)
    path = tmp_path / "ledger.jsonl"
    first = Session(data, budget=Budget.zcdp(1.0), ledger=path)
    first.median_ci("v", rho=0.5, bounds=BOUNDS, method="cdf")
    second = Session(data, ledger=path)  # the cap comes from the file
    assert second.spent.rho == pytest.approx(0.5)
    second.median_ci("v", rho=0.5, bounds=BOUNDS, method="cdf")
    with pytest.raises(BudgetExceededError):
        first.median_ci("v", rho=0.01, bounds=BOUNDS, method="cdf")
    assert len(LedgerFile.open(path).records) == 2
    assert LedgerFile.open(path).header["data"]["path"] == str(data.resolve())
    with pytest.raises(InvalidParameterError, match="never changes"):
        Session(data, budget=Budget.zcdp(5.0), ledger=path)


def test_file_ledger_of_other_data_is_refused(tmp_path: Path, x: np.ndarray) -> None:
    data, other = tmp_path / "d.csv", tmp_path / "e.csv"
    pd.DataFrame({"v": x}).to_csv(data, index=False)
    pd.DataFrame({"v": x[:-1]}).to_csv(other, index=False)
    path = tmp_path / "ledger.jsonl"
    LedgerFile.create(path, Budget.zcdp(1.0), data=data)
    with pytest.raises(LedgerError, match="bound to"):
        Session(other, ledger=path)
    with pytest.raises(LedgerError, match="bound to"):
        Session(x, ledger=path)  # in-memory data cannot be checked against the binding
    s = Session(data, ledger=path)
    data.write_text("v\n1\n2\n3\n")  # the file changed after the session was opened
    with pytest.raises(LedgerError, match="bound to"):
        s.median_ci("v", rho=0.1, bounds=BOUNDS)
    assert LedgerFile.open(path).records == []


def test_corrupt_ledger_file_is_refused(tmp_path: Path, x: np.ndarray) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text("this is not a ledger\n")
    with pytest.raises(LedgerError, match="not"):
        Session(x, ledger=path)
    assert path.read_text() == "this is not a ledger\n"


# ------------------------------------------------------------------ many releases, threads
def test_many_releases_never_pass_the_cap(x: np.ndarray) -> None:
    s = Session({"v": x[:400]}, budget=Budget.zcdp(1.0))
    released = 0
    for _ in range(100):
        try:
            s.median_ci("v", rho=0.05, bounds=BOUNDS, method="cdf")
        except BudgetExceededError:
            continue
        released += 1
    assert released == 20
    assert s.spent.rho <= 1.0 * (1 + 1e-9)
    assert len(s.records) == 20
    for _ in range(10):  # ε = 0.4: 0.02 each in zCDP, and nothing is left
        with pytest.raises(BudgetExceededError):
            s.place_facility("v", epsilon=0.4, domain=DOMAIN)


def test_threads_sharing_a_session_never_pass_the_cap(x: np.ndarray) -> None:
    from concurrent.futures import ThreadPoolExecutor

    s = Session({"v": x}, budget=Budget.zcdp(1.0))

    def one(_: int) -> bool:
        try:
            s.median_ci("v", rho=0.3, bounds=BOUNDS, method="cdf")
        except BudgetExceededError:
            return False
        return True

    with ThreadPoolExecutor(8) as pool:
        outcomes = list(pool.map(one, range(8)))
    assert sum(outcomes) == 3 and len(s.records) == 3
    assert s.spent.rho == pytest.approx(0.9)


def test_fair_classifier_from_a_file_out_of_core(tmp_path: Path,
                                                 fair_frame: pd.DataFrame) -> None:
    from dpfair.fairclass import fit_cdp_fair_from_file

    path = tmp_path / "train.parquet"
    fair_frame.to_parquet(path, index=False)
    s = Session(path, budget=Budget.approx(3.0, 1e-5), reproducible_seed=4)
    clf = s.fit_fair_classifier(**FAIR, aggregate="always")
    ref = fit_cdp_fair_from_file(path, **FAIR, random_state=stream(4))
    np.testing.assert_array_equal(clf.tau_, ref.tau_)
    assert s.records[-1].params["aggregated"] is True
    assert s.records[-1].cost == clf.privacy_spent_
    with pytest.raises(InvalidParameterError, match="unknown option"):
        s.fit_fair_classifier(**FAIR, bandwith=0.1)
    assert len(s.records) == 1


def test_a_session_cannot_be_copied_to_fork_its_budget(x: np.ndarray) -> None:
    import copy
    import pickle

    s = Session(x, budget=Budget.zcdp(1.0))
    for dup in (pickle.dumps, copy.copy, copy.deepcopy):
        with pytest.raises(TypeError, match="same remaining budget"):
            dup(s)
