"""``dpfair fdp flower-local`` / ``flower-app``: FDP-Fair on Flower on one machine.

Fast tests: the app the package writes is the repository's ``flower_app/``, the one-line
errors, the config quoting, and the clean stop (a process group and a child that left it
for a session of its own, as Flower's ``flower-superexec`` does, are both gone). Slow
tests (a real SuperLink, three SuperNodes and ``flwr run``, ~10 processes each): a run
releases a model that verifies with the centre's key and leaves no process behind, and a
run whose sites refuse (cap below the setup's ε) exits 1 with the ServerApp's error.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from dpfair.cli.flower_local import (
    FLOWER_APP_PYPROJECT,
    LocalFlower,
    _failure,
    free_port,
    node_config_arg,
)

REPO_ROOT = Path(__file__).resolve().parents[2]


def _dpfair(*args: str, cwd: Path, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(REPO_ROOT / "src"), *filter(None, [os.environ.get("PYTHONPATH")])])}
    return subprocess.run([sys.executable, "-m", "dpfair.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_the_packaged_app_is_the_repository_flower_app(tmp_path: Path) -> None:
    assert (REPO_ROOT / "flower_app" / "pyproject.toml").read_text() == FLOWER_APP_PYPROJECT
    run = _dpfair("fdp", "flower-app", str(tmp_path / "app"), cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "app" / "pyproject.toml").read_text() == FLOWER_APP_PYPROJECT
    assert json.loads(run.stdout)["flower_app"].endswith("pyproject.toml")


def test_flower_app_readme_names_every_required_run_config_key() -> None:
    readme = (REPO_ROOT / "flower_app" / "README.md").read_text()
    for key in ("setup=", "key=", "out="):
        assert key in readme


def test_missing_site_files_is_a_one_line_error(tmp_path: Path) -> None:
    run = _dpfair("fdp", "flower-local", str(tmp_path), "--sites", "2", cwd=tmp_path)
    assert run.returncode == 2
    assert run.stderr.count("\n") == 1 and run.stderr.startswith("dpfair: error:")
    assert "h1.csv" in run.stderr and "dpfair datasets simulate --sites 2" in run.stderr


def test_bounds_must_match_the_features(tmp_path: Path) -> None:
    run = _dpfair("fdp", "flower-local", str(tmp_path), "--bounds", "0", "--bounds", "1",
                  cwd=tmp_path)
    assert run.returncode == 2 and "--bounds" in run.stderr and "x1, x2" in run.stderr


def test_node_config_values_are_toml() -> None:
    text = node_config_arg({"site-id": 'h"1', "max-epsilon": 1.0, "seed": 3, "x": True})
    assert text == 'site-id="h\\"1" max-epsilon=1.0 seed=3 x=true'


def test_free_ports_are_distinct_per_call() -> None:
    assert len({free_port() for _ in range(5)}) >= 4  # the OS hands out fresh ports


def test_failure_line_is_taken_from_the_stream() -> None:
    log = "INFO x\nERROR 2026 [flwr] FDP-Fair run failed: ProtocolError: site 'h2' refused\n"
    assert _failure(log) == "FDP-Fair run failed: ProtocolError: site 'h2' refused"
    assert _failure("all fine") is None


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has exited; it is only waiting to be reaped


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
def test_stop_kills_the_group_and_a_child_that_left_it(tmp_path: Path) -> None:
    """The clean stop, without Flower: a leader and a child in a session of its own."""
    script = tmp_path / "leader.py"
    script.write_text(textwrap.dedent("""
        import subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                                 start_new_session=True)
        print(child.pid, flush=True)
        time.sleep(600)
    """))
    flower = LocalFlower.__new__(LocalFlower)  # only the process bookkeeping
    flower.root, flower.procs, flower.env = tmp_path, {}, dict(os.environ)
    flower.home = tmp_path
    flower._start("leader", [sys.executable, str(script)])
    deadline = time.monotonic() + 60
    while not flower.log("leader").strip() and time.monotonic() < deadline:
        time.sleep(0.05)
    child = int(flower.log("leader").split()[0])
    leader = flower.procs["leader"].pid
    assert _alive(child) and _alive(leader)
    assert os.getsid(child) != os.getsid(leader)  # it left the group: killpg cannot reach it
    flower.stop(grace=5.0)
    deadline = time.monotonic() + 30
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(leader) and not _alive(child)


# --- a real deployment (slow) -------------------------------------------------------------

def _leftovers(marker: str) -> list[int]:
    """Live processes whose environment or command line names ``marker``."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            blob = (entry / "environ").read_bytes() + (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in blob and _alive(int(entry.name)) and int(entry.name) != os.getpid():
            found.append(int(entry.name))
    return found


