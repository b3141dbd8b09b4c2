"""The FDP-Fair centre as a Flower ``ServerApp`` (runs at the coordinator's SuperLink).

Run config (``[tool.flwr.app.config]`` of the Flower app, overridable with
``flwr run … --run-config``):

``setup``
    Path of the signed ``setup`` message written by ``dpfair fdp centre setup`` (sites
    with N_s, ε_s, δ_s and their pinned public keys; grid; α …): the public protocol,
    exactly as for the file exchange.
``key``
    The centre's private key (the one that signed the setup); it signs the ``model`` and
    the ``released_model``.
``out``
    Where the signed ``released_model`` is written (a ``dpfair fdp predict`` input).
``round-timeout``
    Seconds to wait for every site's reply in a round (in round 1 this includes the time
    for the sites' SuperNodes to connect). A site that has not replied by then (SuperNode
    stopped, killed, disconnected) ends the run with an error naming it — never a hang.
``seed`` (optional, -1: none)
    Seed of the public tie-breaking salt, as ``dpfair fdp centre finalize --seed``.

Steps: round 1 (the setup to every connected node, and to nodes connecting later, until
every site of the setup has answered) → aggregate → round 2 (the model to the node that
answered for each site) → finalize, i.e.
:func:`~dpfair.fairclass.federated.flower._transport.run_centre` over a Flower
:class:`~flwr.serverapp.Grid`. A reply names its site; the centre believes the name only
once the message's signature verifies with the key the setup pins for that site. With
SuperNode authentication, nodes registered under a site's name are the only ones asked.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from flwr.app import Context, Message
from flwr.serverapp import Grid, ServerApp

from dpfair._atomic import write_bytes_atomic
from dpfair._errors import InvalidParameterError
from dpfair.fairclass.federated._keys import load_signer
from dpfair.fairclass.federated._messages import CENTRE, ProtocolError
from dpfair.fairclass.federated.cli import SETUP_MAX_BYTES
from dpfair.fairclass.federated.flower._records import ACTIONS, RECORD, pack, unpack
from dpfair.fairclass.federated.flower._transport import load_setup, run_centre

__all__ = ["DEFAULT_RUN_CONFIG", "GridExchange", "app", "make_server_app", "run"]

_LOG = logging.getLogger("flwr")

#: Seconds between two pulls of replies / two looks for newly connected nodes.
POLL_SECONDS = 0.2
#: Defaults of the run config (``setup``, ``key`` and ``out`` have none).
DEFAULT_RUN_CONFIG: dict[str, Any] = {"round-timeout": 600.0, "seed": -1}


def _positive(conf: Mapping[str, Any], key: str) -> float:
    try:
        value = float(conf[key])
    except (TypeError, ValueError):
        raise InvalidParameterError(f"run config {key}={conf[key]!r}: expected seconds.") from None
    if not value > 0:
        raise InvalidParameterError(f"run config {key}={value!r}: expected a positive number.")
    return value


def registered_names(grid: Grid) -> dict[str, int]:
    """Node name → node id for connected nodes registered with a (unique) name.

    With SuperNode authentication the coordinator registers each site's public key with
    ``flwr supernode register KEY --name SITE_ID``: the name is bound to the key the node
    authenticates with, not declared by the node.
    """
    names: dict[str, list[int]] = {}
    try:
        infos = list(grid.get_nodes())
    except Exception:  # a Grid without node information
        return {}
    for info in infos:
        name = str(getattr(info, "name", "") or "")
        if name:
            names.setdefault(name, []).append(int(info.node_id))
    return {n: ids[0] for n, ids in names.items() if len(ids) == 1}


class GridExchange:
    """One request/reply round with the sites over a Flower ``Grid``.

    Round 1 goes to every candidate node (the nodes registered under the sites' names if
    there are such nodes for every site, else every connected node), including nodes that
    connect while the round is open; round 2 goes to the node that answered round 1 for
    each site. A round ends when every site has answered, when a site refuses (its reason
    is reported), or after ``timeout`` seconds (the silent sites are named).

    Parameters
    ----------
    grid : flwr.serverapp.Grid
    timeout : float
        Seconds per round.
    """

    def __init__(self, grid: Grid, timeout: float) -> None:
        self.grid = grid
        self.timeout = timeout
        self.nodes: dict[str, int] = {}

    def _candidates(self, step: str, site_ids: tuple[str, ...]) -> dict[int, str | None]:
        """Node → the site it must answer for (its registered name; None: unnamed)."""
        if step != "round1":
            return {self.nodes[s]: s for s in site_ids}
        names = registered_names(self.grid)
        if all(s in names for s in site_ids):
            return {names[s]: s for s in site_ids}
        name_of = {node: name for name, node in names.items()}
        return {n: name_of.get(n) for n in self.grid.get_node_ids()}

    def __call__(
        self, step: str, site_ids: tuple[str, ...], payload: Mapping[str, bytes]
    ) -> dict[str, bytes]:
        """Send ``payload`` as ``step``; return each site's reply bytes."""
        t0 = time.monotonic()
        deadline = t0 + self.timeout
        sent: dict[int, str | None] = {}
        pending: dict[str, int] = {}  # message id → node
        got: dict[str, bytes] = {}
        node_of: dict[str, int] = {}
        refused: dict[str, str] = {}
        crashed: list[str] = []
        while True:
            new = {n: s for n, s in self._candidates(step, site_ids).items() if n not in sent}
            if new:
                msgs = [
                    Message(pack(payload), dst_node_id=n, message_type=ACTIONS[step], group_id=step)
                    for n in new
                ]
                for n, mid in zip(new, self.grid.push_messages(msgs), strict=True):
                    if mid:
                        pending[mid] = n
                sent.update(new)
            for reply in self.grid.pull_messages(list(pending)) if pending else ():
                node = pending.pop(reply.metadata.reply_to_message_id, None)
                if node is None:
                    continue
                if reply.has_error():  # Flower's own error: ClientApp crashed, node gone, …
                    crashed.append(f"node {node}: {reply.error.reason}")
                    continue
                record = reply.content.config_records.get(RECORD)
                sid = record.get("site-id") if record is not None else None
                if not isinstance(sid, str) or sid not in site_ids:
                    _LOG.info("node %s is not a site of this run (%r): ignored", node, sid)
                    continue
                expected = sent.get(node)
                if expected is not None and sid != expected:
                    raise ProtocolError(
                        sid,
                        "site-id",
                        f"node {node} is registered as {expected!r} but answers as {sid!r}.",
                    )
                if sid in node_of and node_of[sid] != node:
                    raise ProtocolError(
                        sid,
                        "site-id",
                        f"two SuperNodes ({node_of[sid]} and {node}) answer as site {sid!r}: "
                        "one node per site (fix their --node-config).",
                    )
                node_of[sid] = node
                assert record is not None
                error = record.get("error")
                if isinstance(error, str):
                    refused[sid] = error
                else:
                    got[sid] = unpack(reply.content, "message", sender=sid)
            silent = [s for s in site_ids if s not in got and s not in refused]
            if refused or not silent or time.monotonic() >= deadline:
                break
            time.sleep(POLL_SECONDS)
        if refused or silent:
            parts = [refused[s].rstrip(".") for s in site_ids if s in refused]
            if silent and not refused:
                parts.append(
                    f"site(s) {silent} sent no {step} reply within round-timeout="
                    f"{self.timeout:g} s (SuperNode not connected, stopped, killed or "
                    "disconnected?)"
                )
            if crashed:
                parts.append("Flower errors: " + "; ".join(crashed))
            first = next(iter(refused), silent[0] if silent else "?")
            raise ProtocolError(
                first,
                f"({step} reply)",
                f"FDP-Fair {step} failed after {time.monotonic() - t0:.1f} s: "
                + "; ".join(parts)
                + ". Nothing was aggregated from this round.",
            )
        if step == "round1":
            self.nodes = dict(node_of)
        return {s: got[s] for s in site_ids}


