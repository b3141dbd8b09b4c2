"""The house of issue 14: imports go one way, and every study has one front door.

``cli`` → ``report`` → ``experiments`` → {``median``, ``facility``, ``fairclass``} →
``mechanisms`` → ``privacy``, with ``data`` beside them. The test parses every module of
``src/dpfair`` with :mod:`ast` (module-level and function-level imports alike, absolute and
relative) and checks that each import of another dpfair package goes down this order (a
package's ``cli.py``, the Typer commands the top-level ``dpfair.cli`` loads lazily, belongs
to the ``cli`` layer; the domain packages' command modules must still not import
``experiments`` or ``report``); it
also checks that no domain package holds a study driver any more and that every registered
experiment is listed, and runnable by name, through ``dpfair reproduce``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from typer.testing import CliRunner

import dpfair

SRC = Path(dpfair.__file__).parent

#: Layer of each top-level subpackage; an import may go to a strictly lower layer, to the
#: same package, or to a shared utility (``dpfair._*`` modules, ``dpfair`` itself).
LAYER: dict[str, int] = {
    "cli": 6,
    "report": 5,
    "experiments": 4,
    "median": 3,
    "quantiles": 3,
    "facility": 3,
    "fairclass": 3,
    "session": 4,
    "mechanisms": 2,
    "privacy": 1,
    "data": 1,
}
#: Packages that may import each other although on the same or a lower layer ("beside").
BESIDE: set[tuple[str, str]] = {
    # data sits beside the domain packages and below them: median/facility/fairclass may
    # read data; data uses the privacy ledger and the exact histogram counts of mechanisms.
    ("data", "privacy"),
    ("data", "mechanisms"),
    # quantiles generalises the median's methods and reuses their mechanisms.
    ("quantiles", "median"),
}
DOMAINS = ("median", "facility", "fairclass")


def _package_of(path: Path) -> str:
    rel = path.relative_to(SRC)
    if rel.name == "cli.py" or rel.parts[-2:] == ("cli", "__init__.py"):
        return "cli"  # a package's command module is part of the command-line layer
    if len(rel.parts) == 1:  # dpfair/cli.py, dpfair/_errors.py, dpfair/__init__.py
        return rel.stem
    return rel.parts[0]


def _module_name(path: Path) -> str:
    rel = path.relative_to(SRC).with_suffix("")
    parts = ["dpfair", *rel.parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports_in(text: str, module: str, is_package: bool) -> list[tuple[int, str]]:
    """Every ``dpfair…`` module named by an import in ``text`` (relative ones resolved)."""
    own = module.split(".") if is_package else module.split(".")[:-1]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = own[: len(own) - (node.level - 1)]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            found.append((node.lineno, name))
            found += [(node.lineno, f"{name}.{a.name}") for a in node.names]
    return [(line, m) for line, m in found if m == "dpfair" or m.startswith("dpfair.")]


def _imports(path: Path) -> list[tuple[int, str]]:
    return _imports_in(path.read_text(encoding="utf-8"), _module_name(path),
                       path.name == "__init__.py")


def _target_package(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def _modules() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if "__pycache__" not in p.parts)


def test_the_parser_sees_imports_of_every_kind() -> None:
    """The checker itself: relative, nested and function-level imports are all resolved."""
    text = (
        "import numpy\n"
        "from ..experiments import run_experiment\n"
        "from . import _mechanism\n"
        "def f():\n"
        "    import dpfair.report\n"
        "    if True:\n"
        "        from dpfair.cli import app\n"
    )
    got = [m for _, m in _imports_in(text, "dpfair.facility.cli", is_package=False)]
    assert got == [
        "dpfair.experiments", "dpfair.experiments.run_experiment",
        "dpfair.facility", "dpfair.facility._mechanism",
        "dpfair.report", "dpfair.cli", "dpfair.cli.app",
    ]
    assert [_target_package(m) for m in got][:3] == ["experiments", "experiments", "facility"]


def test_imports_go_down_the_house() -> None:
    offenders: list[str] = []
    for path in _modules():
        here = _package_of(path)
        if here not in LAYER:
            continue  # dpfair/__init__.py and the shared dpfair/_*.py utilities
        for line, module in _imports(path):
            there = _target_package(module)
            if there is None or there == here or there not in LAYER:
                continue  # dpfair itself, the same package, a shared dpfair._* utility
            if (here, there) in BESIDE or LAYER[there] < LAYER[here]:
                continue
            offenders.append(f"{path.relative_to(SRC)}:{line}: {here} imports {module}")
    assert offenders == [], "\n".join(offenders)


def test_domain_packages_import_neither_experiments_nor_report_nor_each_other() -> None:
    offenders: list[str] = []
    for path in _modules():
        rel = path.relative_to(SRC)
        here = rel.parts[0] if len(rel.parts) > 1 else ""
        if here not in DOMAINS:
            continue
        for line, module in _imports(path):
            there = _target_package(module)
            if there in ("experiments", "report", "cli") or (there in DOMAINS and there != here):
                offenders.append(f"{path.relative_to(SRC)}:{line}: {module}")
    assert offenders == [], "\n".join(offenders)


def test_no_study_driver_lives_in_a_domain_package() -> None:
    """Studies are registered experiments under ``dpfair/experiments``, nowhere else."""
    drivers = [
        str(p.relative_to(SRC)) for p in _modules()
        if p.relative_to(SRC).parts[0] in DOMAINS
        and p.stem in {"study", "experiments", "studies"}
    ]
    assert drivers == []
    for path in _modules():
        if path.relative_to(SRC).parts[0] in DOMAINS and _package_of(path) != "cli":
            text = path.read_text(encoding="utf-8")
            assert 'if __name__ == "__main__"' not in text, path


def test_the_report_reads_studies_through_the_experiments_api() -> None:
    """The report imports no private module of ``dpfair.experiments`` and no study driver."""
    offenders: list[str] = []
    for path in sorted((SRC / "report").rglob("*.py")):
        for line, module in _imports(path):
            parts = module.split(".")
            if len(parts) > 2 and parts[1] == "experiments" and parts[2].startswith("_"):
                offenders.append(f"{path.name}:{line}: {module}")
    assert offenders == [], "\n".join(offenders)


def test_only_reproduce_runs_studies_from_the_command_line() -> None:
    from dpfair.cli import app

    res = CliRunner().invoke(app, ["--help"])
    assert res.exit_code == 0, res.output
    for old in ("facility-experiment", "fair-reproduce"):
        assert old not in res.output


def _listed_names() -> str:
    from dpfair.cli import app

    res = CliRunner().invoke(app, ["reproduce", "--list"], env={"COLUMNS": "400"})
    assert res.exit_code == 0, res.output
    return res.output


def _study_modules() -> dict[str, str]:
    """Built-in study modules: ``{module stem: the experiment name its code registers}``."""
    from dpfair.experiments import EXTENSION_MODULES

    found: dict[str, str] = {}
    for stem in EXTENSION_MODULES:
        path = SRC / "experiments" / f"{stem}.py"
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = [
            kw.value.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Call)
            and getattr(node.func, "id", None) == "register_experiment"
            for kw in node.keywords
            if kw.arg == "name" and isinstance(kw.value, ast.Constant)
        ]
        assert len(names) == 1, (stem, names)  # one module per study
        found[stem] = names[0]
    return found


def test_one_module_per_study_named_after_it() -> None:
    studies = _study_modules()
    assert {stem.replace("_", "-") for stem in studies} == set(studies.values())
    for prefix in ("median-", "facility-", "fairclass-", "fdp-"):
        assert any(n.startswith(prefix) for n in studies.values()), prefix
    # nothing else in the package registers a study
    for path in sorted((SRC / "experiments").glob("*.py")):
        if path.stem not in studies:
            assert "register_experiment(\n    name=" not in path.read_text(encoding="utf-8"), path


def test_every_built_in_study_is_registered_from_its_module() -> None:
    from dpfair.experiments import get_experiment

    for stem, name in _study_modules().items():
        exp = get_experiment(name)
        assert exp.run_one.__module__.startswith("dpfair.experiments."), (stem, name)


@pytest.mark.parametrize("name", sorted(_study_modules().values()))
def test_each_registered_experiment_is_reachable_through_reproduce(name: str) -> None:
    assert name in _listed_names().split()
