"""Rewrite the outputs shown in README.md and the docs pages from real runs.

Usage (from the repository root)::

    python tools/refresh_doc_outputs.py                 # README.md and every docs page
    python tools/refresh_doc_outputs.py README.md       # only these files
    python tools/refresh_doc_outputs.py docs/ledgers.md

It runs ``tests/test_readme.py --refresh-doc-outputs`` (each page's blocks in order, as
the test does) and, where a shown output differs from what the code prints, writes the
printed one in its place; then it lists the changed files. A shown output that still
matches (including one with a ``…`` wildcard) is left as it is. Review ``git diff``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str]) -> int:
    selectors = []
    for name in argv:
        path = (Path.cwd() / name).resolve()
        rel = path.relative_to(ROOT)
        if rel == Path("README.md"):
            selectors.append("readme_blocks")
        elif rel.parts[0] == "docs":
            selectors.append(f"documentation_examples and {rel.relative_to('docs')}")
        else:
            print(f"{name}: not README.md or a page under docs/", file=sys.stderr)
            return 2
    cmd = [sys.executable, "-m", "pytest", "tests/test_readme.py", "--refresh-doc-outputs",
           "-p", "no:cacheprovider", "-q", "-s", "-n", "0"]
    cmd += ["-k", " or ".join(f"({s})" for s in selectors)] if selectors else [
        "-k", "readme_blocks or documentation_examples"]
    env_path = str(ROOT / "src")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [env_path, *filter(None, [os.environ.get("PYTHONPATH")])])}
    run = subprocess.run(cmd, cwd=ROOT, env=env)
    diff = subprocess.run(["git", "diff", "--stat", "--", "README.md", "docs"], cwd=ROOT,
                          capture_output=True, text=True)
    print(diff.stdout.strip() or "no shown output changed")
    return run.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
