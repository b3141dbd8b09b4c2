"""The FDP-Fair message format: signed, versioned JSON documents with compact arrays.

Every arrow of the protocol (ALGORITHMS.md §C, paper 003 Algorithm 1) is one message:

========================  ==========  ==========  =====  =======================================
kind                      sender      receiver    round  content
========================  ==========  ==========  =====  =======================================
``setup``                 centre      all         0      public parameters (grid, M, α, band, …) and
                                                         every party's pinned public key
``round1``                site s      centre      1      ñ_{s,1} and the four noisy sums F̃_{a,y}
``model``                 centre      all         1      aggregated η̃_a on the grid and π̃_a
``round2``                site s      centre      2      two noisy binary trees (one per group)
``released_model``        centre      all         2      η̃, π̃, τ̂ per fold: the final classifier
========================  ==========  ==========  =====  =======================================

With ``estimator="rff"`` (optional setup fields ``estimator``, ``features_dim`` ≤ 4096,
``rff_seed``, ``categories``) round 1's ``sums`` hold the four noisy D-vectors of random
Fourier feature sums, and ``model``/``released_model`` carry ``coef`` (aggregated sums) and
``ridge`` instead of ``eta`` (:data:`ARRAY_VARIANTS`). With ``estimator="linear"``
(optional setup fields ``estimator``, ``radius``, ``categories``) round 1 also carries
``cells`` and ``moments`` (and the fields ``sigma_cells``, ``sigma_moments``; with the
setup's ``radius: "auto"`` and ``radius_share`` also ``radius``, the site's released clip
radius per fold, and ``sigma_radius``), and ``model``/``released_model`` carry the
coefficients ``theta`` instead of ``eta`` (with ``radius: "auto"`` also the array
``radius``, the common clip radius per fold) (``federated/_linear.py``).

Document (schema ``dpfair.fdp``, version :data:`SCHEMA_VERSION`), canonical JSON::

    {"body": {"schema": "dpfair.fdp", "version": 3, "kind": "round1", "protocol_id": "…",
              "round": 1, "sender": "h1", "receiver": "centre", "nonce": "<32 hex>",
              "fields": {…JSON scalars and lists…},
              "arrays": {"sums": {"dtype": "<f8", "shape": [1, 33, 33, 2, 2], "b64": "…"}}},
     "signature": {"alg": "ed25519", "value": "<base64>"}}

The signature is the sender's Ed25519 signature of the canonical JSON of ``body`` (sorted
keys, no spaces, no NaN). It is verified with the key the **setup pins for the claimed
sender** — never with a key carried by the message itself — so a message signed by an
unpinned key, relabelled (another sender, receiver, kind or round), moved to another run,
or altered in any byte is refused with an error naming the party and the reason. The setup
itself is verified with the centre key that each site pins on its own (``--centre-key``).
(Version 1 carried a SHA-256 digest of the body: that detects corruption but anyone who can
rewrite the file recomputes it — integrity, not authenticity.)

Within one run a party sends one message per kind; the centre refuses a second message of
the same sender and kind, and each site's ledger refuses to run a round twice. The random
nonce makes every signed body unique.

Strict schema and bounded resources (checked in this order, before any array is allocated):
the byte size of the document (:data:`MAX_MESSAGE_BYTES`, or a tighter per-kind limit from
the setup), exact key sets at every level (unknown fields or arrays are refused), array
ranks and element counts in exact integer arithmetic (a declared shape ``[2**32, 2**32]``
is refused without overflow), the shapes the setup implies when the caller gives them, and
the base64 length against the shape. Arrays are little-endian float64 or int64, C order.

Every message carries only released (noisy) quantities or public parameters: never a row,
never an exact count of a private set.

The API is transport-agnostic: :func:`encode` returns bytes and :func:`decode` takes bytes
(files, sockets or a Flower ``ConfigRecord`` carry the same bytes); :func:`read_message` /
:func:`write_message` are thin file wrappers.
"""

from __future__ import annotations

import base64
import json
import math
import os
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfair._atomic import write_bytes_atomic
from dpfair._errors import InvalidDataError
from dpfair.fairclass.federated._keys import Signer, verify_signature