def _read_file(conf: Mapping[str, Any], key: str, what: str) -> Path:
    value = str(conf.get(key, ""))
    if not value:
        raise InvalidParameterError(
            f"run config: {key!r} is not set ({what}; flwr run … --run-config "
            '\'setup="/abs/setup.json" key="/abs/centre.key" out="/abs/released.json"\').'
        )
    return Path(value).expanduser()


def run(grid: Grid, conf: Mapping[str, Any]) -> Path:
    """The centre's whole run with the (merged) run config ``conf``; returns ``out``."""
    setup_path = _read_file(conf, "setup", "the signed setup of `dpfair fdp centre setup`")
    key = _read_file(conf, "key", "the centre's private key")
    out = _read_file(conf, "out", "where the released model goes")
    if not setup_path.is_file():
        raise InvalidParameterError(
            f"run config setup={str(setup_path)!r}: no such file (give an absolute path; the "
            "ServerApp's working directory is the SuperLink's)."
        )
    if setup_path.stat().st_size > SETUP_MAX_BYTES:
        raise ProtocolError(CENTRE, "(file)", f"{str(setup_path)!r} is over the setup limit.")
    setup_raw = setup_path.read_bytes()
    signer = load_signer(key, CENTRE, option="run config key")
    cfg = load_setup(setup_raw, signer.public, source=str(setup_path))
    seed = int(conf.get("seed", -1))
    t0 = time.monotonic()
    exchange = GridExchange(grid, _positive(conf, "round-timeout"))
    final = run_centre(setup_raw, exchange, signer, seed=None if seed < 0 else seed)
    write_bytes_atomic(out, final)
    _LOG.info(
        "FDP-Fair run %s: sites %s on nodes %s; released model written to %s (%.2f s)",
        cfg.protocol_id,
        list(exchange.nodes),
        list(exchange.nodes.values()),
        out,
        time.monotonic() - t0,
    )
    return out


def make_server_app(run_config: Mapping[str, Any] | None = None) -> ServerApp:
    """Build the centre ``ServerApp``.

    Parameters
    ----------
    run_config : mapping, optional
        Values over the run's ``context.run_config`` (Flower's simulation runtime gives a
        ServerApp started from Python an empty run config).
    """
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        conf = {**DEFAULT_RUN_CONFIG, **dict(context.run_config), **dict(run_config or {})}
        try:
            run(grid, conf)
        except Exception as exc:
            _LOG.error("FDP-Fair run failed: %s: %s", type(exc).__name__, exc)
            raise

    return app


#: The ServerApp named by the Flower app's ``pyproject.toml``.
app = make_server_app()
