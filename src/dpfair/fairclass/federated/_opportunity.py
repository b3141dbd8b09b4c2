"""FDP-Fair under equal opportunity: the broadcast p̃_{a,1} and the positive-label trees.

Equal opportunity caps EOD = TPR₁ − TPR₀ (``docs/proofs/equal_opportunity.md``). Its
fair-Bayes rule is a group-wise threshold with one scalar on the score
Z = (2a − 1)·p_{a,1}·(2 − 1/η_a(x)), p_{a,1} = P(A = a, Y = 1)
(:func:`~dpfair.fairclass._rule.opportunity_scores`). The FDP protocol changes in two places,
neither of which adds a release (§5 of that page):

* **The broadcast p̃_{a,1}** (array ``p_a1`` of the signed ``model`` and ``released_model``,
  one pair per fold) is computed by the centre from the round-1 releases only — the same
  aggregated statistics η̃ is built from — so it is post-processing: no site spends
  anything for it. Kernel grid: p̃_{a,1} = π̃_a · Σ_g F̄_{a,1}(g) / Σ_g (F̄_{a,0} + F̄_{a,1})(g)
  (F̄ the site-weighted, size-normalised noisy kernel sums on the public grid); random
  Fourier features: the same ratio with the grid sum replaced by the projection on the
  aggregated mean feature m̄_a = F̄_{a,0} + F̄_{a,1} (a density-weighted P(Y = 1 | A = a));
  linear: π̃_a times the pooled noisy cell counts' ratio ñ_{a,1}/(ñ_{a,0} + ñ_{a,1}).
  Each is clipped to [1/N, 1 − 1/N] (N the public total). Any p̃ gives a valid rule
  (the family {1{Z ≥ τ}} is monotone in τ for every p̃, and the certificate is about the
  population EOD of the rule actually released); p̃ only moves it off the optimum.
* **Round 2** counts the calibration half's *positive-label* rows only: the trees of
  group a bin Z of the rows with A = a, Y = 1, and their roots estimate n_{a,1}(C). One
  record lies in at most one leaf of one tree (none if Y = 0), so replacing it changes at
  most two nodes per level by one each: the pair's L2 sensitivity is still
  sqrt(2(M + 1)), the same σ_t gives the same μ₂, and the site's ledger is the
  demographic-parity one, exactly. The centre's curve T̂₁(τ)/n̂₁ − T̂₀(τ)/n̂₀ is then the
  noisy EOD̂ curve, and the confidence rule and its one-point guarantee carry over with
  the positive-label counts as the sampling denominators.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfair.fairclass._rule import OpportunityFold
from dpfair.fairclass.federated._messages import Envelope, ProtocolError

__all__ = [
    "check_positive_shares",
    "kernel_positive_shares",
    "linear_positive_shares",
    "opportunity_folds",
    "positive_rows",
    "rff_positive_shares",
    "score_arrays",
]


def _finish(q: NDArray[np.float64], pi: NDArray[np.float64], n_total: int) -> NDArray[np.float64]:
    """p̃_{a,1} = π̃_a·q̃_a, q̃ and the product clipped into [1/N, 1 − 1/N]."""
    lo = 1.0 / max(int(n_total), 2)
    q = np.clip(np.nan_to_num(q, nan=0.5), lo, 1.0 - lo)
    return np.clip(np.asarray(pi, dtype=np.float64) * q, lo, 1.0 - lo)


def kernel_positive_shares(
    agg: NDArray[np.float64], pi: NDArray[np.float64], n_total: int
) -> NDArray[np.float64]:
    """p̃_{a,1} per fold from the aggregated kernel sums ``agg`` (nf, *grid, 2, 2) (a, y).

    Post-processing of round 1 (module docstring): π̃_a times the share of the label-1
    kernel mass over the public grid.
    """
    nf = agg.shape[0]
    mass = np.clip(agg.reshape(nf, -1, 2, 2).sum(axis=1), 0.0, None)  # (nf, a, y)
    tot = mass.sum(axis=2)
    with np.errstate(invalid="ignore", divide="ignore"):
        q = mass[:, :, 1] / tot
    return _finish(q, pi, n_total)


def rff_positive_shares(
    coef: NDArray[np.float64], pi: NDArray[np.float64], n_total: int
) -> NDArray[np.float64]:
    """p̃_{a,1} per fold from the aggregated feature sums ``coef`` (nf, D, 2, 2) (a, y):
    π̃_a times (m̄_a·F̄_{a,1})/(m̄_a·m̄_a), m̄_a = F̄_{a,0} + F̄_{a,1} (post-processing)."""
    m = coef.sum(axis=3)  # (nf, D, a)
    num = np.einsum("nda,nda->na", m, coef[..., 1])
    den = np.einsum("nda,nda->na", m, m)
    with np.errstate(invalid="ignore", divide="ignore"):
        q = num / den
    return _finish(q, pi, n_total)


def linear_positive_shares(
    cells: NDArray[np.float64], pi: NDArray[np.float64], n_total: int
) -> NDArray[np.float64]:
    """p̃_{a,1} per fold from the pooled noisy cell counts ``cells`` (nf, 2, 2) (a, y):
    π̃_a·ñ_{a,1}/(ñ_{a,0} + ñ_{a,1}) (post-processing)."""
    c = np.clip(np.asarray(cells, dtype=np.float64), 0.0, None)
    with np.errstate(invalid="ignore", divide="ignore"):
        q = c[:, :, 1] / c.sum(axis=2)
    return _finish(q, pi, n_total)


def check_positive_shares(env: Envelope, cfg: Any) -> NDArray[np.float64] | None:
    """The ``p_a1`` array of a ``model``/``released_model`` message, validated against the
    setup: present (shape (folds, 2), values in (0, 1)) exactly when the signed setup says
    ``constraints="equal_opportunity"``; None under demographic parity."""
    has = "p_a1" in env.arrays
    if not cfg.is_opportunity:
        if has:
            raise ProtocolError(
                env.sender, "arrays.p_a1",
                "the setup caps demographic parity; an equal-opportunity array is refused.",
            )
        return None
    if not has:
        raise ProtocolError(
            env.sender, "arrays.p_a1",
            "missing: the setup caps equal opportunity, whose score needs p_a1.",
        )
    p = env.array("p_a1", (cfg.n_folds, 2))
    if not np.all(np.isfinite(p)) or np.any((p <= 0) | (p >= 1)):
        raise ProtocolError(env.sender, "arrays.p_a1", "values outside (0, 1).")
    return p


def score_arrays(env: Envelope) -> set[str]:
    """The estimator's arrays of a model message (``p_a1`` set aside)."""
    return set(env.arrays) - {"p_a1"}


def opportunity_folds(
    folds: list[Any], positive: NDArray[np.float64] | None, taus: Any = None
) -> list[Any]:
    """Wrap the estimator's folds in :class:`~dpfair.fairclass._rule.OpportunityFold`
    (score Z with the broadcast p̃_{a,1}); unchanged under demographic parity."""
    if positive is None:
        return folds
    return [
        OpportunityFold(f, positive[k], float(f.tau if taus is None else taus[k]))
        for k, f in enumerate(folds)
    ]


def positive_rows(y: NDArray[Any], cfg: Any) -> NDArray[np.bool_] | slice:
    """The calibration rows round 2 counts: positive labels under equal opportunity,
    every row under demographic parity."""
    return np.asarray(y) == 1 if cfg.is_opportunity else slice(None)
