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

  Optional ``"rows"``, ``"noise"`` and ``"part_of"`` fields (:class:`LedgerRecord`).

Every charge is appended under an exclusive ``flock`` on the file, after re-reading and
re-checking the whole journal, and fsync'ed before :meth:`LedgerFile.charge` returns, so two
processes can never both pass the cap. A crash can only tear the *last* line, whose release
had not happened yet (the caller releases only after ``charge`` returns): a cut last line
(not JSON) is ignored when reading and cut off by the next charge; no earlier entry is ever
rewritten. A last line that is complete but lacks its newline **counts** (deleting the final
newline refunds nothing). A write that fails (a full disk) is cut off again before
``charge`` raises.

The ``prev`` hash chain detects edited, deleted or reordered entries. Rolling the whole file
back (a restored older copy, cut lines, another history grown from an older copy) is caught
by the ledger's high-water mark in the user's state directory (:mod:`dpfair.privacy._state`),
written under the lock after every charge; the state directory's registry keeps one ledger
per data set (by the data's SHA-256). This is integrity against accidents, crashes, other
users and concurrent processes, not against the owner of the account, who can rewrite both
(``docs/ledgers.md``).
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
from dpfair.privacy import _state
from dpfair.privacy._budget import Budget
from dpfair.privacy._ledger import Ledger, LedgerRecord, budget_from_dict, now_utc

__all__ = ["LEDGER_FORMAT", "LEDGER_VERSION", "LedgerFile", "fingerprint_file", "forget_data"]

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
    hashes: tuple[str, ...]  # hashes[k]: SHA-256 of line k + 1 (0: the header)
    good_bytes: int  # length of the well-formed prefix (everything before a torn last line)
    needs_newline: bool  # the last record is complete but lacks its newline

    @property
    def last_hash(self) -> str:
        return self.hashes[-1]


def _parse(raw: bytes, path: Path) -> _Parsed:
    """Parse and verify a whole journal.

    A last line without its newline counts when it is a complete JSON line (it can only
    be one that was written in full: a cut JSON object never parses), and must then pass
    every check of the other lines; a cut one (a torn write, never released) is ignored.
    """
    if not raw:
        raise LedgerError(f"ledger={path}: the file is empty; it is not a dpfair ledger.")
    lines = raw.split(b"\n")
    tail = lines[-1]  # after the final newline: b"" unless the last line lacks its newline
    lines = lines[:-1]
    needs_newline = False
    if tail:
        try:
            json.loads(tail)
        except (ValueError, UnicodeDecodeError):
            pass  # torn: ignored here, cut off by the next charge
        else:
            lines.append(tail)
            needs_newline = True
            tail = b""
    good_bytes = len(raw) - len(tail)
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
    hashes = [_line_hash(lines[0])]
    for lineno, line in enumerate(lines[1:], start=2):
        where = f"ledger={path}: line {lineno}"
        try:
            entry = json.loads(line)
        except (ValueError, UnicodeDecodeError):
            raise LedgerError(f"{where} is corrupt (not JSON); refusing to use it.") from None
        if not isinstance(entry, dict):
            raise LedgerError(f"{where} is corrupt (not an object).")
        if entry.get("prev") != hashes[-1]:
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
        key, rows = entry.get("key"), entry.get("rows")
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
                rows=rows if isinstance(rows, str) else None,
                noise=str(entry.get("noise", "")),
                part_of=str(entry.get("part_of", "")),
            )
        )
        hashes.append(_line_hash(line))
    return _Parsed(header=header, ledger=ledger, hashes=tuple(hashes), good_bytes=good_bytes,
                   needs_newline=needs_newline)


def _check_high_water(parsed: _Parsed, path: Path) -> None:
    """Refuse a ledger shorter than, or forked from, its high-water mark (``_state``)."""
    mark = _state.read_hwm(_state._check_id(parsed.header.get("id")))
    if mark is None:
        return
    seq, head = mark
    have = len(parsed.hashes) - 1
    if have < seq:
        raise LedgerError(
            f"ledger={path} holds {have} release(s), but {seq} were charged to it (its "
            f"high-water mark in {_state.state_dir()}): it was truncated or replaced by an "
            "older copy, which would refund spent budget. Restore the current file; "
            "refusing to use this one."
        )
    if parsed.hashes[seq] != head:
        raise LedgerError(
            f"ledger={path}: its entry {seq} is not the one charged (high-water mark in "
            f"{_state.state_dir()}): this is another history forked from an older copy. "
            "Restore the current file; refusing to use this one."
        )


