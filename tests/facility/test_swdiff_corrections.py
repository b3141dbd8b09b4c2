"""Thm 7.19 (SPM_λ SWDIFF) fails like Thm 7.13: the bounds API must not return its rate
as an upper bound (issue 15, item 3).

n i.i.d. draws from N(0.1, (1e-4/n)²) lie in SPM_λ with λ their KS distance to that
single-peaked law (median 0.1; its mass outside V = [0, 1] underflows to 0). The exact
0.95-quantile of SWDIFF under DPExpMed_{α*} stays at ≈ 0.95·m/ε for every n, while the
theorem's rate m·ln²(nλ/β)/(nε²) + mλ/ε falls: no constant can save it.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from dpfair.facility import DPExpMed
from dpfair.facility.bounds import ctm_bounds, spm_swdiff_bound, table1
from tests.facility._helpers import DOMAIN

EPS, BETA = 1.0, 0.05


def _concentrated_sample(n: int) -> tuple[np.ndarray, float]:
    sd = 1e-4 / n
    x = np.random.default_rng(0).normal(0.1, sd, n)
    lam = float(stats.kstest(x, stats.norm(0.1, sd).cdf).statistic)  # x ∈ SPM_λ
    return x, lam


@pytest.fixture(scope="module")
def measured() -> dict[int, tuple[float, float]]:
    out = {}
    for n in (1001, 10_001, 100_001):
        x, lam = _concentrated_sample(n)
        q = DPExpMed(EPS, DOMAIN).distribution(x).swdiff_quantile(1 - BETA)
        out[n] = (float(q), lam)
    return out


def test_swdiff_quantile_stays_at_m_over_epsilon(measured):
    for q, _ in measured.values():
        assert q == pytest.approx(0.95 / EPS, rel=1e-3)


def test_theorem_7_19_rate_is_refuted_and_table1_returns_the_corrected_one(measured):
    ratios_paper, ratios_corrected = [], []
    for n, (q, lam) in sorted(measured.items()):
        t = table1(n, 1.0, EPS, BETA, lam)
        ratios_paper.append(q / t.spm_swdiff_upper_paper)
        ratios_corrected.append(q / t.spm_swdiff_upper)
    # measured / paper rate: 12.2, 64.6, 370 (grows like n / ln² n: no constant fits)
    assert ratios_paper[0] > 10 and ratios_paper[-1] > 25 * ratios_paper[0]
    # measured / corrected rate stays between 0.85 and 1 (the m/ε term is attained)
    assert all(0.85 < r <= 1.0 for r in ratios_corrected)


def test_explicit_spm_swdiff_bound_paper_fails_corrected_holds(measured):
    q, lam = measured[100_001]
    assert q > 3 * spm_swdiff_bound(100_001, 1.0, EPS, BETA, lam, corrected=False)
    for n, (q, lam) in measured.items():
        assert q <= spm_swdiff_bound(n, 1.0, EPS, BETA, lam)


def test_ctm_rate_in_table1_is_corrected_too():
    """The point mass (in CTM): quantile 0.95·m/ε whatever n, above the paper's CTM rate."""
    for n in (1001, 100_001):
        q = DPExpMed(EPS, DOMAIN).distribution(np.full(n, 0.5)).swdiff_quantile(1 - BETA)
        t = table1(n, 1.0, EPS, BETA, 1.0)
        assert q > 100 * t.ctm_swdiff_upper_paper  # 106× at n = 1001, 10⁴× at n = 100001
        assert q <= t.ctm_swdiff_upper
        assert q <= ctm_bounds(n, 1.0, EPS, BETA).swdiff_bound_corrected


# ------------------------------------------------------------------ Thm 7.15 (item 4)
def _simplification_factor(n: int, nl: np.ndarray, eps: np.ndarray) -> np.ndarray:
    """(unsimplified M − αm) / (simplified bound) from the proof of Thm 7.15, per
    (ε, nλ, k); both share the factor m·e^{−ε(k+1)/2}."""
    big_k = n // 2
    e, lam_n = eps[:, None, None], nl[None, :, None]
    k = np.arange(big_k)[None, None, :]
    g = np.expm1(-e * big_k / 2) / np.expm1(-e / 2)
    s = np.ceil(lam_n) - 1
    count = np.maximum(big_k - s - k + 1, 0)
    g_part = np.expm1(-e * count / 2) / np.expm1(-e / 2)
    exact = (g_part + lam_n + s) / (big_k - k + lam_n)
    simplified = 2 * lam_n * g / (big_k - k)
    return exact / simplified


def test_thm_7_15_simplification_factor():
    """The numbers the docs now state: a constant factor only, near nλ = 1/2."""
    eps = np.linspace(0.002, 0.998, 40)
    nl = np.linspace(0.5, 3.0, 301)
    limits = {2: (5 / 3, 0.79), 3: (5 / 3, 0.79), 4: (1.40, 0.69), 5: (1.40, 0.69)}
    for n in (2, 3, 4, 5, 6, 7, 8, 9, 20, 101, 1001):
        r = _simplification_factor(n, nl, eps)
        top, nl_max = limits.get(n, (1.29, 0.64))
        assert r.max() < top
        assert np.all(r[:, nl >= nl_max, :] <= 1.0 + 1e-12)
        assert r.max() > 1.0  # the step is not valid as written for any n


def test_docs_call_thm_7_15_a_precision_not_an_error():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "proofs"
            / "facility_dpexpmed.md").read_text(encoding="utf-8")
    para = text[text.index("**Thm 7.15"):].split("\n* ")[0]
    assert "The theorem stands" in para and "outside the theorem's hypotheses" in para
