"""Every code block of README.md (and of the docs site) runs, in order, as a user would.

Blocks fenced as ``python`` run in one shared namespace; ``bash`` blocks run with
``bash -euo pipefail``; ``console`` blocks run each ``$ command`` and check its exit code
(2 when the README shows a ``dpfair: error:`` line after it, else 0, and that error line
itself). Everything runs in one temporary directory, with a ``dpfair`` on PATH that is this
interpreter's ``python -m dpfair.cli``. Example files come from the documented
``dpfair datasets`` commands inside the README itself.

A block preceded by ``<!-- skip-test: reason -->`` is not run; the reason is required, and
the README says why such blocks are skipped (full reproductions, a cluster, a fresh venv).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
README = REPO_ROOT / "README.md"
RUN_LANGS = {"python", "bash", "console"}
_SKIP = re.compile(r"^<!--\s*skip-test\s*:?\s*(.*?)\s*-->$")
_FENCE = re.compile(r"^(`{3,})\s*([\w+-]*)")


@dataclass(frozen=True)
class Block:
    """One fenced code block."""

    lang: str
    code: str
    line: int  # 1-based line of the opening fence
    skip_reason: str | None


def parse_blocks(text: str) -> list[Block]:
    """The fenced code blocks of a Markdown text, with their skip markers."""
    blocks: list[Block] = []
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
        reason = skip.group(1) if skip else None
        blocks.append(Block(lang, "\n".join(body) + "\n", start + 1, reason))
        previous = ""
        i += 1
    return blocks


def _console_script(code: str) -> tuple[str, list[tuple[str, int, str | None]]]:
    """A bash script running each ``$ command`` and the expected (command, rc, error line)."""
    commands: list[tuple[str, list[str]]] = []
    lines = code.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("$ "):
            cmd = line[2:]
            while cmd.endswith("\\") and i + 1 < len(lines):
                i += 1
                cmd = cmd[:-1] + " " + lines[i].strip()
            commands.append((cmd, []))
        elif commands:
            commands[-1][1].append(line)
        i += 1
    expected: list[tuple[str, int, str | None]] = []
    parts = []
    for k, (cmd, output) in enumerate(commands):
        errors = [o for o in output if o.startswith("dpfair: error:")]
        if cmd.strip() == "echo $?":  # the README shows the previous command's exit code
            shown = output[0].strip() if output else ""
            expected.append((cmd, 0, None))
            parts.append(
                f'[ "$__rc" = "{shown}" ] || echo "echo \\$? shows $__rc, README: {shown}" >&2; '
                f"echo 0 > .rc-{k}"
            )
            continue
        expected.append((cmd, 2 if errors else 0, errors[0] if errors else None))
        parts.append(f"{cmd} 2> .err-{k}; __rc=$?; cat .err-{k} >&2; echo $__rc > .rc-{k}")
    return "\n".join(parts) + "\n", expected


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


def test_parser_finds_blocks_and_skip_markers() -> None:
    text = (
        "intro\n<!-- skip-test: needs a cluster -->\n\n```bash\nfalse\n```\n"
        "```python\nx = 1\n```\n````console\n$ echo hi\nhi\n````\n"
    )
    blocks = parse_blocks(text)
    assert [(b.lang, b.skip_reason) for b in blocks] == [
        ("bash", "needs a cluster"), ("python", None), ("console", None)
    ]
    assert blocks[1].code == "x = 1\n"


def test_every_skipped_block_gives_its_reason() -> None:
    for block in parse_blocks(README.read_text(encoding="utf-8")):
        if block.skip_reason is not None:
            assert block.skip_reason, f"README.md:{block.line}: skip-test without a reason"


def run_blocks(blocks: list[Block], source: str, tmp_path: Path) -> None:
    """Run ``blocks`` in order in ``tmp_path/work`` (python blocks share one namespace)."""
    work = tmp_path / "work"
    work.mkdir()
    bin_dir = tmp_path / "bin"
    _shims(bin_dir)
    env = _env(bin_dir)
    namespace: dict[str, object] = {"__name__": "__readme__"}
    old_cwd = Path.cwd()
    os.chdir(work)
    try:
        for block in blocks:
            _run_block(block, f"{source}:{block.line} ({block.lang})", work, env, namespace)
    finally:
        os.chdir(old_cwd)


def _run_block(
    block: Block, where: str, work: Path, env: dict[str, str], namespace: dict[str, object]
) -> None:
    if block.lang == "python":
        try:
            exec(compile(block.code, where, "exec"), namespace)
        except Exception as exc:  # pragma: no cover - the failure message
            pytest.fail(f"{where} raised {type(exc).__name__}: {exc}")
        return
    if block.lang == "bash":
        run = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", block.code],
            cwd=work, env=env, capture_output=True, text=True, timeout=900,
        )
        assert run.returncode == 0, f"{where} exited {run.returncode}:\n{run.stderr[-3000:]}"
        return
    script, expected = _console_script(block.code)
    run = subprocess.run(
        ["bash", "-c", script], cwd=work, env=env, capture_output=True, text=True, timeout=900
    )
    assert "echo $? shows" not in run.stderr, f"{where}: {run.stderr[-2000:]}"
    for k, (cmd, rc, error) in enumerate(expected):
        got = int((work / f".rc-{k}").read_text())
        assert got == rc, f"{where}: `{cmd}` exited {got}, expected {rc}:\n{run.stderr[-3000:]}"
        if error is not None:
            err = (work / f".err-{k}").read_text().strip()
            assert err == error, f"{where}: `{cmd}` printed {err!r}, README shows {error!r}"


def _runnable(path: Path) -> list[Block]:
    return [
        b
        for b in parse_blocks(path.read_text(encoding="utf-8"))
        if b.lang in RUN_LANGS and b.skip_reason is None
    ]


def test_readme_blocks_run_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MPLBACKEND", "Agg")
    blocks = _runnable(README)
    assert any(b.lang == "python" for b in blocks) and any(b.lang != "python" for b in blocks)
    run_blocks(blocks, "README.md", tmp_path)


DOC_PAGES = sorted(
    p for p in (REPO_ROOT / "docs").rglob("*.md") if _runnable(p)
)


@pytest.mark.parametrize(
    "page", DOC_PAGES, ids=lambda p: str(p.relative_to(REPO_ROOT / "docs"))
)
def test_documentation_examples_run(
    page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The code examples of the documentation site run too (each page on its own)."""
    monkeypatch.setenv("MPLBACKEND", "Agg")
    run_blocks(_runnable(page), str(page.relative_to(REPO_ROOT)), tmp_path)


def test_every_doc_skip_gives_its_reason() -> None:
    for page in (REPO_ROOT / "docs").rglob("*.md"):
        for block in parse_blocks(page.read_text(encoding="utf-8")):
            if block.skip_reason is not None:
                assert block.skip_reason, f"{page}:{block.line}: skip-test without a reason"
