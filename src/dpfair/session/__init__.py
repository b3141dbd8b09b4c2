"""One privacy budget across many releases: :class:`Session`.

A :class:`Session` holds one data set (in memory, a CSV/Parquet file, or a Dask
DataFrame) and one ledger with a hard cap; its methods run the releases of the three
papers and charge each one, in its own measure converted by
:func:`dpfair.privacy.cost_in_measure`, before anything is returned. Backed by a
:class:`~dpfair.privacy.LedgerFile`, the same budget is shared with ``dpfair ... --ledger``.
"""

from dpfair.session._session import (
    AGGREGATE_ROWS,
    ReproducibleSeedWarning,
    Session,
    charged_on_failure,
    withheld_message,
)

__all__ = [
    "AGGREGATE_ROWS",
    "ReproducibleSeedWarning",
    "Session",
    "charged_on_failure",
    "withheld_message",
]
