"""benchmarks/quantile_speed.py runs end to end in --quick mode (no timing is asserted)."""

from __future__ import annotations

import importlib.util
import math

from tests.conftest import REPO_ROOT


def test_quick_benchmark_runs(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location(
        "quantile_speed", REPO_ROOT / "benchmarks" / "quantile_speed.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = mod.main(["--quick", "--data-dir", str(tmp_path), "--json", str(tmp_path / "r.json")])
    names = {r["name"] for r in out["results"]}
    assert {"big/cdf/engine/peak_memory", "five-vs-one/cdf", "histogram/duckdb",
            "big/expmech/engine"} <= names
    assert all(math.isfinite(r["ratio"]) and r["ratio"] > 0 for r in out["results"])
    assert (tmp_path / "r.json").exists()
    assert "target" in capsys.readouterr().out
