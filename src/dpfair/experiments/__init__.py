"""Reproducible studies: a registry, a parallel resumable runner, a columnar result store.

An :class:`Experiment` is a parameter grid (a list of dicts of scalars) and a function
``run_one(params, seed) -> dict[str, scalar]`` computing one repetition of one cell from
the public API of dpfair's packages. :func:`run_experiment` runs every (cell, rep) pair
on local worker processes (joblib/loky) or a Dask cluster, appends the rows to a Parquet
store chunk by chunk, skips the pairs already stored (an interrupted run resumes), and
returns the table read back with DuckDB, ordered by (cell, rep). Seeds come from
``SeedSequence(seed).spawn`` indexed by cell and repetition (:func:`rep_seed`), so the table
does not depend on the number of workers, the backend or the interruptions.

>>> from dpfair.experiments import list_experiments, run_experiment
>>> "median-width" in {e.name for e in list_experiments()}
True
>>> res = run_experiment("median-smoke", reps=5, jobs=2, store_dir="out/smoke")  # doctest: +SKIP
>>> res.table.num_rows, res.summary[0]["rel_width"]["mean"]                      # doctest: +SKIP

From the shell: ``dpfair reproduce --list``, ``dpfair reproduce median-width --jobs 2``,
``dpfair reproduce median-smoke --backend dask --scheduler tcp://host:8786``.

Adding experiments (extension point)
------------------------------------
Every study is one module of this package named after it (``median_width.py`` registers
``median-width``, ``facility_scaling.py`` registers ``facility-scaling``, …), listed in
:data:`EXTENSION_MODULES`; the registry imports them on first use, and a listed module that
does not exist is skipped. The trial functions and grid helpers that one paper's studies
share live in private modules: ``_median.py`` (paper 004), ``_facility.py`` (paper 000),
``_fairclass.py`` and ``_fdp.py`` (paper 003). The domain packages (:mod:`dpfair.median`,
:mod:`dpfair.facility`, :mod:`dpfair.fairclass`) hold only the library and never import
this package. In a study module, define ``run_one`` at module level (or import it from the
paper's helper module; worker processes import it by name) and register it::

    import dpfair.facility
    from dpfair.experiments import register_experiment

    @register_experiment(
        name="facility-fair-vs-epsilon",          # lower case, '-' separated, unique
        description="FAIR and SWDIFF of DPExpMed vs epsilon (paper 000, Table 1).",
        grid=[{"epsilon": e, "n": n} for e in (0.1, 1.0) for n in (101, 1001)],
        reps=1000,
        metrics=("fair", "swdiff"),                # shown in the printed summary
        reference="paper 000, §5, Table 1",
    )
    def fair_vs_epsilon(params, seed):
        data_seed, noise_seed = seed.spawn(2)      # independent streams, from seed only
        ...                                        # public API of dpfair.facility only
        return {"fair": fair, "swdiff": swdiff}    # scalars: bool, int, float or str

Rules: all randomness from ``seed``; outputs are scalars whose names differ from the
grid's keys and from ``cell``, ``rep`` and ``filename``; every cell of a grid has the same
keys; changing a grid changes the store's fingerprint (old results are then not reused).
Other code may register experiments at run time with :func:`register_experiment` too; with
worker processes, its ``run_one`` must be importable (or picklable by value) in them.
"""

from dpfair.experiments._registry import (
    EXTENSION_MODULES,
    Experiment,
    UnknownExperimentError,
    get_experiment,
    list_experiments,
    register_experiment,
)
from dpfair.experiments._runner import (
    BACKENDS,
    MissingExtraError,
    RunResult,
    default_store_dir,
    rep_seed,
    run_experiment,
)
from dpfair.experiments._store import StoreMismatchError
from dpfair.experiments._summary import summarize

__all__ = [
    "BACKENDS",
    "EXTENSION_MODULES",
    "Experiment",
    "MissingExtraError",
    "RunResult",
    "StoreMismatchError",
    "UnknownExperimentError",
    "default_store_dir",
    "get_experiment",
    "list_experiments",
    "register_experiment",
    "rep_seed",
    "run_experiment",
    "summarize",
]
