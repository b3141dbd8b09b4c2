"""``dpfair ledger`` and ``--ledger``: charged before anything is printed or written, refused
past the cap (exit 2, one line, nothing shown), shared safely by concurrent processes,
surviving a crash mid-write, bound to one data file.

Real processes where processes matter (concurrent ``dpfair median-ci`` runs through the
console entry point, a charge killed with SIGKILL); the other cases run the same Typer app
in process to keep the suite fast."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from dpfair import Session
from dpfair.cli import app
from dpfair.fairclass.datasets import simulate
from dpfair.privacy import Budget, LedgerFile, zcdp_to_approx_epsilon

SRC = Path(__file__).resolve().parents[2] / "src"
ENTRY = "from dpfair.cli import main; main()"
runner = CliRunner()


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")])
    return env


def _cli(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", ENTRY, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env=_env(),
    )


def _median(data: Path, ledger: Path, rho: str = "0.3", *extra: str) -> list[str]:
    return ["median-ci", str(data), "--column", "x", "--rho", rho, "--bounds", "0", "20",
            "--method", "cdf", "--ledger", str(ledger), *extra]


def _one_line_refusal(proc: subprocess.CompletedProcess[str] | Any) -> str:
    assert proc.returncode == 2 if hasattr(proc, "returncode") else proc.exit_code == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    return lines[0]


@pytest.fixture
def data(tmp_path: Path) -> Path:
    p = tmp_path / "data.csv"
    x = np.random.default_rng(0).normal(10.0, 2.0, 800)
    p.write_text("x\n" + "\n".join(f"{v:.6f}" for v in x) + "\n")
    return p


@pytest.fixture
def ledger(tmp_path: Path, data: Path) -> Path:
    path = tmp_path / "budget.jsonl"
    res = runner.invoke(app, ["ledger", "init", str(path), "--data", str(data), "--rho", "1.0"])
    assert res.exit_code == 0, res.output
    return path


# ------------------------------------------------------------------ the cap, in processes
def test_cap_refuses_the_fourth_release_and_prints_nothing(data: Path, ledger: Path) -> None:
    for k in range(3):
        proc = runner.invoke(app, _median(data, ledger, "0.3", "--json"))
        assert proc.exit_code == 0, proc.stderr
        out = json.loads(proc.stdout)
        assert out["ledger"]["entry"] == k + 1
        assert out["ledger"]["remaining"]["rho"] == pytest.approx(1.0 - 0.3 * (k + 1))
    before = ledger.read_bytes()
    line = _one_line_refusal(runner.invoke(app, _median(data, ledger, "0.3", "--json")))
    assert "0.3-zCDP" in line and "only 0.1-zCDP of 1-zCDP remains" in line
    assert ledger.read_bytes() == before  # nothing charged
    show = runner.invoke(app, ["ledger", "show", str(ledger), "--json"])
    summary = json.loads(show.stdout)
    assert len(summary["releases"]) == 3
    assert summary["remaining"]["rho"] == pytest.approx(0.1)
    table = runner.invoke(app, ["ledger", "show", str(ledger)])
    assert table.exit_code == 0 and "median_ci" in table.stdout and "0.1-zCDP" in table.stdout


def test_concurrent_processes_never_pass_the_cap(data: Path, ledger: Path) -> None:
    """Four real `dpfair median-ci --ledger` processes started together, 0.3 each on a cap
    of 1: exactly three are released, the fourth prints nothing and exits 2."""
    procs = [_cli(*_median(data, ledger, "0.3", "--json")) for _ in range(4)]
    results = [(p, *p.communicate(timeout=300)) for p in procs]
    ok = [r for r in results if r[0].returncode == 0]
    refused = [r for r in results if r[0].returncode == 2]
    assert len(ok) == 3 and len(refused) == 1, [(r[0].returncode, r[2]) for r in results]
    _, out, err = refused[0]
    assert out == "" and len(err.strip().splitlines()) == 1 and "remains" in err
    entries = sorted(json.loads(r[1])["ledger"]["entry"] for r in ok)
    assert entries == [1, 2, 3]
    led = LedgerFile.open(ledger)
    assert len(led.records) == 3 and led.spent.rho == pytest.approx(0.9)


def test_kill_minus_nine_mid_write_loses_no_entry(data: Path, ledger: Path) -> None:
    """A process killed (SIGKILL) halfway through writing its charge: the earlier entries
    survive, the torn line is ignored and cut by the next charge."""
    for _ in range(2):
        assert runner.invoke(app, _median(data, ledger, "0.2")).exit_code == 0
    before = ledger.read_bytes()
    crash = (
        "import os, signal, sys\n"
        "from dpfair.privacy import Budget, LedgerFile\n"
        "real = os.write\n"
        "def torn(fd, data):\n"
        "    real(fd, data[: len(data) // 2]); os.fsync(fd)\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "os.write = torn\n"
        "LedgerFile.open(sys.argv[1]).charge(Budget.zcdp(0.1), label='crash')\n"
    )
    proc = subprocess.run([sys.executable, "-c", crash, str(ledger)], env=_env(),
                          capture_output=True, timeout=120)
    assert proc.returncode == -9
    raw = ledger.read_bytes()
    assert raw.startswith(before) and len(raw) > len(before) and not raw.endswith(b"\n")
    led = LedgerFile.open(ledger)
    assert [r.label for r in led.records] == ["median_ci", "median_ci"]
    assert led.spent.rho == pytest.approx(0.4)
    show = runner.invoke(app, ["ledger", "show", str(ledger), "--json"])
    assert show.exit_code == 0 and len(json.loads(show.stdout)["releases"]) == 2
    proc2 = runner.invoke(app, _median(data, ledger, "0.3", "--json"))
    assert proc2.exit_code == 0, proc2.stderr
    after = ledger.read_bytes()
    assert after.startswith(before) and after.endswith(b"\n")
    assert [r.seq for r in LedgerFile.open(ledger).records] == [1, 2, 3]


# ------------------------------------------------------------------ binding and bad files
def test_ledger_of_another_data_file_is_refused(tmp_path: Path, data: Path,
                                                ledger: Path) -> None:
    other = tmp_path / "other.csv"
    other.write_text(data.read_text() + "11.0\n")
    before = ledger.read_bytes()
    line = _one_line_refusal(runner.invoke(app, _median(other, ledger)))
    assert "bound to" in line and str(data.resolve()) in line
    moved = tmp_path / "copy.csv"  # same bytes elsewhere: the same data set
    moved.write_bytes(data.read_bytes())
    assert runner.invoke(app, _median(moved, ledger)).exit_code == 0
    assert ledger.read_bytes().startswith(before)


@pytest.mark.parametrize("content, match", [
    (b"", "empty"),
    (b"not json at all\n", "not a dpfair ledger"),
    (b'{"format": "other"}\n', "not a dpfair ledger"),
    (b'{"format": "dpfair-ledger", "vers', "truncated"),
])
def test_bad_ledger_files_one_line_nothing_lost(tmp_path: Path, data: Path, content: bytes,
                                                match: str) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(content)
    res = runner.invoke(app, _median(data, bad))
    line = _one_line_refusal(res)
    assert match in line
    assert bad.read_bytes() == content
    res = runner.invoke(app, ["ledger", "show", str(bad)])
    assert res.exit_code == 2 and match in res.stderr


def test_unbound_ledger_is_refused_on_the_cli(tmp_path: Path, data: Path) -> None:
    unbound = tmp_path / "unbound.jsonl"
    LedgerFile.create(unbound, Budget.zcdp(1.0))  # e.g. a Session on in-memory data
    assert "not bound to a data file" in _one_line_refusal(
        runner.invoke(app, _median(data, unbound)))
    assert LedgerFile.open(unbound).records == []


def test_edited_entry_breaks_the_chain(data: Path, ledger: Path) -> None:
    assert runner.invoke(app, _median(data, ledger, "0.3")).exit_code == 0
    assert runner.invoke(app, _median(data, ledger, "0.3")).exit_code == 0
    lines = ledger.read_text().splitlines(keepends=True)
    lines[1] = lines[1].replace('"rho": 0.3', '"rho": 0.01')  # someone lowers a cost
    ledger.write_text("".join(lines))
    res = runner.invoke(app, _median(data, ledger, "0.3"))
    assert "hash chain" in _one_line_refusal(res)


def test_missing_ledger_and_init_errors(tmp_path: Path, data: Path, ledger: Path) -> None:
    res = runner.invoke(app, _median(data, tmp_path / "nope.jsonl"))
    assert "ledger init" in _one_line_refusal(res)
    before = ledger.read_bytes()
    for args in (["--rho", "1", "--epsilon", "1"], ["--rho", "nan"], ["--rho", "-1"],
                 ["--rho", "0"], [], ["--epsilon", "1", "--delta", "2"]):
        res = runner.invoke(app, ["ledger", "init", str(tmp_path / "new.jsonl"), "--data",
                                  str(data), *args])
        _one_line_refusal(res)
        assert not (tmp_path / "new.jsonl").exists()
    res = runner.invoke(app, ["ledger", "init", str(ledger), "--data", str(data), "--rho", "9"])
    assert "never overwritten" in _one_line_refusal(res)
    assert ledger.read_bytes() == before
    res = runner.invoke(app, ["ledger", "init", str(tmp_path / "n.jsonl"), "--data",
                              str(tmp_path / "missing.csv"), "--rho", "1"])
    _one_line_refusal(res)


# ------------------------------------------------------------------ measures
def test_facility_costs_eps_squared_over_eight_of_a_rho_ledger(data: Path, ledger: Path) -> None:
    args = ["facility", str(data), "--column", "x", "--epsilon", "2", "--domain", "-100",
            "100", "--ledger", str(ledger), "--json"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["ledger"]["charged"]["rho"] == pytest.approx(0.5)
    rec = LedgerFile.open(ledger).records[-1]
    assert rec.cost == Budget.pure(2.0, note=rec.cost.note) and rec.label == "place_facility"
    res = runner.invoke(app, [*args[:-1], "--epsilon", "2.1"])  # 0.55 > 0.5 left
    line = _one_line_refusal(res)
    assert "0.55125-zCDP" in line and "0.5-zCDP" in line


def test_mixing_measures_needs_convert_delta(tmp_path: Path, data: Path) -> None:
    plain = tmp_path / "plain.jsonl"
    conv = tmp_path / "conv.jsonl"
    other = tmp_path / "other.csv"  # one ledger per data set: the second on other bytes
    other.write_bytes(data.read_bytes() + b"10.0\n")
    assert runner.invoke(app, ["ledger", "init", str(plain), "--data", str(data),
                               "--epsilon", "3", "--delta", "1e-5"]).exit_code == 0
    assert runner.invoke(app, ["ledger", "init", str(conv), "--data", str(other), "--epsilon",
                               "3", "--delta", "1e-5", "--convert-delta", "1e-6"]).exit_code == 0
    line = _one_line_refusal(runner.invoke(app, _median(data, plain, "0.1")))
    assert "convert" in line
    assert LedgerFile.open(plain).records == []
    res = runner.invoke(app, _median(other, conv, "0.1", "--json"))
    assert res.exit_code == 0, res.stderr
    charged = json.loads(res.stdout)["ledger"]["charged"]
    assert charged["epsilon"] == pytest.approx(zcdp_to_approx_epsilon(0.1, 1e-6))
    assert charged["delta"] == 1e-6


@pytest.fixture
def fair_files(tmp_path: Path) -> tuple[Path, Path]:
    paths = []
    for name, seed in (("train.csv", 1), ("test.csv", 2)):
        d = simulate(1200, rng=seed)
        p = tmp_path / name
        rows = "\n".join(f"{a:.6f},{b:.6f},{y},{g}" for (a, b), y, g in zip(d.X, d.y, d.A,
                                                                             strict=True))
        p.write_text("x1,x2,y,a\n" + rows + "\n")
        paths.append(p)
    return paths[0], paths[1]


def test_fair_classify_refused_writes_no_model(tmp_path: Path,
                                               fair_files: tuple[Path, Path]) -> None:
    train, test = fair_files
    led = tmp_path / "fair.jsonl"
    assert runner.invoke(app, ["ledger", "init", str(led), "--data", str(train), "--epsilon",
                               "1.5", "--delta", "1e-5"]).exit_code == 0
    args = ["fair-classify", str(train), str(test), "--target", "y", "--sensitive", "a",
            "--features", "x1", "x2", "--bounds", "0", "1", "0", "1", "--epsilon", "1",
            "--delta", "1e-6", "--alpha", "0.1", "--ledger", str(led)]
    first = runner.invoke(app, [*args, "--json", "--save-model", str(tmp_path / "m1.json")])
    assert first.exit_code == 0, first.stderr
    out = json.loads(first.stdout)
    assert out["ledger"]["charged"]["epsilon"] == out["privacy_spent"]["epsilon"]
    assert (tmp_path / "m1.json").exists()
    line = _one_line_refusal(
        runner.invoke(app, [*args, "--save-model", str(tmp_path / "m2.json")]))
    assert "remains" in line
    assert not (tmp_path / "m2.json").exists()
    assert len(LedgerFile.open(led).records) == 1
    # the ledger is bound to TRAIN: swapping the files is refused (TRAIN, now given as
    # TEST, has a registered ledger, so it is private and refused as the clear test set
    # before the binding is checked)
    swapped = [args[0], str(test), str(train), *args[3:]]
    assert "registered ledger" in _one_line_refusal(runner.invoke(app, swapped))
    # and with a public TEST, the ledger is refused for other training data
    other = [args[0], str(test), str(test.with_name("public_test.csv")), *args[3:]]
    test.with_name("public_test.csv").write_bytes(test.read_bytes() + b"\n")
    assert "bound to" in _one_line_refusal(runner.invoke(app, other))
    # an (ε, δ) release cannot be charged to a ρ-zCDP ledger (a deliberate reset first:
    # one data set has one ledger)
    from dpfair.privacy import forget_data

    assert forget_data(train) is not None
    rho_led = tmp_path / "rho.jsonl"
    assert runner.invoke(app, ["ledger", "init", str(rho_led), "--data", str(train),
                               "--rho", "5"]).exit_code == 0
    res = runner.invoke(app, [*args[:-1], str(rho_led)])
    assert "no zCDP equivalent" in _one_line_refusal(res)


def test_python_session_and_cli_share_one_ledger(data: Path, ledger: Path) -> None:
    from dpfair import Session as TopSession

    assert TopSession is Session
    s = Session(data, ledger=ledger)
    s.median_ci("x", rho=0.5, bounds=(0.0, 20.0), method="cdf")
    line = _one_line_refusal(runner.invoke(app, _median(data, ledger, "0.6")))
    assert "0.5-zCDP" in line
    assert runner.invoke(app, _median(data, ledger, "0.5")).exit_code == 0
    with pytest.raises(Exception, match="remains"):
        s.median_ci("x", rho=0.01, bounds=(0.0, 20.0))
    labels = [r.params.get("via") for r in LedgerFile.open(ledger).records]
    assert labels == [None, "cli"]
