"""The FDP-Fair centre as a Flower ``ServerApp`` (runs at the coordinator's SuperLink).

Run config (``[tool.flwr.app.config]`` of the Flower app, overridable with
``flwr run … --run-config``):

``setup``
    Path of the ``setup`` message written by ``dpfair fdp centre setup`` (sites with
    N_s, ε_s, δ_s; grid; α …): the public protocol, exactly as for the file exchange.
``out``
    Where the ``released_model`` message is written (a ``dpfair fdp predict`` input).
``connect-timeout``
    Seconds to wait until a SuperNode of every site of the setup has answered the
    discovery query.
``seed`` (optional)
    Seed of the public tie-breaking salt of the released classifier (default: OS entropy),
    as ``dpfair fdp centre finalize --seed``.
``round-timeout``
    Seconds to wait for the replies of one round; a site that has not replied by then (its
    SuperNode stopped, was killed, lost the connection) ends the run with an error naming
    it — never a hang.

Steps: discovery (``query.fdp_hello``: node → site id) → round 1 → aggregate → round 2 →
finalize, i.e. :func:`~dpfair.fairclass.federated.flower._transport.run_centre` over a
Flower :class:`~flwr.serverapp.Grid`. The messages are the file CLI's message documents.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from flwr.app import Context, Message, RecordDict
from flwr.serverapp import Grid, ServerApp

from dpfair._errors import InvalidParameterError
from dpfair.fairclass.federated._messages import (
    MAX_MESSAGE_BYTES,
    ProtocolError,
    decode,
    write_message,
)
from dpfair.fairclass.federated.flower._records import ACTIONS, pack, unpack, unpack_text
from dpfair.fairclass.federated.flower._transport import load_setup, run_centre

__all__ = ["DEFAULT_RUN_CONFIG", "GridExchange", "app", "discover_sites", "make_server_app"]

_LOG = logging.getLogger("flwr")

#: Seconds between two pulls of the replies of a round.
POLL_SECONDS = 0.2
#: Defaults of the run config (``setup`` and ``out`` have none).
DEFAULT_RUN_CONFIG: dict[str, Any] = {"connect-timeout": 120.0, "round-timeout": 600.0}


def _positive(conf: Mapping[str, Any], key: str) -> float:
    try:
        value = float(conf[key])
    except (TypeError, ValueError):
        raise InvalidParameterError(f"run config {key}={conf[key]!r}: expected seconds.") from None
    if not value > 0:
        raise InvalidParameterError(f"run config {key}={value!r}: expected a positive number.")
    return value


def _registered_names(grid: Grid) -> dict[str, int]:
    """Node name → node id for the connected nodes that have a name.

    With SuperNode authentication the coordinator registers each site's public key with
    ``flwr supernode register KEY --name SITE_ID``: the name is then bound to the key the
    node authenticates with, not declared by the node.
    """
    names: dict[str, list[int]] = {}
    try:
        infos = list(grid.get_nodes())
    except Exception:  # a Grid without node information (simulation)
        return {}
    for info in infos:
        name = str(getattr(info, "name", "") or "")
        if name:
            names.setdefault(name, []).append(int(info.node_id))
    return {n: ids[0] for n, ids in names.items() if len(ids) == 1}


def discover_sites(grid: Grid, site_ids: tuple[str, ...], timeout: float) -> dict[str, int]:
    """Map each site id of the setup to the node that serves it.

    If every site id is the registered name of exactly one connected node (SuperNode
    authentication on), those nodes are used and nothing is sent. Otherwise every connected
    node is asked once for its ``site-id`` (``query.fdp_hello``), where a node with a
    registered name must claim exactly that name; new nodes are asked and replies collected
    until every site has answered or ``timeout`` seconds passed.

    Raises
    ------
    ProtocolError
        A site not connected in time (named), two nodes claiming the same site, or a node
        claiming a site other than its registered name.
    """
    deadline = time.monotonic() + timeout
    found: dict[str, int] = {}
    asked: set[int] = set()
    pending: set[str] = set()
    while True:
        names = _registered_names(grid)
        if all(s in names for s in site_ids):
            return {s: names[s] for s in site_ids}
        name_of = {node: name for name, node in names.items()}
        new = [n for n in grid.get_node_ids() if n not in asked]
        if new:
            asked.update(new)
            hello = [
                Message(RecordDict(), dst_node_id=n, message_type=ACTIONS["hello"]) for n in new
            ]
            pending.update(i for i in grid.push_messages(hello) if i)
        for reply in grid.pull_messages(list(pending)) if pending else ():
            pending.discard(reply.metadata.reply_to_message_id)
            node = reply.metadata.src_node_id
            if reply.has_error():
                _LOG.warning(
                    "node %s did not answer the FDP-Fair discovery: %s", node, reply.error.reason
                )
                continue
            sid = unpack_text(reply.content, "site-id", sender=f"node {node}")
            if node in name_of and name_of[node] != sid:
                raise ProtocolError(
                    sid,
                    "site-id",
                    f"node {node} is registered as {name_of[node]!r} but its node config "
                    f"says site-id={sid!r}: refused.",
                )
            if sid in found and found[sid] != node:
                raise ProtocolError(
                    sid,
                    "site-id",
                    f"two SuperNodes ({found[sid]} and {node}) claim this site: fix their "
                    "--node-config (one node per site).",
                )
            found[sid] = node
        missing = [s for s in site_ids if s not in found]
        if not missing:
            return {s: found[s] for s in site_ids}
        if time.monotonic() >= deadline:
            raise ProtocolError(
                missing[0],
                "(connection)",
                f"site(s) {missing} of the setup have no SuperNode connected to this SuperLink "
                f"after connect-timeout={timeout:g} s (connected: {sorted(found) or 'none'}). "
                "Start their SuperNodes with site-id set in --node-config.",
            )
        time.sleep(POLL_SECONDS)


class GridExchange:
    """One request per site over a Flower ``Grid``, every reply or a clear error.

    Parameters
    ----------
    grid : flwr.serverapp.Grid
    nodes : dict of str to int
        Site id → node id (:func:`discover_sites`).
    timeout : float
        Seconds to wait for the replies of one round.
    """

    def __init__(self, grid: Grid, nodes: Mapping[str, int], timeout: float) -> None:
        self.grid = grid
        self.nodes = dict(nodes)
        self.timeout = timeout

    def __call__(self, step: str, payloads: Mapping[str, Mapping[str, bytes]]) -> dict[str, bytes]:
        """Send ``payloads[site]`` to each site as ``step``; return each site's bytes."""
        msgs = [
            Message(pack(p), dst_node_id=self.nodes[sid], message_type=ACTIONS[step], group_id=step)
            for sid, p in payloads.items()
        ]
        t0 = time.monotonic()
        deadline = t0 + self.timeout
        # push/pull with a short poll (Grid.send_and_receive sleeps 3 s between pulls).
        pending = {i for i in self.grid.push_messages(msgs) if i}
        replies: dict[int, Message] = {}
        while pending:
            for reply in self.grid.pull_messages(list(pending)):
                pending.discard(reply.metadata.reply_to_message_id)
                replies[reply.metadata.src_node_id] = reply
            if not pending or time.monotonic() >= deadline:
                break
            time.sleep(POLL_SECONDS)
        out: dict[str, bytes] = {}
        failed: list[str] = []
        silent: list[str] = []
        for sid in payloads:
            got = replies.get(self.nodes[sid])
            if got is None:
                silent.append(sid)
            elif got.has_error():
                failed.append(f"{sid}: {got.error.reason}")
            else:
                out[sid] = unpack(got.content, "message", sender=sid)
        if silent or failed:
            parts = []
            if silent:
                parts.append(
                    f"site(s) {silent} sent no reply within round-timeout={self.timeout:g} s "
                    "(SuperNode stopped, killed or disconnected?)"
                )
            if failed:
                parts.append("error replies: " + "; ".join(failed))
            raise ProtocolError(
                (silent or [f.split(":")[0] for f in failed])[0],
                f"({step} reply)",
                f"FDP-Fair {step} failed after {time.monotonic() - t0:.1f} s: "
                + "; ".join(parts)
                + ". Nothing was aggregated; start a new run with a new setup.",
            )
        return out


