"""How FDP-Fair payloads ride in Flower messages: one ``ConfigRecord`` of byte strings.

Every request and reply carries a :class:`~flwr.app.RecordDict` with one
:class:`~flwr.app.ConfigRecord` named :data:`RECORD`; its values are the message documents
exactly as the file CLI writes them (``setup``, ``model``, the site's ``message``) and, in
a site's reply, its ``site-id`` (and, instead of the message, the ``error`` it refused
with). Flower adds transport (TLS, node authentication, routing); the content is opaque to
it and authenticated and validated only by :func:`dpfair.fairclass.federated._messages.decode`.
"""

from __future__ import annotations

from collections.abc import Mapping

from flwr.app import ConfigRecord, RecordDict

from dpfair.fairclass.federated._messages import ProtocolError

__all__ = ["ACTIONS", "RECORD", "STATE", "pack", "unpack"]

#: Name of the ConfigRecord holding the payloads.
RECORD = "fdp"
#: Name of the ConfigRecord in the ClientApp's ``context.state`` (never leaves the site).
STATE = "fdp-site-state"
#: Flower message type of each step (``<category>.<action>``).
ACTIONS = {
    "round1": "train.fdp_round1",
    "round2": "train.fdp_round2",
}


def pack(payloads: Mapping[str, bytes | str]) -> RecordDict:
    """A RecordDict carrying ``payloads`` (bytes or str values) unchanged."""
    return RecordDict({RECORD: ConfigRecord(dict(payloads))})


def unpack(content: RecordDict, name: str, *, sender: str = "?") -> bytes:
    """The byte payload ``name`` of a received RecordDict."""
    value = _payload(content, name)
    if not isinstance(value, bytes):
        raise _missing(sender, name, "bytes")
    return value


def unpack_text(content: RecordDict, name: str, *, sender: str = "?") -> str:
    """The text payload ``name`` of a received RecordDict."""
    value = _payload(content, name)
    if not isinstance(value, str):
        raise _missing(sender, name, "text")
    return value


def _payload(content: RecordDict, name: str) -> object:
    record = content.config_records.get(RECORD)
    return None if record is None else record.get(name)


def _missing(sender: str, name: str, what: str) -> ProtocolError:
    return ProtocolError(
        sender, f"{RECORD}.{name}", f"missing or not {what} in the Flower message."
    )
