"""Every third-party module ``src/dpfair`` imports is a declared dependency.

A fresh ``pip install dpfair`` installs only ``[project] dependencies``: a module imported by
the core but present in the developers' environment only through an extra (``click`` via
Dask or Flower, ``pandas`` via ``dev``) breaks the installed command line. Optional
integrations are allowed only through their extra.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: import name -> distribution name, where they differ
DISTRIBUTION = {"sklearn": "scikit-learn"}
#: optional integrations: import name -> the extra that installs it
EXTRA_ONLY = {"dask": "dask", "distributed": "dask", "flwr": "flower"}


def _imported_top_level_modules() -> set[str]:
    found: set[str] = set()
    for path in (ROOT / "src" / "dpfair").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return {m for m in found if m not in sys.stdlib_module_names and m != "dpfair"}


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[\s<>=!~\[;]", r, maxsplit=1)[0].lower() for r in requirements}


def test_every_imported_third_party_module_is_declared() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    core = _names(project["dependencies"])
    extras = {k: _names(v) for k, v in project["optional-dependencies"].items()}
    missing = []
    for module in sorted(_imported_top_level_modules()):
        if module in EXTRA_ONLY:
            extra = EXTRA_ONLY[module]
            dist = {"distributed": "dask"}.get(module, module)
            assert dist in extras.get(extra, set()), (module, extra)
            continue
        if DISTRIBUTION.get(module, module).lower() not in core:
            missing.append(module)
    assert not missing, f"imported by src/dpfair but not in [project] dependencies: {missing}"