class LedgerFile:
    """A persistent privacy ledger: an append-only journal bound to one data set.

    Create one with :meth:`create`, open an existing one with :meth:`open`, or find the
    one of a data set's content with :meth:`for_data`. Every read re-parses the file, so
    several processes can share it; :meth:`charge` holds an exclusive lock while it
    re-checks and appends. The composition rules are those of :class:`Ledger` (the file
    is replayed into one).

    Rollback protection (``docs/ledgers.md``): every read is checked against the ledger's
    high-water mark in the user's state directory (:mod:`dpfair.privacy._state`) and a
    ledger shorter than it, or forked from it, is refused; a ledger bound to data is the
    one registered for that content, and a second one for the same bytes is refused.

    Parameters
    ----------
    path : path-like
        The journal file.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._path: Path | None = Path(path)
        self._deferred: dict[str, Any] | None = None  # set by for_data until resolved
        self._pending: dict[str, Any] | None = None  # a ledger to create at the 1st charge
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
        purpose: str = "ledger",
    ) -> LedgerFile:
        """Create a new ledger file (refuses to overwrite an existing one).

        Parameters
        ----------
        path : path-like
            Where to write the journal.
        cap : Budget
            Total budget for every release on ``data``.
        data : path-like, optional
            The data file the ledger is bound to: its path and SHA-256 are recorded,
            :meth:`check_data` refuses any other file, and the ledger is registered as
            the one of that content in the state directory.
        convert_delta : float, optional
            δ' at which zCDP releases are converted for an (ε, δ) cap.
        mode : int
            File permissions (default 0600).
        purpose : str
            Recorded in the registry (``"ledger"``, ``"fdp-site"``, …), for messages.

        Raises
        ------
        LedgerError
            ``data`` already has a registered ledger (one ledger per data set).
        InvalidParameterError
            A file exists at ``path``, or the cap or ``convert_delta`` is invalid.
        """
        Ledger(cap, convert_delta=convert_delta)  # validates cap and convert_delta
        binding = None
        if data is not None:
            dpath = Path(data)
            if not dpath.is_file():
                raise InvalidParameterError(f"data={data}: no such file to bind the ledger to.")
            binding = {"path": str(dpath.resolve()), "fingerprint": fingerprint_file(dpath)}
        with _state.locked():
            _create_locked(Path(path), cap, binding, convert_delta, mode, purpose)
        return cls(path)

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> LedgerFile:
        """Open an existing ledger (raises :class:`LedgerError` if it is not a valid one)."""
        p = Path(path)
        if not p.is_file():
            raise LedgerError(
                f"ledger={path}: no such ledger file; create one with `dpfair ledger init`."
            )
        return cls(p)

    @classmethod
    def registered(cls, data: str | os.PathLike[str]) -> LedgerFile | None:
        """The ledger registered for ``data``'s content in the state directory, or None.

        For a command that should charge the data's one ledger without being told its path.

        Raises
        ------
        LedgerError
            A ledger is registered but its file is missing or invalid (rolled back, forked).
        """
        dpath = Path(data)
        if not dpath.is_file():
            raise InvalidParameterError(f"data={data}: no such file.")
        entry = _state.lookup(fingerprint_file(dpath))
        if entry is None:
            return None
        found = Path(entry["path"])
        if not found.is_file():
            raise LedgerError(
                f"data {data}: its ledger {found} (registered in {_state.state_dir()}) is "
                "missing; restore it, or reset deliberately with `dpfair ledger forget "
                f"{data} --yes` (the budget spent on these data is then forgotten)."
            )
        return cls(found)

    @classmethod
    def for_data(
        cls,
        data: str | os.PathLike[str],
        cap: Budget,
        *,
        path: str | os.PathLike[str],
        create: bool = True,
        purpose: str = "ledger",
        missing: str = "",
    ) -> LedgerFile:
        """The ledger of ``data``'s content, found by fingerprint, with the cap ``cap``.

        Nothing is read when this returns: the data file is fingerprinted, and the
        registry consulted, at the first use of the ledger (so a caller can check public
        caps before touching the data). Then: the registered ledger of that content if
        there is one (wherever it was created; its cap must be ``cap``); else a ledger
        already at ``path`` (registered then); else, with ``create``, a new ledger at
        ``path`` that is written, bound and registered only by the first :meth:`charge`
        (a refused check writes nothing).

        Parameters
        ----------
        data : path-like
            The data file (its content decides which ledger this is).
        cap : Budget
            The cap the ledger must have (a ledger's cap never changes).
        path : path-like
            Where a new ledger is created.
        create : bool
            Whether a missing ledger may be created.
        purpose : str
            Recorded in the registry.
        missing : str
            Error message when there is no ledger and ``create`` is False.
        """
        self = cls.__new__(cls)
        self._path = None
        self._pending = None
        self._deferred = {
            "data": Path(data), "cap": cap, "path": Path(path), "create": bool(create),
            "purpose": purpose, "missing": missing,
        }
        return self

    def _resolve(self) -> None:
        d = self._deferred
        if d is None:
            return
        data, cap, path = d["data"], d["cap"], d["path"]
        fp = fingerprint_file(data) if data.is_file() else None
        entry = _state.lookup(fp) if fp is not None else None
        if entry is not None:
            found = Path(entry["path"])
            if not found.is_file():
                raise LedgerError(
                    f"data {data}: its ledger {found} (registered in {_state.state_dir()}) is "
                    "missing; restore it, or reset deliberately with `dpfair ledger forget "
                    f"{data} --yes` (the budget spent on these data is then forgotten)."
                )
            self._adopt(found, cap)
        elif path.is_file():
            self._adopt(path, cap)
        elif not d["create"]:
            raise LedgerError(missing_message(d["missing"], path))
        else:
            Ledger(cap)  # validates the cap now
            binding = None if fp is None else {"path": str(data.resolve()), "fingerprint": fp}
            self._path = path
            self._pending = {"cap": cap, "binding": binding, "purpose": d["purpose"]}
        self._deferred = None

    def _adopt(self, path: Path, cap: Budget) -> None:
        self._path = path
        self._deferred = None
        have = self._read().ledger.cap
        if have.to_dict() | {"note": ""} != cap.to_dict() | {"note": ""}:
            raise LedgerError(
                f"ledger={path}: the ledger of these data has the cap {have}, not the {cap} "
                "given; a ledger's cap never changes. Give the same cap, or pass that ledger "
                "explicitly (--ledger FILE)."
            )

    @property
    def path(self) -> Path:
        """The journal file (for a ledger found by :meth:`for_data`: once resolved)."""
        self._resolve()
        assert self._path is not None
        return self._path

    # ------------------------------------------------------------------ reading
    def _read(self) -> _Parsed:
        self._resolve()
        assert self._path is not None
        if self._pending is not None:
            return _empty(self._pending, self._path)
        if self._path.is_dir():
            raise LedgerError(f"ledger={self._path}: is a directory, not a ledger file.")
        try:
            fd = os.open(self._path, os.O_RDONLY)
        except FileNotFoundError:
            raise LedgerError(f"ledger={self._path}: no such ledger file.") from None
        try:
            # a shared lock: a charge (exclusive lock) appends its line and raises the
            # high-water mark together, so a reader never sees the mark of a line it has
            # not read (which would look like a rollback)
            fcntl.flock(fd, fcntl.LOCK_SH)
            with os.fdopen(os.dup(fd), "rb") as fh:
                raw = fh.read()
            parsed = _parse(raw, self._path)
            _check_high_water(parsed, self._path)
        finally:
            os.close(fd)  # releases the lock
        return parsed

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
        """Refuse (:class:`LedgerError`) data other than this ledger's, or not its ledger.

        The comparison is by content (SHA-256), so a renamed or moved copy of the same
        bytes is accepted and a modified file at the same path is refused. The content
        must also be registered to *this* ledger in the state directory (a ledger from
        before the registry is registered now); another ledger for the same bytes is
        refused, naming the registered one.
        """
        parsed = self._read()
        binding = parsed.header.get("data")
        if binding is None:
            self._check_unbound(parsed, data)
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
        if self._pending is not None:
            return  # registered when it is created, by the first charge
        ledger_id = _state._check_id(parsed.header.get("id"))
        with _state.locked():
            entry = _state.lookup(actual)
            if entry is None or (
                entry["ledger_id"] == ledger_id
                and Path(entry["path"]) != self.path.resolve()
            ):
                _state.register(actual, ledger_id, self.path, purpose=(entry or {}).get(
                    "purpose", "ledger"))
            elif entry["ledger_id"] != ledger_id:
                when = str(entry.get("registered", "?"))[:19]
                raise LedgerError(
                    f"ledger={self.path} is not the ledger of {data}: these data already "
                    f"have the ledger {entry['path']} (registered {when}); one data set has "
                    "one ledger. Use that one."
                )

    def _check_unbound(self, parsed: _Parsed, data: str | os.PathLike[str]) -> None:
        """An unbound ledger is refused for data whose content has a registered ledger:
        each new unbound ledger would otherwise be a fresh budget on them (rule 11)."""
        dpath = Path(data)
        if not dpath.is_file():
            return
        entry = _state.lookup(fingerprint_file(dpath))
        if entry is None or entry["ledger_id"] == parsed.header.get("id"):
            return
        when = str(entry.get("registered", "?"))[:19]
        raise LedgerError(
            f"ledger={self.path} is bound to no data, but {data} already has the ledger "
            f"{entry['path']} (registered {when}); one data set has one ledger, so another "
            "ledger (a fresh budget) is refused for them. Use that one."
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
        rows: str | None = None,
    ) -> Budget:
        """Raise as :meth:`charge` would right now, without recording (a pre-flight check).

        Another process may charge in between; :meth:`charge` checks again under the lock.
        Writes nothing (also for a ledger that :meth:`for_data` has yet to create).
        """
        return self._read().ledger.check(
            cost, label=label, bounded_range=bounded_range, convert_delta=convert_delta,
            key=key, rows=rows,
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
        rows: str | None = None,
        noise: str = "",
    ) -> LedgerRecord:
        """Append a charge atomically under an exclusive lock, or raise and append nothing.

        Same parameters and errors as :meth:`Ledger.charge`. When this returns, the entry is
        on disk (fsync'ed) and the ledger's high-water mark is recorded; release only
        after it returns. A write that fails (a full disk) is cut off again and raises:
        nothing was charged, nothing may be released.
        """
        self._resolve()
        if self._pending is not None:
            self._create_pending()
        with self._locked() as fd, _state.locked():
            with open(self.path, "rb") as fh:  # the locked inode
                raw = fh.read()
            parsed = _parse(raw, self.path)
            _check_high_water(parsed, self.path)
            rec = parsed.ledger.charge(
                cost,
                label=label,
                params=params,
                bounded_range=bounded_range,
                convert_delta=convert_delta,
                key=key,
                rows=rows,
                noise=noise,
            )
            entry = rec.to_dict()
            entry["prev"] = parsed.last_hash
            line = json.dumps(entry, sort_keys=True, allow_nan=False).encode()
            out = (b"\n" if parsed.needs_newline else b"") + line + b"\n"
            try:
                if parsed.good_bytes != len(raw):
                    os.ftruncate(fd, parsed.good_bytes)  # cut a torn last line (never released)
                os.lseek(fd, parsed.good_bytes, os.SEEK_SET)
                written = 0
                while written < len(out):
                    written += os.write(fd, out[written:])
                os.fsync(fd)
            except OSError as exc:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, parsed.good_bytes)
                    os.fsync(fd)
                raise LedgerError(
                    f"ledger={self.path}: could not write the charge ({exc.strerror or exc}); "
                    "nothing was charged and nothing may be released."
                ) from None
            try:
                _state.write_hwm(parsed.header["id"], rec.seq, _line_hash(line), self.path)
            except OSError as exc:
                raise LedgerError(
                    f"ledger={self.path}: entry {rec.seq} is charged, but its high-water mark "
                    f"could not be saved in {_state.state_dir(create=False)} "
                    f"({exc.strerror or exc}); nothing may be released. Free space there and "
                    "retry (the entry stays charged)."
                ) from None
        return rec

    def _create_pending(self) -> None:
        """Create the ledger :meth:`for_data` deferred, unless one appeared meanwhile."""
        pending = self._pending
        assert pending is not None and self._path is not None
        binding = pending["binding"]
        with _state.locked():
            entry = _state.lookup(binding["fingerprint"]) if binding else None
            if entry is not None and Path(entry["path"]).is_file():
                self._pending = None
                self._adopt(Path(entry["path"]), pending["cap"])
                return
            try:
                _create_locked(self._path, pending["cap"], binding, None, 0o600,
                               pending["purpose"])
            except InvalidParameterError:
                if not self._path.is_file():
                    raise
                self._pending = None  # another process created it at this path meanwhile
                self._adopt(self._path, pending["cap"])
                return
        self._pending = None

    def summary(self) -> dict[str, Any]:
        """JSON-ready summary: header, cap, spent, remaining and every release."""
        parsed = self._read()
        out = parsed.ledger.summary()
        out["ledger"] = str(self.path)
        out["id"] = parsed.header.get("id")
        out["created"] = parsed.header.get("created")
        out["data"] = parsed.header.get("data")
        return out


def missing_message(message: str, path: Path) -> str:
    return message or f"ledger={path}: no ledger for these data; create one first."


def _empty(pending: dict[str, Any], path: Path) -> _Parsed:
    header = {
        "format": LEDGER_FORMAT, "version": LEDGER_VERSION, "id": None, "created": None,
        "cap": pending["cap"].to_dict(), "convert_delta": None, "data": pending["binding"],
    }
    return _Parsed(header=header, ledger=Ledger(pending["cap"]), hashes=("",), good_bytes=0,
                   needs_newline=False)


def _create_locked(
    target: Path,
    cap: Budget,
    binding: dict[str, str] | None,
    convert_delta: float | None,
    mode: int,
    purpose: str,
) -> None:
    """Write a new ledger's header and register it (caller holds the state lock)."""
    if target.exists():  # checked again, atomically, by the link below
        raise InvalidParameterError(
            f"ledger={target}: a file already exists there; a ledger is never "
            "overwritten (its history would be lost). Choose another path."
        )
    if binding is not None:
        entry = _state.lookup(binding["fingerprint"])
        if entry is not None:
            gone = "" if Path(entry["path"]).is_file() else " (the file is missing: restore it)"
            raise LedgerError(
                f"data {binding['path']} already has a ledger: {entry['path']}{gone}, "
                f"registered {str(entry.get('registered', '?'))[:19]}. One data set has one "
                "ledger: use that one, or reset deliberately with `dpfair ledger forget DATA "
                "--yes` (the budget spent on these data is then forgotten)."
            )
    ledger_id = uuid.uuid4().hex
    header = {
        "format": LEDGER_FORMAT,
        "version": LEDGER_VERSION,
        "id": ledger_id,
        "created": now_utc(),
        "cap": cap.to_dict(),
        "convert_delta": convert_delta,
        "data": binding,
    }
    line = json.dumps(header, sort_keys=True, allow_nan=False).encode()
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(line + b"\n")
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
    _state.write_hwm(ledger_id, 0, _line_hash(line), target)
    if binding is not None:
        _state.register(binding["fingerprint"], ledger_id, target, purpose=purpose)


def _fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def forget_data(data: str | os.PathLike[str]) -> dict[str, Any] | None:
    """Deliberately reset: forget the registered ledger of ``data``'s content.

    Removes the registry entry of the data's SHA-256 and that ledger's high-water mark from
    the state directory, so a new ledger can be created for these data (and an older copy
    of the old one would be accepted again). The budget already spent on the data is then
    no longer enforced by dpfair: do this only when the data set is retired or re-consented.
    The ledger file itself is left in place.

    Returns
    -------
    dict or None
        The registry entry removed (ledger id and path), or None if there was none.
    """
    dpath = Path(data)
    if not dpath.is_file():
        raise InvalidParameterError(f"data={data}: no such file.")
    return _state.forget(fingerprint_file(dpath))
