"""Exact worst cases over CTM (Lemma 7.8): the worst-case level and the family maxima."""

from __future__ import annotations

import pytest

from dpfair.facility import DPExpMed, ctm_family_max, ctm_worst_case, worst_case_level
from dpfair.facility.bounds import ctm_min_k

DOMAIN = (0.0, 1.0)


def test_worst_case_level_is_the_smallest_valid_k() -> None:
    k, dist = worst_case_level(201, 1.0, 0.05)
    assert dist.loss_sf(k) <= 0.05
    below = DPExpMed(1.0, DOMAIN).distribution(ctm_worst_case(201, k - 1, DOMAIN))
    assert below.loss_sf(k - 1) > 0.05


@pytest.mark.parametrize(("n", "eps"), [(101, 0.5), (1001, 1.0)])
def test_worst_case_level_is_below_the_explicit_bound(n: int, eps: float) -> None:
    k, _ = worst_case_level(n, eps, 0.05)
    alpha = DPExpMed(eps, DOMAIN).widening_for(n)
    assert 0 <= k <= ctm_min_k(n, eps, 0.05, alpha)


def test_ctm_family_max_dominates_each_member() -> None:
    n, eps, level = 101, 1.0, 0.95
    best = ctm_family_max(n, eps, level, domain=DOMAIN)
    mech = DPExpMed(eps, DOMAIN)
    for k in (0, 1, 2, (n + 1) // 2 - 1):
        d = mech.distribution(ctm_worst_case(n, k, DOMAIN), presorted=True)
        assert float(d.fair_quantile(level)) <= best["fair_quantile"]
        assert d.expected_swdiff() <= best["expected_swdiff"]
    assert best["fair_quantile_at"].startswith(("D_", "uniform"))
