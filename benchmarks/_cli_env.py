"""Shared by the command-line timing benchmarks (``cli_startup.py``, ``fdp_walkthrough.py``):
which dpfair to time and how its bytecode is cached."""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--src`` (a checkout's src directory) and ``--no-bytecode-cache``."""
    parser.add_argument("--src", type=Path, default=None,
                        help="a checkout's src directory to time (default: this dpfair)")
    parser.add_argument("--no-bytecode-cache", action="store_true",
                        help="every process compiles dpfair afresh (no .pyc)")


def environment(
    args: argparse.Namespace,
) -> tuple[dict[str, str], tempfile.TemporaryDirectory[str], Path]:
    """The child processes' environment, the bytecode cache directory (keep it alive) and
    the timed ``src`` directory.

    By default bytecode is cached in a temporary directory, as an installed package would
    have it (this environment sets ``PYTHONDONTWRITEBYTECODE=1``).
    """
    if args.src is None:
        import dpfair

        src = Path(dpfair.__file__).resolve().parents[1]
    else:
        src = args.src.resolve()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), os.environ.get(
        "PYTHONPATH", "")]).rstrip(os.pathsep)}
    cache = tempfile.TemporaryDirectory(prefix="dpfair-pycache-")
    if args.no_bytecode_cache:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    else:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = cache.name
    return env, cache, src
