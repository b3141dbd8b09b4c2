"""Public helpers of the registered fair-classification studies (paper 003).

The studies themselves are registered by the private extension module
``dpfair.experiments._fairclass`` (see its documentation, or ``dpfair reproduce --list``);
this module gives other packages (the report) the names they need to build the same cells
and read the same columns: the grids, the α column names and the data-set locations, and
the federated (FDP-Fair) effect-of-sites table.
"""

from dpfair.experiments._fairclass import (
    ADULT_ENV,
    CERTIFIED_METHOD,
    DATASET_CODES,
    LAW_SCHOOL_DEFAULT,
    LAW_SCHOOL_ENV,
    METHODS,
    PRIVATE_METHODS,
    REAL_EPSILONS,
    SIM_EPSILONS,
    SIM_NS,
    DataUnavailableError,
    alpha_column,
    alphas_text,
    data_seed,
    law_school_path,
    load_dataset,
    parse_alphas,
    real_grid,
    simulation_grid,
)
from dpfair.experiments._fairclass_paper import ALPHA_GRID_REAL, ALPHA_GRID_SIM
from dpfair.experiments._fdp_paper import effect_of_sites_table

__all__ = [
    "ADULT_ENV",
    "ALPHA_GRID_REAL",
    "ALPHA_GRID_SIM",
    "CERTIFIED_METHOD",
    "DATASET_CODES",
    "LAW_SCHOOL_DEFAULT",
    "LAW_SCHOOL_ENV",
    "METHODS",
    "PRIVATE_METHODS",
    "REAL_EPSILONS",
    "SIM_EPSILONS",
    "SIM_NS",
    "DataUnavailableError",
    "alpha_column",
    "alphas_text",
    "data_seed",
    "effect_of_sites_table",
    "law_school_path",
    "load_dataset",
    "parse_alphas",
    "real_grid",
    "simulation_grid",
]
