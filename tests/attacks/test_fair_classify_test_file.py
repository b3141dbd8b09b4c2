"""``dpfair fair-classify TRAIN TEST --ledger L``: TEST's metrics are printed in the clear.
What if TEST is private data — TRAIN itself, or a data set with its own ledger?"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.attacks._helpers import run


def _fair(path: Path, seed: int, flip: int | None = None) -> Path:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(400):
        x = rng.uniform()
        rows.append([f"{x:.4f}", str(int(rng.uniform() < 0.3 + 0.4 * x)), str(i % 2)])
    if flip is not None:
        rows[flip][1] = str(1 - int(rows[flip][1]))
    path.write_text("x,y,a\n" + "\n".join(",".join(r) for r in rows) + "\n")
    return path


def _classify(train: Path, test: Path, ledger: Path) -> dict[str, object]:
    r = run("fair-classify", train, test, "--target", "y", "--sensitive", "a", "--features",
            "x", "--bounds", "0", "1", "--epsilon", "1", "--delta", "1e-6", "--alpha", "0.2",
            "--ledger", ledger, "--json")
    if r.returncode != 0:
        return {"refused": r.stderr}
    out: dict[str, object] = json.loads(r.stdout)
    return out


@pytest.mark.parametrize("which", ["train-as-test", "registered-as-test"])
def test_private_data_are_not_accepted_as_the_clear_test_set(tmp_path: Path,
                                                             which: str) -> None:
    train = _fair(tmp_path / "train.csv", 1)
    led = tmp_path / "train.ledger"
    assert run("ledger", "init", led, "--data", train, "--epsilon", "10", "--delta",
               "1e-4").returncode == 0
    if which == "train-as-test":
        test = train
    else:
        test = _fair(tmp_path / "other.csv", 2)
        assert run("ledger", "init", tmp_path / "other.ledger", "--data", test, "--epsilon",
                   "1", "--delta", "1e-6").returncode == 0
    out = _classify(train, test, led)
    assert "refused" in out, f"test_error={out.get('test_error')} printed in the clear"
