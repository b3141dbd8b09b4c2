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

The command line (:mod:`dpfair.cli.fdp`) and the Flower app drive the roles through the
names listed under "drivers" in :data:`_WHERE` (setup and site-file I/O, the site's ledger
checks, key files). Names load on first use (PEP 562): ``dpfair fdp keygen`` loads only
the key module, not scikit-learn.

The algorithms' building blocks (monotone corrections, threshold searches, the noise plan
and the ledger) live in the private modules; they are not part of the public surface.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dpfair.fairclass.federated._centre import Centre
    from dpfair.fairclass.federated._classifier import (
        FDPFairClassifier,
        run_protocol,
    )
    from dpfair.fairclass.federated._config import FDPConfig
    from dpfair.fairclass.federated._keys import Signer, generate_keypair, load_signer
    from dpfair.fairclass.federated._keys import key_fingerprint as key_fingerprint
    from dpfair.fairclass.federated._keys import load_public_key as load_public_key
    from dpfair.fairclass.federated._messages import CENTRE as CENTRE
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
    from dpfair.fairclass.federated._released import (
        FederatedModel,
    )
    from dpfair.fairclass.federated._released import (
        certified_from_thresholds as certified_from_thresholds,
    )
    from dpfair.fairclass.federated._released import uncertified_detail as uncertified_detail
    from dpfair.fairclass.federated._site import Site
    from dpfair.fairclass.federated._site import seed_of as seed_of
    from dpfair.fairclass.federated._site_budget import charge_round as charge_round
    from dpfair.fairclass.federated._site_budget import open_site_ledger as open_site_ledger
    from dpfair.fairclass.federated._site_budget import preflight as preflight
    from dpfair.fairclass.federated._siteio import check_site_columns as check_site_columns
    from dpfair.fairclass.federated._siteio import make_site as make_site
    from dpfair.fairclass.federated._siteio import read_setup as read_setup
    from dpfair.fairclass.federated._siteio import read_site_data as read_site_data
    from dpfair.fairclass.federated._siteio import site_setup as site_setup

#: Exported name -> defining module (user-facing names in __all__; the drivers' names are
#: for dpfair.cli.fdp and the Flower app).
_WHERE: dict[str, str] = {
    "Centre": "dpfair.fairclass.federated._centre",
    "FDPFairClassifier": "dpfair.fairclass.federated._classifier",
    "FederatedModel": "dpfair.fairclass.federated._released",
    "run_protocol": "dpfair.fairclass.federated._classifier",
    "certified_from_thresholds": "dpfair.fairclass.federated._released",
    "uncertified_detail": "dpfair.fairclass.federated._released",
    "FDPConfig": "dpfair.fairclass.federated._config",
    "Signer": "dpfair.fairclass.federated._keys",
    "generate_keypair": "dpfair.fairclass.federated._keys",
    "load_signer": "dpfair.fairclass.federated._keys",
    "load_public_key": "dpfair.fairclass.federated._keys",
    "key_fingerprint": "dpfair.fairclass.federated._keys",
    "SCHEMA_VERSION": "dpfair.fairclass.federated._messages",
    "CENTRE": "dpfair.fairclass.federated._messages",
    "Envelope": "dpfair.fairclass.federated._messages",
    "ProtocolError": "dpfair.fairclass.federated._messages",
    "decode": "dpfair.fairclass.federated._messages",
    "encode": "dpfair.fairclass.federated._messages",
    "read_message": "dpfair.fairclass.federated._messages",
    "write_message": "dpfair.fairclass.federated._messages",
    "ProtocolConfig": "dpfair.fairclass.federated._protocol",
    "SiteSpec": "dpfair.fairclass.federated._protocol",
    "make_protocol": "dpfair.fairclass.federated._protocol",
    "Site": "dpfair.fairclass.federated._site",
    "seed_of": "dpfair.fairclass.federated._site",
    "charge_round": "dpfair.fairclass.federated._site_budget",
    "open_site_ledger": "dpfair.fairclass.federated._site_budget",
    "preflight": "dpfair.fairclass.federated._site_budget",
    "check_site_columns": "dpfair.fairclass.federated._siteio",
    "make_site": "dpfair.fairclass.federated._siteio",
    "read_setup": "dpfair.fairclass.federated._siteio",
    "read_site_data": "dpfair.fairclass.federated._siteio",
    "site_setup": "dpfair.fairclass.federated._siteio",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        value = getattr(importlib.import_module(_WHERE[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'dpfair.fairclass.federated' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


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
