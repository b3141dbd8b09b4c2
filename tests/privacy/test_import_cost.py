"""``import dpfair.privacy`` is cheap: no SciPy, no NumPy at load (issue 23, item 7).

Checked by the modules a fresh interpreter has loaded, never by wall time. The conversions
that need SciPy (the GDP curve) import it when called; the CKS zCDP bound needs none.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import dpfair


def _loaded_after(code: str) -> set[str]:
    src = str(Path(dpfair.__file__).resolve().parents[1])
    out = subprocess.run(
        [sys.executable, "-c", f"import sys; sys.path.insert(0, {src!r}); {code}; "
         "import json; print(json.dumps(sorted(sys.modules)))"],
        capture_output=True, text=True, check=True, timeout=120,
    ).stdout
    return set(json.loads(out.splitlines()[-1]))


def test_import_privacy_loads_neither_scipy_nor_numpy() -> None:
    mods = _loaded_after("import dpfair.privacy")
    heavy = {m for m in mods if m.split(".")[0] in ("scipy", "numpy")}
    assert not heavy, sorted(heavy)[:10]


def test_charging_a_ledger_file_loads_no_scipy(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    mods = _loaded_after(
        "import os; os.environ['DPFAIR_STATE_DIR'] = " + repr(str(tmp_path / "state")) + "; "
        "from dpfair.privacy import Budget, LedgerFile; "
        f"led = LedgerFile.create({str(path)!r}, Budget.zcdp(1.0)); "
        "led.charge(Budget.zcdp(0.1)); led.charge(Budget.pure(0.2), bounded_range=True)"
    )
    assert not {m for m in mods if m.startswith("scipy")}


def test_conversions_still_work_when_called() -> None:
    from dpfair.privacy import Budget, gdp_delta, gdp_epsilon

    eps = gdp_epsilon(1.0, 1e-5)
    assert 4.3 < eps < 4.5
    assert gdp_delta(1.0, eps) <= 1e-5
    assert Budget.zcdp(0.5).to_approx(1e-6).epsilon < 0.5 + 2 * (0.5 * 13.8156) ** 0.5
