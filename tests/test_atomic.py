"""Atomic writes: an interrupted write leaves the old file (or none), never a truncated one."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dpfair._atomic import (
    atomic_open,
    strict_json,
    write_bytes_atomic,
    write_json_atomic,
    write_text_atomic,
)


def test_write_replaces_content_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    write_text_atomic(target, "old")
    write_text_atomic(target, "néw")
    assert target.read_text(encoding="utf-8") == "néw"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


def test_mode_is_applied_and_default_follows_umask(tmp_path: Path) -> None:
    private = write_bytes_atomic(tmp_path / "state", b"x", mode=0o600)
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    old = os.umask(0o022)
    try:
        plain = write_bytes_atomic(tmp_path / "plain", b"x")
    finally:
        os.umask(old)
    assert stat.S_IMODE(plain.stat().st_mode) == 0o644
    os.chmod(plain, 0o640)  # replacing keeps the existing file's mode
    write_bytes_atomic(plain, b"y")
    assert stat.S_IMODE(plain.stat().st_mode) == 0o640


def test_exception_mid_write_keeps_old_file(tmp_path: Path) -> None:
    target = tmp_path / "model.pkl"
    target.write_bytes(b"old content")
    with pytest.raises(RuntimeError), atomic_open(target) as fh:
        fh.write(b"half of the new")
        raise RuntimeError("disk full")
    assert target.read_bytes() == b"old content"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.pkl"]


def test_exception_mid_write_without_old_file_leaves_nothing(tmp_path: Path) -> None:
    target = tmp_path / "new.html"
    with pytest.raises(KeyboardInterrupt), atomic_open(target) as fh:
        fh.write(b"<html>")
        raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_sigkill_mid_write_never_leaves_a_truncated_file(tmp_path: Path) -> None:
    target = tmp_path / "index.html"
    target.write_text("old report")
    child = textwrap.dedent(
        f"""
        import sys, time
        from dpfair._atomic import atomic_open
        with atomic_open({str(target)!r}) as fh:
            fh.write(b"<html> partial" * 1000)
            fh.flush()
            print("written", flush=True)
            time.sleep(60)
            fh.write(b"</html>")
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen(
        [sys.executable, "-c", child], stdout=subprocess.PIPE, env=env, text=True
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "written"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert target.read_text() == "old report"
    leftovers = [p.name for p in tmp_path.iterdir() if p.name != "index.html"]
    assert all(n.startswith(".index.html.") and n.endswith(".tmp") for n in leftovers)


def test_save_model_failure_keeps_the_previous_model(tmp_path: Path) -> None:
    import pickle

    from dpfair.cli.fairclass import _save_model

    target = tmp_path / "model.pkl"
    _save_model({"weights": list(range(10_000))}, target)
    before = target.read_bytes()

    class Unpicklable:
        """Fails when pickled, after the list before it was written."""

        def __reduce__(self) -> tuple[object, ...]:
            raise pickle.PicklingError("cannot pickle this")

    with pytest.raises(pickle.PicklingError):
        _save_model({"weights": list(range(100_000)), "bad": Unpicklable()}, target)
    assert target.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.pkl"]


def test_strict_json_unwraps_numpy_and_names_non_finite_floats() -> None:
    import numpy as np

    value = {"a": (1, 2.5, float("nan")), "b": [np.float64("inf"), np.int64(3)], "c": None}
    assert strict_json(value) == {"a": [1, 2.5, "nan"], "b": ["inf", 3], "c": None}
    assert type(strict_json(np.int64(3))) is int
    assert strict_json(-float("inf")) == "-inf"


def test_write_json_atomic_writes_strict_indented_json(tmp_path: Path) -> None:
    import json

    target = write_json_atomic(tmp_path / "out.json", [{"x": float("nan"), "y": 1}])
    text = target.read_text(encoding="utf-8")
    assert text == json.dumps([{"x": "nan", "y": 1}], indent=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]
