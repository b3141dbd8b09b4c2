"""The sampler with widening 0 on tie blocks (issue 15, item 1).

With α = 0 and a tie block around the median wider than any window, every window piece
has length zero; the sampler used to retry forever (the outside-mass bound e^{−300} was
compared with a true outside mass that underflows to 0). It must end, do the same work
whatever the data (only public sizes choose the path), and stay exact.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest
from scipy import stats

import dpfair.facility._mechanism as mech_mod
from dpfair.facility import DPExpMed, unwidened_expmed
from tests._stats import FAIL_PROB

#: Generous hang guard (the fixed code needs well under a second); not a timing assertion.
_HANG_GUARD_S = 120


@contextmanager
def _no_hang(seconds: int = _HANG_GUARD_S) -> Iterator[None]:
    def _raise(signum, frame):
        raise TimeoutError(f"did not return within {seconds} s: the sampler loops forever")

    old = signal.signal(signal.SIGALRM, _raise)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _tie_cases():
    yield "point-mass", np.full(10_001, 0.5), (0.0, 1.0)
    yield "five-values", np.random.default_rng(1).integers(1, 6, 10_001).astype(float), (1.0, 5.0)


TIE_CASES = list(_tie_cases())


@pytest.mark.statistical
@pytest.mark.parametrize(("name", "x", "domain"), TIE_CASES, ids=[c[0] for c in TIE_CASES])
def test_unwidened_sampler_on_a_big_tie_block_ends_and_is_exact(name, x, domain, seed):
    mech = DPExpMed(1.0, domain, widening=0.0)
    law = mech.distribution(x)
    with _no_hang():
        one = mech.sample(x, rng=seed)
        many = mech.sample(x, rng=seed + 1, size=20_000)
        singles = np.array([mech.sample(x, rng=seed + 2 + i) for i in range(300)])
    assert domain[0] <= one <= domain[1]
    assert stats.kstest(many, law.cdf).pvalue > FAIL_PROB
    assert stats.kstest(singles, law.cdf).pvalue > FAIL_PROB


def test_issue_example_unwidened_baseline_returns():
    with _no_hang():
        out = unwidened_expmed(1.0, (0, 1)).sample(np.full(10_001, 0.5), rng=1)
    assert 0.0 <= out <= 1.0


def _spy(monkeypatch) -> list[int]:
    """Record the window size handed to the exact windowed sampler by the facility sampler."""
    seen: list[int] = []
    original = mech_mod.choose_windowed

    def spy(window, *args, **kwargs):
        seen.append(len(window))
        return original(window, *args, **kwargs)

    monkeypatch.setattr(mech_mod, "choose_windowed", spy)
    return seen


def _varied_data(n: int) -> list[np.ndarray]:
    rng = np.random.default_rng(3)
    return [
        rng.uniform(0, 1, n),
        np.full(n, 0.5),
        np.full(n, 1.0),  # T at the domain's end: the loss-0 band is half clipped
        np.round(rng.uniform(0, 1, n), 1),
        np.concatenate((np.zeros(n // 2), np.ones(n - n // 2))),
    ]


@pytest.mark.parametrize("size", [None, 50])
def test_window_is_chosen_by_public_quantities_only(monkeypatch, size):
    """Positive α: one window of half-width W(ε, α, n) whatever the data (no data-driven
    widening). α = 0: no window at all (the full law, the same path for every data set)."""
    n, eps = 2001, 0.7
    seen = _spy(monkeypatch)
    for alpha in (0.01, 1e-6):
        w = mech_mod._window_half_width(eps, alpha, n)
        k = (n + 1) // 2
        expected = min(n + 1, k + w) - max(0, k - w) + 1
        for x in _varied_data(n):
            seen.clear()
            DPExpMed(eps, (0.0, 1.0), widening=alpha).sample(x, rng=0, size=size)
            assert seen == [expected]
    rng = np.random.default_rng(4)
    for x in (rng.uniform(0, 1, n), rng.uniform(0.4, 0.6, n)):  # tie-free: also ended before
        seen.clear()
        with _no_hang():
            DPExpMed(eps, (0.0, 1.0), widening=0.0).sample(x, rng=0, size=size)
        assert seen == []


# ------------------------------------------------------------------ the shared helpers
def _empty_window_problem():
    """A window with no mass, an outside bound e^0 and true outside masses ~e^{-2500}
    (ratio 1 : 3 between the two outside pieces): the old rejection loop never accepted."""
    window = np.full(5, -np.inf)
    full = np.array([-2500.0, -np.inf, -np.inf, -np.inf, -np.inf, -np.inf, -2500.0 + np.log(3)])
    return window, 1, 0.0, full
