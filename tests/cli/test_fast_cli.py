"""``dpfair --help``/``--version`` and ``import dpfair`` load no heavy dependency; help text.

No wall-time assertion: the tests check which modules a fresh interpreter has loaded.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from dpfair.cli import app

HEAVY = ("scipy", "sklearn", "duckdb", "matplotlib", "pandas", "pyarrow", "numpy")
runner = CliRunner()


def _loaded_after(code: str) -> list[str]:
    probe = (
        "import sys, json\n"
        f"{code}\n"
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "COLUMNS": "80"}
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr
    loaded: list[str] = json.loads(out.stdout.strip().splitlines()[-1])
    return loaded


def test_import_dpfair_loads_no_heavy_module() -> None:
    assert _loaded_after("import dpfair") == []


@pytest.mark.parametrize("argv", [["--version"], ["--help"], [], ["datasets", "--help"]])
def test_version_and_help_load_no_heavy_module(argv: list[str]) -> None:
    code = (
        "from dpfair.cli import main\n"
        "try:\n"
        f"    main({argv!r})\n"
        "except SystemExit as exc:\n"
        "    assert exc.code in (0, None, 2), exc.code\n"
    )
    assert _loaded_after(code) == []


def test_subpackages_are_still_reachable_as_attributes() -> None:
    import dpfair

    assert dpfair.median.confidence_interval is not None
    assert dpfair.data.read_column is not None
    assert "fairclass" in dir(dpfair)
    with pytest.raises(AttributeError):
        _ = dpfair.no_such_subpackage  # type: ignore[attr-defined]


def test_median_ci_does_not_load_scikit_learn_or_matplotlib() -> None:
    code = (
        "import numpy as np, tempfile, os\n"
        "from dpfair.cli import main\n"
        "d = tempfile.mkdtemp(); p = os.path.join(d, 'x.csv')\n"
        "open(p, 'w').write('x\\n' + ''.join(f'{v}\\n' for v in range(500)))\n"
        "try:\n"
        "    main(['median-ci', p, '-c', 'x', '--rho', '1', '--bounds', '0', '500', '--json'])\n"
        "except SystemExit as exc:\n"
        "    assert exc.code in (0, None), exc.code\n"
    )
    loaded = _loaded_after(code)
    assert "sklearn" not in loaded and "matplotlib" not in loaded


def test_lazy_help_lines_equal_each_commands_own_docstring() -> None:
    from dpfair.cli import _Commands

    group = _Commands(name="probe")
    ctx = None
    for name, (_module, short_help) in _Commands.lazy_commands.items():
        command = group.get_command(ctx, name)
        assert command is not None, name
        own = command.help or ""
        first = " ".join(own.strip().split("\n\n")[0].split())
        assert first == short_help, (name, first, short_help)


def _help(*args: str) -> str:
    res = runner.invoke(app, [*args, "--help"], env={"COLUMNS": "100"})
    assert res.exit_code == 0, res.output
    return res.stdout


def test_top_level_help_states_each_commands_measure() -> None:
    text = " ".join(_help().split())
    assert re.search(r"median-ci\*?\*? ρ-zCDP", text)
    assert re.search(r"facility\*?\*? pure ε-DP", text)
    assert re.search(r"fair-classify\*?\*? and \*?\*?fdp\*?\*? \(ε, δ\)-DP", text)
    assert "(ρ-zCDP under replace-one neighbours)" not in text  # the old blanket claim


def test_report_help_mentions_fair_classification() -> None:
    assert "fair classification" in " ".join(_help("report").split())


ALL_HELP = [
    [],
    ["median-ci"],
    ["report"],
    ["reproduce"],
    ["facility"],
    ["fair-classify"],
    ["fdp"],
    ["fdp", "site", "round1"],
    ["fdp", "centre", "setup"],
    ["datasets"],
    ["datasets", "export"],
    ["datasets", "simulate"],
]


@pytest.mark.parametrize("args", ALL_HELP, ids=lambda a: " ".join(a) or "dpfair")
@pytest.mark.parametrize("columns", ["80", "100"])
def test_help_has_no_bool_metavar_and_no_cut_text(args: list[str], columns: str) -> None:
    res = runner.invoke(app, [*args, "--help"], env={"COLUMNS": columns})
    assert res.exit_code == 0, res.output
    assert "<bool>" not in res.stdout
    # rich cuts a word longer than the column with an ellipsis glued to it
    assert not re.search(r"\S…", res.stdout), res.stdout


def test_fair_classify_aggregate_help_is_complete() -> None:
    text = " ".join(_help("fair-classify").replace("│", " ").split())
    assert "dpfair.fairclass, fit from file). TEST is always loaded." in text
