"""FDP-Fair: fairness-aware classification across several data holders (paper 003, Alg. 1).

Each site is its own process holding only its own data; the protocol is four messages
(``setup``, ``round1``, ``model``, ``round2``) plus the ``released_model``:

* :class:`FDPConfig` — the run's public choices (α, tolerance, rule, estimator, grid, …),
  validated once; :func:`make_protocol` adds the sites' public sizes and budgets
  (:class:`SiteSpec`) and gives the signed ``setup`` (:class:`ProtocolConfig`);
* :class:`Site` — round 1 (π̃^s and kernel sums on the training half) and round 2 (two
  noisy binary trees of the scores Z on the calibration half), with its own ledger;
* :class:`Centre` — validation, weighted aggregation and broadcast, tail counts, monotone
  correction and the threshold search;
* :class:`FDPFairClassifier` — the whole protocol in one process through the same messages
  (:func:`run_protocol`); :class:`FederatedModel` — the released classifier
  (post-processing only);
* :mod:`dpfair.fairclass.federated.cli` — ``dpfair fdp …`` for multi-process runs;
* :class:`Signer`, :func:`generate_keypair`, :func:`load_signer` — the parties' Ed25519
  keys; every message is signed (:func:`encode`, :func:`write_message`) and verified
  against the keys pinned in the setup (:func:`decode`, :func:`read_message`), or refused
  with a :class:`ProtocolError`.

The algorithms' building blocks (monotone corrections, threshold searches, the noise plan
and the ledger) live in the private modules; they are not part of the public surface.
"""

from __future__ import annotations

from dpfair.fairclass.federated._centre import Centre
from dpfair.fairclass.federated._classifier import (
    FDPFairClassifier,
    FederatedModel,
    run_protocol,
)
from dpfair.fairclass.federated._config import FDPConfig
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
from dpfair.fairclass.federated._protocol import ProtocolConfig, SiteSpec, make_protocol
from dpfair.fairclass.federated._site import Site

__all__ = [
    "SCHEMA_VERSION",
    "Centre",
    "Envelope",
    "FDPConfig",
    "FDPFairClassifier",
    "FederatedModel",
    "ProtocolConfig",
    "ProtocolError",
    "Signer",
    "Site",
    "SiteSpec",
    "decode",
    "encode",
    "generate_keypair",
    "load_signer",
    "make_protocol",
    "read_message",
    "run_protocol",
    "write_message",
]
