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
