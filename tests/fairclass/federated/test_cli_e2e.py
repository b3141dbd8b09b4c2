"""End to end: S = 3 site processes and a centre, exchanging only message files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from dpfair.fairclass.datasets import simulate

CLI = [sys.executable, "-m", "dpfair.fairclass.federated.cli", "fdp"]


def _run(*args: str, cwd: Path) -> dict:
    out = subprocess.run([*CLI, *args], cwd=cwd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _write(path: Path, d) -> None:
    np.savetxt(
        path,
        np.column_stack([d.X, d.A, d.y]),
        delimiter=",",
        header="x1,x2,a,y",
        comments="",
        fmt="%.12g",
    )


def test_three_site_processes(tmp_path: Path) -> None:
    S, alpha = 3, 0.2
    for s in range(S):
        (tmp_path / f"s{s + 1}").mkdir()
        _write(tmp_path / f"s{s + 1}" / "data.csv", simulate(2000, rng=40 + s))
    _write(tmp_path / "test.csv", simulate(4000, rng=77))
    site_args = [arg for s in range(S) for arg in ("--site", f"site-{s + 1}:2000:4:1e-6")]
    _run(
        "centre",
        "setup",
        *site_args,
        "--bounds",
        "0",
        "--bounds",
        "1",
        "--bounds",
        "0",
        "--bounds",
        "1",
        "--alpha",
        str(alpha),
        "--out",
        "setup.json",
        cwd=tmp_path,
    )
    common = ["--features", "x1,x2", "--target", "y", "--sensitive", "a"]

    def sites(round_no: int) -> None:
        procs = []
        for s in range(S):
            sid = f"site-{s + 1}"
            extra = ["--seed", str(s)] if round_no == 1 else ["--model", "../model.json"]
            procs.append(
                subprocess.Popen(
                    [
                        *CLI,
                        "site",
                        f"round{round_no}",
                        "data.csv",
                        "--setup",
                        "../setup.json",
                        "--site-id",
                        sid,
                        *common,
                        "--state",
                        "state.json",
                        "--out",
                        f"../{sid}.r{round_no}.json",
                        *extra,
                    ],
                    cwd=tmp_path / f"s{s + 1}",
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
            )
        for p in procs:
            _, err = p.communicate(timeout=120)
            assert p.returncode == 0, err

    sites(1)
    _run(
        "centre",
        "aggregate",
        *[f"site-{s + 1}.r1.json" for s in range(S)],
        "--setup",
        "setup.json",
        "--out",
        "model.json",
        cwd=tmp_path,
    )
    sites(2)
    fin = _run(
        "centre",
        "finalize",
        *[f"site-{s + 1}.r2.json" for s in range(S)],
        "--setup",
        "setup.json",
        "--model",
        "model.json",
        "--out",
        "released.json",
        "--seed",
        "0",
        cwd=tmp_path,
    )
    for spent in fin["site_privacy"].values():
        assert spent["epsilon"] <= 4.0 + 1e-6 and spent["delta"] == 1e-6
    # The verdict of the confidence rule is printed (a warning on stderr when uncertified).
    outcomes = [t["outcome"] for t in fin["thresholds"]]
    assert fin["certified"] is all(o == "certified" for o in outcomes)
    res = _run(
        "predict",
        "released.json",
        "test.csv",
        "--features",
        "x1,x2",
        "--sensitive",
        "a",
        "--target",
        "y",
        cwd=tmp_path,
    )
    assert res["abs_dd"] <= alpha + 0.05  # test-sample |DD| (default confidence rule)
    assert res["error"] <= 0.25
    # The site directories hold only their own data and local state; the centre's folder
    # only messages.
    assert sorted(p.name for p in (tmp_path / "s1").iterdir()) == ["data.csv", "state.json"]

    # A tampered message is refused with exit code 2 and a one-line error naming the field.
    raw = (tmp_path / "site-1.r2.json").read_text()
    (tmp_path / "bad.json").write_text(
        raw.replace('"depth":', '"depth": ', 1).replace('"n_cal":[', '"n_cal":[1,')
    )
    out = subprocess.run(
        [
            *CLI,
            "centre",
            "finalize",
            "bad.json",
            "site-2.r2.json",
            "site-3.r2.json",
            "--setup",
            "setup.json",
            "--model",
            "model.json",
            "--out",
            "x.json",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2 and "sha256" in out.stderr and "site-1" in out.stderr
