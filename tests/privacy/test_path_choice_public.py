"""``aggregate="auto"`` must choose the in-memory or out-of-core path from public facts.

Attack review of issue 11: the FDP site CLI chose by the file's size in bytes, which
depends on the values (digits in a CSV), while the two paths split differently and the
round-1 message's ``n_train`` shows which ran. The choice is now by the row count, public
under replace-one neighbours.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dpfair.data import AGGREGATE_ROWS, row_count, use_out_of_core


def _write(path: Path, values: np.ndarray, fmt: str) -> None:
    path.write_text("x\n" + "\n".join(fmt.format(v) for v in values) + "\n")


def test_neighbouring_files_of_very_different_sizes_take_the_same_path(tmp_path: Path):
    x = np.random.default_rng(0).random(2000)
    short, long = tmp_path / "short.csv", tmp_path / "long.csv"
    _write(short, x, "{:.3f}")
    _write(long, x, "{:.17g}")  # the same rows, many more bytes
    assert long.stat().st_size > 3 * short.stat().st_size
    assert row_count(short) == row_count(long) == 2000
    for mode in ("auto", "always", "never"):
        assert use_out_of_core(short, mode) == use_out_of_core(long, mode)
    assert use_out_of_core(short, "auto") is (2000 > AGGREGATE_ROWS)


def test_the_threshold_is_on_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    import dpfair.data._paths as paths

    f = tmp_path / "d.csv"
    _write(f, np.arange(10.0), "{}")
    monkeypatch.setattr(paths, "AGGREGATE_ROWS", 9)
    assert paths.use_out_of_core(f, "auto") is True
    monkeypatch.setattr(paths, "AGGREGATE_ROWS", 10)
    assert paths.use_out_of_core(f, "auto") is False


def test_no_byte_size_decides_a_path_anywhere():
    """Static guard: no module compares a data file's ``st_size`` to pick a path."""
    import dpfair

    root = Path(dpfair.__file__).parent
    offenders = [
        p.relative_to(root).as_posix()
        for p in root.rglob("*.py")
        if "AGGREGATE_BYTES" in p.read_text(encoding="utf-8")
    ]
    assert offenders == []
