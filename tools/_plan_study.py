"""Shared by the S1 smoother tools: read ``key=value`` modes and run the plan study."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

STUDY = Path(__file__).resolve().parents[1] / "benchmarks" / "fairclass_plan_study.py"


def read_mode(text: str, mode: dict) -> bool:
    """Fill ``mode`` from ``k=v,k=v``; False for the plain ``main`` (nothing to install)."""
    if text == "main":
        return False
    for kv in text.split(","):
        key, val = kv.split("=")
        mode[key] = val
    return True


def run_study(args: list[str]) -> None:
    """Run ``benchmarks/fairclass_plan_study.py`` with ``args`` in this process."""
    sys.argv = [str(STUDY), *args]
    runpy.run_path(str(STUDY), run_name="__main__")
