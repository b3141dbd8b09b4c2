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

The rules of issue 24, checked on the same parse (``if TYPE_CHECKING:`` blocks aside, since
they never run):

* no import circle anywhere in ``src/dpfair``, module-level and function-level imports alike;
* no module imports a private module (``_name``) of another top-level package;
* ``data`` sits below the domain packages: nothing under ``data/`` imports ``median``,
  ``facility``, ``fairclass`` (nor anything above them);
* the domain packages never import each other;
* outside ``dpfair/mechanisms``, mechanisms are imported only from ``dpfair.mechanisms``,
  whose ``__all__`` is exactly what the library uses.

Temporary exceptions are listed by name with the reason they still exist; an exception that
no longer occurs fails the test too, so the lists can only shrink. The command-line layer
may be ``dpfair/cli.py`` with per-package ``cli.py`` modules, or a package ``dpfair/cli/``:
both layouts are read as the ``cli`` layer.
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


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _runtime_imports(path: Path) -> list[tuple[int, str, str | None]]:
    """(line, module, name) of every import that can run, ``if TYPE_CHECKING:`` aside.

    ``from a.b import c`` gives ("a.b", "c"); ``import a.b`` gives ("a.b", None). Relative
    imports are resolved; function-level imports are included.
    """
    module = _module_name(path)
    own = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found: list[tuple[int, str, str | None]] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                for stmt in child.orelse:
                    visit_one(stmt)
                continue
            visit_one(child)

    def visit_one(child: ast.AST) -> None:
        if isinstance(child, ast.Import):
            found.extend((child.lineno, a.name, None) for a in child.names)
        elif isinstance(child, ast.ImportFrom):
            if child.level:
                base = ".".join(own[: len(own) - (child.level - 1)]
                                + ([child.module] if child.module else []))
            else:
                base = child.module or ""
            found.extend((child.lineno, base, a.name) for a in child.names)
        visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return [f for f in found if f[1] == "dpfair" or f[1].startswith("dpfair.")]


def _module_index() -> dict[str, Path]:
    return {_module_name(p): p for p in _modules()}


