"""Helpers for the Flower transport tests: site files, a setup, an in-process Grid."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from dpfair.fairclass.datasets import FairnessDataset

FEATURES = ["x1", "x2"]


def write_site(path: Path, d: FairnessDataset) -> Path:
    """The site's own CSV file (columns x1, x2, a, y)."""
    np.savetxt(
        path,
        np.column_stack([d.X, d.A, d.y]),
        delimiter=",",
        header="x1,x2,a,y",
        comments="",
        fmt="%.17g",
    )
    return path


def make_keys(root: Path, parties: Iterable[str]) -> dict[str, tuple[Path, Path, str]]:
    """An Ed25519 key pair per party: {party: (NAME.key, NAME.pub, public text)}."""
    from dpfair.fairclass.federated._keys import generate_keypair

    (root / "keys").mkdir(exist_ok=True)
    return {p: generate_keypair(root / "keys" / p) for p in parties}


def signed_setup(path: Path, keys: Mapping[str, tuple[Path, Path, str]], **kw: Any) -> Path:
    """The centre's signed setup pinning every party's key (``kw``: make_protocol's)."""
    from dpfair.fairclass.federated import make_protocol, write_message
    from dpfair.fairclass.federated._keys import load_signer

    cfg = make_protocol(keys={p: k[2] for p, k in keys.items()}, **kw)
    return write_message(path, cfg.to_envelope(), load_signer(keys["centre"][0], "centre"))


def node_config(
    site_id: str,
    data: Path,
    keys: Mapping[str, tuple[Path, Path, str]],
    eps: float,
    delta: float,
    **extra: Any,
) -> dict:
    """What the site's SuperNode gets as --node-config."""
    return {
        "site-id": site_id,
        "data": str(data),
        "features": ",".join(FEATURES),
        "target": "y",
        "sensitive": "a",
        "key": str(keys[site_id][0]),
        "centre-key": str(keys["centre"][1]),
        "max-epsilon": float(eps),
        "max-delta": float(delta),
        **extra,
    }


@contextmanager
def task_identity(run_id: int = 1) -> Iterator[None]:
    """Flower messages need the process's task identity (set by Flower's runtimes)."""
    from flwr.supercore.task_identity import TaskIdentity

    saved = (TaskIdentity._task_id, TaskIdentity._run_id, TaskIdentity._node_id)
    TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = 1, run_id, 1
    try:
        yield
    finally:
        TaskIdentity._task_id, TaskIdentity._run_id, TaskIdentity._node_id = saved


class LocalGrid:
    """A Flower ``Grid`` whose nodes are ClientApps called in this process.

    Each node keeps its own ``Context`` (node config, persistent ``state``), as a SuperNode
    does. ``silent`` nodes never reply (a killed site): ``send_and_receive`` then returns
    the other replies after ``timeout``, as Flower's grids do.
    """

    def __init__(
        self,
        client_app: Any,
        node_configs: Mapping[int, Mapping[str, Any]],
        *,
        names: Mapping[int, str] | None = None,
        silent: Iterable[int] = (),
    ) -> None:
        from flwr.app import Context, RecordDict

        self.app = client_app
        self.names = dict(names or {})
        self.silent = set(silent)
        self.contexts = {
            n: Context(run_id=1, node_id=n, node_config=dict(c), state=RecordDict(), run_config={})
            for n, c in node_configs.items()
        }
        self.sent: list[Any] = []
        self._replies: dict[str, Any] = {}

    def get_node_ids(self) -> list[int]:
        return list(self.contexts)

    def get_nodes(self) -> list[Any]:
        from flwr.proto.node_pb2 import NodeInfo

        return [NodeInfo(node_id=n, name=self.names.get(n, "")) for n in self.contexts]

    def push_messages(self, messages: Iterable[Any]) -> list[str]:
        ids = []
        for m in messages:
            m.metadata.__dict__["_message_id"] = uuid.uuid4().hex
            self.sent.append(m)
            node = m.metadata.dst_node_id
            if node not in self.silent:
                self._replies[m.metadata.message_id] = self.app(m, self.contexts[node])
            ids.append(m.metadata.message_id)
        return ids

    def pull_messages(self, message_ids: Iterable[str]) -> list[Any]:
        return [self._replies.pop(i) for i in list(message_ids) if i in self._replies]

    def send_and_receive(self, messages: Iterable[Any], *, timeout: float | None = None) -> list:
        replies, waiting = [], False
        for m in messages:
            self.sent.append(m)
            node = m.metadata.dst_node_id
            if node in self.silent:
                waiting = True
                continue
            replies.append(self.app(m, self.contexts[node]))
        if waiting:  # wait out the timeout for the replies that never come
            time.sleep(timeout if timeout is not None else 3600.0)
        return replies


def core_reference(
    setup: Path,
    keys: Mapping[str, tuple[Path, Path, str]],
    data: list[FairnessDataset],
    seeds: list[int],
    centre_seed: int,
):
    """The released model of the in-process core (Site/Centre) seeded as ``dpfair fdp site
    --seed`` and the Flower site seed; every message signed, encoded and verified."""
    from dpfair.fairclass.federated import Centre, ProtocolConfig, Site
    from dpfair.fairclass.federated._keys import load_signer
    from dpfair.fairclass.federated._messages import decode, encode, read_message

    centre = load_signer(keys["centre"][0], "centre")
    config = ProtocolConfig.from_envelope(
        read_message(setup, keys={"centre": centre.public}, kind="setup")
    )
    ring = config.keyring()

    def wire(msg: Any) -> Any:
        signer = load_signer(keys[msg.sender][0], msg.sender)
        return decode(encode(msg, signer), keys=ring)

    core = [
        Site(sid, d.X, d.y, d.A, config=config, random_state=seed)
        for sid, d, seed in zip(config.site_ids, data, seeds, strict=True)
    ]
    c = Centre(config, random_state=centre_seed)
    model = wire(c.aggregate([wire(s.round1()) for s in core]))
    return wire(c.finalize([wire(s.round2(model)) for s in core], model))


def same_message(a: Any, b: Any) -> None:
    """Two decoded messages carry the same content (signatures and nonces differ)."""
    assert (a.kind, a.protocol_id, a.sender) == (b.kind, b.protocol_id, b.sender)
    assert a.fields == b.fields
    assert sorted(a.arrays) == sorted(b.arrays)
    for name in a.arrays:
        np.testing.assert_array_equal(a.arrays[name], b.arrays[name])
