"""MkDocs hook: render ``<!-- results-table: FILE.json -->`` as a Markdown table.

``FILE.json`` (under ``docs/results/``) is a list of flat records, as the reproduction
scripts store them; scalar fields become columns, lists are shown joined by " / ", floats
with 4 significant digits. A missing or malformed file fails the build.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

_MARKER = re.compile(r"<!--\s*results-table:\s*([\w.\-]+\.json)\s*-->")


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list):
        return " / ".join(_cell(v) for v in value)
    return str(value).replace("|", "\\|")


def _table(path: Path) -> str:
    records = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(records, list) or not records or not all(
        isinstance(r, dict) for r in records
    ):
        raise ValueError(f"{path}: expected a non-empty list of records")
    columns: list[str] = []
    for record in records:
        columns.extend(k for k in record if k not in columns)
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for record in records:
        lines.append("| " + " | ".join(_cell(record.get(c, "")) for c in columns) + " |")
    return "\n".join(lines) + f"\n\n*Source: `docs/results/{path.name}`.*\n"


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    results = Path(config["docs_dir"]) / "results"
    return _MARKER.sub(lambda m: _table(results / m.group(1)), markdown)