def _import_graph() -> dict[str, set[str]]:
    """Module → the dpfair modules it imports (``from pkg import sub`` counts as pkg.sub)."""
    index = _module_index()
    graph: dict[str, set[str]] = {}
    for name, path in index.items():
        targets: set[str] = set()
        for _, module, attr in _runtime_imports(path):
            full = f"{module}.{attr}" if attr else module
            target = full if full in index else module
            if target in index and target != name:
                targets.add(target)
        graph[name] = targets
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in graph:
                    continue
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    comp.append(top)
                    if top == node:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def _top(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


#: Top-level packages that are one domain in two public namespaces: ``quantiles`` is paper
#: 004's algorithm for any q and shares the median's private method modules (the median is
#: its q = 1/2 case), so imports between them are imports within one package.
FAMILY: dict[str, str] = {"quantiles": "median"}


def _family(package: str) -> str:
    return FAMILY.get(package, package)


def _rel(path: Path) -> str:
    return path.relative_to(SRC).as_posix()


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


# --------------------------------------------------------------------------- issue 24 rules
#: Private modules still imported across top-level packages: (importing file, module) → why.
PRIVATE_IMPORT_EXCEPTIONS: dict[tuple[str, str], str] = {}
#: Modules under data/ still importing a domain package: (file, module) → why.
DATA_IMPORT_EXCEPTIONS: dict[tuple[str, str], str] = {}
#: Direct imports of a mechanisms submodule from outside dpfair/mechanisms: (file, module).
MECHANISMS_IMPORT_EXCEPTIONS: dict[tuple[str, str], str] = {}


def _check_exceptions(found: set[tuple[str, str]], allowed: dict[tuple[str, str], str],
                      what: str) -> None:
    new = sorted(found - set(allowed))
    stale = sorted(set(allowed) - found)
    assert not new, f"{what}:\n" + "\n".join(f"{f}: {m}" for f, m in new)
    assert not stale, (f"{what}: these exceptions no longer occur, delete them from the list: "
                       + ", ".join(f"{f}: {m}" for f, m in stale))


def test_the_cycle_finder_finds_a_circle_hidden_in_a_function() -> None:
    """The checker itself: a circle closed by a function-level import is found."""
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_anywhere() -> None:
    """No module of src/dpfair reaches itself through imports (function-level ones too)."""
    assert _cycles(_import_graph()) == []


def test_no_private_module_is_imported_across_packages() -> None:
    found: set[tuple[str, str]] = set()
    for path in _modules():
        here = _module_name(path)
        for _, module, attr in _runtime_imports(path):
            full = f"{module}.{attr}" if attr else module
            for name in (module, full):
                parts = name.split(".")
                private = any(p.startswith("_") for p in parts[2:])
                if private and len(parts) > 2 and _family(_top(name)) != _family(_top(here)):
                    found.add((_rel(path), ".".join(
                        parts[: next(i for i, p in enumerate(parts) if i >= 2
                                     and p.startswith("_")) + 1])))
    _check_exceptions(found, PRIVATE_IMPORT_EXCEPTIONS,
                      "private modules imported across top-level packages")


def test_data_sits_below_the_domain_packages() -> None:
    """Nothing under data/ (its command module included) imports a domain package or above."""
    above = {*DOMAINS, "session", "experiments", "report", "cli"}
    found: set[tuple[str, str]] = set()
    for path in _modules():
        if path.relative_to(SRC).parts[0] != "data":
            continue
        for _, module, attr in _runtime_imports(path):
            full = f"{module}.{attr}" if attr else module
            if _top(full) in above:
                found.add((_rel(path), module if _top(module) in above else full))
    _check_exceptions(found, DATA_IMPORT_EXCEPTIONS, "data/ importing a package above it")


def test_mechanisms_are_imported_from_the_package_only() -> None:
    """Outside dpfair/mechanisms, ``from dpfair.mechanisms import X``, never a submodule."""
    found: set[tuple[str, str]] = set()
    for path in _modules():
        if path.relative_to(SRC).parts[0] == "mechanisms":
            continue
        for _, module, _attr in _runtime_imports(path):
            if module.startswith("dpfair.mechanisms."):
                found.add((_rel(path), module))
    _check_exceptions(found, MECHANISMS_IMPORT_EXCEPTIONS,
                      "mechanisms submodules imported directly (import from dpfair.mechanisms)")


def test_mechanisms_export_exactly_what_the_library_uses() -> None:
    import dpfair.mechanisms as mech

    exports = mech._EXPORTS
    assert sorted(mech.__all__) == sorted(exports)
    used: set[tuple[str, str]] = set()
    for path in _modules():
        if path.relative_to(SRC).parts[0] == "mechanisms":
            continue
        for _, module, attr in _runtime_imports(path):
            if module == "dpfair.mechanisms" and attr is not None:
                assert attr in exports, f"{_rel(path)}: dpfair.mechanisms has no {attr!r}"
                used.add(exports[attr])
            elif module.startswith("dpfair.mechanisms.") and attr is not None:
                used.add((module.split(".", 2)[2], attr))
    assert used == set(exports.values()), (
        f"exported but unused: {sorted(set(exports.values()) - used)}; "
        f"used but not exported: {sorted(used - set(exports.values()))}")
    for name in mech.__all__:
        assert getattr(mech, name) is not None


def test_the_cli_layer_may_be_a_module_or_a_package() -> None:
    """Both layouts of the command line are read as the ``cli`` layer."""
    assert _package_of(SRC / "cli.py") == "cli"
    assert _package_of(SRC / "facility" / "cli.py") == "cli"
    assert _package_of(SRC / "cli" / "__init__.py") == "cli"
    assert _package_of(SRC / "cli" / "median.py") == "cli"
    assert _target_package("dpfair.cli.median") == "cli"
