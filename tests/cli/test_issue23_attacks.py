"""Issue 23 attacks on the command line, each replayed through the real ``dpfair`` command.

* ``dpfair median-ci bad.csv --ledger L`` printed private values and exact counts in its
  errors (``Non-numeric entries include '4x1'``, ``1 of 3000 rows are missing``,
  ``fair-classify``: ``found other value(s) 7``) and charged nothing. Now every data
  command is a Session release: the error names the column and the kind of problem, and
  the planned cost is charged. ``dpfair inspect`` is the owner's explicit look.
* UTF-16 and Latin-1 CSVs, a 10⁶-column CSV and a malformed row crashed with a traceback
  (exit 1); an Excel workbook was not named. Now: read correctly, or one line, exit 2.
* ``--reps 10**12`` grew without bound; ``--jobs 10000`` started a worker per job.
* Typer usage errors were a multi-line box.

Each test fails on the code before issue 23 (``PYTHONPATH=/work/main/src``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from dpfair.cli import app
from dpfair.privacy import LedgerFile

runner = CliRunner()
ENTRY = "from dpfair.cli import main; main()"


def _run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "COLUMNS": "100"}
    return subprocess.run([sys.executable, "-c", ENTRY, *args], capture_output=True,
                          text=True, env=env, timeout=timeout)


def _one_line_exit_2(res: subprocess.CompletedProcess[str] | object) -> str:
    code = getattr(res, "returncode", getattr(res, "exit_code", None))
    stderr = str(res.stderr)
    assert code == 2, (code, stderr)
    assert "Traceback" not in stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dpfair: error:"), stderr
    return lines[0]


def _init_ledger(tmp_path: Path, data: Path, rho: str = "2") -> Path:
    led = tmp_path / "l.jsonl"
    res = runner.invoke(app, ["ledger", "init", str(led), "--data", str(data), "--rho", rho])
    assert res.exit_code == 0, res.output
    return led


def _init_approx_ledger(tmp_path: Path, data: Path) -> Path:
    led = tmp_path / "la.jsonl"
    res = runner.invoke(app, ["ledger", "init", str(led), "--data", str(data), "--epsilon",
                              "5", "--delta", "1e-4"])
    assert res.exit_code == 0, res.output
    return led


def _column_csv(path: Path, values: list[str]) -> Path:
    path.write_text("x\n" + "".join(f"{v}\n" for v in values))
    return path


def _values(n: int = 3000) -> list[str]:
    return [f"{v:.6f}" for v in np.random.default_rng(0).normal(10, 2, n)]


# ------------------------------------------------------------------ withheld and charged
@pytest.mark.parametrize(
    ("bad", "secrets"),
    [
        ("4x1", ["4x1", "include"]),           # a non-numeric entry
        ("", ["1 of 3000", "3000"]),           # a missing row: its count
        ("nan", ["1 NaN", "3000"]),            # a NaN: its count
    ],
    ids=["non-numeric", "missing", "nan"],
)
def test_median_ci_data_errors_are_withheld_and_charged(tmp_path: Path, bad: str,
                                                        secrets: list[str]) -> None:
    values = _values()
    values[1234] = bad
    data = _column_csv(tmp_path / "bad.csv", values)
    led = _init_ledger(tmp_path, data)
    res = runner.invoke(app, ["median-ci", str(data), "-c", "x", "--rho", "0.3", "--bounds",
                              "0", "20", "--ledger", str(led)])
    line = _one_line_exit_2(res)
    for secret in secrets:
        assert secret not in line, line
    assert "1234" not in line and "1235" not in line  # no row number
    assert "column='x'" in line and "withheld" in line
    recs = LedgerFile.open(led).records
    assert len(recs) == 1 and recs[0].charged.rho == pytest.approx(0.3)  # charged


def test_without_a_ledger_the_same_withheld_text(tmp_path: Path) -> None:
    values = _values()
    values[7] = "4x1"
    data = _column_csv(tmp_path / "bad.csv", values)
    res = runner.invoke(app, ["median-ci", str(data), "-c", "x", "--rho", "0.3", "--bounds",
                              "0", "20"])
    line = _one_line_exit_2(res)
    assert "4x1" not in line and "non-numeric" in line and "dpfair inspect" in line


def test_fair_classify_label_error_is_withheld_and_charged(tmp_path: Path) -> None:
    from dpfair.fairclass.datasets import simulate

    d = simulate(1500, rng=2)
    y = d.y.astype(int)
    y[99] = 7  # a label that is not 0/1
    rows = np.column_stack([d.X, d.A, y])
    train = tmp_path / "train.csv"
    np.savetxt(train, rows, delimiter=",", header="x1,x2,a,y", comments="", fmt="%.10g")
    test = tmp_path / "test.csv"
    np.savetxt(test, np.column_stack([d.X, d.A, d.y]), delimiter=",", header="x1,x2,a,y",
               comments="", fmt="%.10g")
    led = _init_approx_ledger(tmp_path, train)
    res = runner.invoke(app, ["fair-classify", str(train), str(test), "--target", "y",
                              "--sensitive", "a", "--features", "x1", "x2", "--bounds", "0",
                              "1", "0", "1", "--epsilon", "1", "--delta", "1e-6", "--alpha",
                              "0.1", "--ledger", str(led)])
    line = _one_line_exit_2(res)
    assert "other value" not in line and " 7" not in line and "withheld" in line
    recs = LedgerFile.open(led).records
    assert len(recs) == 1 and recs[0].charged.epsilon == pytest.approx(1.0)


def test_inspect_shows_the_owner_the_bad_rows_and_says_it_is_not_a_release(
    tmp_path: Path,
) -> None:
    values = _values(50)
    values[3], values[9], values[20] = "4x1", "", "inf"
    data = _column_csv(tmp_path / "bad.csv", values)
    res = runner.invoke(app, ["inspect", str(data), "--column", "x", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["release"] is False and "NOT" in out["note"]
    assert [(r["row"], r["text"]) for r in out["bad_rows"]] == [(4, "4x1"), (10, ""),
                                                              (21, "inf")]
    assert (out["non_numeric"], out["missing"], out["non_finite"], out["rows"]) == (1, 1, 1, 50)
    assert "NOT A PRIVATE RELEASE" in res.stderr
    table = runner.invoke(app, ["inspect", str(data), "--column", "x"])
    assert table.exit_code == 0 and "NOT" in table.stdout and "'4x1'" in table.stdout


# ------------------------------------------------------------------ files, one line
def _utf8_text(n: int = 2000) -> str:
    rng = np.random.default_rng(5)
    names = ["Zoë", "Åsa", "Jürgen", "Noël"]
    return "name,age\n" + "".join(
        f"{names[i % 4]},{int(a)}\n" for i, a in enumerate(rng.integers(18, 90, n))
    )


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "latin-1", "utf-8-sig"])
def test_utf16_and_latin1_files_are_read(tmp_path: Path, encoding: str) -> None:
    text = _utf8_text()
    ref = tmp_path / "ref.csv"
    ref.write_text(text, encoding="utf-8")
    data = tmp_path / f"{encoding}.csv"
    data.write_bytes(text.encode(encoding))
    args = ["-c", "age", "--rho", "0.5", "--bounds", "0", "120", "--json", "--seed", "4"]
    a = runner.invoke(app, ["median-ci", str(data), *args])
    b = runner.invoke(app, ["median-ci", str(ref), *args])
    assert a.exit_code == 0, a.output
    assert json.loads(a.stdout)["n"] == 2000
    assert json.loads(a.stdout)["low"] == json.loads(b.stdout)["low"]  # the same column


def test_utf16_training_file_for_fair_classify(tmp_path: Path) -> None:
    from dpfair.fairclass.datasets import simulate

    d = simulate(1200, rng=3)
    text = "x1,x2,a,y\n" + "".join(
        f"{r[0]:.8g},{r[1]:.8g},{int(r[2])},{int(r[3])}\n"
        for r in np.column_stack([d.X, d.A, d.y])
    )
    train = tmp_path / "train.csv"
    train.write_bytes(text.encode("utf-16"))
    test = tmp_path / "test.csv"
    test.write_text(text)
    res = runner.invoke(app, ["fair-classify", str(train), str(test), "--target", "y",
                              "--sensitive", "a", "--features", "x1", "x2", "--bounds", "0",
                              "1", "0", "1", "--epsilon", "1", "--delta", "1e-6", "--alpha",
                              "0.2", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["n_train"] == 1200


def test_an_excel_workbook_is_named(tmp_path: Path) -> None:
    book = tmp_path / "export.xlsx"
    with zipfile.ZipFile(book, "w") as z:
        z.writestr("[Content_Types].xml", "<Types/>")
        z.writestr("xl/workbook.xml", "<workbook/>")
    line = _one_line_exit_2(_run("median-ci", str(book), "-c", "age", "--rho", "0.5",
                                 "--bounds", "0", "120"))
    assert "Excel" in line and "CSV" in line


def test_a_million_columns_is_one_line(tmp_path: Path) -> None:
    wide = tmp_path / "wide.csv"
    n = 10**6
    wide.write_text(",".join(f"c{i}" for i in range(n)) + "\n" + ",".join("1" * n) + "\n")
    line = _one_line_exit_2(_run("median-ci", str(wide), "-c", "c0", "--rho", "0.5",
                                 "--bounds", "0", "2", timeout=300))
    assert "c1,c2" not in line and len(line) < 600


def test_a_malformed_row_is_one_line_without_its_content(tmp_path: Path) -> None:
    values = [f"{v},{v}" for v in _values(5000)]
    values[4000] = "5.5,6.5,SECRET"  # beyond the sniffer's sample
    data = tmp_path / "m.csv"
    data.write_text("x,y\n" + "\n".join(values) + "\n")
    line = _one_line_exit_2(_run("median-ci", str(data), "-c", "x", "--rho", "0.5",
                                 "--bounds", "0", "20"))
    assert "SECRET" not in line and "4001" not in line and "4002" not in line


def test_typer_usage_errors_are_one_line() -> None:
    for args in (["median-ci"], ["median-ci", "x.csv", "--rho", "abc"], ["no-such-command"],
                 ["median-ci", "x.csv", "--column", "a", "--rho", "1", "--bounds", "0"]):
        line = _one_line_exit_2(_run(*args))
        assert "--help" in line


# ------------------------------------------------------------------ bounded resources
def test_reps_times_cells_above_the_public_limit_is_refused_at_once(tmp_path: Path) -> None:
    try:
        res = _run("reproduce", "median-smoke", "--reps", str(10**12), "--out",
                   str(tmp_path / "store"), timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("--reps 10**12 was not refused before the run started")
    line = _one_line_exit_2(res)
    assert "limit" in line
    assert not (tmp_path / "store").exists() or not any((tmp_path / "store").iterdir())


def test_jobs_are_clamped_to_the_cpus(tmp_path: Path) -> None:
    res = _run("reproduce", "median-smoke", "--reps", "2", "--jobs", "10000", "--json",
               "--out", str(tmp_path / "store"), timeout=300)
    assert res.returncode == 0, res.stderr
    jobs = json.loads(res.stdout)["jobs"]
    assert 1 <= jobs <= (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                         else os.cpu_count() or 1)


# ------------------------------------------------------------------ an FDP site's round
def test_fdp_site_round_data_error_is_withheld_and_charged(tmp_path: Path) -> None:
    """A site's round is a release on its data: a bad label is charged, not quoted."""
    from dpfair.fairclass.datasets import simulate
    from dpfair.privacy import Budget

    n, eps, delta = 1200, 2.0, 1e-6
    d = simulate(n, rng=8)
    y = d.y.astype(int)
    y[17] = 7
    data = tmp_path / "h1.csv"
    np.savetxt(data, np.column_stack([d.X, d.A, y]), delimiter=",", header="x1,x2,a,y",
               comments="", fmt="%.12g")
    for party in ("centre", "h1"):
        assert runner.invoke(app, ["fdp", "keygen", "--out", str(tmp_path / party)]).exit_code == 0
    setup = tmp_path / "setup.json"
    res = runner.invoke(app, ["fdp", "centre", "setup", "--key", str(tmp_path / "centre.key"),
                              "--site", f"h1:{n}:{eps}:{delta}", "--site-key",
                              f"h1={tmp_path / 'h1.pub'}", "--bounds", "0", "--bounds", "1",
                              "--bounds", "0", "--bounds", "1", "--alpha", "0.2", "--out",
                              str(setup)])
    assert res.exit_code == 0, res.output
    led = tmp_path / "h1.fdp-ledger"
    LedgerFile.create(led, Budget.approx(3 * eps, 3 * delta), data=data)
    res = runner.invoke(app, ["fdp", "site", "round1", str(data), "--setup", str(setup),
                              "--site-id", "h1", "--key", str(tmp_path / "h1.key"),
                              "--centre-key", str(tmp_path / "centre.pub"), "--ledger",
                              str(led), "--features", "x1,x2", "--target", "y", "--sensitive",
                              "a", "--state", str(tmp_path / "st.json"), "--out",
                              str(tmp_path / "r1.json")])
    line = _one_line_exit_2(res)
    assert "other value" not in line and " 7" not in line and "withheld" in line
    assert not (tmp_path / "r1.json").exists()
    recs = LedgerFile.open(led).records
    assert len(recs) == 1 and recs[0].charged.epsilon == pytest.approx(eps)  # the round


