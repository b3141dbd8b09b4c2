"""Add/remove neighbours (issue 15, item 5): n must be public for the default widening.

The default α* = 1/(nε) moves with n, so adding one agent can change the density by a
factor e^{250ε}; a fixed widening keeps the mechanism ε-DP under add/remove neighbours.
Both checked on exact laws (log-density ratio at every breakpoint and midpoint).
"""

from __future__ import annotations

import numpy as np
import pytest

import dpfair.facility._mechanism as mech_mod
from dpfair.facility import DPExpMed
from tests.facility._helpers import DOMAIN, max_log_ratio


def test_default_widening_is_not_private_when_n_is_not_public():
    mech = DPExpMed(1.0, DOMAIN)
    ratio = max_log_ratio(mech.distribution(np.full(1000, 0.5)),
                          mech.distribution(np.full(1001, 0.5)))
    assert ratio == pytest.approx(250.499, abs=1e-3)  # 250.5ε, not ≤ ε


def _add_remove_pairs():
    rng = np.random.default_rng(15)
    yield "point-mass-1000", np.full(1000, 0.5), 0.5
    yield "point-mass-at-hi", np.full(20, 1.0), 1.0
    yield "two-ends", np.array([0.0] * 6 + [1.0] * 5), 0.0
    for i in range(12):
        n = int(rng.integers(1, 60))
        x = np.round(rng.uniform(0, 1, n), int(rng.integers(1, 3)))  # ties
        yield f"random-{i}", x, float(rng.choice(np.concatenate((x, [rng.uniform()]))))


PAIRS = list(_add_remove_pairs())


@pytest.mark.parametrize(("name", "x", "extra"), PAIRS, ids=[p[0] for p in PAIRS])
@pytest.mark.parametrize("widening", [0.0, 0.001, 0.05, 0.5])
@pytest.mark.parametrize("median", ["lower", "upper"])
def test_fixed_widening_is_eps_dp_under_add_remove(name, x, extra, widening, median):
    for eps in (0.3, 1.0, 5.0):
        mech = DPExpMed(eps, DOMAIN, widening=widening, median=median)
        ratio = max_log_ratio(mech.distribution(x), mech.distribution(np.append(x, extra)))
        assert ratio <= eps * (1 + 1e-9)


def test_docstrings_say_n_is_public_and_what_to_do_otherwise():
    for doc in (DPExpMed.__doc__, mech_mod.__doc__):
        assert doc is not None
        assert "add/remove" in doc and "fixed" in doc
