"""Attack: is the side allocation public, and does what ``fit`` records agree with it?

The proof (``docs/proofs/fairclass_cdp_fair.md`` §10, "Side allocation") needs κ fixed given
S1 — a function of S1's π̃ and public numbers — and the side to be the sign of the released
τ̂, nothing else of the calibration half. Checked here through the real
:class:`~dpfair.fairclass.CDPFairClassifier`:

* every fold's certificate is recomputed from released/public numbers only: κ from
  ``choose_side_share(α, π̃·n_C)`` (equal opportunity: ·½), the side from sign(τ̂) of the
  released fold, β_fold = β/K, the verdict from D̃ and the two margins;
* calibration-half neighbours (one label flipped, one group flipped, the last bits of one
  feature) leave π̃ and hence κ unchanged bit for bit, whatever they do to τ̂ and D̃;
* the ledger and ``privacy_spent_`` do not depend on the allocation (same releases, same
  guarantees at an α where κ = ½ and at one where κ = 0.05);
* the planner's ``side_choice`` is the rule S2 applies at the planner's sizes.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from dpfair import UncertifiedFairnessWarning
from dpfair.fairclass import CDPFairClassifier, plan_certification
from dpfair.fairclass._budget import plan_budget
from dpfair.fairclass._certify import SIDE_SHARES, choose_side_share
from dpfair.fairclass._opportunity import ASSUMED_POSITIVE_RATE
from dpfair.fairclass._pipeline import CalibrationScores, expected_sizes, s2_threshold

BETA = 0.05
N = 6000


def _data(seed: int, n: int = N, share1: float = 0.4):
    rng = np.random.default_rng(seed)
    A = (rng.uniform(size=n) < share1).astype(np.int8)
    x = rng.uniform(size=n)
    eta = np.clip(0.15 + 0.7 * x + 0.12 * (2 * A - 1), 0.0, 1.0)
    y = (rng.uniform(size=n) < eta).astype(np.int8)
    return x[:, None], y, A


def _fit(X, y, A, *, alpha: float, seed: int, **kw) -> CDPFairClassifier:
    clf = CDPFairClassifier(epsilon=1.0, delta=1e-6, alpha=alpha, feature_bounds=[(0.0, 1.0)],
                            random_state=seed, fail_prob=BETA, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UncertifiedFairnessWarning)
        clf.fit(X, y, sensitive_features=A)
    return clf


def _public_kappa(clf: CDPFairClassifier, fold, n_cal: int, folds: int, eo: bool) -> float:
    if eo:  # equal opportunity keeps the symmetric split (S1 releases no label rates)
        return 0.5
    plan = clf.budget_plan_
    rate = ASSUMED_POSITIVE_RATE if eo else 1.0
    kw = {"counts": 2, "n_public": n_cal} if eo else {}
    return choose_side_share(
        clf.alpha, *expected_sizes(np.asarray(fold.pi), n_cal, rate),
        epsilon_count=plan.epsilon_count, epsilon_threshold=plan.epsilon_threshold,
        epsilon_check=plan.epsilon_check, fail_prob=BETA / folds,
        extra_margin=clf.alpha_margin, **kw,
    ).side_share


@pytest.mark.parametrize("constraints", ["demographic_parity", "equal_opportunity"])
@pytest.mark.parametrize("cross_fit", [False, True])
def test_certificates_recompute_from_public_numbers(constraints, cross_fit):
    eo = constraints == "equal_opportunity"
    seen_kappa = set()
    for seed, alpha in ((1, 0.05), (2, 0.12), (3, 0.2), (4, 0.3), (5, 0.6)):
        X, y, A = _data(seed)
        clf = _fit(X, y, A, alpha=alpha, seed=seed, cross_fit=cross_fit,
                   constraints=constraints)
        k = len(clf.folds_)
        assert k == (2 if cross_fit else 1)
        assert len(clf.certificates_) == k
        n_cal = N // 2
        for fold, cert in zip(clf.folds_, clf.certificates_, strict=True):
            tau = float(fold.tau)
            assert cert.side == (1 if tau > 0 else -1 if tau < 0 else 0)
            assert cert.fail_prob == pytest.approx(BETA / k, rel=1e-15)
            kappa = _public_kappa(clf, fold, n_cal, k, eo)
            assert cert.side_share == kappa
            assert 0.0 < kappa <= 0.5 and kappa in SIDE_SHARES
            seen_kappa.add(kappa)
            small, other = cert.margin, (cert.margin_lower if cert.side > 0 else
                                         cert.margin_upper)
            if kappa == 0.5 or cert.side == 0:  # symmetric, or the atom τ̂ = 0: t_s twice
                assert cert.margin_upper == cert.margin_lower == cert.margin
                other = small
            else:
                assert other > small
            up = small if cert.side >= 0 else other
            lo = small if cert.side <= 0 else other
            assert (cert.margin_upper, cert.margin_lower) == (up, lo)
            assert cert.certified == (-(alpha - lo) <= cert.released_dd <= alpha - up)
        assert clf.certified_ == all(c.certified for c in clf.certificates_)
    # both regimes (symmetric and one-sided) were exercised; EO is symmetric only
    assert len(seen_kappa) >= (1 if eo else 2)


def _calibration_row(X, y, A, seed: int) -> int:
    """A row of the calibration half: changing it leaves S1's π̃ and η̃ unchanged."""
    base = _fit(X, y, A, alpha=0.15, seed=seed)
    for i in range(40):
        X2 = X.copy()
        X2[i, 0] = 1.0 - X2[i, 0]
        other = _fit(X2, y, A, alpha=0.15, seed=seed)
        if np.array_equal(other.folds_[0].pi, base.folds_[0].pi) and np.array_equal(
                other.folds_[0].eta, base.folds_[0].eta):
            return i
    raise AssertionError("no calibration row among the first 40")


