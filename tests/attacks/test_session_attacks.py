"""Attacks on ``dpfair.Session``: caller randomness, failures inside a release, what an
exception carries, warnings as errors, and a data file changed under a release
(issue 23, items 3 and 4)."""

from __future__ import annotations

import traceback
import warnings
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

import dpfair
from dpfair import BudgetExceededError, InvalidDataError, InvalidParameterError
from dpfair.privacy import Budget, LedgerFile
from tests.attacks._helpers import write_column


def _data(n: int = 300, seed: int = 0) -> np.ndarray:
    return np.clip(np.random.default_rng(seed).normal(50.0, 10.0, n), 1.0, 99.0)


class _SpyGenerator(np.random.Generator):
    """A Generator subclass that records (and could abort on) every call it sees."""

    calls: ClassVar[list[str]] = []

    def __init__(self) -> None:
        super().__init__(np.random.PCG64(0))

    def __getattribute__(self, name: str) -> Any:
        if not name.startswith("_") and name not in ("calls", "bit_generator"):
            type(self).calls.append(name)
        return super().__getattribute__(name)


class _Index:
    def __index__(self) -> int:
        return 7

    def __int__(self) -> int:
        return 7


def _bad_rngs() -> list[Any]:
    return [7, np.int64(7), True, _Index(), np.random.SeedSequence(7),
            np.random.RandomState(7), np.random.default_rng(7), _SpyGenerator(),
            np.random.PCG64(7)]


RELEASES = {
    "median_ci": lambda s, r: s.median_ci(rho=0.1, bounds=(0.0, 100.0), rng=r),
    "place_facility": lambda s, r: s.place_facility(epsilon=0.5, domain=(0.0, 100.0), rng=r),
}


@pytest.mark.parametrize("release", sorted(RELEASES))
@pytest.mark.parametrize("rng", _bad_rngs(), ids=lambda r: type(r).__name__)
def test_caller_randomness_is_refused_before_the_data(release: str, rng: Any) -> None:
    _SpyGenerator.calls = []
    s = dpfair.Session(_data(), budget=Budget.zcdp(1.0))
    with pytest.raises(InvalidParameterError, match="reproducible_seed"):
        RELEASES[release](s, rng)
    assert s.spent.rho == 0.0 and not s.records
    assert _SpyGenerator.calls == []


def _fair_frame(n: int = 400) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    a = rng.integers(0, 2, n)
    x = rng.uniform(0, 1, n)
    y = (rng.uniform(0, 1, n) < 0.3 + 0.4 * x).astype(float)
    return {"x": x, "y": y, "a": a.astype(float)}


@pytest.mark.parametrize("rng", [7, np.random.default_rng(7), _SpyGenerator(),
                                 np.random.SeedSequence(7)], ids=lambda r: type(r).__name__)
def test_fit_fair_classifier_refuses_random_state(rng: Any) -> None:
    s = dpfair.Session(_fair_frame(), budget=Budget.approx(2.0, 1e-5))
    with pytest.raises(InvalidParameterError, match="reproducible_seed"):
        s.fit_fair_classifier(features=["x"], target="y", sensitive="a", epsilon=1.0,
                              delta=1e-6, alpha=0.1, feature_bounds=[(0.0, 1.0)],
                              random_state=rng)
    assert s.records == []


@pytest.mark.parametrize("rng", [7, np.random.SeedSequence(7), _SpyGenerator()],
                         ids=lambda r: type(r).__name__)
def test_quantile_ci_refuses_caller_randomness(rng: Any) -> None:
    s = dpfair.Session(_data(), budget=Budget.zcdp(1.0))
    with pytest.raises(InvalidParameterError):
        s.quantile_ci(q=0.5, rho=0.1, bounds=(0.0, 100.0), rng=rng)
    assert s.records == []


def test_quantile_ci_seeded_twice_is_a_fixed_function_of_the_data() -> None:
    """The concrete consequence of the break above (records today's behaviour): the same
    interval twice, each charged as a private release and recorded as not reproducible."""
    s = dpfair.Session(_data(), budget=Budget.zcdp(1.0))
    try:
        a = s.quantile_ci(q=0.5, rho=0.1, bounds=(0.0, 100.0), rng=7)
    except InvalidParameterError:
        return  # fixed
    b = s.quantile_ci(q=0.5, rho=0.1, bounds=(0.0, 100.0), rng=7)
    assert (a.low, a.high) == (b.low, b.high)


def _nan_data() -> np.ndarray:
    x = _data()
    x[123] = np.nan
    return x


