"""A persistent privacy ledger: an append-only journal file bound to one data set.

What ``dpfair ledger`` and every ``--ledger FILE`` option use, so that one total budget holds
across processes and crashes. The composition rules are those of the in-memory
:class:`~dpfair.privacy.Ledger` (:func:`~dpfair.privacy.cost_in_measure`).

Journal format (``dpfair-ledger`` version 1), one JSON object per line:

* line 1, the header: ``{"format": "dpfair-ledger", "version": 1, "id": ..., "created":
  ..., "cap": {Budget}, "data": {"path": ..., "fingerprint": "sha256:..."} | null,
  "convert_delta": δ' | null}``;
* each following line, a charge: ``{"seq": k, "time": ..., "label": ..., "params": {...},
  "cost": {Budget}, "charged": {Budget}, "key": str | null, "prev": sha256 of the previous
  line}``.

Every charge is appended under an exclusive ``flock`` on the file, after re-reading and
re-checking the whole journal, and fsync'ed before :meth:`LedgerFile.charge` returns, so two
processes can never both pass the cap. A crash can only tear the *last* line, whose release
had not happened yet (the caller releases only after ``charge`` returns): a torn last line is
ignored when reading and cut off by the next charge; no earlier entry is ever rewritten. The
``prev`` hash chain detects edited, deleted or reordered entries (integrity against
accidents, not authenticity against someone who can write the file: keep the file where only
the data holder can write).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dpfair._errors import InvalidParameterError, LedgerError
from dpfair.privacy._budget import Budget
from dpfair.privacy._ledger import Ledger, LedgerRecord, budget_from_dict, now_utc

__all__ = ["LEDGER_FORMAT", "LEDGER_VERSION", "LedgerFile", "fingerprint_file"]

LEDGER_FORMAT = "dpfair-ledger"
LEDGER_VERSION = 1


def fingerprint_file(path: str | os.PathLike[str], *, chunk: int = 1 << 22) -> str:
    """SHA-256 of a file's bytes, as ``"sha256:<hex>"`` (streamed, O(1) memory)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return "sha256:" + h.hexdigest()


def _line_hash(line: bytes) -> str:
    return hashlib.sha256(line).hexdigest()


@dataclass(frozen=True)
class _Parsed:
    header: dict[str, Any]
    ledger: Ledger
    last_hash: str
    good_bytes: int  # length of the well-formed prefix (everything before a torn last line)


def _parse(raw: bytes, path: Path) -> _Parsed:
    """Parse and verify a whole journal; a torn (unterminated) last line is ignored."""
    if not raw:
        raise LedgerError(f"ledger={path}: the file is empty; it is not a dpfair ledger.")
    lines = raw.split(b"\n")
    torn = lines[-1]  # after the final newline: b"" unless the last write was torn
    lines = lines[:-1]
    good_bytes = len(raw) - len(torn)
    if not lines:
        raise LedgerError(
            f"ledger={path}: truncated before its header was complete; not a usable ledger."
        )
    try:
        header = json.loads(lines[0])
    except (ValueError, UnicodeDecodeError):
        raise LedgerError(
            f"ledger={path}: line 1 is not JSON; it is not a dpfair ledger."
        ) from None
    if not isinstance(header, dict) or header.get("format") != LEDGER_FORMAT:
        raise LedgerError(f"ledger={path}: not a dpfair ledger (no '{LEDGER_FORMAT}' header).")
    if header.get("version") != LEDGER_VERSION:
        raise LedgerError(
            f"ledger={path}: ledger version {header.get('version')!r} is not supported "
            f"(this dpfair reads version {LEDGER_VERSION})."
        )
    cap = budget_from_dict(header.get("cap"), where=f"ledger={path}: cap")
    try:
        ledger = Ledger(cap, convert_delta=header.get("convert_delta"))
    except InvalidParameterError as exc:
        raise LedgerError(f"ledger={path}: invalid header ({exc}).") from None
    prev = _line_hash(lines[0])
    for lineno, line in enumerate(lines[1:], start=2):
        where = f"ledger={path}: line {lineno}"
        try:
            entry = json.loads(line)
        except (ValueError, UnicodeDecodeError):
            raise LedgerError(f"{where} is corrupt (not JSON); refusing to use it.") from None
        if not isinstance(entry, dict):
            raise LedgerError(f"{where} is corrupt (not an object).")
        if entry.get("prev") != prev:
            raise LedgerError(
                f"{where}: the hash chain is broken (an entry was edited, removed or "
                "reordered); refusing to use this ledger."
            )
        if entry.get("seq") != lineno - 1:
            raise LedgerError(
                f"{where}: sequence number {entry.get('seq')!r}, expected {lineno - 1}."
            )
        cost = budget_from_dict(entry.get("cost"), where=f"{where}: cost")
        charged = budget_from_dict(entry.get("charged"), where=f"{where}: charged")
        if charged.kind != cap.kind:
            raise LedgerError(f"{where}: charge in measure {charged.kind}, cap is {cap.kind}.")
        key = entry.get("key")
        params = entry.get("params", {})
        ledger.records.append(
            LedgerRecord(
                seq=lineno - 1,
                time=str(entry.get("time", "")),
                label=str(entry.get("label", "")),
                params=params if isinstance(params, dict) else {},
                cost=cost,
                charged=charged,
                key=key if isinstance(key, str) else None,
            )
        )
        prev = _line_hash(line)
    return _Parsed(header=header, ledger=ledger, last_hash=prev, good_bytes=good_bytes)


