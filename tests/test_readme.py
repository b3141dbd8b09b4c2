"""Every code block of README.md (and of the docs site) runs, in order, and prints what it shows.

Blocks fenced as ``python`` run in one shared namespace; ``bash`` blocks run with
``bash -euo pipefail``; ``console`` blocks run each ``$ command``. Everything runs in one
temporary directory, with a ``dpfair`` on PATH that is this interpreter's
``python -m dpfair.cli``. Example files come from the documented ``dpfair datasets``
commands inside the README itself.

Printed outputs are checked, doctest-style:

* a ``python`` or ``bash`` block followed by ``<!-- output -->`` and a fenced ``text``
  block must print exactly that text (stdout; for ``bash``, stdout and stderr as the
  terminal shows them);
* in a ``console`` block, the lines after each ``$ command`` are that command's output
  (stdout and stderr), and its exit code must be 2 when they contain a ``dpfair: error:``
  line, else 0. ``$ echo $?`` shows the previous command's exit code.

Only whitespace is normalised (runs of spaces and newlines compare equal). A ``…`` in a
shown output matches any text: use it only for what cannot be fixed (a temporary path).
A block preceded by ``<!-- skip-test: reason -->`` is not run; the reason is required.

When the code changes what an example prints, refresh the shown outputs from real runs::

    python tools/refresh_doc_outputs.py            # README.md and every docs page
    python tools/refresh_doc_outputs.py README.md  # one file

(the same as ``pytest tests/test_readme.py --refresh-doc-outputs``), then review the diff.
"""

from __future__ import annotations

import contextlib
import difflib
import io
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
README = REPO_ROOT / "README.md"
RUN_LANGS = {"python", "bash", "console"}
_SKIP = re.compile(r"^<!--\s*skip-test\s*:?\s*(.*?)\s*-->$")
_OUTPUT = re.compile(r"^<!--\s*output\s*-->$")
_FENCE = re.compile(r"^(`{3,})\s*([\w+-]*)")
REFRESH_HINT = "refresh the shown outputs with: python tools/refresh_doc_outputs.py"


@dataclass(frozen=True)
class Block:
    """One fenced code block (with the shown output that belongs to it, if any)."""

    lang: str
    code: str
    line: int  # 1-based line of the opening fence
    skip_reason: str | None
    end: int = 0  # 1-based line of the closing fence
    output: str | None = None  # the shown output (a following <!-- output --> text block)
    output_span: tuple[int, int] | None = None  # its fences' 1-based lines
    is_output: bool = field(default=False, compare=False)


def parse_blocks(text: str) -> list[Block]:
    """The fenced code blocks of a Markdown text, with their skip markers and outputs.

    An output block (``<!-- output -->`` then a fenced block) is attached to the code
    block before it and not listed on its own.
    """
    raw: list[Block] = []
    lines = text.splitlines()
    i = 0
    previous = ""  # last non-blank line before the current position
    while i < len(lines):
        match = _FENCE.match(lines[i].strip())
        if not match:
            if lines[i].strip():
                previous = lines[i].strip()
            i += 1
            continue
        fence, lang = match.group(1), match.group(2).lower()
        start = i
        body: list[str] = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i])
            i += 1
        skip = _SKIP.match(previous)
        raw.append(Block(lang, "\n".join(body) + "\n", start + 1,
                         skip.group(1) if skip else None, end=i + 1,
                         is_output=bool(_OUTPUT.match(previous))))
        previous = ""
        i += 1
    blocks: list[Block] = []
    for b in raw:
        if b.is_output:
            if not blocks or blocks[-1].lang not in ("python", "bash"):
                raise ValueError(f"line {b.line}: <!-- output --> follows no python/bash block")
            blocks[-1] = replace(blocks[-1], output=b.code, output_span=(b.line, b.end))
        else:
            blocks.append(b)
    return blocks


# --------------------------------------------------------------------------- comparison

def normalise(text: str) -> str:
    """Whitespace runs (spaces, tabs, newlines) as one space; ends stripped."""
    return " ".join(text.split())


def matches(shown: str, actual: str) -> bool:
    """``actual`` is ``shown`` up to whitespace, each ``…`` in ``shown`` matching any text."""
    want, got = normalise(shown), normalise(actual)
    if "…" not in want:
        return want == got
    pattern = ".*?".join(re.escape(part) for part in want.split("…"))
    return re.fullmatch(pattern, got, flags=re.DOTALL) is not None


def _diff(shown: str, actual: str) -> str:
    return "\n".join(difflib.unified_diff(
        shown.strip().splitlines(), actual.strip().splitlines(), "shown", "printed",
        lineterm="", n=1))


# --------------------------------------------------------------------------- console

