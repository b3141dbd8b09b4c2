"""The user's dpfair state directory: ledgers' high-water marks and the data registry.

A ledger file alone can be rolled back by whoever can write it: restore yesterday's copy,
or cut its last lines, and the budget spent since is forgotten. So every ledger also leaves
two records in a second place, the user's state directory:

* a **high-water mark** per ledger (``hwm/<ledger id>.json``): the sequence number and the
  SHA-256 of the last line charged through this account. A ledger shorter than its mark,
  or whose line at that sequence number differs (a fork: another history grown from an
  older copy), is refused;
* a **registry** keyed by the data's content (``registry/<sha256 of the data>.json``): the
  one ledger of that data set, by id and path. ``dpfair ledger init`` refuses a second
  ledger for the same bytes, a ledger that is not the registered one is refused for them,
  and an FDP site's cap (``--max-epsilon/--max-delta``) is found here, whatever directory
  the run is started in.

Location: ``$DPFAIR_STATE_DIR``, else ``$XDG_STATE_HOME/dpfair``, else
``~/.local/state/dpfair``. The directory is 0700, every file 0600, every write atomic
(temporary file, fsync, rename, fsync of the directory) and made under an exclusive lock
(``.lock``), so concurrent processes never lose an update.

What this defends against, and what it cannot: ``docs/ledgers.md``. In short: accidents,
crashes, restored backups and other users; not the owner of the account, who can delete
the state directory as well as the ledger (``dpfair ledger forget`` does it deliberately).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import json
import os
import re
import stat
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dpfair._atomic import write_bytes_atomic
from dpfair._errors import LedgerError

__all__ = [
    "STATE_ENV",
    "forget",
    "locked",
    "lookup",
    "read_hwm",
    "register",
    "state_dir",
    "write_hwm",
]

#: Environment variable naming the state directory.
STATE_ENV = "DPFAIR_STATE_DIR"

_HEX_ID = re.compile(r"[0-9a-f]{32}")
_FINGERPRINT = re.compile(r"sha256:([0-9a-f]{64})")
_HWM_FORMAT = "dpfair-high-water-mark"
_REG_FORMAT = "dpfair-registry-entry"

_lock = threading.RLock()
_held: list[int] = []  # the flock'ed descriptor while this process holds the lock


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="microseconds")


def state_dir(*, create: bool = True) -> Path:
    """The state directory (created 0700 with its subdirectories when ``create``).

    Raises
    ------
    LedgerError
        It exists but is not a directory, or belongs to another user.
    """
    env = os.environ.get(STATE_ENV)
    if env:
        base = Path(env).expanduser()
    else:
        xdg = os.environ.get("XDG_STATE_HOME")
        root = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".local" / "state"
        base = root / "dpfair"
    if create:
        for d in (base, base / "hwm", base / "registry"):
            _ensure_private_dir(d)
    return base


def _ensure_private_dir(d: Path) -> None:
    try:
        d.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:  # includes a file (not a directory) already at that path
        raise LedgerError(
            f"state directory {d}: cannot create it ({exc.strerror}); set {STATE_ENV} to a "
            "directory you own."
        ) from None
    st = os.stat(d)
    if not stat.S_ISDIR(st.st_mode):
        raise LedgerError(f"state directory {d}: not a directory; set {STATE_ENV} elsewhere.")
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        raise LedgerError(
            f"state directory {d}: belongs to another user (uid {st.st_uid}); the ledgers' "
            f"high-water marks must be yours alone. Set {STATE_ENV} to a directory you own."
        )
    if stat.S_IMODE(st.st_mode) != 0o700:
        os.chmod(d, 0o700)


@contextlib.contextmanager
def locked() -> Iterator[Path]:
    """Hold the state directory's exclusive lock (re-entrant within a process)."""
    with _lock:
        base = state_dir()
        if _held:
            yield base
            return
        fd = os.open(base / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            _held.append(fd)
            try:
                yield base
            finally:
                _held.pop()
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)


def _check_id(ledger_id: Any) -> str:
    if not isinstance(ledger_id, str) or not _HEX_ID.fullmatch(ledger_id):
        raise LedgerError(
            f"ledger id {ledger_id!r}: malformed (expected 32 hex digits); the header was "
            "edited, refusing to use this ledger."
        )
    return ledger_id