@pytest.fixture
def sites(tmp_path: Path) -> Path:
    pytest.importorskip("flwr")
    run = _dpfair("datasets", "simulate", "--sites", "3", "--out", "sites", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    return tmp_path / "sites"


@pytest.mark.slow
def test_flower_local_releases_a_verified_model_and_leaves_no_process(sites: Path) -> None:
    run = _dpfair("fdp", "flower-local", str(sites), "--sites", "3", "--seed", "1",
                  cwd=sites.parent, timeout=900)
    assert run.returncode == 0, run.stderr[-4000:]
    summary = json.loads(run.stdout)
    released = Path(summary["released_model"])
    assert released.exists() and summary["transport"] == "insecure (localhost)"
    assert set(summary["sites"]) == {"h1", "h2", "h3"}
    from dpfair.fairclass.federated import FederatedModel, load_public_key, read_message

    key = load_public_key(Path(summary["verified_with"]), option="centre.pub")
    model = FederatedModel.from_envelope(read_message(released, keys={"centre": key},
                                                      kind="released_model"))
    assert model is not None
    # Each site charged its own ledger, next to its data file.
    assert all((sites / f"h{s}.fdp-ledger").exists() for s in (1, 2, 3))
    # Nothing of the deployment is still running (flower-superexec included).
    time.sleep(1.0)
    assert _leftovers(summary["logs"]) == []
    # predict with the printed command works (post-processing of the released model)
    cmd = summary["predict"].replace("TEST.csv", str(sites / "test.csv")).split()[1:]
    pred = _dpfair(*cmd, cwd=sites.parent)
    assert pred.returncode == 0, pred.stderr


@pytest.mark.slow
def test_a_failed_server_app_fails_the_command(sites: Path) -> None:
    run = _dpfair("fdp", "flower-local", str(sites), "--sites", "3", "--epsilon", "1",
                  "--max-epsilon", "0.5", "--round-timeout", "60", cwd=sites.parent,
                  timeout=900)
    assert run.returncode == 1, run.stderr[-4000:]
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("dpfair: error: the Flower run failed: FDP-Fair run failed:")
    assert "BudgetExceededError" in last and "logs in" in last
    run_dir = Path(last.rsplit("logs in ", 1)[1])
    assert not (run_dir / "released.json").exists()
    time.sleep(1.0)
    assert _leftovers(str(run_dir)) == []


@pytest.mark.slow
@pytest.mark.skipif(__import__("shutil").which("openssl") is None, reason="needs openssl")
def test_flower_local_with_tls(tmp_path: Path) -> None:
    pytest.importorskip("flwr")
    made = _dpfair("datasets", "simulate", "--sites", "2", "--out", "s", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    run = _dpfair("fdp", "flower-local", "s", "--sites", "2", "--tls", cwd=tmp_path,
                  timeout=900)
    assert run.returncode == 0, run.stderr[-4000:]
    summary = json.loads(run.stdout)
    assert summary["transport"] == "TLS (private CA)"
    assert Path(summary["released_model"]).exists()
    assert "SSL" not in (Path(summary["logs"]) / "superlink.log").read_text()
