"""``dpfair quantile-ci``: a thin layer over ``Session.quantile_ci`` (simultaneous
intervals, JSON, public groups, one ledger charge per run, one-line errors)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import dpfair
from dpfair.cli import app
from dpfair.privacy import LedgerFile

runner = CliRunner()
QS = ("0.1", "0.5", "0.9")


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("qcli")
    rng = np.random.default_rng(5)
    x = rng.lognormal(np.log(1.5), 1.0, 3000)
    g = np.where(np.arange(x.size) % 3 == 0, "north", "south")
    p = root / "data.csv"
    rows = "".join(f"{float(v)!r},{r}\n" for v, r in zip(x, g, strict=True))
    p.write_text("income,region\n" + rows)
    return p


def _cmd(path: Path, *extra: str, column: str = "income") -> list[str]:
    return ["quantile-ci", str(path), "--column", column, "--q", *QS, "--rho", "0.5",
            "--bounds", "-5", "15", *extra]


def test_table_prints_simultaneous_intervals(data: Path) -> None:
    res = runner.invoke(app, _cmd(data, "--seed", "3"))
    assert res.exit_code == 0, res.output
    for q in QS:
        assert f"q={float(q):g} 0.95 CI" in res.stdout
    assert "simultaneous over 3 levels" in res.stdout
    assert "0.5-zCDP" in res.stdout


def test_json_matches_the_python_api(data: Path) -> None:
    res = runner.invoke(app, _cmd(data, "--seed", "3", "--json"))
    assert res.exit_code == 0, res.output
    payload = json.loads(res.stdout)
    ivs = payload["result"]["intervals"]
    assert [iv["q"] for iv in ivs] == [0.1, 0.5, 0.9]
    assert payload["privacy"]["rho"] == pytest.approx(0.5)
    # the session's first reproducible stream, on the column read from the file
    x = dpfair.data.read_column(data, "income")
    gen = np.random.default_rng(np.random.SeedSequence(3, spawn_key=(0,)))
    ref = dpfair.quantiles.confidence_intervals(x, [0.1, 0.5, 0.9], rho=0.5,
                                                bounds=(-5.0, 15.0), rng=gen)
    assert [(iv["low"], iv["high"]) for iv in ivs] == [(r.low, r.high) for r in ref.intervals]
    again = runner.invoke(app, _cmd(data, "--seed", "3", "--json"))
    assert json.loads(again.stdout)["result"] == payload["result"]


def test_groups_one_family_each(data: Path) -> None:
    res = runner.invoke(app, _cmd(data, "--by", "region", "--groups", "north", "south",
                                  "--seed", "1", "--json"))
    assert res.exit_code == 0, res.output
    payload = json.loads(res.stdout)
    assert list(payload["groups"]) == ["north", "south"]
    for fam in payload["groups"].values():
        assert len(fam["intervals"]) == 3
        assert all(iv["low"] < iv["high"] for iv in fam["intervals"])
    # parallel composition over the disjoint groups: rho once
    assert payload["privacy"]["rho"] == pytest.approx(0.5)
    assert payload["groups"]["north"]["intervals"][0]["n"] == 1000


def test_ledger_charged_once_for_all_levels(tmp_path: Path, data: Path) -> None:
    led = tmp_path / "budget.jsonl"
    init = runner.invoke(app, ["ledger", "init", str(led), "--data", str(data), "--rho", "1"])
    assert init.exit_code == 0, init.output
    res = runner.invoke(app, _cmd(data, "--ledger", str(led)))
    assert res.exit_code == 0, res.output
    records = LedgerFile.open(led).records
    assert [r.label for r in records] == ["quantile_ci"]
    assert records[0].charged.rho == pytest.approx(0.5)
    # a second run fits (0.5 + 0.5 = 1), a third is refused: one line, nothing printed
    assert runner.invoke(app, _cmd(data, "--ledger", str(led))).exit_code == 0
    refused = runner.invoke(app, _cmd(data, "--ledger", str(led)))
    assert refused.exit_code == 2 and refused.stdout == ""
    assert len(refused.stderr.strip().splitlines()) == 1
    assert len(LedgerFile.open(led).records) == 2


def test_bad_column_named_without_values(data: Path) -> None:
    res = runner.invoke(app, _cmd(data, column="incme"))
    assert res.exit_code == 2 and res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr
    assert "incme" in lines[0]
    x = dpfair.data.read_column(data, "income")
    assert not any(f"{v:.4g}" in lines[0] for v in x[:50])


def _bounded_warn_explicit(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Count re-issued warnings; fail fast instead of looping forever (the old hang)."""
    import warnings

    calls: list[object] = []
    real = warnings.warn_explicit

    def counting(*args: object, **kw: object) -> None:
        calls.append(args[0])
        if len(calls) > 50:
            raise AssertionError("warn_explicit called > 50 times: re-issue loop")
        real(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(warnings, "warn_explicit", counting)
    return calls


def test_release_context_reissues_other_warnings_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # A non-free warning raised during a release used to be re-issued INTO the list being
    # read, an endless loop (``quantile-ci --rho 1e6 --bounds 50 100`` ran > 60 s).
    import warnings

    from dpfair.cli._ledger import release_context

    calls = _bounded_warn_explicit(monkeypatch)
    with warnings.catch_warnings(record=True) as outer:
        warnings.simplefilter("always")
        with release_context(None):
            warnings.warn("something else", UserWarning, stacklevel=1)
    assert len(calls) == 1
    assert [str(w.message) for w in outer] == ["something else"]


def test_huge_rho_bounds_missing_the_data_finishes_and_warns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The reported case: ages with median ≈ 37, bounds 50..100, ρ = 10⁶.
    ages = np.random.default_rng(8).gamma(4.0, 5.0, 4000).round() + 17
    p = tmp_path / "ages.csv"
    p.write_text("age\n" + "".join(f"{int(v)}\n" for v in ages))
    calls = _bounded_warn_explicit(monkeypatch)
    res = runner.invoke(app, ["quantile-ci", str(p), "--column", "age", "--q", "0.5",
                              "--rho", "1e6", "--bounds", "50", "100", "--seed", "1"])
    assert res.exit_code == 0, res.output
    assert len(calls) == 0  # the free warnings are printed, not re-issued
    err = res.stderr
    assert "dpfair: warning: q=0.5: the lower end sits on a public bound" in err
    assert "the bounds may not contain the quantile" in err
    assert "little privacy is left" in err


def test_json_lists_the_free_warnings(tmp_path: Path) -> None:
    ages = np.random.default_rng(9).gamma(4.0, 5.0, 2000).round() + 17
    p = tmp_path / "ages.csv"
    p.write_text("age\n" + "".join(f"{int(v)}\n" for v in ages))
    res = runner.invoke(app, ["quantile-ci", str(p), "--column", "age", "--q", "0.5",
                              "--rho", "1e6", "--bounds", "50", "100", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert any("may not contain the quantile" in w for w in out["warnings"])
    assert any("little privacy" in w for w in out["warnings"])
