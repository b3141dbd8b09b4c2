"""The FDP-Fair site as a Flower ``ClientApp`` (runs at each institution's SuperNode).

It answers three message types (:data:`~dpfair.fairclass.federated.flower._records.ACTIONS`):

* ``query.fdp_hello`` — replies with this node's ``site-id`` (so the centre can address
  the sites of its setup); reads no data;
* ``train.fdp_round1`` — ``setup`` in, the site's ``round1`` message out
  (:func:`~dpfair.fairclass.federated.flower._transport.site_round1`);
* ``train.fdp_round2`` — ``setup`` and the broadcast ``model`` in, ``round2`` out.

Everything the site uses comes from its own SuperNode: ``--node-config`` gives the data
file, its columns and the site's cap (:class:`SiteNode`); the seed entropy between the rounds
is kept in ``context.state`` on the SuperNode. The code that runs is the dpfair installed at
the site (the Flower App Bundle only names it), so a coordinator cannot ship other code.

Errors: the site logs the full message locally and replies with a Flower error carrying only
the error's class (and, for protocol errors, the field): the text of a data error can depend
on the site's rows, and the centre must not learn it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from flwr.app import ConfigRecord, Context, Error, Message
from flwr.clientapp import ClientApp

from dpfair._errors import BudgetExceededError, InvalidParameterError
from dpfair.fairclass.federated._messages import ProtocolError
from dpfair.fairclass.federated.flower._records import STATE, pack, unpack
from dpfair.fairclass.federated.flower._transport import SiteNode, site_round1, site_round2

__all__ = ["app", "make_client_app"]

_LOG = logging.getLogger("flwr")
#: Flower's error code for "the ClientApp raised an exception".
_CLIENT_APP_RAISED_EXCEPTION = 2


def _public_reason(site: str, step: str, exc: Exception) -> str:
    """What the centre may learn about a failure (no data-dependent text)."""
    if isinstance(exc, ProtocolError):
        detail = f"ProtocolError in field {exc.field!r}"
    elif isinstance(exc, (BudgetExceededError, InvalidParameterError)):
        detail = f"{type(exc).__name__}: {exc}"  # about public parameters only
    else:
        detail = type(exc).__name__
    return (
        f"site {site!r} refused {step}: {detail} (the site's operator sees the full message "
        "in its SuperNode log)."
    )


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

    def node_of(context: Context) -> SiteNode:
        config = dict(context.node_config)
        if node_configs is not None:
            config.update(node_configs[int(config["partition-id"])])
        return SiteNode.from_config(config)

    def state_of(context: Context) -> ConfigRecord:
        if STATE not in context.state.config_records:
            context.state[STATE] = ConfigRecord()
        return context.state.config_records[STATE]

    def guarded(
        step: str, body: Callable[[SiteNode, Message, Context], dict[str, bytes | str]]
    ) -> Callable[[Message, Context], Message]:
        def handler(message: Message, context: Context) -> Message:
            site = str(context.node_config.get("site-id", "?"))
            try:
                node = node_of(context)
                site = node.site_id
                return Message(pack(body(node, message, context)), reply_to=message)
            except Exception as exc:
                _LOG.error(
                    "FDP-Fair site %r, %s failed: %s: %s", site, step, type(exc).__name__, exc
                )
                reason = _public_reason(site, step, exc)
                return Message(Error(_CLIENT_APP_RAISED_EXCEPTION, reason), reply_to=message)

        return handler

    def hello(node: SiteNode, message: Message, context: Context) -> dict[str, bytes | str]:
        return {"site-id": node.site_id}

    def round1(node: SiteNode, message: Message, context: Context) -> dict[str, bytes | str]:
        setup = unpack(message.content, "setup", sender="centre")
        state = state_of(context)
        raw = site_round1(node, setup, state)
        _LOG.info("FDP-Fair site %r: round 1 released (%d bytes)", node.site_id, len(raw))
        return {"message": raw}

    def round2(node: SiteNode, message: Message, context: Context) -> dict[str, bytes | str]:
        setup = unpack(message.content, "setup", sender="centre")
        model = unpack(message.content, "model", sender="centre")
        raw = site_round2(node, setup, model, state_of(context))
        _LOG.info("FDP-Fair site %r: round 2 released (%d bytes)", node.site_id, len(raw))
        return {"message": raw}

    app.query("fdp_hello")(guarded("hello", hello))
    app.train("fdp_round1")(guarded("round 1", round1))
    app.train("fdp_round2")(guarded("round 2", round2))
    return app


#: The ClientApp named by the Flower app's ``pyproject.toml``.
app = make_client_app()