def test_inspect_lists_a_malformed_line(tmp_path: Path) -> None:
    data = tmp_path / "m.csv"
    data.write_text("x,y\n" + "".join(f"{i},{i}\n" for i in range(3000)) + "5,6,7\n")
    res = runner.invoke(app, ["inspect", str(data), "--column", "x", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["malformed"] == 1 and out["rows"] == 3000
    assert out["bad_rows"] == [{"row": 3001, "text": "5,6,7",
                                "problem": "malformed line (too many columns)"}]


def test_a_file_whose_layout_fails_is_charged_under_a_ledger(tmp_path: Path) -> None:
    """The sniffer reads rows: a layout failure at opening is a release like any other."""
    data = tmp_path / "m.csv"
    data.write_text("x,y\n" + "".join(f"{i},{i}\n" for i in range(3000)) + "5,6,SECRET\n")
    led = _init_ledger(tmp_path, data)
    res = runner.invoke(app, ["median-ci", str(data), "-c", "x", "--rho", "0.25", "--bounds",
                              "0", "3000", "--ledger", str(led)])
    line = _one_line_exit_2(res)
    assert "SECRET" not in line and "3002" not in line and "withheld" in line
    recs = LedgerFile.open(led).records
    assert len(recs) == 1 and recs[0].charged.rho == pytest.approx(0.25)