@dataclass
class Command:
    """One ``$ command`` of a console block, its source lines and its shown output."""

    cmd: str
    source: list[str]
    shown: list[str]

    @property
    def expected_rc(self) -> int:
        return 2 if any(o.startswith("dpfair: error:") for o in self.shown) else 0


def console_commands(code: str) -> list[Command]:
    commands: list[Command] = []
    lines = code.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("$ "):
            source = [line]
            cmd = line[2:]
            while cmd.endswith("\\") and i + 1 < len(lines):
                i += 1
                source.append(lines[i])
                cmd = cmd[:-1] + " " + lines[i].strip()
            commands.append(Command(cmd, source, []))
        elif commands:
            commands[-1].shown.append(line)
        i += 1
    return commands


def _console_script(commands: list[Command]) -> str:
    parts = ["__rc=0"]
    for k, c in enumerate(commands):
        cmd = "echo $__rc" if c.cmd.strip() == "echo $?" else c.cmd
        parts.append(f"{{ {cmd}\n}} > .out-{k} 2>&1; __rc=$?; echo $__rc > .rc-{k}")
    return "\n".join(parts) + "\n"


# --------------------------------------------------------------------------- running

def _env(bin_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join(
        [str(REPO_ROOT / "src"), *filter(None, [env.get("PYTHONPATH")])]
    )
    env.update(MPLBACKEND="Agg", COLUMNS="100", PYTHONHASHSEED="0")
    return env


def _shims(bin_dir: Path) -> None:
    bin_dir.mkdir()
    for name, target in (("dpfair", "-m dpfair.cli"), ("python", "")):
        shim = bin_dir / name
        shim.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} {target} "$@"\n')
        shim.chmod(0o755)


@dataclass
class Mismatch:
    """A shown output that differs from the printed one (and what to write instead)."""

    where: str
    shown: str
    actual: str
    span: tuple[int, int]  # 1-based lines to replace (exclusive of fences)
    replacement: list[str]


def run_blocks(blocks: list[Block], source: str, tmp_path: Path) -> list[Mismatch]:
    """Run ``blocks`` in order in ``tmp_path/work``; the shown outputs that differ.

    A block that fails (an exception, a non-zero exit, an unexpected exit code) fails
    the test at once; mismatching outputs are collected.
    """
    work = tmp_path / "work"
    work.mkdir()
    bin_dir = tmp_path / "bin"
    _shims(bin_dir)
    env = _env(bin_dir)
    namespace: dict[str, object] = {"__name__": "__readme__"}
    old_cwd = Path.cwd()
    os.chdir(work)
    found: list[Mismatch] = []
    try:
        for block in blocks:
            where = f"{source}:{block.line} ({block.lang})"
            found += _run_block(block, where, work, env, namespace)
    finally:
        os.chdir(old_cwd)
    return found


def _run_block(
    block: Block, where: str, work: Path, env: dict[str, str], namespace: dict[str, object]
) -> list[Mismatch]:
    if block.lang == "python":
        buf = io.StringIO()
        try:
            with contextlib.redirect_stdout(buf):
                exec(compile(block.code, where, "exec"), namespace)
        except Exception as exc:  # pragma: no cover - the failure message
            pytest.fail(f"{where} raised {type(exc).__name__}: {exc}")
        return _check_output(block, where, buf.getvalue())
    if block.lang == "bash":
        run = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", block.code],
            cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            timeout=900,
        )
        assert run.returncode == 0, f"{where} exited {run.returncode}:\n{run.stdout[-3000:]}"
        return _check_output(block, where, run.stdout)
    commands = console_commands(block.code)
    subprocess.run(["bash", "-c", _console_script(commands)], cwd=work, env=env,
                   capture_output=True, text=True, timeout=900)
    body: list[str] = []
    bad = False
    for k, c in enumerate(commands):
        got = int((work / f".rc-{k}").read_text())
        out = (work / f".out-{k}").read_text()
        assert got == c.expected_rc, (
            f"{where}: `{c.cmd}` exited {got}, expected {c.expected_rc}:\n{out[-3000:]}"
        )
        shown = "\n".join(c.shown)
        keep = matches(shown, out)
        bad |= not keep
        body += c.source + (c.shown if keep else _lines(out))
    if not bad:
        return []
    actual = "\n".join(body)
    return [Mismatch(where, block.code, actual, (block.line + 1, block.end - 1), body)]


def _check_output(block: Block, where: str, printed: str) -> list[Mismatch]:
    if block.output is None or block.output_span is None or matches(block.output, printed):
        return []
    first, last = block.output_span
    return [Mismatch(where, block.output, printed, (first + 1, last - 1), _lines(printed))]