def test_a_withheld_error_carries_no_detail_in_its_chain() -> None:
    s = dpfair.Session(_nan_data(), budget=Budget.zcdp(1.0))
    with pytest.raises(InvalidDataError) as info:
        s.median_ci(rho=0.1, bounds=(0.0, 100.0))
    assert s.spent.rho == pytest.approx(0.1)
    chain: list[BaseException] = []
    e: BaseException | None = info.value
    while e is not None:
        chain.append(e)
        e = e.__cause__ or e.__context__
    text = " | ".join(str(c) for c in chain)
    assert "123" not in text and "1 non-finite" not in text, text


def test_the_withheld_message_itself_names_no_value_row_or_count() -> None:
    s = dpfair.Session(_nan_data(), budget=Budget.zcdp(1.0))
    with pytest.raises(InvalidDataError) as info:
        s.median_ci(rho=0.1, bounds=(0.0, 100.0))
    msg = str(info.value)
    assert "123" not in msg and "index" not in msg and "1 non-finite" not in msg
    assert "".join(traceback.format_exception_only(info.value)).count("123") == 0


class _Column:
    """A column object whose conversion runs the caller's code inside the release."""

    def __init__(self, values: np.ndarray, action: Any) -> None:
        self._values, self._action = values, action
        self.shape = values.shape

    def to_numpy(self, dtype: Any = None, na_value: Any = None) -> np.ndarray:
        self._action()
        return self._values.astype(dtype)


def _interrupt() -> None:
    raise KeyboardInterrupt


def _raise_own() -> None:
    raise RuntimeError("callback")


@pytest.mark.parametrize("action", [_interrupt, _raise_own], ids=["KeyboardInterrupt",
                                                                   "RuntimeError"])
def test_an_exception_from_a_callback_inside_the_release_is_charged(action: Any) -> None:
    s = dpfair.Session({"x": _Column(_data(), action)}, budget=Budget.zcdp(1.0))
    with pytest.raises((KeyboardInterrupt, RuntimeError)):
        s.median_ci("x", rho=0.25, bounds=(0.0, 100.0))
    assert s.spent.rho == pytest.approx(0.25)
    with pytest.raises((KeyboardInterrupt, RuntimeError)):
        s.place_facility("x", epsilon=1.0, domain=(0.0, 100.0))
    assert s.spent.rho == pytest.approx(0.25 + 1.0 / 8)


def test_a_refused_failure_charge_does_not_chain_the_raw_error(tmp_path: Path) -> None:
    led_path = tmp_path / "mem.ledger"
    LedgerFile.create(led_path, Budget.zcdp(1.0))
    other = LedgerFile.open(led_path)  # "another process" on the same ledger

    def drain() -> None:
        other.charge(Budget.zcdp(other.remaining.rho or 0.0), label="drain")

    s = dpfair.Session({"x": _Column(_nan_data(), drain)}, ledger=led_path)
    with pytest.raises(BaseException) as info:
        s.median_ci("x", rho=0.25, bounds=(0.0, 100.0))
    assert isinstance(info.value, BudgetExceededError)
    chain = []
    e: BaseException | None = info.value
    while e is not None:
        chain.append(str(e))
        e = e.__cause__ or e.__context__
    assert not any("123" in c for c in chain), chain


