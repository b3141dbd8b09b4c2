"""How CDP-Fair spends (ε, δ): the split between releases, their noise scales, the ledger.

Releases of one fit (one training half T, one calibration half C; replace-one neighbours,
n and the halves' sizes public; the split of row indices into halves is drawn independently
of the data, so a replaced record lies in exactly one half):

S1, on T — one Gaussian mechanism, accounted exactly:
    * ñ_1 = n_1(T) + N(0, σ_c²): group-1 count (L2 sensitivity 1, since n_0 = n − n_1), from
      which π̃_1 = ñ_1/n, π̃_0 = 1 − π̃_1;
    * F̃_{a,y} = F_{a,y} + σ_f·W_{a,y}, a, y ∈ {0, 1}: the binned kernel sums of the four
      (group, label) cells on the public grid (Gaussian-process mechanism). One record lies in
      one cell and contributes φ_x = Σ_j w_j(x) k(·, t_j) with ‖φ_x‖_H ≤ 1 and ⟨φ_x, φ_x'⟩ ≥ 0,
      so replacing it changes the four functions by RKHS norm at most √2
      (``docs/proofs/fairclass_cdp_fair.md`` §2).
    The worst case of both parts occurs together (a record that changes group and moves
    far), so S1 is exactly μ₁-Gaussian-DP with μ₁² = 1/σ_c² + 2/σ_f² (the privacy-loss
    distributions of independent Gaussian releases compose to a Gaussian with the squared
    μ's added). Given (ε₁, δ) for S1, μ₁ is the analytic-Gaussian calibration (Balle & Wang
    2018) and the count gets a share w_c of μ₁²: σ_c = 1/(μ₁√w_c), σ_f = √2/(μ₁√(1 − w_c)).
    In zCDP units the parts are ρ_c = μ_c²/2 and ρ_f = μ_f²/2 and they add up to μ₁²/2.

S2, on C — pure DP:
    * m̃_1 = n_1(C) + Laplace(1/ε_c): group-1 count of the calibration half (ε_c-DP); the
      denominators of DD̂ are m̃_1 and n̆ − m̃_1;
    * τ̂ by the exponential mechanism on the exact DD̂ step function (ε_e-DP, see
      :func:`dpfair.fairclass._threshold.private_fair_threshold`).
    S2 is (ε_c + ε_e)-DP by basic composition.

Composition over the rows:
    * one fit (``cross_fit=False``): T's rows see S1 only and C's rows S2 only, so by
      parallel composition the fit is (max(ε₁, ε₂), δ)-DP: both get the full budget;
    * cross-fitting: the second fit swaps the halves, so every row sees one S1 and one S2:
      (ε₁ + ε₂, δ). Default ("split"): ε₁ = s·ε, ε₂ = (1 − s)·ε, total (ε, δ). With
      ``cross_fit_budget="compose"`` each fit uses the full (ε, δ) and the total reported is
      (2ε, δ) — only when the user asks for it.
    * baselines without S2 (privacy-only) give S1 the full budget in both modes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from dpfair._errors import InvalidParameterError
from dpfair.mechanisms import analytic_gaussian_delta, discrete_gaussian_sigma
from dpfair.privacy import Budget, Ledger, LedgerRecord

__all__ = ["BudgetPlan", "LedgerRecord", "PrivacyLedger", "S1Release", "plan_budget"]

CrossFitBudget = Literal["split", "compose"]

#: RKHS sensitivity of the four cell kernel sums together (see module docstring).
KERNEL_SUM_RKHS_SENSITIVITY = math.sqrt(2.0)


#: The ledger of a fit: the privacy engine's :class:`~dpfair.privacy.Ledger` with its cap
#: ``plan.limit``, each release charged to its half (``rows="half A"`` / ``"half B"``):
#: sequential composition within a half, parallel across the disjoint halves
#: (``ledger.total``); the parts of S1 are listed with ``part_of`` and charged zero.
PrivacyLedger = Ledger

#: One planned S1 release of another group-score estimator: (label, guarantee, noise).
S1Release = tuple[str, Budget, str]


@dataclass(frozen=True, slots=True)
class BudgetPlan:
    """Noise scales and budgets of every release of one fit (see the module docstring).

    Attributes
    ----------
    epsilon, delta : float
        The user's request.
    n_fits : int
        1, or 2 with cross-fitting.
    s1 : Budget
        (ε₁, δ) of the S1 Gaussian mechanism (per fit).
    mu_s1 : float
        Its Gaussian-DP parameter μ₁.
    sigma_count : float
        σ_c of the training-half group count.
    sigma_function : float
        σ_f multiplying the Gaussian process on each cell kernel sum.
    epsilon_count : float
        ε_c of the Laplace count on the calibration half (0 without S2).
    epsilon_threshold : float
        ε_e of the exponential mechanism for τ̂ (0 without S2).
    limit : Budget
        The total the ledger may reach.
    epsilon_check : float
        ε_k of the certificate's Laplace check of DD̂(τ̂) (0: no check, the "target" rule).
    constraints : {"demographic_parity", "equal_opportunity"}
        What S2 caps. Equal opportunity spends ε_c on two calibration counts (the
        positive-label rows of each group, L1 sensitivity 2 together) instead of one
        (``fairclass/_opportunity.py``); the totals are the same.
    """

    epsilon: float
    delta: float
    n_fits: int
    has_s2: bool
    s1: Budget
    mu_s1: float
    sigma_count: float
    sigma_function: float
    epsilon_count: float
    epsilon_threshold: float
    limit: Budget
    epsilon_check: float = 0.0
    constraints: str = "demographic_parity"

    @property
    def s2(self) -> Budget:
        """Pure (ε_c + ε_e + ε_k) of S2."""
        return Budget.pure(self.epsilon_count + self.epsilon_threshold + self.epsilon_check)

    def charge_fit(
        self,
        ledger: PrivacyLedger,
        fit: int,
        train_rows: str,
        cal_rows: str,
        *,
        s1_records: Sequence[S1Release] | None = None,
    ) -> None:
        """Charge the releases of fit number ``fit`` (1-based) to ``ledger``.

        ``s1_records``: the S1 releases of another group-score estimator (e.g. the linear
        one), as (label, guarantee, noise), charged to ``train_rows`` instead of the kernel
        S1; together they must stay within ``s1``.
        """
        tag = f"fit {fit}"
        if s1_records is not None:
            for label, budget, noise in s1_records:
                ledger.charge(budget, label=label, rows=train_rows, noise=noise)
            self._charge_s2(ledger, tag, cal_rows)
            return
        self._charge_s1(ledger, tag, train_rows)
        self._charge_s2(ledger, tag, cal_rows)

    def path_ledger(self, n_thresholds: int, fits: list[tuple[str, str]]) -> PrivacyLedger:
        """What publishing every model of an α path costs: S1 once, S2 once per α.

        The models of :func:`dpfair.fairclass.fit_alpha_path` share each fit's S1 release
        and draw one S2 release per α on the same calibration half, so publishing all of
        them is S1 once per fit plus ``n_thresholds`` S2 releases per fit, composed by
        basic composition within each half and in parallel across the disjoint halves:
        (max over halves of Σ ε, max of Σ δ). Without cross-fitting that is
        (max(ε₁, K·ε₂), δ); with it, (ε₁ + K·ε₂, δ) (K = ``n_thresholds``). With K = 1 it
        is the single fit's guarantee.

        Parameters
        ----------
        n_thresholds : int
            Number of S2 releases per fit (the number of α; 1 without a fairness step).
        fits : list of (training rows, calibration rows)
            The halves' labels of each fit, in order.
        """
        k = int(n_thresholds) if self.has_s2 else 1
        eps1, eps2 = float(self.s1.epsilon or 0.0), float(self.s2.epsilon or 0.0)
        # Every half sees at most one S1 and K S2 releases: (ε₁ + K·ε₂, δ) bounds each
        # half's total; ``ledger.total`` is the exact composed value.
        limit = Budget.approx(eps1 + k * eps2, self.delta,
                              note=f"publishing {k} model(s) sharing S1")
        ledger = PrivacyLedger(limit)
        for fit, (train_rows, cal_rows) in enumerate(fits, start=1):
            self._charge_s1(ledger, f"fit {fit}", train_rows)
            for i in range(k):
                self._charge_s2(ledger, f"fit {fit} / alpha #{i + 1}" if k > 1 else f"fit {fit}",
                                cal_rows)
        return ledger

    def _charge_s1(self, ledger: PrivacyLedger, tag: str, train_rows: str) -> None:
        s1_label = f"{tag} / S1 (count + kernel sums, one Gaussian mechanism)"
        ledger.charge(
            self.s1,
            label=s1_label,
            rows=train_rows,
            noise=f"mu-GDP with mu = {self.mu_s1:.6g}",
        )
        mu_c = 1.0 / self.sigma_count
        mu_f = KERNEL_SUM_RKHS_SENSITIVITY / self.sigma_function
        ledger.note_part(
            Budget.zcdp(mu_c**2 / 2.0),
            label=f"{tag} / S1 / group-1 count n_1 (Gaussian, sensitivity 1)",
            rows=train_rows,
            noise=f"N(0, {self.sigma_count:.6g}^2)",
            part_of=s1_label,
        )
        ledger.note_part(
            Budget.zcdp(mu_f**2 / 2.0),
            label=(f"{tag} / S1 / kernel sums F_ay, 4 functions (Gaussian process, RKHS "
                   "sensitivity sqrt(2))"),
            rows=train_rows,
            noise=f"{self.sigma_function:.6g} * GP(0, k_h) per function",
            part_of=s1_label,
        )

    def _charge_s2(self, ledger: PrivacyLedger, tag: str, cal_rows: str) -> None:
        if self.has_s2:
            eo = self.constraints == "equal_opportunity"
            if eo:
                ledger.charge(
                    Budget.pure(self.epsilon_count),
                    label=(f"{tag} / S2 / calibration positive-label counts n_01, n_11 "
                           "(Laplace, L1 sensitivity 2)"),
                    rows=cal_rows,
                    noise=(
                        "exact discrete Laplace on a 2^-k lattice, scale "
                        f"~ {2.0 / self.epsilon_count:.6g} per count"
                    ),
                )
            else:
                ledger.charge(
                    Budget.pure(self.epsilon_count),
                    label=f"{tag} / S2 / calibration group-1 count (Laplace, sensitivity 1)",
                    rows=cal_rows,
                    noise=(
                        "exact discrete Laplace on a 2^-k lattice, scale "
                        f"~ {1.0 / self.epsilon_count:.6g}"
                    ),
                )
            curve = "TPR-difference (EOD)" if eo else "DD"
            ledger.charge(
                Budget.pure(self.epsilon_threshold),
                label=(f"{tag} / S2 / threshold tau (exponential mechanism on the {curve} "
                       "step function)"),
                rows=cal_rows,
                noise="exp(-eps * |DD - target| / (2 * (1/m1 + 1/m0)))",
            )
            if self.epsilon_check > 0:
                ledger.charge(
                    Budget.pure(self.epsilon_check),
                    label=(f"{tag} / S2 / certificate: {curve} at tau (Laplace, "
                           "sensitivity 1/m1 + 1/m0)"),
                    rows=cal_rows,
                    noise=(
                        "exact discrete Laplace on a 2^-k lattice, scale "
                        f"~ (1/m1 + 1/m0) / {self.epsilon_check:.6g}"
                    ),
                )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        out = asdict(self)
        out["s1"] = self.s1.to_dict()
        out["limit"] = self.limit.to_dict()
        return out


def _check_share(name: str, value: Any) -> float:
    if isinstance(value, bool):
        raise InvalidParameterError(f"{name}={value!r}: expected a number in (0, 1).")
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InvalidParameterError(f"{name}={value!r}: expected a number in (0, 1).") from None
    if not 0.0 < v < 1.0:
        raise InvalidParameterError(f"{name}={value!r}: must lie strictly between 0 and 1.")
    return v


def plan_budget(
    epsilon: float,
    delta: float,
    *,
    cross_fit: bool,
    has_s2: bool,
    cross_fit_budget: CrossFitBudget = "split",
    s1_share: float = 0.75,
    count_share: float = 0.05,
    threshold_count_share: float = 0.25,
    check_share: float = 0.0,
    constraints: str = "demographic_parity",
) -> BudgetPlan:
    """Derive every noise scale from the user's (ε, δ) (module docstring).

    Parameters
    ----------
    epsilon, delta : float
        Validated request.
    cross_fit : bool
        Two fits with swapped halves.
    has_s2 : bool
        False for the privacy-only baseline (no threshold step).
    cross_fit_budget : {"split", "compose"}
        With cross-fitting and S2: split (ε, δ) between S1 and S2 so the total is (ε, δ), or
        give each fit the full budget and report the composed (2ε, δ).
    s1_share : float in (0, 1)
        s: S1's fraction of ε when cross-fitting splits.
    count_share : float in (0, 1)
        w_c: the training-half count's share of μ₁² (the rest goes to the kernel sums).
    threshold_count_share : float in (0, 1)
        The calibration count's fraction of S2's ε (the rest goes to τ̂).
    check_share : float in [0, 1), default 0
        The certificate check's fraction of S2's ε (0: no check). The count and the check
        together must leave a positive share for τ̂.
    constraints : {"demographic_parity", "equal_opportunity"}, default "demographic_parity"
        What S2 caps (recorded in the plan and the ledger's labels; same budgets).
    """
    s = _check_share("s1_share", s1_share)
    wc = _check_share("count_share", count_share)
    tc = _check_share("threshold_count_share", threshold_count_share)
    check = 0.0 if check_share == 0 else _check_share("check_share", check_share)
    if tc + check >= 1.0:
        raise InvalidParameterError(
            f"threshold_count_share={tc:g} + check_share={check:g} must be < 1: the rest of "
            "S2's epsilon drives the threshold."
        )
    if cross_fit_budget not in ("split", "compose"):
        raise InvalidParameterError(
            f"cross_fit_budget={cross_fit_budget!r}: expected 'split' (total (epsilon, delta)) "
            "or 'compose' (each fit spends (epsilon, delta); total reported as composed)."
        )
    n_fits = 2 if cross_fit else 1
    eps, dl = float(epsilon), float(delta)
    if not has_s2:
        eps1, eps2 = eps, 0.0
        limit = Budget.approx(eps, dl)
    elif not cross_fit:
        eps1, eps2 = eps, eps  # disjoint halves: parallel composition
        limit = Budget.approx(eps, dl)
    elif cross_fit_budget == "split":
        eps1 = s * eps
        eps2 = eps - eps1
        limit = Budget.approx(eps, dl)
    else:
        eps1, eps2 = eps, eps
        limit = Budget.approx(2.0 * eps, dl, note="cross-fit composed (requested)")
    # calibrated at δ(1 − 2^-40): the S1 noise is an exact discrete Gaussian on public
    # lattices, (ε, δ_c + ξ)-DP with ξ ≤ δ·2^-41 (mechanisms.discrete_gaussian)
    sigma1 = discrete_gaussian_sigma(eps1, dl, 1.0, 2**40)
    mu1 = 1.0 / sigma1
    # Re-check the exact guarantee of the composed Gaussian (μ₁² = μ_c² + μ_f²).
    mu_c = mu1 * math.sqrt(wc)
    mu_f = math.sqrt(max(mu1**2 - mu_c**2, 0.0))
    sigma_c = 1.0 / mu_c
    sigma_f = KERNEL_SUM_RKHS_SENSITIVITY / mu_f
    mu_total = math.hypot(1.0 / sigma_c, KERNEL_SUM_RKHS_SENSITIVITY / sigma_f)
    if analytic_gaussian_delta(1.0 / mu_total, 1.0, eps1) > dl * (1.0 + 1e-9):
        raise AssertionError("internal: S1 calibration does not meet its (epsilon, delta)")
    eps_c = tc * eps2
    eps_k = check * eps2
    eps_e = eps2 - eps_c - eps_k
    return BudgetPlan(
        epsilon=eps,
        delta=dl,
        n_fits=n_fits,
        has_s2=has_s2,
        s1=Budget.approx(eps1, dl, note="S1: one Gaussian mechanism, analytic calibration"),
        mu_s1=mu1,
        sigma_count=sigma_c,
        sigma_function=sigma_f,
        epsilon_count=eps_c,
        epsilon_threshold=eps_e,
        limit=limit,
        epsilon_check=eps_k,
        constraints=str(constraints),
    )
