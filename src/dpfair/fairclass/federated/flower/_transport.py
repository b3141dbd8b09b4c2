"""FDP-Fair over any transport that moves bytes: the site and centre steps, no Flower here.

The Flower apps (``client_app.py``, ``server_app.py``) are thin adapters around these
functions. Every payload is the exact signed document the file-exchange CLI writes to a
message file (:func:`~dpfair.fairclass.federated._messages.encode` with the sender's key),
and every payload received is authenticated and checked by the same
:func:`~dpfair.fairclass.federated._messages.decode`, with the same pinned keys and limits,
that the CLI applies when it reads a file. The rounds are
:class:`~dpfair.fairclass.federated.Site` and :class:`~dpfair.fairclass.federated.Centre`;
the site's budget is its own ledger with single-use rounds (``_site_budget.py``), exactly
as for ``dpfair fdp site``. So a ``round1`` produced by a Flower site is a valid ``round1``
file for ``dpfair fdp centre aggregate``, a ``model`` file of the CLI centre is a valid
Flower broadcast, and back.

Site state between the rounds is the CLI's ``--state`` file content (split entropy, split
kind, data fingerprint; nothing that determines noise) kept in a mapping that never leaves
the site (Flower: the SuperNode's ``context.state``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dpfair._errors import InvalidParameterError
from dpfair.fairclass.federated._centre import Centre
from dpfair.fairclass.federated._keys import Signer, load_public_key, load_signer
from dpfair.fairclass.federated._messages import Envelope, ProtocolError, decode, encode
from dpfair.fairclass.federated._protocol import ProtocolConfig
from dpfair.fairclass.federated._site_budget import charge_round, open_site_ledger, preflight

__all__ = [
    "Exchange",
    "SiteNode",
    "centre_aggregate",
    "centre_finalize",
    "load_setup",
    "run_centre",
    "site_round1",
    "site_round2",
]

#: ``exchange(round, site_ids, payload) -> {site_id: reply bytes}``: sends the round's
#: request (the same payload to every site) and returns every site's reply, or raises naming
#: the sites that refused or did not answer.
Exchange = Callable[[str, tuple[str, ...], Mapping[str, bytes]], dict[str, bytes]]

#: Required keys of a site's node config (plus ``ledger`` or ``max-epsilon``/``max-delta``).
_NODE_KEYS = ("site-id", "data", "features", "target", "sensitive", "key", "centre-key")


def load_setup(raw: bytes, centre_public: str, *, source: str = "setup") -> ProtocolConfig:
    """Verify a ``setup`` received as bytes with the centre key the reader pins itself."""
    from dpfair.fairclass.federated.cli import setup_from_bytes

    return setup_from_bytes(raw, centre_public, source=source)


def decode_for(cfg: ProtocolConfig, raw: bytes, kind: str, *, source: str) -> Envelope:
    """Authenticate and check a message of the run as the CLI does for a file of it."""
    return decode(
        raw,
        keys=cfg.keyring(),
        kind=kind,
        protocol_id=cfg.protocol_id,
        source=source,
        max_bytes=cfg.message_limit(kind),
        shapes=cfg.message_shapes(kind),
    )


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
    key : Path
        The site's private signing key (``dpfair fdp keygen``); the setup must pin its
        public half for this site.
    centre_key : Path
        The centre's public key, obtained and checked by the site itself.
    ledger : Path or None
        The site's privacy ledger file (``--ledger`` of ``dpfair fdp site``).
    max_epsilon, max_delta : float or None
        The site's own per-run cap (``--max-epsilon``/``--max-delta``); alone, they keep a
        site-local journal in ``state_dir``. A ledger or a cap is required.
    state_dir : Path
        Where the site-local journal lives (default: the data file's directory).
    aggregate : str
        ``auto``, ``always`` or ``never``: out-of-core reading, as ``dpfair fdp site``.
    seed : int or None
        As ``dpfair fdp site --seed``: tests and studies only (reproducible noise).
    """

    site_id: str
    data: Path
    features: str
    target: str
    sensitive: str
    key: Path
    centre_key: Path
    ledger: Path | None = None
    max_epsilon: float | None = None
    max_delta: float | None = None
    state_dir: Path | None = None
    aggregate: str = "auto"
    seed: int | None = None

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> SiteNode:
        """Parse a node config (keys as the attributes, with ``-`` for ``_``)."""
        missing = [k for k in _NODE_KEYS if k not in config]
        if missing:
            raise InvalidParameterError(
                f"node config: missing {missing}. Start the SuperNode with e.g. --node-config "
                '\'site-id="h1" data="/data/h1.csv" features="x1,x2" target="y" '
                'sensitive="a" key="h1.key" centre-key="centre.pub" max-epsilon=1.0 '
                "max-delta=1e-6'."
            )
        caps: dict[str, float | None] = {}
        for name in ("max-epsilon", "max-delta"):
            value = config.get(name)
            if value is None:
                caps[name] = None
                continue
            try:
                caps[name] = float(value)
            except (TypeError, ValueError):
                raise InvalidParameterError(
                    f"node config {name}={value!r}: expected a number."
                ) from None
            if not math.isfinite(float(caps[name] or 0.0)):
                raise InvalidParameterError(f"node config {name}={value!r}: not finite.")
        if config.get("ledger") is None and caps["max-epsilon"] is None:
            raise InvalidParameterError(
                'node config: give the site\'s own budget, ledger="/path/site.ledger" or '
                "max-epsilon=E max-delta=D (the setup's budget is the centre's request, not "
                "the site's consent)."
            )
        aggregate = str(config.get("aggregate", "auto"))
        if aggregate not in ("auto", "always", "never"):
            raise InvalidParameterError(
                f"node config aggregate={aggregate!r}: expected 'auto', 'always' or 'never'."
            )
        seed = config.get("seed")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise InvalidParameterError(f"node config seed={seed!r}: expected an integer >= 0.")
        data = Path(str(config["data"])).expanduser()
        state_dir = config.get("state-dir")
        return cls(
            site_id=str(config["site-id"]),
            data=data,
            features=str(config["features"]),
            target=str(config["target"]),
            sensitive=str(config["sensitive"]),
            key=Path(str(config["key"])).expanduser(),
            centre_key=Path(str(config["centre-key"])).expanduser(),
            ledger=None if config.get("ledger") is None else Path(str(config["ledger"])),
            max_epsilon=caps["max-epsilon"],
            max_delta=caps["max-delta"],
            state_dir=data.parent if state_dir is None else Path(str(state_dir)).expanduser(),
            aggregate=aggregate,
            seed=seed,
        )

    def signer(self) -> Signer:
        """The site's signing key."""
        return load_signer(self.key, self.site_id, option="node config key")

    def setup(self, raw: bytes, signer: Signer) -> ProtocolConfig:
        """The setup as this site sees it: signed by its pinned centre key, pinning its key."""
        from dpfair.fairclass.federated.cli import check_site_pinned

        centre_public = load_public_key(self.centre_key, option="node config centre-key")
        cfg = load_setup(raw, centre_public, source="the setup from the centre")
        check_site_pinned(cfg, self.site_id, signer)
        return cfg

    def open_ledger(self, create: bool) -> tuple[Any, Any]:
        """The site's ledger and per-run cap (``_site_budget.open_site_ledger``)."""
        assert self.state_dir is not None
        return open_site_ledger(
            ledger=self.ledger,
            max_epsilon=self.max_epsilon,
            max_delta=self.max_delta,
            state=self.state_dir / f"{self.site_id}.flower-state",  # locates the journal
            site_id=self.site_id,
            data=self.data,
            create=create,
        )