def test_warnings_as_errors_in_a_reproducible_session_charge_nothing_before_the_data(
) -> None:
    """The reproduction warning is issued before the data are touched: an error from it
    is not a release (nothing charged), and with 'ignore' the release is charged."""
    s = dpfair.Session(_data(), budget=Budget.zcdp(1.0), reproducible_seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(dpfair.session.ReproducibleSeedWarning):
            s.median_ci(rho=0.1, bounds=(0.0, 100.0))
    assert s.records == []


@pytest.mark.parametrize("release", ["median_ci", "place_facility", "quantile_ci",
                                     "fit_fair_classifier"])
def test_a_warning_turned_into_an_error_inside_a_release_is_charged(
        monkeypatch: pytest.MonkeyPatch, release: str) -> None:
    """A warning raised while the data are read (here: injected into the column read, as
    numpy would on overflow) becomes an exception under simplefilter('error'): charged."""
    from dpfair.session import _sources

    real = _sources._to_float

    def warn_then_read(name: Any, values: Any) -> np.ndarray:
        warnings.warn("overflow encountered", RuntimeWarning, stacklevel=2)
        return real(name, values)

    monkeypatch.setattr(_sources, "_to_float", warn_then_read)
    frame = _fair_frame()
    frame["x"] = frame["x"] * 100.0
    s = dpfair.Session(frame, budget=Budget.approx(5.0, 1e-4))
    calls = {
        "median_ci": lambda: s.median_ci("x", rho=0.1, bounds=(0.0, 100.0)),
        "place_facility": lambda: s.place_facility("x", epsilon=0.5, domain=(0.0, 100.0)),
        "quantile_ci": lambda: s.quantile_ci("x", 0.5, rho=0.1, bounds=(0.0, 100.0)),
        "fit_fair_classifier": lambda: s.fit_fair_classifier(
            features=["x"], target="y", sensitive="a", epsilon=1.0, delta=1e-6, alpha=0.1,
            feature_bounds=[(0.0, 100.0)]),
    }
    s2 = dpfair.Session(frame, budget=Budget.approx(5.0, 1e-4), convert_delta=1e-6)
    if release in ("median_ci", "quantile_ci"):
        s = s2
        calls["median_ci"] = lambda: s.median_ci("x", rho=0.1, bounds=(0.0, 100.0))
        calls["quantile_ci"] = lambda: s.quantile_ci("x", 0.5, rho=0.1, bounds=(0.0, 100.0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(RuntimeWarning):
            calls[release]()
    assert len(s.records) == 1 and s.records[0].params.get("failed_on_data") is True
    assert (s.spent.epsilon or 0.0) > 0.0


def test_a_data_file_replaced_after_the_binding_check_is_not_released(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dpfair.privacy import _journal

    data = tmp_path / "d.csv"
    write_column(data, n=300, seed=0)
    other = tmp_path / "other.csv"
    write_column(other, n=200, seed=1)
    led = tmp_path / "d.ledger"
    LedgerFile.create(led, Budget.zcdp(1.0), data=data)
    s = dpfair.Session(data, ledger=led)
    real = _journal.fingerprint_file

    def fingerprint_then_swap(path: Any, **kw: Any) -> str:
        fp = real(path, **kw)
        if Path(path).resolve() == data.resolve():
            data.write_bytes(other.read_bytes())  # the concurrent writer
        return fp

    monkeypatch.setattr(_journal, "fingerprint_file", fingerprint_then_swap)
    try:
        res = s.median_ci("x", rho=0.1, bounds=(0.0, 100.0), aggregate="never")
    except (dpfair.LedgerError, InvalidDataError):
        return
    assert res.n == 300, f"released n={res.n}: computed on the replaced file"


def test_an_unbound_ledger_file_is_refused_for_registered_data(tmp_path: Path) -> None:
    data = tmp_path / "d.csv"
    write_column(data)
    LedgerFile.create(tmp_path / "reg.ledger", Budget.zcdp(1.0), data=data)
    LedgerFile.create(tmp_path / "fresh.ledger", Budget.zcdp(1.0))
    with pytest.raises(dpfair.LedgerError):
        s = dpfair.Session(data, ledger=tmp_path / "fresh.ledger")
        s.median_ci("x", rho=0.5, bounds=(0.0, 100.0))


def test_a_malformed_row_in_a_session_file_is_charged(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    rows = [f"{v:.3f},{i % 2}" for i, v in enumerate(rng.uniform(1, 99, 500))]
    rows[250] += ",7"
    data = tmp_path / "d.csv"
    data.write_text("x,y\n" + "\n".join(rows) + "\n")
    s = dpfair.Session(data, budget=Budget.zcdp(1.0))
    with pytest.raises(InvalidDataError):
        s.median_ci("x", rho=0.25, bounds=(0.0, 100.0))
    assert s.spent.rho == pytest.approx(0.25)


def test_the_session_ledger_cannot_be_refunded_through_its_records() -> None:
    s = dpfair.Session(_data(), budget=Budget.zcdp(1.0))
    released = 0
    for _ in range(3):
        try:
            s.median_ci(rho=0.5, bounds=(0.0, 100.0))
            released += 1
        except BudgetExceededError:
            pass
        try:
            s.ledger.records.clear()  # type: ignore[union-attr]
        except (AttributeError, TypeError):
            pass
    assert released <= 2


def test_quantile_ci_follows_the_sessions_reproduction_mode() -> None:
    outs, streams = [], []
    for _ in range(2):
        s = dpfair.Session(_data(), budget=Budget.zcdp(1.0), reproducible_seed=3)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = s.quantile_ci(q=0.5, rho=0.1, bounds=(0.0, 100.0))
        outs.append((r.low, r.high))
        streams.append(s.records[-1].params.get("stream"))
    assert streams == [0, 0]
    assert outs[0] == outs[1]


def test_a_session_on_registered_data_uses_or_refuses_its_ledger(tmp_path: Path) -> None:
    data = tmp_path / "d.csv"
    write_column(data)
    reg = LedgerFile.create(tmp_path / "reg.ledger", Budget.zcdp(1.0), data=data)
    released = 0
    for _ in range(3):
        try:
            dpfair.Session(data, budget=Budget.zcdp(1.0)).median_ci(
                "x", rho=0.5, bounds=(0.0, 100.0))
            released += 1
        except (dpfair.LedgerError, BudgetExceededError, InvalidParameterError):
            pass
    assert released * 0.5 <= 1.0 and reg.spent.rho == pytest.approx(0.5 * released)