@pytest.mark.parametrize("alpha", [0.05, 0.15])
def test_calibration_neighbours_leave_kappa_and_ledger_unchanged(alpha):
    seed = 11
    X, y, A = _data(seed)
    i = _calibration_row(X, y, A, seed)
    base = _fit(X, y, A, alpha=alpha, seed=seed)
    neighbours = []
    X1 = X.copy()
    X1[i, 0] = np.nextafter(X1[i, 0], 2.0)  # last bit of one feature
    neighbours.append((X1, y, A))
    y1 = y.copy()
    y1[i] = 1 - y1[i]  # one label
    neighbours.append((X, y1, A))
    A1 = A.copy()
    A1[i] = 1 - A1[i]  # one group
    neighbours.append((X, y, A1))
    X2 = X.copy()
    X2[i, 0] = 1.0 - X2[i, 0]  # the record moved across the range
    neighbours.append((X2, y, A1))
    ledger0 = [(r["label"], r["charged"], r["rows"]) for r in
               base.privacy_ledger_.to_dict()["releases"]]
    for Xn, yn, An in neighbours:
        other = _fit(Xn, yn, An, alpha=alpha, seed=seed)
        assert np.array_equal(other.folds_[0].pi, base.folds_[0].pi)
        c0, c1 = base.certificates_[0], other.certificates_[0]
        assert c1.side_share == c0.side_share
        assert c1.fail_prob == c0.fail_prob and c1.target >= 0
        assert other.privacy_spent_ == base.privacy_spent_
        assert [(r["label"], r["charged"], r["rows"]) for r in
                other.privacy_ledger_.to_dict()["releases"]] == ledger0


def test_ledger_does_not_depend_on_the_allocation():
    """Same data and seed at α = 0.05 (κ = ½) and α = 0.2 (κ = 0.05): the same releases
    with the same guarantees and rows, and the same total."""
    X, y, A = _data(21)
    sym = _fit(X, y, A, alpha=0.05, seed=21)
    one = _fit(X, y, A, alpha=0.2, seed=21)
    assert sym.certificates_[0].side_share == 0.5
    assert one.certificates_[0].side_share == min(SIDE_SHARES)

    def rows(clf):
        return [(r["label"], r["cost"], r["charged"], r["rows"], r["noise"])
                for r in clf.privacy_ledger_.to_dict()["releases"]]

    assert rows(sym) == rows(one)
    assert sym.privacy_spent_ == one.privacy_spent_
    assert len([r for r in rows(one) if "/ S2 /" in r[0]]) == 3  # count, τ̂, check: no new


@pytest.mark.parametrize("alpha", [0.04, 0.06, 0.08, 0.1, 0.15, 0.3])
@pytest.mark.parametrize("share", [0.3, 0.5])
def test_planner_side_choice_is_the_rule_s2_applies(alpha, share):
    """``plan_certification(...).side_choice(α)`` at the planner's sizes equals what S2
    chooses when S1's π̃ equals the planner's assumed share (n even, no cross-fit)."""
    n = 9000
    eps, delta = 1.0, 4500.0**-2
    plan = plan_certification(n, eps, delta, min_group_share=share, fail_prob=BETA)
    budget = plan_budget(eps, delta, cross_fit=False, has_s2=True, check_share=0.35)
    n_cal = n // 2
    assert plan.group_sizes == pytest.approx((share * n_cal, (1 - share) * n_cal))
    pi = np.array([1.0 - share, share])
    rng = np.random.default_rng(3)
    z = np.clip(rng.normal(0.0, 0.3, n_cal), -1, 1)
    a = (rng.uniform(size=n_cal) < share).astype(np.int8)
    _tau, cert = s2_threshold(CalibrationScores(z, a), pi, (alpha, 0.0), budget, rng, BETA)
    assert cert is not None
    direct = choose_side_share(alpha, *expected_sizes(pi, n_cal),
                               epsilon_count=budget.epsilon_count,
                               epsilon_threshold=budget.epsilon_threshold,
                               epsilon_check=budget.epsilon_check, fail_prob=BETA)
    assert cert.side_share == direct.side_share
    assert plan.side_choice(alpha).side_share == direct.side_share
    assert plan.side_choice(alpha).margin == pytest.approx(direct.margin, rel=1e-9)
    assert plan.side_choice(alpha).aim == pytest.approx(direct.aim, rel=1e-9, abs=1e-12)


