"""FDP-Fair over any transport that moves bytes: the site and centre steps, no Flower here.

The Flower apps (``client_app.py``, ``server_app.py``) are thin adapters around these
functions. Every payload is the exact byte string the file-exchange CLI writes to a message
file (:func:`~dpfair.fairclass.federated.encode`), and every payload received is checked by
the same :func:`~dpfair.fairclass.federated.decode` the CLI uses when it reads a file; the
rounds themselves are :class:`~dpfair.fairclass.federated.Site` and
:class:`~dpfair.fairclass.federated.Centre`, unchanged. So a ``round1`` produced by a Flower
site is a valid ``round1`` file for ``dpfair fdp centre aggregate`` and a ``model`` file of
the CLI centre is a valid Flower broadcast, and back.

Site state between the rounds is the CLI's ``--state`` file content (seed entropy, split,
data fingerprint) kept in a string mapping that never leaves the site (Flower: the
SuperNode's ``context.state``).
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dpfair._errors import BudgetExceededError, InvalidParameterError
from dpfair.fairclass.federated._centre import Centre
from dpfair.fairclass.federated._messages import (
    MAX_MESSAGE_BYTES,
    Envelope,
    ProtocolError,
    decode,
    encode,
)
from dpfair.fairclass.federated._protocol import ProtocolConfig

__all__ = [
    "ROUNDS",
    "Exchange",
    "SiteNode",
    "centre_aggregate",
    "centre_finalize",
    "load_setup",
    "run_centre",
    "site_round1",
    "site_round2",
]

#: Required keys of a site's node config.
_NODE_KEYS = ("site-id", "data", "features", "target", "sensitive", "max-epsilon", "max-delta")
#: The two request/reply rounds a centre drives, in order.
ROUNDS = ("round1", "round2")

#: ``exchange(round, {site_id: {payload name: bytes}}) -> {site_id: reply bytes}``: sends one
#: request per site and returns every site's reply, or raises naming the sites that failed.
Exchange = Callable[[str, Mapping[str, Mapping[str, bytes]]], dict[str, bytes]]


def _check_size(raw: bytes, what: str) -> bytes:
    if not isinstance(raw, (bytes, bytearray)):
        raise ProtocolError("?", "(whole message)", f"{what}: expected bytes.")
    if len(raw) > MAX_MESSAGE_BYTES:
        raise ProtocolError("?", "(whole message)", f"{what} is {len(raw)} bytes, over the limit.")
    return bytes(raw)


def load_setup(raw: bytes, *, source: str = "setup") -> ProtocolConfig:
    """Decode and validate a ``setup`` message (the bytes of a setup file)."""
    env = decode(_check_size(raw, source), kind="setup", source=source)
    return ProtocolConfig.from_envelope(env)


# ---------------------------------------------------------------------------------- site
@dataclass(frozen=True)
class SiteNode:
    """What an institution configures on its own node (Flower: ``--node-config``).

    Attributes
    ----------
    site_id : str
        This site's id in the centre's setup.
    data : Path
        The site's own CSV/Parquet file (the only data the site reads).
    features, target, sensitive : str
        Comma-separated feature columns, label column, group column.
    max_epsilon, max_delta : float
        The site's own cap: a setup asking this site for a larger (ε_s, δ_s) is refused
        before any data are read.
    aggregate : str
        ``auto``, ``always`` or ``never``: out-of-core reading, as ``dpfair fdp site``.
    seed : int or None
        Seed of the site's split and noise, as ``dpfair fdp site round1 --seed`` (default:
        fresh OS entropy per run). For reproducing a run in tests only: a fixed seed reuses
        the same noise in every run.
    """

    site_id: str
    data: Path
    features: str
    target: str
    sensitive: str
    max_epsilon: float
    max_delta: float
    aggregate: str = "auto"
    seed: int | None = None

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> SiteNode:
        """Parse a node config (keys ``site-id``, ``data``, ``features``, ``target``,
        ``sensitive``, ``max-epsilon``, ``max-delta``, optional ``aggregate``)."""
        missing = [k for k in _NODE_KEYS if k not in config]
        if missing:
            raise InvalidParameterError(
                f"node config: missing {missing}. Start the SuperNode with e.g. --node-config "
                '\'site-id="h1" data="/data/h1.csv" features="x1,x2" target="y" '
                'sensitive="a" max-epsilon=1.0 max-delta=1e-6\'.'
            )
        caps = {}
        for key in ("max-epsilon", "max-delta"):
            try:
                caps[key] = float(config[key])
            except (TypeError, ValueError):
                raise InvalidParameterError(
                    f"node config {key}={config[key]!r}: expected a number."
                ) from None
            if not (math.isfinite(caps[key]) and caps[key] >= 0):
                raise InvalidParameterError(
                    f"node config {key}={config[key]!r}: expected a finite number >= 0."
                )
        aggregate = str(config.get("aggregate", "auto"))
        if aggregate not in ("auto", "always", "never"):
            raise InvalidParameterError(
                f"node config aggregate={aggregate!r}: expected 'auto', 'always' or 'never'."
            )
        seed = config.get("seed")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise InvalidParameterError(f"node config seed={seed!r}: expected an integer >= 0.")
        return cls(
            site_id=str(config["site-id"]),
            data=Path(str(config["data"])).expanduser(),
            features=str(config["features"]),
            target=str(config["target"]),
            sensitive=str(config["sensitive"]),
            max_epsilon=caps["max-epsilon"],
            max_delta=caps["max-delta"],
            aggregate=aggregate,
            seed=seed,
        )

    def check_cap(self, cfg: ProtocolConfig) -> None:
        """Refuse a setup that asks this site for more than its cap (before reading data)."""
        spec = cfg.site(self.site_id)
        if spec.epsilon > self.max_epsilon or spec.delta > self.max_delta:
            raise BudgetExceededError(
                f"site {self.site_id!r}: the setup asks for (epsilon, delta) = "
                f"({spec.epsilon:g}, {spec.delta:g}) but this site's cap is max-epsilon="
                f"{self.max_epsilon:g}, max-delta={self.max_delta:g}; refused before reading "
                "any data."
            )


def _make_site(node: SiteNode, cfg: ProtocolConfig, entropy: int, out_of_core: bool) -> Any:
    # The file CLI's own constructor (same column reading, same seeding): one code path.
    from dpfair.fairclass.federated.cli import _make_site as make

    return make(
        node.data,
        cfg,
        node.site_id,
        node.features,
        node.target,
        node.sensitive,
        entropy,
        out_of_core,
    )


def _out_of_core(node: SiteNode) -> bool:
    from dpfair.fairclass.federated.cli import _AGGREGATE_BYTES

    data = node.data
    return node.aggregate == "always" or (
        node.aggregate == "auto" and data.is_file() and data.stat().st_size > _AGGREGATE_BYTES
    )


def site_round1(node: SiteNode, setup_raw: bytes, state: MutableMapping[str, Any]) -> bytes:
    """Round 1 at a site: ``setup`` bytes in, ``round1`` bytes out.

    Checks the site's cap, then runs :meth:`Site.round1` exactly as ``dpfair fdp site
    round1`` does; ``state`` receives what the CLI writes to its ``--state`` file. A second
    round 1 for the same run is refused (fresh noise on the same rows would be a second
    release).
    """
    cfg = load_setup(setup_raw)
    node.check_cap(cfg)
    if state.get("protocol_id") == cfg.protocol_id:
        raise ProtocolError(
            node.site_id, "round", f"round 1 of run {cfg.protocol_id!r} was already run here."
        )
    ooc = _out_of_core(node)
    entropy = node.seed if node.seed is not None else secrets.randbits(128)
    site = _make_site(node, cfg, entropy, ooc)
    msg = site.round1()
    raw = encode(msg)
    state.update(
        {
            "site_id": node.site_id,
            "protocol_id": cfg.protocol_id,
            "entropy": str(entropy),
            "split": "position" if ooc else "permutation",
            "fingerprint": site.data_fingerprint(),
            "round": "1",
        }
    )
    return raw


def site_round2(
    node: SiteNode, setup_raw: bytes, model_raw: bytes, state: MutableMapping[str, Any]
) -> bytes:
    """Round 2 at a site: ``setup`` and the broadcast ``model`` in, ``round2`` bytes out.

    Re-creates round 1's site from ``state`` (same split, same data: checked by fingerprint,
    fresh round-2 noise stream) as ``dpfair fdp site round2`` does; runs once per run.
    """
    cfg = load_setup(setup_raw)
    node.check_cap(cfg)
    if state.get("protocol_id") != cfg.protocol_id or state.get("site_id") != node.site_id:
        raise ProtocolError(
            node.site_id, "round", "round 2 without this site's round 1 of this run."
        )
    if state.get("round") != "1":
        raise ProtocolError(node.site_id, "round", "round 2 of this run was already run here.")
    model = decode(
        _check_size(model_raw, "model"), kind="model", protocol_id=cfg.protocol_id, source="model"
    )
    ooc = state.get("split") == "position"
    site = _make_site(node, cfg, int(state["entropy"]), ooc)
    if site.data_fingerprint() != state.get("fingerprint"):
        raise InvalidParameterError(
            f"site {node.site_id!r}: the data file differs from the one used in round 1."
        )
    site.resume_after_round1()
    raw = encode(site.round2(model))
    state["round"] = "2"
    state.pop("entropy", None)  # no further use; nothing can re-create round 2's noise
    return raw


# -------------------------------------------------------------------------------- centre
def _decode_all(cfg: ProtocolConfig, replies: Mapping[str, bytes], kind: str) -> list[Envelope]:
    out = []
    for sid, raw in replies.items():
        env = decode(
            _check_size(raw, f"{kind} from {sid!r}"),
            kind=kind,
            protocol_id=cfg.protocol_id,
            source=f"the {kind} reply of site {sid!r}",
        )
        if env.sender != sid:
            raise ProtocolError(
                sid,
                "sender",
                f"the reply of site {sid!r} says it is from {env.sender!r}: refused.",
            )
        out.append(env)
    return out


def centre_aggregate(cfg: ProtocolConfig, replies: Mapping[str, bytes]) -> bytes:
    """``round1`` bytes per site in, ``model`` bytes out (as ``dpfair fdp centre aggregate``)."""
    return encode(Centre(cfg).aggregate(_decode_all(cfg, replies, "round1")))


def centre_finalize(
    cfg: ProtocolConfig, replies: Mapping[str, bytes], model_raw: bytes, *, seed: Any = None
) -> bytes:
    """``round2`` bytes per site and the ``model`` in, ``released_model`` bytes out."""
    model = decode(model_raw, kind="model", protocol_id=cfg.protocol_id, source="model")
    final = Centre(cfg, random_state=seed).finalize(_decode_all(cfg, replies, "round2"), model)
    return encode(final)


def run_centre(setup_raw: bytes, exchange: Exchange, *, seed: Any = None) -> bytes:
    """Drive setup → round 1 → aggregate → round 2 → finalize over ``exchange``.

    Returns the ``released_model`` bytes (a valid ``dpfair fdp predict`` input once written).
    """
    cfg = load_setup(setup_raw)
    r1 = exchange("round1", {sid: {"setup": setup_raw} for sid in cfg.site_ids})
    model_raw = centre_aggregate(cfg, r1)
    r2 = exchange("round2", {sid: {"setup": setup_raw, "model": model_raw} for sid in cfg.site_ids})
    return centre_finalize(cfg, r2, model_raw, seed=seed)
