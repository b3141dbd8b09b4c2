"""The FDP-Fair site as a Flower ``ClientApp`` (runs at each institution's SuperNode).

It answers two message types (:data:`~dpfair.fairclass.federated.flower._records.ACTIONS`):

* ``train.fdp_round1`` — the signed ``setup`` in, the site's signed ``round1`` out
  (:func:`~dpfair.fairclass.federated.flower._transport.site_round1`);
* ``train.fdp_round2`` — ``setup`` and the signed broadcast ``model`` in, ``round2`` out.

Every reply carries this node's ``site-id`` next to the message; the centre believes it
only after the message's signature verifies with the key its setup pins for that site.
Everything the site uses comes from its own SuperNode: ``--node-config`` gives the data
file, its columns, its signing key, the centre key it pins and its budget
(:class:`~dpfair.fairclass.federated.flower._transport.SiteNode`); between the rounds the
split entropy is kept in ``context.state`` on the SuperNode. The code that runs is the
dpfair installed at the site (the Flower App Bundle only names it).

Errors: the site logs the full message locally and tells the centre only the error's class
(and, for protocol errors, the field; for budget errors a fixed explanation): the text of a
data error can depend on the site's rows, and a ledger's can reveal the site's other
releases. A node whose ``site-id`` is not in the setup refuses; the centre ignores it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from flwr.app import ConfigRecord, Context, Message
from flwr.clientapp import ClientApp

from dpfair._errors import BudgetExceededError, LedgerError, ReleaseReplayError
from dpfair.fairclass.federated._messages import ProtocolError
from dpfair.fairclass.federated.flower._records import STATE, pack, unpack
from dpfair.fairclass.federated.flower._transport import SiteNode, site_round1, site_round2

__all__ = ["app", "make_client_app"]

_LOG = logging.getLogger("flwr")


#: What the centre learns about a refusal, per error class: fixed texts, so that nothing
#: from the site's data, files or ledger history (entries, remaining budget) leaves it.
_PUBLIC_REASONS: tuple[tuple[type[Exception], str], ...] = (
    (ReleaseReplayError, "this round of this run was already made at this site"),
    (
        BudgetExceededError,
        "the setup asks this site for more than its own cap or than its ledger has left",
    ),
    (LedgerError, "the site's ledger refused the release"),
)


def _public_reason(exc: Exception) -> str:
    """What the centre may learn about a failure (no data-, file- or ledger-dependent text)."""
    if isinstance(exc, ProtocolError):
        return f"ProtocolError in field {exc.field!r}"
    for cls, text in _PUBLIC_REASONS:
        if isinstance(exc, cls):
            return f"{type(exc).__name__}: {text}"
    return type(exc).__name__


def make_client_app(
    node_configs: Mapping[int, Mapping[str, Any]] | None = None,
) -> ClientApp:
    """Build the site ``ClientApp``.

    Parameters
    ----------
    node_configs : mapping of int to mapping, optional
        Only for Flower's simulation runtime, which gives its virtual SuperNodes no
        ``--node-config`` but a ``partition-id``: the node config of each partition.

    Returns
    -------
    flwr.clientapp.ClientApp
    """
    app = ClientApp()

    def config_of(context: Context) -> dict[str, Any]:
        config = dict(context.node_config)
        if node_configs is not None:
            config.update(node_configs[int(config["partition-id"])])
        return config

    def state_of(context: Context) -> ConfigRecord:
        if STATE not in context.state.config_records:
            context.state[STATE] = ConfigRecord()
        return context.state.config_records[STATE]

    def guarded(
        step: str, body: Callable[[SiteNode, Message, Context], bytes]
    ) -> Callable[[Message, Context], Message]:
        def handler(message: Message, context: Context) -> Message:
            config = config_of(context)
            site = str(config.get("site-id", "?"))
            try:
                node = SiteNode.from_config(config)
                raw = body(node, message, context)
                _LOG.info("FDP-Fair site %r: %s released (%d bytes)", site, step, len(raw))
                return Message(pack({"site-id": site, "message": raw}), reply_to=message)
            except Exception as exc:
                _LOG.error(
                    "FDP-Fair site %r, %s refused: %s: %s", site, step, type(exc).__name__, exc
                )
                reason = (
                    f"site {site!r} refused {step}: {_public_reason(exc)} (the site's operator "
                    "sees the full message in its SuperNode log)."
                )
                return Message(pack({"site-id": site, "error": reason}), reply_to=message)

        return handler

    def round1(node: SiteNode, message: Message, context: Context) -> bytes:
        setup = unpack(message.content, "setup", sender="centre")
        return site_round1(node, setup, state_of(context))

    def round2(node: SiteNode, message: Message, context: Context) -> bytes:
        setup = unpack(message.content, "setup", sender="centre")
        model = unpack(message.content, "model", sender="centre")
        return site_round2(node, setup, model, state_of(context))

    app.train("fdp_round1")(guarded("round 1", round1))
    app.train("fdp_round2")(guarded("round 2", round2))
    return app


#: The ClientApp named by the Flower app's ``pyproject.toml``.
app = make_client_app()
