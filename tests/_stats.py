"""Exact Monte Carlo acceptance bounds shared by the statistical tests."""

from __future__ import annotations

from scipy import stats

#: Per-test false-alarm probability for a correct implementation.
FAIL_PROB = 1e-6


def min_successes(n_trials: int, p: float, fail_prob: float = FAIL_PROB) -> int:
    """Largest k with P[Binomial(n_trials, p) < k] ≤ fail_prob.

    A correct method has success probability ≥ p per trial, so its success count falls
    below the returned k with probability at most ``fail_prob``.
    """
    k = int(stats.binom.ppf(fail_prob, n_trials, p))
    while k > 0 and stats.binom.cdf(k - 1, n_trials, p) > fail_prob:
        k -= 1
    while stats.binom.cdf(k, n_trials, p) <= fail_prob:
        k += 1
    return k


def chisquare_pvalue(draws, pmf, min_expected: float = 20.0) -> float:
    """p-value of a chi-square test of integer ``draws`` against the exact ``pmf``.

    Consecutive outcomes are grouped into bins of expected count ≥ ``min_expected`` (so
    the chi-square approximation holds); the caller compares with :data:`FAIL_PROB`.
    """
    import numpy as np

    law = np.asarray(pmf, dtype=float)
    x = np.asarray(draws)
    cum = np.cumsum(law) * x.size
    bins = np.unique(np.concatenate(
        ([0], np.searchsorted(cum, np.arange(min_expected, cum[-1], min_expected)),
         [law.size])))
    expected = np.add.reduceat(law, bins[:-1]) * x.size
    observed = np.histogram(x, bins=bins)[0]
    keep = expected > 0
    return float(stats.chisquare(
        observed[keep], expected[keep] * observed.sum() / expected[keep].sum()).pvalue)