class LedgerFile:
    """A persistent privacy ledger: an append-only journal bound to one data set.

    Create one with :meth:`create`, open an existing one with :meth:`open`. Every read
    re-parses the file, so several processes can share it; :meth:`charge` holds an
    exclusive lock while it re-checks and appends.

    Parameters
    ----------
    path : path-like
        The journal file.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._read()  # validate now: a bad file fails at open, not at the first charge

    # ------------------------------------------------------------------ creation
    @classmethod
    def create(
        cls,
        path: str | os.PathLike[str],
        cap: Budget,
        *,
        data: str | os.PathLike[str] | None = None,
        convert_delta: float | None = None,
        mode: int = 0o600,
    ) -> LedgerFile:
        """Create a new ledger file (refuses to overwrite an existing one).

        Parameters
        ----------
        path : path-like
            Where to write the journal.
        cap : Budget
            Total budget for every release on ``data``.
        data : path-like, optional
            The data file the ledger is bound to: its path and SHA-256 are recorded, and
            :meth:`check_data` refuses any other file.
        convert_delta : float, optional
            δ' at which zCDP releases are converted for an (ε, δ) cap.
        mode : int
            File permissions (default 0600).
        """
        Ledger(cap, convert_delta=convert_delta)  # validates cap and convert_delta
        target = Path(path)
        binding = None
        if data is not None:
            dpath = Path(data)
            if not dpath.is_file():
                raise InvalidParameterError(f"data={data}: no such file to bind the ledger to.")
            binding = {"path": str(dpath.resolve()), "fingerprint": fingerprint_file(dpath)}
        header = {
            "format": LEDGER_FORMAT,
            "version": LEDGER_VERSION,
            "id": uuid.uuid4().hex,
            "created": now_utc(),
            "cap": cap.to_dict(),
            "convert_delta": convert_delta,
            "data": binding,
        }
        line = (json.dumps(header, sort_keys=True, allow_nan=False) + "\n").encode()
        tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(line)
                fh.flush()
                os.fsync(fh.fileno())
            try:
                os.link(tmp, target)  # atomic, and fails if target exists
            except FileExistsError:
                raise InvalidParameterError(
                    f"ledger={target}: a file already exists there; a ledger is never "
                    "overwritten (its history would be lost). Choose another path."
                ) from None
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
        _fsync_dir(target.parent)
        return cls(target)

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> LedgerFile:
        """Open an existing ledger (raises :class:`LedgerError` if it is not a valid one)."""
        p = Path(path)
        if not p.is_file():
            raise LedgerError(
                f"ledger={path}: no such ledger file; create one with `dpfair ledger init`."
            )
        return cls(p)

    # ------------------------------------------------------------------ reading
    def _read(self) -> _Parsed:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            raise LedgerError(f"ledger={self.path}: no such ledger file.") from None
        except IsADirectoryError:
            raise LedgerError(f"ledger={self.path}: is a directory, not a ledger file.") from None
        return _parse(raw, self.path)

    @property
    def header(self) -> dict[str, Any]:
        """The journal's header (cap, data binding, id, creation time)."""
        return dict(self._read().header)

    @property
    def cap(self) -> Budget:
        """The total budget."""
        return self._read().ledger.cap

    @property
    def records(self) -> list[LedgerRecord]:
        """Every charged release, oldest first."""
        return list(self._read().ledger.records)

    @property
    def spent(self) -> Budget:
        """Composed total so far, in the cap's measure."""
        return self._read().ledger.spent

    @property
    def remaining(self) -> Budget:
        """What can still be spent, in the cap's measure."""
        return self._read().ledger.remaining

    def snapshot(self) -> Ledger:
        """An in-memory copy of the ledger as it is now."""
        return self._read().ledger

    def has_key(self, key: str) -> bool:
        """Has the single-use release ``key`` been charged?"""
        return self._read().ledger.has_key(key)

    def check_data(self, data: str | os.PathLike[str]) -> None:
        """Refuse (:class:`LedgerError`) a data file other than the one the ledger is bound to.

        The comparison is by content (SHA-256), so a renamed or moved copy of the same
        bytes is accepted and a modified file at the same path is refused.
        """
        binding = self._read().header.get("data")
        if binding is None:
            return
        if not isinstance(binding, dict) or "fingerprint" not in binding:
            raise LedgerError(f"ledger={self.path}: malformed data binding in the header.")
        dpath = Path(data)
        if not dpath.is_file():
            raise LedgerError(
                f"ledger={self.path}: data {data} is not a file; the ledger is bound to "
                f"{binding.get('path')} and can only check a file's content."
            )
        actual = fingerprint_file(dpath)
        if actual != binding["fingerprint"]:
            raise LedgerError(
                f"ledger={self.path} is bound to {binding.get('path')} "
                f"({binding['fingerprint'][:19]}…), not to {data} ({actual[:19]}…); use the "
                "ledger of this data set or create one with `dpfair ledger init`."
            )

    # ------------------------------------------------------------------ charging
    @contextlib.contextmanager
    def _locked(self) -> Iterator[int]:
        fd = os.open(self.path, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield fd
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def check(
        self,
        cost: Budget,
        *,
        label: str = "",
        bounded_range: bool = False,
        convert_delta: float | None = None,
        key: str | None = None,
    ) -> Budget:
        """Raise as :meth:`charge` would right now, without recording (a pre-flight check).

        Another process may charge in between; :meth:`charge` checks again under the lock.
        """
        return self._read().ledger.check(
            cost, label=label, bounded_range=bounded_range, convert_delta=convert_delta, key=key
        )

    def charge(
        self,
        cost: Budget,
        *,
        label: str = "",
        params: Mapping[str, Any] | None = None,
        bounded_range: bool = False,
        convert_delta: float | None = None,
        key: str | None = None,
    ) -> LedgerRecord:
        """Append a charge atomically under an exclusive lock, or raise and append nothing.

        Same parameters and errors as :meth:`Ledger.charge`. When this returns, the entry is
        on disk (fsync'ed); release only after it returns.
        """
        with self._locked() as fd:
            with open(self.path, "rb") as fh:  # the locked inode
                raw = fh.read()
            parsed = _parse(raw, self.path)
            rec = parsed.ledger.charge(
                cost,
                label=label,
                params=params,
                bounded_range=bounded_range,
                convert_delta=convert_delta,
                key=key,
            )
            entry = rec.to_dict()
            entry["prev"] = parsed.last_hash
            line = (json.dumps(entry, sort_keys=True, allow_nan=False) + "\n").encode()
            if parsed.good_bytes != len(raw):
                os.ftruncate(fd, parsed.good_bytes)  # cut a torn last line (never released)
            os.lseek(fd, parsed.good_bytes, os.SEEK_SET)
            written = 0
            while written < len(line):
                written += os.write(fd, line[written:])
            os.fsync(fd)
        return rec

    def summary(self) -> dict[str, Any]:
        """JSON-ready summary: header, cap, spent, remaining and every release."""
        parsed = self._read()
        out = parsed.ledger.summary()
        out["ledger"] = str(self.path)
        out["id"] = parsed.header.get("id")
        out["created"] = parsed.header.get("created")
        out["data"] = parsed.header.get("data")
        return out


def _fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