def _fp_hex(fingerprint: str) -> str:
    m = _FINGERPRINT.fullmatch(fingerprint)
    if m is None:
        raise LedgerError(f"fingerprint {fingerprint!r}: expected 'sha256:<64 hex digits>'.")
    return m.group(1)


def _read_json(path: Path, fmt: str) -> dict[str, Any] | None:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        doc = None
    if not isinstance(doc, dict) or doc.get("format") != fmt:
        raise LedgerError(
            f"state file {path} is corrupt; restore it from a backup, or remove it "
            "deliberately (`dpfair ledger forget`), which forgets what it protected."
        )
    return doc


def _write_json(path: Path, doc: dict[str, Any]) -> None:
    data = (json.dumps(doc, sort_keys=True, allow_nan=False) + "\n").encode()
    write_bytes_atomic(path, data, mode=0o600)


# --------------------------------------------------------------------------- high-water
def read_hwm(ledger_id: str) -> tuple[int, str] | None:
    """The recorded (sequence number, head hash) of a ledger, or None if none is recorded."""
    base = state_dir()
    doc = _read_json(base / "hwm" / f"{_check_id(ledger_id)}.json", _HWM_FORMAT)
    if doc is None:
        return None
    seq, head = doc.get("seq"), doc.get("head")
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0 or not isinstance(head, str):
        raise LedgerError(f"state file {base / 'hwm' / ledger_id}.json is corrupt.")
    return seq, head


def write_hwm(ledger_id: str, seq: int, head: str, path: Path) -> None:
    """Record a ledger's new high-water mark (never lowers it). Call under :func:`locked`."""
    with locked() as base:
        old = read_hwm(ledger_id)
        if old is not None and old[0] > seq:
            return
        _write_json(
            base / "hwm" / f"{_check_id(ledger_id)}.json",
            {
                "format": _HWM_FORMAT,
                "version": 1,
                "ledger_id": ledger_id,
                "seq": int(seq),
                "head": head,
                "path": str(Path(path).resolve()),
                "updated": _now(),
            },
        )


# --------------------------------------------------------------------------- registry
def lookup(fingerprint: str) -> dict[str, Any] | None:
    """The registry entry of a data set's content (ledger id, path), or None.

    A state directory that does not exist yet holds no registry: None, and nothing is
    created (a Session on a file only looks, it need not be able to write there).
    """
    if not (state_dir(create=False) / "registry").is_dir():
        return None
    base = state_dir()
    doc = _read_json(base / "registry" / f"{_fp_hex(fingerprint)}.json", _REG_FORMAT)
    if doc is None:
        return None
    if doc.get("fingerprint") != fingerprint or not isinstance(doc.get("path"), str):
        raise LedgerError(f"state file {base / 'registry'}/{_fp_hex(fingerprint)}.json is corrupt.")
    _check_id(doc.get("ledger_id"))
    return doc


def register(fingerprint: str, ledger_id: str, path: Path, *, purpose: str = "ledger") -> None:
    """Record ``ledger_id`` (at ``path``) as the ledger of the data ``fingerprint``.

    Call under :func:`locked` after :func:`lookup` found no other ledger.
    """
    with locked() as base:
        _write_json(
            base / "registry" / f"{_fp_hex(fingerprint)}.json",
            {
                "format": _REG_FORMAT,
                "version": 1,
                "fingerprint": fingerprint,
                "ledger_id": _check_id(ledger_id),
                "path": str(Path(path).resolve()),
                "purpose": purpose,
                "registered": _now(),
            },
        )


def forget(fingerprint: str) -> dict[str, Any] | None:
    """Remove a data set's registry entry and its ledger's high-water mark (deliberate reset).

    Returns the entry removed, or None if there was none.
    """
    with locked() as base:
        entry = lookup(fingerprint)
        if entry is None:
            return None
        with contextlib.suppress(FileNotFoundError):
            (base / "hwm" / f"{entry['ledger_id']}.json").unlink()
        (base / "registry" / f"{_fp_hex(fingerprint)}.json").unlink()
        return entry
