"""CDP-Fair on the paper's simulation: the disparity cap holds, error tends to the oracle.

Every assertion compares a repetition mean with a bound through an exact one-sided t bound
at level 1e-6 (or an exact binomial bound on counts), so a correct implementation fails
with probability below 1e-6 per assertion. Repetitions use independent training and test
samples (N = 5000, 4000 test points, δ = (N/2)^-2, as in paper §5.1.1).
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
import pytest
from scipy import stats

from dpfair.experiments._fairclass_paper import AUTHORS_CODE_BAR, figure3_study, paper_offset
from dpfair.fairclass.datasets import SIMULATION_PAPER_ORACLE
from tests._stats import FAIL_PROB

ALPHAS = (0.05, 0.1, 0.2, 0.3)
EPS = (1.0, 4.0)
N = 5000
REPS = 60


def _t_crit(n: int) -> float:
    return float(stats.t.isf(FAIL_PROB, n - 1))


def _lower(v: np.ndarray) -> float:
    """Lower 1 − 1e-6 confidence limit of the mean."""
    return float(v.mean() - _t_crit(v.size) * v.std(ddof=1) / math.sqrt(v.size))


def _upper(v: np.ndarray) -> float:
    """Upper 1 − 1e-6 confidence limit of the mean."""
    return float(v.mean() + _t_crit(v.size) * v.std(ddof=1) / math.sqrt(v.size))


@pytest.fixture(scope="module")
def sim_runs(request):
    seed = getattr(request, "param", 0)
    result = figure3_study(
        n_list=(N,), eps_list=EPS, alphas=ALPHAS, reps=REPS, seed=seed, oracle_n=100_000
    )
    by = defaultdict(dict)
    for r in result.rows:
        by[(r["epsilon"], r["alpha"])][r["rep"]] = r
    return by


def _col(by, eps, alpha, key):
    d = by[(eps, alpha)]
    return np.array([d[k][key] for k in sorted(d)])


@pytest.mark.statistical
@pytest.mark.parametrize("eps", EPS)
@pytest.mark.parametrize("alpha", ALPHAS)
def test_mean_disparity_within_alpha_plus_offset(sim_runs, eps, alpha):
    """Mean test |DD| ≤ α + N^{-1/2} + (Nε)^{-1} (the paper's offset, §4.2), t bound 1e-6.

    Detects a systematic excess of the published code's size: its mean |DD| of 0.092 at
    α = 0.05 (excess 0.042) fails this test with probability ≈ 1 at 60 repetitions.
    """
    absdd = _col(sim_runs, eps, alpha, "abs_dd")
    assert _lower(absdd) <= alpha + paper_offset(N, eps)


@pytest.mark.statistical
@pytest.mark.parametrize("alpha", ALPHAS)
def test_error_decreases_towards_oracle_as_epsilon_grows(sim_runs, alpha):
    """Error at ε = 4 is within 0.01 of the fair-Bayes risk and not above the ε = 1 error.

    Paired by repetition (same data): mean(err_4 − err_1) ≤ 0 up to a 1e-6 t bound; and
    err_ε − R*(α) ≤ 0.02 (ε = 1), ≤ 0.01 (ε = 4), with R*(α) the oracle of ALGORITHMS.md C.
    A classifier that ignored the budget (or the fairness step) would fail the second part.
    """
    e1 = _col(sim_runs, 1.0, alpha, "error")
    e4 = _col(sim_runs, 4.0, alpha, "error")
    oracle = SIMULATION_PAPER_ORACLE["fair_risk"][alpha]
    assert _lower(e4 - e1) <= 0.0
    assert _lower(e1) <= oracle + 0.02
    assert _lower(e4) <= oracle + 0.01
    assert _upper(e4) >= oracle - 0.01  # cannot beat the fair-Bayes risk while fair


@pytest.mark.statistical
def test_beats_the_published_code_at_eps1_alpha005(sim_runs):
    """The bar of issue 4 at ε = 1, α = 0.05 (authors' code: error 0.274, |DD| 0.092, 9/10 > α).

    Ours: mean error and mean |DD| significantly below theirs (t bounds at 1e-6), and the
    share of repetitions above α + offset below 1/2 (exact binomial bound at 1e-6).
    """
    bar = AUTHORS_CODE_BAR[1.0]
    err = _col(sim_runs, 1.0, 0.05, "error")
    absdd = _col(sim_runs, 1.0, 0.05, "abs_dd")
    assert _upper(err) < bar["error"]
    assert _upper(absdd) < bar["abs_dd"]
    above = int(np.sum(absdd > 0.05 + paper_offset(N, 1.0)))
    assert above <= stats.binom.isf(FAIL_PROB, absdd.size, 0.5)


@pytest.mark.slow
@pytest.mark.statistical
def test_full_size_sweep():
    """Figure 3 size: N ∈ {5000, 7000, 9000}, ε ∈ {0.75, 1, 2, 3, 4}, 200 repetitions.

    Mean |DD| ≤ α + offset for every cell; the error at ε = 4 is significantly below the
    error at ε = 0.75 (paired by data set, averaged over α, pooled over N: lower t bound > 0).
    """
    eps_list = (0.75, 1.0, 2.0, 3.0, 4.0)
    res = figure3_study(
        n_list=(5000, 7000, 9000),
        eps_list=eps_list,
        alphas=ALPHAS,
        reps=200,
        seed=1,
        oracle_n=100_000,
    )
    by = defaultdict(dict)
    for r in res.rows:
        by[(r["N"], r["epsilon"], r["alpha"])][r["rep"]] = r
    for (n, eps, alpha), d in by.items():
        absdd = np.array([d[k]["abs_dd"] for k in sorted(d)])
        assert _lower(absdd) <= alpha + paper_offset(n, eps), (n, eps, alpha)
    gains = [
        np.mean([by[(n, 0.75, a)][k]["error"] - by[(n, 4.0, a)][k]["error"] for a in ALPHAS])
        for n in (5000, 7000, 9000)
        for k in range(200)
    ]
    assert _lower(np.array(gains)) > 0.0
