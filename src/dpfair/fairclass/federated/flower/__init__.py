"""FDP-Fair on Flower: the centre as a ``ServerApp``, each site as a ``ClientApp``.

A thin transport: the Flower messages carry the file CLI's message documents unchanged
(:mod:`~dpfair.fairclass.federated.flower._records`), produced and checked by the same
:class:`~dpfair.fairclass.federated.Site`, :class:`~dpfair.fairclass.federated.Centre`,
``encode`` and ``decode`` (:mod:`~dpfair.fairclass.federated.flower._transport`).

* :mod:`dpfair.fairclass.federated.flower.server_app` — ``app``, ``make_server_app``;
* :mod:`dpfair.fairclass.federated.flower.client_app` — ``app``, ``make_client_app``.

Needs the ``flower`` extra (``pip install 'dpfair[flower]'``). The Flower app directory that
``flwr run`` takes is ``flower_app/`` of the repository (see the README, "FDP-Fair on
Flower"). This package imports Flower only in those two modules.
"""

from __future__ import annotations

from dpfair.fairclass.federated.flower._transport import (
    SiteNode,
    centre_aggregate,
    centre_finalize,
    load_setup,
    run_centre,
    site_round1,
    site_round2,
)

__all__ = [
    "SiteNode",
    "centre_aggregate",
    "centre_finalize",
    "load_setup",
    "run_centre",
    "site_round1",
    "site_round2",
]