__all__ = [
    "KINDS",
    "MAX_ARRAY_ELEMENTS",
    "MAX_MESSAGE_BYTES",
    "RECEIVERS",
    "ROUNDS",
    "SCHEMA_NAME",
    "SCHEMA_VERSION",
    "Envelope",
    "ProtocolError",
    "decode",
    "encode",
    "read_message",
    "wire_float",
    "write_message",
]

SCHEMA_NAME = "dpfair.fdp"
SCHEMA_VERSION = 3
#: Older versions this release still reads, with each kind's renamed fields (old → new).
#: Version 3 renamed the setup's tolerance band ``rho`` → ``tolerance`` (ρ means zCDP
#: elsewhere in dpfair); nothing else changed, so a version-2 document is read as the same
#: message under the new name. Every message this release writes is version 3.
LEGACY_FIELDS: dict[int, dict[str, dict[str, str]]] = {2: {"setup": {"rho": "tolerance"}}}
KINDS = ("setup", "round1", "model", "round2", "released_model")
#: The protocol round of each kind (part of the signed body).
ROUNDS = {"setup": 0, "round1": 1, "model": 1, "round2": 2, "released_model": 2}
#: The receiver of each kind ("all": every party of the run).
RECEIVERS = {
    "setup": "all",
    "round1": "centre",
    "model": "all",
    "round2": "centre",
    "released_model": "all",
}
CENTRE = "centre"
_CENTRE_KINDS = ("setup", "model", "released_model")
_DTYPES = {"<f8": np.dtype("<f8"), "<i8": np.dtype("<i8")}
#: Refuse any document larger than this before parsing (the largest honest message, a
#: round-2 message at the depth limit with two folds, is ~90 MB of base64).
MAX_MESSAGE_BYTES = 96 * 2**20
#: Refuse a declared array with more elements than this (exact integer product).
MAX_ARRAY_ELEMENTS = 2**23
_MAX_RANK = 8
_NONCE = re.compile(r"[0-9a-f]{32}")
_PARTY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_BODY_KEYS = frozenset(
    {
        "schema",
        "version",
        "kind",
        "protocol_id",
        "round",
        "sender",
        "receiver",
        "nonce",
        "fields",
        "arrays",
    }
)

#: Per kind: (required fields, optional fields, arrays) — exactly these, nothing else.
SCHEMAS: dict[str, tuple[frozenset[str], frozenset[str], frozenset[str]]] = {
    "setup": (
        frozenset(
            {
                "sites",
                "keys",
                "feature_bounds",
                "bandwidth",
                "grid_shape",
                "depth",
                "alpha",
                "alpha_margin",
                "tolerance",
                "c_omega",
                "eta_fail",
                "correction",
                "tail",
                "cross_fit",
                "s1_share",
                "count_share",
                "threshold_rule",
                "fail_prob",
            }
        ),
        frozenset({"estimator", "features_dim", "rff_seed", "categories", "radius",
                   "radius_share", "constraints"}),
        frozenset(),
    ),
    "round1": (
        frozenset({"n_train", "sigma_count", "sigma_function"}),
        frozenset({"sigma_cells", "sigma_moments", "radius", "sigma_radius"}),
        frozenset({"count", "sums"}),
    ),
    "model": (frozenset({"weights"}), frozenset(), frozenset({"eta", "pi"})),
    "round2": (
        frozenset({"n_cal", "depth", "sigma_tree", "privacy"}),
        frozenset(),
        frozenset({"trees"}),
    ),
    "released_model": (
        frozenset(
            {
                "feature_bounds",
                "bandwidth",
                "grid_shape",
                "alpha",
                "threshold_rule",
                "fail_prob",
                "omega",
                "depth",
                "thresholds",
                "tie_seed",
                "site_privacy",
                "weights",
            }
        ),
        frozenset({"estimator", "features_dim", "rff_seed", "categories", "radius",
                   "radius_share", "constraints"}),
        frozenset({"eta", "pi", "tau", "dd_curve", "dd_sd"}),
    ),
}
#: Per kind: other exact array sets a message may carry instead of ``SCHEMAS``' one — the
#: random-Fourier-feature estimator broadcasts its aggregated sums ("coef", D×2×2 per fold)
#: and ratio regularisers ("ridge") instead of η̃ on a grid. The shapes (D ≤ the public
#: ``MAX_FEATURES_DIM``) follow from the signed setup and are checked before decoding.
#: The linear estimator (``federated/_linear.py``) adds ``cells`` and ``moments`` to round 1
#: and broadcasts its coefficients ``theta`` (p + 2 per fold, p ≤ ``MAX_LINEAR_WIDTH``);
#: with ``radius="auto"`` also the common clip radius ``radius`` (one per fold).
ARRAY_VARIANTS: dict[str, tuple[frozenset[str], ...]] = {
    "round1": (frozenset({"count", "sums", "cells", "moments"}),),
    "model": (frozenset({"coef", "ridge", "pi"}), frozenset({"theta", "pi"}),
              frozenset({"theta", "pi", "radius"})),
    "released_model": (
        frozenset({"coef", "ridge", "pi", "tau", "dd_curve", "dd_sd"}),
        frozenset({"theta", "pi", "tau", "dd_curve", "dd_sd"}),
        frozenset({"theta", "pi", "radius", "tau", "dd_curve", "dd_sd"}),
    ),
}
#: Under equal opportunity (setup field ``constraints``; ``federated/_opportunity.py``) the
#: ``model`` and ``released_model`` of every estimator also carry ``p_a1`` (p̃_{a,1} per fold).
for _kind in ("model", "released_model"):
    ARRAY_VARIANTS[_kind] = (
        *ARRAY_VARIANTS[_kind],
        *(v | {"p_a1"} for v in (SCHEMAS[_kind][2], *ARRAY_VARIANTS[_kind])),
    )