def _make_site(node: SiteNode, cfg: ProtocolConfig, split_entropy: int | None, ooc: bool) -> Any:
    # The file CLI's own constructor (same column reading, same seeding): one code path.
    from dpfair.fairclass.federated.cli import _make_site as make

    return make(
        node.data,
        cfg,
        node.site_id,
        node.features,
        node.target,
        node.sensitive,
        node.seed,
        split_entropy,
        ooc,
    )


def _out_of_core(node: SiteNode) -> bool:
    # by the public row count, never the file's size (dpfair.data._paths)
    from dpfair.data import use_out_of_core

    return use_out_of_core(node.data, node.aggregate)


def site_round1(node: SiteNode, setup_raw: bytes, state: MutableMapping[str, Any]) -> bytes:
    """Round 1 at a site: ``setup`` bytes in, signed ``round1`` bytes out.

    As ``dpfair fdp site round1``: the setup is verified with the site's pinned centre key
    and must pin the site's own key; the site's ledger checks its cap and records the run
    under a single-use key before the data are read and the noise is drawn. ``state``
    receives what the CLI writes to its ``--state`` file.
    """
    signer = node.signer()
    cfg = node.setup(setup_raw, signer)
    if state.get("protocol_id") == cfg.protocol_id:
        raise ProtocolError(
            node.site_id, "round", f"round 1 of run {cfg.protocol_id!r} was already run here."
        )
    led, per_run = node.open_ledger(create=True)
    cost = preflight(led, per_run, cfg, node.site_id, 1, node.data)  # before any data read
    ooc = _out_of_core(node)
    site = _make_site(node, cfg, None, ooc)
    charge_round(led, cfg, node.site_id, 1, cost)  # recorded (fsync) before the release
    raw = encode(site.round1(), signer)
    state.update(
        {
            "site_id": node.site_id,
            "protocol_id": cfg.protocol_id,
            "split": "position" if ooc else "permutation",
            "split_entropy": str(site.split_entropy),
            "fingerprint": site.data_fingerprint(),
            "round": "1",
        }
    )
    return raw


