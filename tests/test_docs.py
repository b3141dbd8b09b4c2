"""The documentation site builds with warnings as errors (``mkdocs build --strict``).

Skipped where the ``docs`` extra (MkDocs, Material, mkdocstrings) is not installed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]

pytest.importorskip("mkdocs")
pytest.importorskip("material")
pytest.importorskip("mkdocstrings")


def test_site_builds_strict(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "NO_MKDOCS_2_WARNING": "1",
        "PYTHONPATH": os.pathsep.join([str(REPO_ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
    }
    run = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    api = (tmp_path / "api" / "median" / "index.html").read_text(encoding="utf-8")
    assert 'id="dpfair.median.confidence_interval"' in api  # the API reference is generated
    tables = (tmp_path / "reproduction" / "index.html").read_text(encoding="utf-8")
    assert tables.count("<table>") >= 2  # rendered from docs/results/*.json
