"""Atomic file writes: a reader sees the old file or the complete new one, never a part.

Every output dpfair writes (reports, results, saved models, protocol messages) goes through
:func:`atomic_open` (or the two one-shot helpers): the bytes go to a temporary file in the
destination's directory, are flushed and ``fsync``-ed, and the temporary file is renamed
over the destination with :func:`os.replace`, which POSIX and Windows perform atomically
within one file system. A crash, kill or exception at any point leaves either the previous
file untouched or no file at all (plus, after a hard kill only, a hidden ``.<name>.*.tmp``
file that can be deleted); it never leaves a truncated file under the real name.

The temporary file is created with mode ``0o600`` (``tempfile.mkstemp``), so private
content is never readable by others while it is being written; its final mode is ``mode``
if given, else what an ordinary ``open(path, "w")`` would give (the mode of the file being
replaced, or ``0o666`` minus the umask for a new file).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import stat
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

__all__ = [
    "atomic_open",
    "strict_json",
    "write_bytes_atomic",
    "write_json_atomic",
    "write_text_atomic",
]


def _umask() -> int:
    with contextlib.suppress(OSError, ValueError), open(
        "/proc/self/status", encoding="ascii"
    ) as fh:
        for line in fh:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    current = os.umask(0o022)  # no portable read-only query elsewhere
    os.umask(current)
    return current


def _final_mode(path: Path, mode: int | None) -> int:
    if mode is not None:
        return mode
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except OSError:
        return 0o666 & ~_umask()


def _fsync_dir(directory: Path) -> None:
    """Persist the rename itself (POSIX); a no-op where directories cannot be opened."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike[str], *, mode: int | None = None) -> Iterator[IO[bytes]]:
    """Open a temporary binary file; on a clean exit it atomically becomes ``path``.

    Parameters
    ----------
    path : str or path-like
        Destination. Its directory must exist.
    mode : int, optional
        Permission bits of the final file (e.g. ``0o600`` for private state). Default: the
        mode of the file being replaced, else ``0o666`` minus the umask.

    Yields
    ------
    file object (binary)
        Write the whole content to it. If the ``with`` block raises, the temporary file is
        removed and ``path`` is left as it was.
    """
    dest = Path(path)
    final_mode = _final_mode(dest, mode)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as fh:
            if hasattr(os, "fchmod"):
                os.fchmod(fh.fileno(), final_mode)
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        if not hasattr(os, "fchmod"):  # pragma: no cover - Windows
            os.chmod(tmp, final_mode)
        os.replace(tmp, dest)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    _fsync_dir(dest.parent)


def write_bytes_atomic(
    path: str | os.PathLike[str], data: bytes, *, mode: int | None = None
) -> Path:
    """Write ``data`` to ``path`` atomically (temporary file, fsync, rename).

    Parameters
    ----------
    path : str or path-like
        Destination; its directory must exist.
    data : bytes
        The complete new content.
    mode : int, optional
        Permission bits of the final file (e.g. ``0o600``); see :func:`atomic_open`.

    Returns
    -------
    pathlib.Path
        ``path``.
    """
    with atomic_open(path, mode=mode) as fh:
        fh.write(bytes(data))
    return Path(path)


def write_text_atomic(
    path: str | os.PathLike[str], text: str, *, mode: int | None = None
) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically (temporary file, fsync, rename).

    Parameters
    ----------
    path : str or path-like
        Destination; its directory must exist.
    text : str
        The complete new content, written as UTF-8 without newline translation.
    mode : int, optional
        Permission bits of the final file (e.g. ``0o600``); see :func:`atomic_open`.

    Returns
    -------
    pathlib.Path
        ``path``.
    """
    return write_bytes_atomic(path, text.encode("utf-8"), mode=mode)


def strict_json(value: Any) -> Any:
    """``value`` ready for strict JSON: numpy scalars unwrapped, non-finite floats as strings.

    Dicts, lists and tuples are converted recursively (tuples become lists); NaN and ±inf
    become ``"nan"``, ``"inf"``, ``"-inf"``, so ``json.dumps(..., allow_nan=False)``
    accepts the result. Anything else is returned unchanged.
    """
    np = sys.modules.get("numpy")  # a numpy scalar implies numpy is loaded; no import here
    if np is not None and isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, dict):
        return {k: strict_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict_json(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def write_json_atomic(
    path: str | os.PathLike[str], value: Any, *, mode: int | None = None
) -> Path:
    """Write ``value`` as strict JSON (:func:`strict_json`, indent 2, UTF-8) atomically.

    Parameters
    ----------
    path : str or path-like
        Destination; its directory must exist.
    value : JSON-like
        Dicts, lists, tuples, strings, numbers (numpy scalars included), booleans, None.
    mode : int, optional
        Permission bits of the final file; see :func:`atomic_open`.

    Returns
    -------
    pathlib.Path
        ``path``.
    """
    text = json.dumps(strict_json(value), indent=2, allow_nan=False)
    return write_text_atomic(path, text, mode=mode)