def _lines(printed: str) -> list[str]:
    """Printed text as lines for the page (trailing spaces dropped: they compare equal)."""
    return [line.rstrip() for line in printed.rstrip("\n").splitlines()]


def apply_refresh(path: Path, mismatches: list[Mismatch]) -> None:
    """Write the printed outputs in place of the shown ones (bottom-up, so lines stay put)."""
    lines = path.read_text(encoding="utf-8").split("\n")
    for m in sorted(mismatches, key=lambda m: -m.span[0]):
        first, last = m.span
        lines[first - 1:last] = m.replacement
    path.write_text("\n".join(lines), encoding="utf-8")


def _runnable(path: Path) -> list[Block]:
    return [
        b
        for b in parse_blocks(path.read_text(encoding="utf-8"))
        if b.lang in RUN_LANGS and b.skip_reason is None
    ]


def _check_page(path: Path, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    source = str(path.relative_to(REPO_ROOT))
    mismatches = run_blocks(_runnable(path), source, tmp_path)
    if not mismatches:
        return
    if request.config.getoption("--refresh-doc-outputs", default=False):
        apply_refresh(path, mismatches)
        print(f"{source}: refreshed {len(mismatches)} shown output(s): "
              + ", ".join(m.where.split(":", 1)[1] for m in mismatches))
        return
    report = "\n\n".join(f"{m.where}: the shown output is stale\n{_diff(m.shown, m.actual)}"
                         for m in mismatches)
    pytest.fail(f"{report}\n\n{REFRESH_HINT}", pytrace=False)


# --------------------------------------------------------------------------- tests

def test_parser_finds_blocks_skip_markers_and_outputs() -> None:
    text = (
        "intro\n<!-- skip-test: needs a cluster -->\n\n```bash\nfalse\n```\n"
        "```python\nprint(1)\n```\n\n<!-- output -->\n```text\n1\n```\n"
        "````console\n$ echo hi\nhi\n````\n"
    )
    blocks = parse_blocks(text)
    assert [(b.lang, b.skip_reason) for b in blocks] == [
        ("bash", "needs a cluster"), ("python", None), ("console", None)
    ]
    assert blocks[1].code == "print(1)\n" and blocks[1].output == "1\n"
    assert blocks[1].output_span == (12, 14)


def test_outputs_compare_up_to_whitespace_and_ellipsis() -> None:
    assert matches("a  b\n c", "a b c\n")
    assert not matches("a b", "a c")
    assert matches("ledger=/tmp/…/x.ledger: refused", "ledger=/tmp/abc123/x.ledger: refused")
    assert not matches("x … y", "x z")


def test_a_stale_output_is_reported_and_refreshed(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "```python\nprint('new', 2)\n```\n\n<!-- output -->\n```text\nold 1\n```\n\n"
        "```console\n$ echo fresh\nstale\n$ echo same\nsame\n```\n", encoding="utf-8")
    found = run_blocks(_runnable(page), "page.md", tmp_path)
    assert [m.where for m in found] == ["page.md:1 (python)", "page.md:10 (console)"]
    apply_refresh(page, found)
    text = page.read_text(encoding="utf-8")
    assert "```text\nnew 2\n```" in text and "$ echo fresh\nfresh\n$ echo same\nsame" in text
    (tmp_path / "work").rename(tmp_path / "work-1")
    (tmp_path / "bin").rename(tmp_path / "bin-1")
    assert run_blocks(_runnable(page), "page.md", tmp_path) == []


def test_every_skipped_block_gives_its_reason() -> None:
    for block in parse_blocks(README.read_text(encoding="utf-8")):
        if block.skip_reason is not None:
            assert block.skip_reason, f"README.md:{block.line}: skip-test without a reason"


def test_readme_blocks_run_in_order_and_print_what_they_show(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    monkeypatch.setenv("MPLBACKEND", "Agg")
    blocks = _runnable(README)
    assert any(b.lang == "python" for b in blocks) and any(b.lang != "python" for b in blocks)
    _check_page(README, tmp_path, request)


DOC_PAGES = sorted(
    p for p in (REPO_ROOT / "docs").rglob("*.md") if _runnable(p)
)


@pytest.mark.parametrize(
    "page", DOC_PAGES, ids=lambda p: str(p.relative_to(REPO_ROOT / "docs"))
)
def test_documentation_examples_run(
    page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    """The code examples of the documentation site run and print what they show too."""
    monkeypatch.setenv("MPLBACKEND", "Agg")
    _check_page(page, tmp_path, request)


def test_every_doc_skip_gives_its_reason() -> None:
    for page in (REPO_ROOT / "docs").rglob("*.md"):
        for block in parse_blocks(page.read_text(encoding="utf-8")):
            if block.skip_reason is not None:
                assert block.skip_reason, f"{page}:{block.line}: skip-test without a reason"
