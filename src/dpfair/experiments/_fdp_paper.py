"""FDP-Fair (paper 003) fits behind the registered federated studies.

:func:`run_one` fits :class:`dpfair.fairclass.FDPFairClassifier` on given sites and
evaluates it; the registered experiments ``fdp-figure4``, ``fdp-figure5``,
``fdp-sensitivity``, ``fdp-adult`` and ``fdp-law`` (:mod:`dpfair.experiments._fdp`) call it
once per repetition, and :func:`effect_of_sites_table` (the report's FDP-Fair panel) runs
the Figure 5 design for a fixed total sample.

Two variants are run side by side:

* ``default``: the package defaults — confidence rule (β = 0.05), consistent tails, M = 8,
  no cross-fitting (``docs/proofs/fairclass_fdp_fair.md`` §Threshold);
* ``paper``: the paper's choices — dyadic tail counts, the paper's M rule, cross-fitting,
  Algorithm 6 with ω, target α with band ρ (|DD| may exceed α by up to ρ by design).

With ``population=True`` a fit also records, on the simulation, the *population* |DD| and
risk of the released classifier (its P(Ŷ = 1 | x, a) over a fixed 200,000-row sample from
the design, with the true η): ``pop_abs_dd``, ``pop_risk``.
"""

from __future__ import annotations

import time
import warnings
from typing import Any

import numpy as np

from dpfair import UncertifiedFairnessWarning
from dpfair.fairclass.datasets import FairnessDataset, simulate
from dpfair.fairclass.federated import FDPFairClassifier
from dpfair.fairclass.metrics import demographic_disparity, misclassification_error

__all__ = ["VARIANTS", "effect_of_sites_table", "run_one"]

VARIANTS: dict[str, dict[str, Any]] = {
    "default": {},
    "paper": {
        "tail": "dyadic",
        "threshold_rule": "paper",
        "depth": "paper",
        "cross_fit": True,
    },
}

_BIG: dict[str, FairnessDataset] = {}


def _population() -> FairnessDataset:
    if "sim" not in _BIG:
        _BIG["sim"] = simulate(200_000, rng=987_654_321)
    return _BIG["sim"]


def run_one(
    sites: list[FairnessDataset],
    test: FairnessDataset,
    *,
    epsilon: float,
    alpha: float,
    variant: str,
    seed: int,
    rho: float = 0.03,
    c_omega: float = 0.1,
    population: bool = True,
) -> dict[str, float]:
    """One fit + test evaluation; δ_s = (N_s/2)^-2 as in the paper.

    With ``population=True`` (simulation only) also the population |DD| and risk of the
    released classifier (module docstring).
    """
    from dpfair.fairclass.datasets import simulation_eta

    n_s = sites[0].n
    clf = FDPFairClassifier(
        epsilon=epsilon,
        delta=(n_s / 2) ** -2,
        alpha=alpha,
        feature_bounds=sites[0].feature_bounds,
        tolerance=rho,
        c_omega=c_omega,
        random_state=seed,
        clip=True,
        **VARIANTS[variant],
    )
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        # a study records each fit's certification ("uncertified" below); one warning per
        # repetition would bury the run's output
        warnings.simplefilter("ignore", UncertifiedFairnessWarning)
        clf.fit([d.X for d in sites], [d.y for d in sites],
                sensitive_features=[d.A for d in sites])
    fit_s = time.perf_counter() - t0
    pred = clf.predict(test.X, sensitive_features=test.A)
    out = {
        "error": misclassification_error(test.y, pred),
        "abs_dd": abs(demographic_disparity(pred, test.A)),
        "fit_seconds": fit_s,
        "site_epsilon_spent": float(clf.privacy_spent_.epsilon or 0.0),
        "uncertified": float(
            sum(t.get("outcome") == "uncertified" for t in (clf.thresholds_ or []))
        ),
    }
    if population:
        big = _population()
        p = clf.predict_proba(big.X, sensitive_features=big.A)[:, 1]
        eta = simulation_eta(big.X, big.A)
        out["pop_abs_dd"] = abs(float(p[big.A == 1].mean() - p[big.A == 0].mean()))
        out["pop_risk"] = float(np.mean(p * (1.0 - eta) + (1.0 - p) * eta))
    return out


def _parallel(tasks: list[tuple[Any, ...]], n_jobs: int) -> list[dict[str, Any]]:
    """Run ``(meta, kwargs)`` tasks through joblib; returns ``{**meta, **run_one(...)}``."""
    from joblib import Parallel, delayed

    def job(meta: dict[str, Any], kw: dict[str, Any]) -> dict[str, Any]:
        sites = _sim_sites(kw.pop("S"), kw.pop("n_s"), kw.pop("site_seed"))
        if "split" in kw:
            parts = kw.pop("split")
            full = sites[0]
            sites = [full.subset(np.asarray(q)) for q in parts]
        test = simulate(kw.pop("n_test"), rng=kw.pop("test_seed"))
        return {**meta, **run_one(sites, test, **kw)}

    res: list[dict[str, Any]] = Parallel(n_jobs=n_jobs)(delayed(job)(m, dict(k)) for m, k in tasks)
    return res


def effect_of_sites_table(
    *,
    n_total: int = 7200,
    sites: tuple[int, ...] = (1, 2, 3, 4, 5),
    epsilon: float = 1.0,
    alpha: float = 0.1,
    reps: int = 5,
    variant: str = "default",
    n_jobs: int = 1,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """Error and |DD| versus the number of sites S for a fixed total sample (Figure 5 style).

    N_total rows drawn from the paper's simulation are split evenly over S sites (each with
    its own (ε, δ = (N_s/2)^-2)); FDP-Fair with ``variant`` runs on them, ``reps`` times.

    Returns
    -------
    list of dict
        One row per S: ``S``, ``reps``, ``error`` (test), ``pop_risk``, ``pop_abs_dd``
        (mean population |DD|), ``share_above_alpha`` (population), ``abs_dd`` (test).
    """
    tasks = []
    for S in sites:
        for r in range(reps):
            parts = [p.tolist() for p in np.array_split(np.arange(n_total), S)]
            tasks.append(
                (
                    {"S": S, "rep": r},
                    {
                        "S": 1,
                        "n_s": n_total,
                        "site_seed": seed * 1_000_003 + 700_000 + r,
                        "split": parts,
                        "n_test": 2500,
                        "test_seed": seed * 1_000_003 + 800_000 + r,
                        "epsilon": epsilon,
                        "alpha": alpha,
                        "variant": variant,
                        "seed": r,
                    },
                )
            )
    rows = _parallel(tasks, n_jobs)
    out = []
    for S in sites:
        rs = [r for r in rows if r["S"] == S]
        pop = np.array([r["pop_abs_dd"] for r in rs])
        out.append(
            {
                "S": S,
                "reps": len(rs),
                "error": float(np.mean([r["error"] for r in rs])),
                "pop_risk": float(np.mean([r["pop_risk"] for r in rs])),
                "pop_abs_dd": float(pop.mean()),
                "share_above_alpha": float(np.mean(pop > alpha)),
                "abs_dd": float(np.mean([r["abs_dd"] for r in rs])),
            }
        )
    return out


def _sim_sites(S: int, n_s: int, seed: int) -> list[FairnessDataset]:
    ss = np.random.SeedSequence(seed).spawn(S)
    return [simulate(n_s, rng=np.random.default_rng(s)) for s in ss]
