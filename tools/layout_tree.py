"""Rewrite the file tree with line counts in ``docs/layout.md`` from ``src/dpfair``.

Run from the repository root: ``python tools/layout_tree.py`` (``--check`` exits 1 when
the page lists a different set of files than the package has).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "dpfair"
PAGE = ROOT / "docs" / "layout.md"
WIDTH = 40


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def _total(directory: Path) -> int:
    return sum(_lines(p) for p in directory.rglob("*.py"))


def _entries(directory: Path, depth: int) -> list[str]:
    out: list[str] = []
    indent = "  " * depth
    for path in sorted(directory.iterdir(), key=lambda p: (p.is_dir(), p.name)):
        if path.name.startswith(".") or path.name == "__pycache__":
            continue
        if path.is_dir():
            if not any(path.rglob("*.py")):
                continue
            label = f"{indent}{path.name}/"
            count = _total(path)
            out.append(label + str(count).rjust(WIDTH - len(label)))
            out.extend(_entries(path, depth + 1))
        elif path.suffix == ".py":
            label = f"{indent}{path.name}"
            out.append(label + str(_lines(path)).rjust(WIDTH - len(label)))
    return out


def tree() -> str:
    """The tree block's text: every Python file under ``src/dpfair`` with its lines."""
    head = f"src/dpfair/  ({_total(PACKAGE)} lines of Python)"
    return "\n".join([head, *_entries(PACKAGE, 1)])


_BLOCK = re.compile(r"```text\nsrc/dpfair/.*?\n```", re.S)


def _names(block: str) -> list[str]:
    return [line.split()[0] for line in block.splitlines()[1:] if line.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="only compare the file lists")
    args = parser.parse_args(argv)
    page = PAGE.read_text(encoding="utf-8")
    match = _BLOCK.search(page)
    if match is None:
        print(f"{PAGE}: no ```text block starting with src/dpfair/", file=sys.stderr)
        return 1
    fresh = tree()
    if args.check:
        listed = _names(match.group(0).removeprefix("```text\n").removesuffix("\n```"))
        if listed != _names(fresh):
            print("docs/layout.md lists other files; run python tools/layout_tree.py")
            return 1
        return 0
    PAGE.write_text(page[: match.start()] + f"```text\n{fresh}\n```" + page[match.end():],
                    encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