def site_round2(
    node: SiteNode, setup_raw: bytes, model_raw: bytes, state: MutableMapping[str, Any]
) -> bytes:
    """Round 2 at a site: ``setup`` and the signed ``model`` in, signed ``round2`` out.

    As ``dpfair fdp site round2``: the ledger refuses a second round 2 of the run (and a
    round 2 without this site's round 1); round 1's halves are re-created from the split
    entropy and checked against the data fingerprint; round 2's noise is fresh.
    """
    signer = node.signer()
    cfg = node.setup(setup_raw, signer)
    if state.get("protocol_id") != cfg.protocol_id or state.get("site_id") != node.site_id:
        raise ProtocolError(node.site_id, "round", "round 2 without this site's round 1 here.")
    led, per_run = node.open_ledger(create=False)
    cost = preflight(led, per_run, cfg, node.site_id, 2, node.data)  # replay refused here
    model = decode_for(cfg, model_raw, "model", source="the model from the centre")
    ooc = state.get("split") == "position"
    site = _make_site(node, cfg, int(state["split_entropy"]), ooc)
    if site.data_fingerprint() != state.get("fingerprint"):
        raise InvalidParameterError(
            f"site {node.site_id!r}: the data file differs from the one used in round 1."
        )
    site.resume_after_round1()
    charge_round(led, cfg, node.site_id, 2, cost)  # single-use: recorded before release
    raw = encode(site.round2(model), signer)
    state["round"] = "2"
    return raw


# -------------------------------------------------------------------------------- centre
def _decode_all(cfg: ProtocolConfig, replies: Mapping[str, bytes], kind: str) -> list[Envelope]:
    out = []
    for sid, raw in replies.items():
        env = decode_for(cfg, raw, kind, source=f"the {kind} reply of site {sid!r}")
        if env.sender != sid:
            raise ProtocolError(
                sid, "sender", f"the reply of site {sid!r} is signed as {env.sender!r}: refused."
            )
        out.append(env)
    return out


def centre_aggregate(cfg: ProtocolConfig, replies: Mapping[str, bytes], signer: Signer) -> bytes:
    """Signed ``round1`` bytes per site in, the signed ``model`` out (``centre aggregate``)."""
    return encode(Centre(cfg).aggregate(_decode_all(cfg, replies, "round1")), signer)


def centre_finalize(
    cfg: ProtocolConfig,
    replies: Mapping[str, bytes],
    model_raw: bytes,
    signer: Signer,
    *,
    seed: Any = None,
) -> bytes:
    """Signed ``round2`` bytes per site and the ``model`` in, the ``released_model`` out."""
    model = decode_for(cfg, model_raw, "model", source="the model")
    final = Centre(cfg, random_state=seed).finalize(_decode_all(cfg, replies, "round2"), model)
    return encode(final, signer)


def run_centre(setup_raw: bytes, exchange: Exchange, signer: Signer, *, seed: Any = None) -> bytes:
    """Drive round 1 → aggregate → round 2 → finalize over ``exchange``.

    ``signer`` is the centre's key: the setup must be signed by it and pin it. Returns the
    signed ``released_model`` bytes (a valid ``dpfair fdp predict`` input once written).
    """
    cfg = load_setup(setup_raw, signer.public)
    r1 = exchange("round1", cfg.site_ids, {"setup": setup_raw})
    model_raw = centre_aggregate(cfg, r1, signer)
    r2 = exchange("round2", cfg.site_ids, {"setup": setup_raw, "model": model_raw})
    return centre_finalize(cfg, r2, model_raw, signer, seed=seed)
