"""Compatibility: :func:`read_columns` lives in :mod:`dpfair.data.fairclass_sql` (the data
layer owns all reading)."""

from dpfair.data.fairclass_sql import read_columns

__all__ = ["read_columns"]