# By default π̃₁ ∈ {0, 1e-12, ½}; the mirrored π̃₁ ∈ {1 − 1e-12, 1} (the same sizes with
# the groups swapped) join them in the full grid with -m slow.
CRAFTED_PI1 = (0.0, 1e-12, 0.5)
CRAFTED_PI1_FULL = (0.0, 1e-12, 0.5, 1 - 1e-12, 1.0)


@pytest.mark.parametrize("pi1s", [
    pytest.param(CRAFTED_PI1, id="pi1-ci"),
    pytest.param(CRAFTED_PI1_FULL, marks=pytest.mark.slow, id="pi1-full"),
])
@pytest.mark.parametrize("eps", [0.01, 1.0, 100.0])
def test_kappa_never_exceeds_half_for_crafted_pi(eps, pi1s):
    """κ ≤ ½ is what the case |D(0)| ≤ α needs (both bad sides at t(βκ)). Whatever S1
    releases — π̃ at 0, 1, 1e-12 from them, balanced — and whatever n_C, α, ε: κ is one of
    ``SIDE_SHARES``, all ≤ ½ (no float path returns anything else)."""
    assert max(SIDE_SHARES) == 0.5
    seen = set()
    for p1 in pi1s:
        pi = np.array([1.0 - p1, p1])
        for n_cal in (4, 3000, 10**7):
            for alpha in (1e-3, 0.1, 0.99):
                for rate, kw in ((1.0, {}), (ASSUMED_POSITIVE_RATE,
                                             {"counts": 2, "n_public": n_cal})):
                    c = choose_side_share(
                        alpha, *expected_sizes(pi, n_cal, rate), epsilon_count=0.25 * eps,
                        epsilon_threshold=0.4 * eps, epsilon_check=0.35 * eps,
                        fail_prob=BETA, **kw)
                    assert c.side_share in SIDE_SHARES and c.side_share <= 0.5
                    assert c.margin <= c.margin_other
                    seen.add(c.side_share)
    assert 0.5 in seen


def test_alpha_path_each_model_its_own_allocation():
    """``fit_alpha_path``: one S1, one S2 per α. Each model's certificate carries the
    fold's full β (the claim is per model), its own κ recomputed from π̃ and its α, and the
    verdict from its own two margins; the path's ledger has one S2 triple per α."""
    from dpfair.fairclass import fit_alpha_path

    X, y, A = _data(31)
    est = CDPFairClassifier(epsilon=1.0, delta=1e-6, feature_bounds=[(0.0, 1.0)],
                            random_state=31, fail_prob=BETA)
    alphas = [0.05, 0.1, 0.2, 0.3]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UncertifiedFairnessWarning)
        models = fit_alpha_path(est, X, y, sensitive_features=A, alphas=alphas)
    kappas = []
    for alpha, model in zip(alphas, models, strict=True):
        (cert,) = model.certificates_
        (fold,) = model.folds_
        assert cert.alpha == alpha and cert.fail_prob == BETA
        assert cert.side_share == _public_kappa(model, fold, N // 2, 1, False)
        kappas.append(cert.side_share)
        assert cert.certified == (-(alpha - cert.margin_lower) <= cert.released_dd
                                  <= alpha - cert.margin_upper)
    assert kappas[0] == 0.5 and kappas[-1] == min(SIDE_SHARES)
    path = models[0].path_privacy_ledger_.to_dict()["releases"]
    assert sum("certificate" in r["label"] for r in path) == len(alphas)
    # one α: the path equals a fresh fit at that α with the same seed (bit for bit)
    (single,) = fit_alpha_path(est, X, y, sensitive_features=A, alphas=[0.2])
    fresh = _fit(X, y, A, alpha=0.2, seed=31)
    assert single.certificates_ == fresh.certificates_


def test_planner_min_alpha_is_the_smallest_alpha_reaching_the_target():
    target = 0.966
    plan = plan_certification(9000, 1.0, 1e-6, min_group_share=0.3, target_rate=target)
    """Fixed (the planner scans α for the first crossing before refining it): no α on a
    fine grid below min_alpha reaches the target; min_alpha itself does."""
    grid = np.linspace(0.04, plan.min_alpha, 4001)[:-1]
    reach = [a for a in grid if plan.certification_probability(a) >= target]
    # the refinement's tolerance: a crossing within 1e-6 of min_alpha is the same one
    assert not [a for a in reach if a < plan.min_alpha - 1e-6], (plan.min_alpha, reach[:1])
    assert plan.certification_probability(plan.min_alpha + 1e-6) >= target
