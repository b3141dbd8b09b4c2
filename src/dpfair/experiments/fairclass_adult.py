"""The registered study ``fairclass-adult`` (paper 003, CDP-Fair).

Run it with ``dpfair reproduce fairclass-adult``. Its trial function and grid
helpers live in :mod:`dpfair.experiments._fairclass`.
"""

from __future__ import annotations

from dpfair.experiments._fairclass import _REF, _metrics, real_grid, real_trial
from dpfair.experiments._registry import register_experiment

register_experiment(
    name="fairclass-adult",
    description=(
        "Figure 6/7 panel, Adult (bundled copy, or $DPFAIR_ADULT_PATH): the four methods at "
        "eps in {1, 2, 4}, alpha in {0.025, ..., 0.35}, random 70/30 splits shared by all "
        "cells; features age, workclass, education-num; A = sex."
    ),
    grid=real_grid("adult"),
    reps=200,
    metrics=_metrics((0.05, 0.1, 0.2)),
    reference=f"{_REF}, §5.2, Figures 6-7 (Adult)",
)(real_trial)
