"""The full UCI Adult data (all 14 attributes) with public bounds and categories.

The loader and its public description live in :mod:`dpfair.data.adult` (the data layer
owns all reading); this module keeps the names importable from :mod:`dpfair.fairclass`.
"""

from dpfair.data.adult import (
    ADULT_FULL_BOUNDS,
    ADULT_FULL_CATEGORIES,
    ADULT_FULL_FEATURES,
    MixedFairnessDataset,
    bundled_full_adult_path,
    load_full_adult,
)

__all__ = [
    "ADULT_FULL_BOUNDS",
    "ADULT_FULL_CATEGORIES",
    "ADULT_FULL_FEATURES",
    "MixedFairnessDataset",
    "bundled_full_adult_path",
    "load_full_adult",
]
