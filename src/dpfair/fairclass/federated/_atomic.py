"""Atomic file writes for FDP-Fair's local files (state, keys, messages).

Local stand-in with the same names and signatures as the shared ``dpfair._atomic`` helper
(``write_bytes_atomic(path, data, *, mode=None)`` / ``write_text_atomic(...)``), so the
import can be swapped without touching the callers.

The bytes go to a temporary file in the target's directory, created with ``O_EXCL`` and
the requested mode from the start (never briefly world-readable), are fsync'ed, then
renamed over the target (``os.replace`` is atomic on POSIX) and the directory is fsync'ed.
A reader sees the old file or the new one, never a torn one.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

__all__ = ["write_bytes_atomic", "write_text_atomic"]


def write_bytes_atomic(
    path: str | os.PathLike[str], data: bytes, *, mode: int | None = None
) -> Path:
    """Write ``data`` to ``path`` atomically; ``mode`` (e.g. 0o600) is set at creation.

    Parameters
    ----------
    path : path-like
        Target file (replaced if it exists).
    data : bytes
    mode : int, optional
        Permissions of the new file; default 0o644 minus the umask.
    """
    target = Path(path)
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(8)}.tmp")
    perm = 0o644 if mode is None else mode
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, perm)
    try:
        if mode is not None:
            os.fchmod(fd, mode)  # exact mode, whatever the umask
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    with contextlib.suppress(OSError):
        dfd = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    return target


def write_text_atomic(
    path: str | os.PathLike[str], text: str, *, mode: int | None = None
) -> Path:
    """:func:`write_bytes_atomic` of ``text`` encoded as UTF-8."""
    return write_bytes_atomic(path, text.encode("utf-8"), mode=mode)
