"""The registered study ``fairclass-law`` (paper 003, CDP-Fair).

Run it with ``dpfair reproduce fairclass-law``. Its trial function and grid
helpers live in :mod:`dpfair.experiments._fairclass`.
"""

from __future__ import annotations

from dpfair.experiments._fairclass import _REF, _metrics, real_grid, real_trial
from dpfair.experiments._registry import register_experiment

register_experiment(
    name="fairclass-law",
    description=(
        "Figure 6/7 panel, Law School ($DPFAIR_LAW_SCHOOL_PATH, default "
        "../shared/data/law_school_xue_yu.csv; not bundled): the four methods at eps in "
        "{1, 2, 4}, alpha in {0.025, ..., 0.35}, random 70/30 splits; A = race."
    ),
    grid=real_grid("law_school"),
    reps=200,
    metrics=_metrics((0.05, 0.1, 0.2)),
    reference=f"{_REF}, §5.2, Figures 6-7 (Law School)",
)(real_trial)
