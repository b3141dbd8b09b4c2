"""FDP-Fair: fairness-aware classification across several data holders (paper 003, Alg. 1).

Each site is its own process holding only its own data; the protocol is four messages
(``setup``, ``round1``, ``model``, ``round2``) plus the ``released_model``:

* :class:`Site` — round 1 (π̃^s and kernel sums on the training half) and round 2 (two
  noisy binary trees of the scores Z on the calibration half), with its own ledger;
* :class:`Centre` — validation, weighted aggregation and broadcast, tail counts, monotone
  correction and the threshold search;
* :class:`FDPFairClassifier` — the whole protocol in one process through the same messages;
  :class:`FederatedModel` — the released classifier (post-processing only);
* :mod:`dpfair.fairclass.federated.cli` — ``dpfair fdp …`` for multi-process runs;
* :class:`Signer`, :func:`generate_keypair` — the parties' Ed25519 keys; every message is
  signed (:func:`encode`) and verified against the keys pinned in the setup (:func:`decode`).
"""

from __future__ import annotations

from dpfair.fairclass.federated._centre import Centre, site_dd_curve
from dpfair.fairclass.federated._classifier import (
    FDPFairClassifier,
    FederatedModel,
    run_protocol,
)
from dpfair.fairclass.federated._keys import Signer, generate_keypair, load_signer
from dpfair.fairclass.federated._messages import (
    SCHEMA_VERSION,
    Envelope,
    ProtocolError,
    decode,
    encode,
    read_message,
    write_message,
)
from dpfair.fairclass.federated._monotone import (
    MonotoneResult,
    ThresholdSearch,
    grid_threshold,
    monotone_alg4,
    monotone_alg6,
    monotone_isotonic,
    omega,
)
from dpfair.fairclass.federated._protocol import (
    ProtocolConfig,
    SiteLedger,
    SitePlan,
    SiteSpec,
    depth_rule,
    make_protocol,
    site_plan,
)
from dpfair.fairclass.federated._site import Site

__all__ = [
    "SCHEMA_VERSION",
    "Centre",
    "Envelope",
    "FDPFairClassifier",
    "FederatedModel",
    "MonotoneResult",
    "ProtocolConfig",
    "ProtocolError",
    "Signer",
    "Site",
    "SiteLedger",
    "SitePlan",
    "SiteSpec",
    "ThresholdSearch",
    "decode",
    "depth_rule",
    "encode",
    "generate_keypair",
    "grid_threshold",
    "load_signer",
    "make_protocol",
    "monotone_alg4",
    "monotone_alg6",
    "monotone_isotonic",
    "omega",
    "read_message",
    "run_protocol",
    "site_dd_curve",
    "site_plan",
    "write_message",
]
