"""docs/layout.md lists exactly the package's Python files (tools/layout_tree.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_layout_page_lists_every_file_of_the_package() -> None:
    run = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "layout_tree.py"), "--check"],
        capture_output=True, text=True, check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
