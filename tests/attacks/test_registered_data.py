"""Non-private outputs on data that have a registered ledger (THREATS.md rules 1, 11)."""

from __future__ import annotations

from pathlib import Path

from tests.attacks._helpers import init_ledger, run, write_column


def _facility(data: Path, *extra: str | Path) -> tuple[int, str]:
    r = run("facility", data, "--column", "x", "--epsilon", "1", "--domain", "0", "100",
            "--report-metrics", *extra)
    return r.returncode, r.stdout + r.stderr


def test_report_metrics_is_refused_under_ledger(tmp_path: Path) -> None:
    data = tmp_path / "d.csv"
    write_column(data)
    led = tmp_path / "d.ledger"
    init_ledger(led, data)
    code, out = _facility(data, "--ledger", led)
    assert code == 2 and "SWDIFF" not in out.split("error")[0]


def test_report_metrics_is_refused_on_registered_data_without_ledger(tmp_path: Path) -> None:
    data = tmp_path / "d.csv"
    write_column(data)
    init_ledger(tmp_path / "d.ledger", data)
    code, _ = _facility(data)
    assert code == 2
