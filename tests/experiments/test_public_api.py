"""Studies use only the public API of the domain packages (issue 6, "What must hold")."""

from __future__ import annotations

import ast
from pathlib import Path

import dpfair.experiments

PACKAGE = Path(dpfair.experiments.__file__).parent
#: Shared by every package by design (the exception hierarchy); not a package's helper.
ALLOWED_PRIVATE = {"dpfair._errors", "dpfair._atomic",  # shared utilities
                   "dpfair._validation"}


def _imported_modules(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
            names.extend(f"{node.module}.{a.name}" for a in node.names)
    return names


def test_no_private_module_of_another_package_is_imported() -> None:
    offenders = []
    for path in sorted(PACKAGE.glob("*.py")):  # includes _facility.py/_fairclass.py when added
        for name in _imported_modules(path):
            parts = name.split(".")
            if parts[0] != "dpfair" or any(
                name == m or name.startswith(f"{m}.") for m in ALLOWED_PRIVATE
            ):
                continue
            if len(parts) > 1 and parts[1] == "experiments":
                continue
            if any(p.startswith("_") and not p.endswith("__") for p in parts[1:]):
                offenders.append(f"{path.name}: {name}")
    assert offenders == [], offenders
