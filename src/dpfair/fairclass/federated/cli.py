"""Moved: the ``dpfair fdp`` commands live in :mod:`dpfair.cli.fdp`.

Kept so that ``python -m dpfair.fairclass.federated.cli fdp …`` and the old import names
(used by the Flower app) still work; the site helpers are in
:mod:`dpfair.fairclass.federated._siteio`. No command-line code lives here.
"""

from __future__ import annotations

import importlib
from typing import Any

from dpfair.fairclass.federated._siteio import (
    SETUP_MAX_BYTES,
    check_site_pinned,
    setup_from_bytes,
)
from dpfair.fairclass.federated._siteio import make_site as _make_site

__all__ = ["SETUP_MAX_BYTES", "check_site_pinned", "setup_from_bytes"]


def _standalone() -> Any:
    """The ``fdp`` commands as a stand-alone Typer app (see :mod:`dpfair.cli.fdp`)."""
    # by name: a domain package does not import the command-line layer (this shim only
    # forwards the old entry point to it)
    return importlib.import_module("dpfair.cli.fdp")._standalone()


if __name__ == "__main__":
    _standalone()()

_ = _make_site  # re-exported for dpfair.fairclass.federated.flower