def _read_setup(path: Path) -> bytes:
    if not path.is_file():
        raise InvalidParameterError(
            f"run config setup={str(path)!r}: no such file (write it with `dpfair fdp centre "
            "setup … --out setup.json`; give an absolute path, the ServerApp's working "
            "directory is the SuperLink's)."
        )
    if path.stat().st_size > MAX_MESSAGE_BYTES:
        raise ProtocolError("?", "(file)", f"{str(path)!r} is over the message size limit.")
    return path.read_bytes()


def run(grid: Grid, conf: Mapping[str, Any]) -> Path:
    """The centre's whole run with the (merged) run config ``conf``; returns ``out``."""
    for key in ("setup", "out"):
        if not str(conf.get(key, "")):
            raise InvalidParameterError(
                f"run config: {key!r} is not set (flwr run … --run-config "
                '\'setup="/abs/setup.json" out="/abs/released.json"\').'
            )
    setup_raw = _read_setup(Path(str(conf["setup"])).expanduser())
    out = Path(str(conf["out"])).expanduser()
    cfg = load_setup(setup_raw, source=str(conf["setup"]))
    t0 = time.monotonic()
    nodes = discover_sites(grid, cfg.site_ids, _positive(conf, "connect-timeout"))
    _LOG.info(
        "FDP-Fair run %s: sites %s on nodes %s (%.2f s)",
        cfg.protocol_id,
        list(nodes),
        list(nodes.values()),
        time.monotonic() - t0,
    )
    exchange = GridExchange(grid, nodes, _positive(conf, "round-timeout"))
    seed = conf.get("seed")
    final = run_centre(setup_raw, exchange, seed=None if seed in (None, "", -1) else int(seed))
    write_message(out, decode(final, kind="released_model", protocol_id=cfg.protocol_id))
    _LOG.info(
        "FDP-Fair run %s: released model written to %s (%.2f s)",
        cfg.protocol_id,
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