class ProtocolError(InvalidDataError):
    """A protocol message is malformed, forged, tampered with, or disagrees with the protocol.

    Attributes
    ----------
    site : str
        Who sent (or claims to have sent, or should have sent) the message: a site id or
        ``"centre"``; ``"?"`` if the message is too broken to tell.
    field : str
        The offending field (``"signature"``, ``"version"``, ``"arrays.sums"``, …).
    """

    def __init__(self, site: str, field: str, problem: str) -> None:
        self.site = site
        self.field = field
        super().__init__(f"message from {site!r}, field {field!r}: {problem}")


def canonical(obj: Mapping[str, Any]) -> bytes:
    """Sorted-key compact JSON without NaN: the bytes that are signed."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


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
    receiver : str
        ``"centre"`` or ``"all"`` (fixed by the kind; filled in by :func:`encode`).
    nonce : str
        The random nonce of the signed body (empty before encoding).
    """

    kind: str
    protocol_id: str
    sender: str
    fields: dict[str, Any] = field(default_factory=dict)
    arrays: dict[str, NDArray[Any]] = field(default_factory=dict)
    receiver: str = ""
    nonce: str = ""

    @property
    def round(self) -> int:
        """The protocol round of this kind (:data:`ROUNDS`)."""
        return ROUNDS[self.kind]

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
        """A finite real field (optionally > 0); a JSON integer beyond binary64's range
        (e.g. 10**400) is refused like inf, naming the sender and the field."""
        raw = self.get(name, (int, float))
        v = wire_float(raw)
        if not np.isfinite(v) or (positive and v <= 0):
            shown = f"{v!r}" if isinstance(raw, float) or np.isfinite(v) else (
                "an integer beyond binary64's range")
            raise ProtocolError(
                self.sender,
                f"fields.{name}",
                f"{shown} is not a finite{' positive' if positive else ''} number.",
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


def wire_float(value: int | float) -> float:
    """``float(value)`` for a JSON number of a message; NaN when it has no binary64 value
    (an integer beyond ±1.8e308 raises OverflowError in ``float``), so callers refuse it
    with their finiteness check and name the party instead of crashing."""
    try:
        return float(value)
    except (OverflowError, ValueError, TypeError):
        return math.nan


def _check_schema_names(who: str, kind: str, fields: Mapping[str, Any], arrays: Any) -> None:
    required, optional, array_names = SCHEMAS[kind]
    names = set(fields)
    missing = sorted(required - names)
    if missing:
        raise ProtocolError(who, f"fields.{missing[0]}", f"missing from the {kind!r} message.")
    unknown = sorted(names - required - optional)
    if unknown:
        raise ProtocolError(
            who,
            f"fields.{unknown[0]}",
            f"unknown field in a {kind!r} message (schema version {SCHEMA_VERSION} has "
            f"exactly {sorted(required | optional)}); refused.",
        )
    got = set(arrays)
    if got in ARRAY_VARIANTS.get(kind, ()):
        return
    if got != array_names:
        extra = sorted(got - array_names)
        if extra:
            raise ProtocolError(
                who,
                f"arrays.{extra[0]}",
                f"unknown array in a {kind!r} message (expected exactly "
                f"{sorted(array_names)}); refused.",
            )
        raise ProtocolError(
            who, f"arrays.{sorted(array_names - got)[0]}", f"missing from the {kind!r} message."
        )


def encode(msg: Envelope, signer: Signer) -> bytes:
    """Sign ``msg`` with ``signer`` (who must be its sender) and serialise it to bytes.

    A fresh random nonce is drawn for every call; the receiver and round are those of the
    kind (:data:`RECEIVERS`, :data:`ROUNDS`).
    """
    if msg.kind not in KINDS:
        raise ProtocolError(msg.sender, "kind", f"{msg.kind!r} is not one of {KINDS}.")
    if not isinstance(signer, Signer):
        raise ProtocolError(msg.sender, "signature", "encode needs the sender's Signer.")
    if signer.party != msg.sender:
        raise ProtocolError(
            msg.sender,
            "sender",
            f"cannot sign a message from {msg.sender!r} with the key of {signer.party!r}.",
        )
    receiver = RECEIVERS[msg.kind]
    if msg.receiver not in ("", receiver):
        raise ProtocolError(msg.sender, "receiver", f"a {msg.kind!r} goes to {receiver!r}.")
    _check_schema_names(msg.sender, msg.kind, msg.fields, msg.arrays)
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
        "round": ROUNDS[msg.kind],
        "sender": msg.sender,
        "receiver": receiver,
        "nonce": secrets.token_hex(16),
        "fields": msg.fields,
        "arrays": arrays,
    }
    try:
        signed = canonical(body)
    except (TypeError, ValueError) as exc:
        raise ProtocolError(msg.sender, "fields", f"not JSON-serialisable: {exc}") from None
    doc = {"body": body, "signature": {"alg": "ed25519", "value": signer.sign(signed)}}
    return canonical(doc)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"duplicate key {k!r}")
        out[k] = v
    return out


