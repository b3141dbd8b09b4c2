"""The FDP-Fair message format: versioned JSON envelopes with compact arrays.

Every arrow of the protocol (ALGORITHMS.md §C, paper 003 Algorithm 1) is one file:

========================  ==========  ===========  =============================================
kind                      sender      receiver     content
========================  ==========  ===========  =============================================
``setup``                 centre      all sites    public protocol parameters (grid, M, α, ρ, …)
``round1``                site s      centre       ñ_{s,1} and the four noisy kernel sums F̃_{a,y}
``model``                 centre      all sites    aggregated η̃_a on the grid and π̃_a
``round2``                site s      centre       two noisy binary trees (one per group)
``released_model``        centre      anyone       η̃, π̃, τ̂ per fold: the final classifier
========================  ==========  ===========  =============================================

Envelope (schema ``dpfair.fdp``, version :data:`SCHEMA_VERSION`)::

    {"schema": "dpfair.fdp", "version": 1, "kind": "round1", "protocol_id": "…",
     "sender": "site-1", "fields": {…JSON scalars and lists…},
     "arrays": {"sums": {"dtype": "<f8", "shape": [2, 33, 33, 2, 2], "b64": "…"}},
     "sha256": "…"}

Arrays are little-endian float64 (or int64), C order, base64 encoded. ``sha256`` is the
SHA-256 of the canonical JSON (sorted keys, no spaces) of everything else: it detects
truncation and accidental or careless tampering. It is an integrity check, not an
authentication: a party that can rewrite a file can recompute the digest, so deployments that
need authenticity sign the files (or use an authenticated channel) on top.

Every message carries only released (noisy) quantities or public parameters: never a row,
never an exact count of a private set.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfair._errors import InvalidDataError

__all__ = [
    "KINDS",
    "SCHEMA_NAME",
    "SCHEMA_VERSION",
    "Envelope",
    "ProtocolError",
    "decode",
    "encode",
    "read_message",
    "write_message",
]

SCHEMA_NAME = "dpfair.fdp"
SCHEMA_VERSION = 1
KINDS = ("setup", "round1", "model", "round2", "released_model")
_DTYPES = {"<f8": np.dtype("<f8"), "<i8": np.dtype("<i8")}
#: Refuse files larger than this before parsing (a 2^18-node grid with 2 folds is ~34 MB).
MAX_MESSAGE_BYTES = 512 * 2**20


class ProtocolError(InvalidDataError):
    """A protocol message is malformed, tampered with, or disagrees with the protocol.

    Attributes
    ----------
    site : str
        Who sent (or should have sent) the message: a site id or ``"centre"``; ``"?"`` if
        the message is too broken to tell.
    field : str
        The offending field (``"sha256"``, ``"version"``, ``"arrays.sums"``, …).
    """

    def __init__(self, site: str, field: str, problem: str) -> None:
        self.site = site
        self.field = field
        super().__init__(f"message from {site!r}, field {field!r}: {problem}")


def _canonical(obj: Mapping[str, Any]) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


def _digest(body: Mapping[str, Any]) -> str:
    return hashlib.sha256(_canonical(body)).hexdigest()


@dataclass(frozen=True)
class Envelope:
    """A decoded (or to-be-encoded) message.

    Attributes
    ----------
    kind : str
        One of :data:`KINDS`.
    protocol_id : str
        Identifies one run of the protocol (set by the centre in ``setup``); messages of
        another run are refused.
    sender : str
        Site id, or ``"centre"``.
    fields : dict
        JSON scalars and lists.
    arrays : dict of str to ndarray
        Numeric arrays (float64 or int64).
    """

    kind: str
    protocol_id: str
    sender: str
    fields: dict[str, Any] = field(default_factory=dict)
    arrays: dict[str, NDArray[Any]] = field(default_factory=dict)

    # ------------------------------------------------------------------ typed access
    def get(self, name: str, kind: type | tuple[type, ...]) -> Any:
        """``fields[name]`` checked to be of ``kind``; a :class:`ProtocolError` otherwise."""
        if name not in self.fields:
            raise ProtocolError(self.sender, f"fields.{name}", "missing.")
        value = self.fields[name]
        ok = isinstance(value, kind) and not (
            isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,))
        )
        if not ok:
            raise ProtocolError(
                self.sender, f"fields.{name}", f"expected {kind}, got {type(value).__name__}."
            )
        return value

    def number(self, name: str, *, positive: bool = False) -> float:
        """A finite real field (optionally > 0)."""
        v = float(self.get(name, (int, float)))
        if not np.isfinite(v) or (positive and v <= 0):
            raise ProtocolError(
                self.sender,
                f"fields.{name}",
                f"{v!r} is not a finite{' positive' if positive else ''} number.",
            )
        return v

    def array(self, name: str, shape: tuple[int, ...] | None = None) -> NDArray[np.float64]:
        """``arrays[name]`` as float64, with the expected shape and finite values."""
        if name not in self.arrays:
            raise ProtocolError(self.sender, f"arrays.{name}", "missing.")
        arr = np.asarray(self.arrays[name], dtype=np.float64)
        if shape is not None and arr.shape != tuple(shape):
            raise ProtocolError(
                self.sender,
                f"arrays.{name}",
                f"has shape {arr.shape}, expected {tuple(shape)} for this protocol "
                "(different grid, tree depth M or number of folds than the setup?).",
            )
        if not np.all(np.isfinite(arr)):
            raise ProtocolError(self.sender, f"arrays.{name}", "contains NaN or inf.")
        return arr


def encode(msg: Envelope) -> bytes:
    """Serialise ``msg`` to UTF-8 JSON bytes (with its digest)."""
    if msg.kind not in KINDS:
        raise ProtocolError(msg.sender, "kind", f"{msg.kind!r} is not one of {KINDS}.")
    arrays: dict[str, Any] = {}
    for name, value in msg.arrays.items():
        arr = np.asarray(value)
        code = "<i8" if arr.dtype.kind in "iub" else "<f8"
        data = np.ascontiguousarray(arr, dtype=_DTYPES[code])
        if code == "<f8" and not np.all(np.isfinite(data)):
            raise ProtocolError(msg.sender, f"arrays.{name}", "refusing to send NaN or inf.")
        arrays[name] = {
            "dtype": code,
            "shape": list(data.shape),
            "b64": base64.b64encode(data.tobytes()).decode("ascii"),
        }
    body = {
        "schema": SCHEMA_NAME,
        "version": SCHEMA_VERSION,
        "kind": msg.kind,
        "protocol_id": msg.protocol_id,
        "sender": msg.sender,
        "fields": msg.fields,
        "arrays": arrays,
    }
    try:
        digest = _digest(body)
    except (TypeError, ValueError) as exc:
        raise ProtocolError(msg.sender, "fields", f"not JSON-serialisable: {exc}") from None
    return _canonical({**body, "sha256": digest})


def decode(
    raw: bytes | str,
    *,
    kind: str | None = None,
    protocol_id: str | None = None,
    source: str = "message",
) -> Envelope:
    """Parse and validate an envelope.

    Parameters
    ----------
    raw : bytes or str
        The file content.
    kind : str, optional
        Expected kind; another kind is refused.
    protocol_id : str, optional
        Expected run id; a message of another run is refused.
    source : str
        Where the bytes came from (a file name), for error messages.

    Raises
    ------
    ProtocolError
        Truncated or non-JSON content, wrong schema or version, digest mismatch (tampering or
        corruption), wrong kind or run, malformed arrays. The message names the sender (when
        it can be read) and the field.
    """
    try:
        obj = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ProtocolError(
            "?",
            "(whole message)",
            f"{source} is truncated or not JSON ({exc.msg if hasattr(exc, 'msg') else exc}).",
        ) from None
    if not isinstance(obj, dict):
        raise ProtocolError("?", "(whole message)", f"{source} is not a JSON object.")
    sender = obj.get("sender")
    who = sender if isinstance(sender, str) and sender else "?"
    if obj.get("schema") != SCHEMA_NAME:
        raise ProtocolError(
            who, "schema", f"{obj.get('schema')!r} in {source}; expected {SCHEMA_NAME!r}."
        )
    version = obj.get("version")
    if version != SCHEMA_VERSION:
        raise ProtocolError(
            who,
            "version",
            f"schema version {version!r} in {source}, but this dpfair reads version "
            f"{SCHEMA_VERSION}: run every party with the same dpfair release.",
        )
    digest = obj.pop("sha256", None)
    if not isinstance(digest, str):
        raise ProtocolError(who, "sha256", f"missing in {source}.")
    try:
        actual = _digest(obj)
    except (TypeError, ValueError):
        raise ProtocolError(who, "(whole message)", f"{source} holds non-JSON values.") from None
    if actual != digest:
        raise ProtocolError(
            who,
            "sha256",
            f"digest mismatch in {source}: the message was modified or corrupted after it "
            "was written. Ask the sender to resend it.",
        )
    for key, typ in (
        ("kind", str),
        ("protocol_id", str),
        ("sender", str),
        ("fields", dict),
        ("arrays", dict),
    ):
        if not isinstance(obj.get(key), typ):
            raise ProtocolError(who, key, f"missing or of the wrong type in {source}.")
    if obj["kind"] not in KINDS:
        raise ProtocolError(who, "kind", f"{obj['kind']!r} is not one of {KINDS}.")
    if kind is not None and obj["kind"] != kind:
        raise ProtocolError(
            who, "kind", f"{source} is a {obj['kind']!r} message; a {kind!r} message was expected."
        )
    if protocol_id is not None and obj["protocol_id"] != protocol_id:
        raise ProtocolError(
            who,
            "protocol_id",
            f"{obj['protocol_id']!r} in {source} belongs to another run (expected "
            f"{protocol_id!r}).",
        )
    arrays: dict[str, NDArray[Any]] = {}
    for name, spec in obj["arrays"].items():
        fld = f"arrays.{name}"
        if not isinstance(spec, dict) or spec.get("dtype") not in _DTYPES:
            raise ProtocolError(who, fld, "malformed array (dtype must be '<f8' or '<i8').")
        shape = spec.get("shape")
        if not (isinstance(shape, list) and all(isinstance(s, int) and s >= 0 for s in shape)):
            raise ProtocolError(who, fld, "malformed shape.")
        try:
            buf = base64.b64decode(spec.get("b64", ""), validate=True)
        except (binascii.Error, ValueError, TypeError):
            raise ProtocolError(who, fld, "payload is not valid base64.") from None
        dt = _DTYPES[spec["dtype"]]
        expected = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
        if len(buf) != expected:
            raise ProtocolError(
                who, fld, f"payload has {len(buf)} bytes, shape {shape} needs {expected}."
            )
        arr = np.frombuffer(buf, dtype=dt).reshape(shape).astype(dt.newbyteorder("="))
        if dt.kind == "f" and not np.all(np.isfinite(arr)):
            raise ProtocolError(who, fld, "contains NaN or inf.")
        arrays[name] = arr
    return Envelope(obj["kind"], obj["protocol_id"], obj["sender"], obj["fields"], arrays)


def write_message(path: str | os.PathLike[str], msg: Envelope) -> Path:
    """Write ``msg`` atomically (temporary file + rename) and return the path."""
    p = Path(path)
    data = encode(msg)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, p)
    return p


def read_message(
    path: str | os.PathLike[str], *, kind: str | None = None, protocol_id: str | None = None
) -> Envelope:
    """Read and validate a message file (see :func:`decode`)."""
    p = Path(path)
    if not p.is_file():
        raise ProtocolError("?", "(file)", f"{str(p)!r} does not exist.")
    size = p.stat().st_size
    if size > MAX_MESSAGE_BYTES:
        raise ProtocolError("?", "(file)", f"{str(p)!r} is {size} bytes, over the limit.")
    return decode(p.read_bytes(), kind=kind, protocol_id=protocol_id, source=repr(str(p)))
