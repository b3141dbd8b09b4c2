"""Attack on the free warnings (``dpfair._advice``): they must be post-processing.

A warning that read the data would be an unaccounted release (a data-dependent bit printed
for free). Checks: the module imports nothing that can reach data (AST); its functions
accept only released values and public inputs (signatures); every call site in the
command line passes released results or the analyst's own request; and through the real
CLI, the printed warnings are exactly the function of the released JSON fields — two data
sets whose releases agree get the same warnings, and a data set whose median lies far
outside the bounds gets the on-bound warning only via its released interval.
"""

from __future__ import annotations

import ast
import inspect
import json
from pathlib import Path

from dpfair import _advice
from dpfair.privacy import Budget

from ._helpers import REPO, median, write_column

SRC = REPO / "src" / "dpfair"


def test_today_advice_imports_nothing_that_reads_data():
    tree = ast.parse((SRC / "_advice.py").read_text())
    mods = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            mods |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            mods.add(node.module or "")
    assert mods <= {"__future__", "warnings", "typing", "dpfair._warnings",
                    "dpfair.privacy"}, mods
    for fn in (_advice.on_public_bound, _advice.little_privacy, _advice.warn_free):
        params = set(inspect.signature(fn).parameters)
        assert params <= {"low", "high", "bounds", "what", "budget", "privacy",
                          "stacklevel"}, (fn.__name__, params)


def test_today_cli_call_sites_pass_only_released_or_requested_values():
    allowed_roots = {"result", "request", "mech"}
    for path in (SRC / "cli").glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", "") == "warn_free"):
                continue
            args = [*node.args, *(k.value for k in node.keywords)]
            for a in args:
                if isinstance(a, ast.Constant):
                    continue
                root = a
                while isinstance(root, ast.Attribute):
                    root = root.value
                assert isinstance(root, ast.Name) and root.id in allowed_roots, (
                    path.name, ast.unparse(a))
    # and those roots are the release's own result / the public request
    med = (SRC / "cli" / "median.py").read_text()
    assert "result = session.median_ci(" in med


def test_today_cli_warnings_are_a_function_of_the_release(tmp_path: Path):
    outs = []
    for seed in (0, 1):
        data = tmp_path / f"d{seed}.csv"
        write_column(data, n=300, seed=seed)
        r = median(data, None, 0.25, "--seed", "7")
        assert r.returncode == 0, r.stderr[-400:]
        outs.append(json.loads(r.stdout))
    # the median (about 50) below the public bounds [70, 100], and a huge rho: both warnings,
    # and still only through the released interval and the request
    data = tmp_path / "far.csv"
    write_column(data, n=300, seed=2)
    for rho, extra in ((0.25, ("--bounds", "70", "100")), (50.0, ())):
        r = median(data, None, rho, "--seed", "7", *extra)
        assert r.returncode == 0, r.stderr[-400:]
        outs.append(json.loads(r.stdout))
    assert outs[2]["warnings"] and outs[3]["warnings"]  # power: both kinds fire
    for out, rho in zip(outs, (0.25, 0.25, 0.25, 50.0), strict=True):
        low, high = out["low"], out["high"]
        lo, hi = out["bounds"]
        expect = []
        m = _advice.on_public_bound(low, high, (lo, hi), "median")
        if m:
            expect.append(m)
        m = _advice.little_privacy(Budget.zcdp(rho))
        if m:
            expect.append(m)
        assert out["warnings"] == expect, out