def _declared_arrays(
    who: str,
    specs: Mapping[str, Any],
    shapes: Mapping[str, tuple[int, ...]] | None,
) -> dict[str, tuple[np.dtype[Any], tuple[int, ...], str]]:
    """Validate every array's declaration in exact integer arithmetic (nothing allocated)."""
    out = {}
    for name, spec in specs.items():
        fld = f"arrays.{name}"
        if not isinstance(spec, dict) or set(spec) != {"dtype", "shape", "b64"}:
            raise ProtocolError(who, fld, "malformed array (exactly dtype, shape and b64).")
        if spec["dtype"] not in _DTYPES:
            raise ProtocolError(who, fld, "dtype must be '<f8' or '<i8'.")
        shape = spec["shape"]
        if not (
            isinstance(shape, list)
            and len(shape) <= _MAX_RANK
            and all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape)
        ):
            raise ProtocolError(who, fld, f"malformed shape (at most {_MAX_RANK} sizes >= 0).")
        count = math.prod(shape)  # Python ints: no overflow
        if count > MAX_ARRAY_ELEMENTS:
            raise ProtocolError(
                who,
                fld,
                f"declares shape {shape} = {count} elements, over the public limit of "
                f"{MAX_ARRAY_ELEMENTS}; refused before allocating anything.",
            )
        if shapes is not None and name in shapes and tuple(shape) != tuple(shapes[name]):
            raise ProtocolError(
                who,
                fld,
                f"has shape {tuple(shape)}, expected {tuple(shapes[name])} for this protocol "
                "(different grid, tree depth M or number of folds than the setup?).",
            )
        b64 = spec["b64"]
        dt = _DTYPES[spec["dtype"]]
        nbytes = count * dt.itemsize
        if not isinstance(b64, str) or len(b64) != 4 * ((nbytes + 2) // 3):
            raise ProtocolError(
                who, fld, f"payload length does not match shape {shape} ({nbytes} bytes)."
            )
        out[name] = (dt, tuple(shape), b64)
    return out


def decode(
    raw: bytes | str,
    *,
    keys: Mapping[str, str],
    kind: str | None = None,
    protocol_id: str | None = None,
    source: str = "message",
    max_bytes: int = MAX_MESSAGE_BYTES,
    shapes: Mapping[str, tuple[int, ...]] | None = None,
) -> Envelope:
    """Parse, authenticate and validate a signed message.

    Parameters
    ----------
    raw : bytes or str
        The document (from a file, a socket, a Flower record, …).
    keys : mapping of party id to public key text
        The pinned keys: the setup's (``ProtocolConfig.keyring()``), or, to read a setup
        or a released model, ``{"centre": <the centre key this party pins itself>}``.
    kind : str, optional
        Expected kind; another kind is refused.
    protocol_id : str, optional
        Expected run id; a message of another run is refused.
    source : str
        Where the bytes came from (a file name), for error messages.
    max_bytes : int
        Refuse larger documents before parsing.
    shapes : mapping of array name to shape, optional
        The shapes the setup implies; a different declared shape is refused before the
        array is decoded.

    Raises
    ------
    ProtocolError
        Oversized, truncated or non-JSON content, unknown or missing keys, wrong schema or
        version, an unpinned sender, a bad signature (forged, tampered, relabelled), wrong
        kind, round, receiver or run, malformed or oversized arrays. The message names the
        (claimed) sender and the field.
    """
    if len(raw) > max_bytes:
        raise ProtocolError(
            "?",
            "(whole message)",
            f"{source} has {len(raw)} bytes, over the limit of {max_bytes} for this message; "
            "refused before parsing.",
        )
    try:
        obj = json.loads(raw, object_pairs_hook=_no_duplicates)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise ProtocolError(
            "?",
            "(whole message)",
            f"{source} is truncated or not valid JSON ({getattr(exc, 'msg', exc)}).",
        ) from None
    if not isinstance(obj, dict) or set(obj) != {"body", "signature"}:
        raise ProtocolError(
            "?",
            "(whole message)",
            f"{source} is not a signed dpfair.fdp document (exactly 'body' and 'signature' "
            "expected; messages of schema version 1 were not signed).",
        )
    body, sig = obj["body"], obj["signature"]
    if not isinstance(body, dict):
        raise ProtocolError("?", "body", f"not an object in {source}.")
    sender = body.get("sender")
    who = sender if isinstance(sender, str) and _PARTY.fullmatch(sender) else "?"
    if body.get("schema") != SCHEMA_NAME:
        raise ProtocolError(who, "schema", f"{body.get('schema')!r} in {source}; expected "
                            f"{SCHEMA_NAME!r}.")
    version = body.get("version")
    if isinstance(version, bool) or (version != SCHEMA_VERSION and version not in LEGACY_FIELDS):
        raise ProtocolError(
            who,
            "version",
            f"schema version {version!r} in {source}, but this dpfair reads versions "
            f"{sorted({SCHEMA_VERSION, *LEGACY_FIELDS})}: run every party with the same "
            "dpfair release.",
        )
    if set(body) != _BODY_KEYS:
        odd = sorted(set(body) ^ _BODY_KEYS)
        raise ProtocolError(who, f"body.{odd[0]}", "unknown or missing key in the body.")
    if who == "?":
        raise ProtocolError("?", "sender", f"missing or not a valid party id in {source}.")
    # ---- authenticity: the key pinned for the claimed sender, never one from the message
    if not isinstance(sig, dict) or set(sig) != {"alg", "value"} or sig["alg"] != "ed25519":
        raise ProtocolError(who, "signature", f"missing or malformed in {source}.")
    pinned = keys.get(sender) if isinstance(sender, str) else None
    if pinned is None:
        raise ProtocolError(
            who,
            "signature",
            f"no key is pinned for {sender!r} (pinned: {sorted(keys)}); a message from a "
            "party outside the setup is refused.",
        )
    try:
        signed = canonical(body)
    except (TypeError, ValueError):
        raise ProtocolError(who, "body", f"{source} holds non-JSON values.") from None
    if not verify_signature(pinned, sig["value"], signed):
        raise ProtocolError(
            who,
            "signature",
            f"does not verify with the key pinned for {sender!r}: {source} was forged, "
            "altered, relabelled (sender, receiver, kind, round or run changed) or signed "
            "with another key. Refused.",
        )
    # ---- the signed body must also say what the receiver expects
    knd = body["kind"]
    if knd not in KINDS:
        raise ProtocolError(who, "kind", f"{knd!r} is not one of {KINDS}.")
    if kind is not None and knd != kind:
        raise ProtocolError(
            who, "kind", f"{source} is a {knd!r} message; a {kind!r} message was expected."
        )
    if body["round"] != ROUNDS[knd] or isinstance(body["round"], bool):
        raise ProtocolError(who, "round", f"{body['round']!r} does not match kind {knd!r}.")
    if body["receiver"] != RECEIVERS[knd]:
        raise ProtocolError(
            who, "receiver", f"{body['receiver']!r}; a {knd!r} goes to {RECEIVERS[knd]!r}."
        )
    if (knd in _CENTRE_KINDS) != (sender == CENTRE):
        origin = "the centre" if knd in _CENTRE_KINDS else "a site"
        raise ProtocolError(who, "sender", f"a {knd!r} message must come from {origin}.")
    if not isinstance(body["nonce"], str) or not _NONCE.fullmatch(body["nonce"]):
        raise ProtocolError(who, "nonce", "malformed (32 lowercase hex digits expected).")
    if not isinstance(body["protocol_id"], str):
        raise ProtocolError(who, "protocol_id", "not a string.")
    if protocol_id is not None and body["protocol_id"] != protocol_id:
        raise ProtocolError(
            who,
            "protocol_id",
            f"{body['protocol_id']!r} in {source} belongs to another run (expected "
            f"{protocol_id!r}): replayed from another run? Refused.",
        )
    fields, array_specs = body["fields"], body["arrays"]
    if not isinstance(fields, dict) or not isinstance(array_specs, dict):
        raise ProtocolError(who, "fields", "fields and arrays must be objects.")
    fields = _current_names(who, version, knd, fields)
    _check_schema_names(who, knd, fields, array_specs)
    declared = _declared_arrays(who, array_specs, shapes)
    arrays: dict[str, NDArray[Any]] = {}
    for name, (dt, shape, b64) in declared.items():
        try:
            buf = base64.b64decode(b64, validate=True)
        except ValueError:
            raise ProtocolError(who, f"arrays.{name}", "payload is not valid base64.") from None
        arr = np.frombuffer(buf, dtype=dt).reshape(shape).astype(dt.newbyteorder("="))
        if dt.kind == "f" and not np.all(np.isfinite(arr)):
            raise ProtocolError(who, f"arrays.{name}", "contains NaN or inf.")
        arrays[name] = arr
    return Envelope(
        knd, body["protocol_id"], who, fields, arrays, body["receiver"], body["nonce"]
    )


def _current_names(who: str, version: int, kind: str, fields: dict[str, Any]) -> dict[str, Any]:
    """The fields of a (signature-verified) older document under this version's names."""
    renamed = LEGACY_FIELDS.get(version, {}).get(kind)
    if not renamed:
        return fields
    clash = sorted(set(renamed.values()) & set(fields))
    if clash:
        raise ProtocolError(
            who, f"fields.{clash[0]}",
            f"unknown field in a version-{version} {kind!r} message; refused.",
        )
    return {renamed.get(k, k): v for k, v in fields.items()}


def write_message(path: str | os.PathLike[str], msg: Envelope, signer: Signer) -> Path:
    """Sign ``msg``, write it atomically (temporary file + rename) and return the path."""
    return write_bytes_atomic(path, encode(msg, signer))


def read_message(
    path: str | os.PathLike[str],
    *,
    keys: Mapping[str, str],
    kind: str | None = None,
    protocol_id: str | None = None,
    max_bytes: int = MAX_MESSAGE_BYTES,
    shapes: Mapping[str, tuple[int, ...]] | None = None,
) -> Envelope:
    """Read a message file (its size is checked before it is read) and :func:`decode` it."""
    p = Path(path)
    if not p.is_file():
        raise ProtocolError("?", "(file)", f"{str(p)!r} does not exist.")
    size = p.stat().st_size
    if size > max_bytes:
        raise ProtocolError(
            "?",
            "(file)",
            f"{str(p)!r} is {size} bytes, over the limit of {max_bytes} for this message; "
            "refused before reading.",
        )
    with p.open("rb") as fh:
        raw = fh.read(max_bytes + 1)  # the file may grow after stat
    return decode(
        raw,
        keys=keys,
        kind=kind,
        protocol_id=protocol_id,
        source=repr(str(p)),
        max_bytes=max_bytes,
        shapes=shapes,
    )
