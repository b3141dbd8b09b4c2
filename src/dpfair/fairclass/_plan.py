"""Plan a certified CDP-Fair fit before reading any data: margin, aim and the smallest α.

The certified rule (``fairclass/_certify.py``) certifies a fold iff the private check
|D̃| ≤ α − t, with t the public margin. Everything that decides how often that happens is
a function of public numbers: n (public under replace-one), (ε, δ), the budget split, β,
and the calibration denominators m̃_a — which are released, and which a planner replaces by
their expected size m_a = share_a · n_C with a *public* (assumed) group share. So
:func:`plan_certification` computes, from public quantities only and without data:

* the margin t (:func:`~dpfair.fairclass._certify.certification_margin` at m_a);
* the aim's slack g (:func:`~dpfair.fairclass._certify.aim_slack`): how far below α − t
  the threshold aims, covering the threshold's own spread b_v = 2Δ/ε_e and the check's
  noise b_w ≈ Δ/ε_k, floored at one step of a tied curve; where α − t − g is small or
  negative (demographic parity) the flat-region aim
  (:func:`~dpfair.fairclass._certify.flat_aim`) raises it while the predicted pass
  probability stays ≥ max(0.9, 1 − 2(1 − p*)) (p* the best one; issue 20, fifth pass);
* the side allocation the fit will choose at an α (:meth:`CertificationPlan.side_choice`,
  :func:`~dpfair.fairclass._certify.choose_from_margins`): the share κ of β left to the
  side opposite τ̂, the margins t (τ̂'s side, β(1 − κ)) and t_o (the other side, βκ);
* the predicted certification probability of an α,
  P(−(α − t_o) ≤ aim + V + W ≤ α − t)^K with V ~ Laplace(b_v), W ~ Laplace(b_w), K folds
  (:func:`~dpfair.fairclass._certify.pass_probability`), the aim on τ̂'s side;
* ``min_alpha``: the smallest α whose predicted probability reaches ``target_rate``;
* ``sampling_margin``: the margin without privacy noise at the largest side share
  1 − min(κ) — no α at or below it certifies at any ε, only more calibration rows lower
  it (``calibration_share``, or ``calibration_share="auto"`` with the α to plan for: the
  smallest share in 0.5 … 0.75 that reaches ``target_rate``).

It spends no privacy: nothing here reads data. What it cannot know (stated, not hidden): the
actual group shares (a smaller group than assumed gives a larger margin) and the shape of
the calibration curve (strong ties can lower the rate; the windowed loss and the slack
floor bound how much). Checked on designs it was not tuned on
(``tests/fairclass/test_plan.py``: fits at α ≥ 1.5·``min_alpha`` certify in ≥ 90% of cases).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from dpfair._errors import InvalidParameterError
from dpfair._validation import check_positive
from dpfair.fairclass._budget import plan_budget
from dpfair.fairclass._certify import (
    AIM_FAIL,
    PLAN_RATE,
    SIDE_SHARES,
    TIE_SLACK,
    SideChoice,
    aim_scales,
    aim_slack,
    certification_margin,
    choose_from_margins,
    side_margins,
)
from dpfair.fairclass._rule import CONSTRAINTS
from dpfair.fairclass._split import calibration_size
from dpfair.fairclass._validation import check_budget

__all__ = ["AUTO_SHARES", "CertificationPlan", "plan_certification"]

#: The calibration shares ``calibration_share="auto"`` chooses from (smallest first).
AUTO_SHARES = (0.5, 0.55, 0.6, 0.65, 0.7, 0.75)

#: ``calibration_share="auto"`` when no share reaches the target rate: the smallest share
#: whose predicted rate is within this of the best one.
_AUTO_TOLERANCE = 0.02

#: ε of the count and the check for :attr:`CertificationPlan.sampling_margin` (no noise).
_NO_NOISE = 1e7


@dataclass(frozen=True)
class CertificationPlan:
    """What a certified fit can promise, from public numbers only (no data read).

    Attributes
    ----------
    n : int
        Rows of the fit (public).
    epsilon, delta : float
        The fit's budget.
    constraints : str
        "demographic_parity" or "equal_opportunity".
    min_group_share : float
        The assumed smaller share: P(A = a) (demographic parity) or P(A = a, Y = 1)
        (equal opportunity).
    group_sizes : (float, float)
        The expected calibration denominators (m₁, m₀) used in place of the released ones.
    folds : int
        1, or 2 with cross-fitting (β and the probability are per fit).
    fail_prob : float
        β: P(|disparity| > α and certified) ≤ β.
    epsilon_count, epsilon_threshold, epsilon_check : float
        S2's budget split (as the estimator will use it).
    margin : float
        t at β_fold/2 per side, the symmetric margin (side share κ = ½): with it a fold is
        certified iff its released check satisfies |D̃| ≤ α − t. At an α where the fit
        moves β to τ̂'s side (κ < ½) the margins are those of :meth:`side_choice`.
    slack : float
        g: the threshold aims at α − t − g (t of τ̂'s side).
    threshold_spread, check_noise : float
        b_v = 2Δ/ε_e and b_w ≈ Δ/ε_k (DD units).
    target_rate : float
        The certification probability ``min_alpha`` is defined by.
    min_alpha : float
        The smallest α whose predicted certification probability is ≥ ``target_rate``.
    sampling_margin : float
        t₀: the margin with no privacy noise (ε → ∞) on the side with the largest share,
        β_fold·(1 − min κ) (:data:`~dpfair.fairclass._certify.SIDE_SHARES`; β_fold/2 under
        equal opportunity, which keeps the symmetric split): the calibration
        sampling term alone (z_{0.99·β_side}·s plus the continuity shift). Every margin the
        fit can use is ≥ t₀ at every ε and a certificate needs D̃ ≤ α − t on τ̂'s side, so
        **no fit certifies α ≤ t₀**, whatever ε: a smaller α needs more calibration rows
        (n or ``calibration_share``), not more budget.
    calibration_share : float
        The calibration half's share of the rows the plan assumes (the estimator's
        ``calibration_share``).
    side_margins : tuple of (κ, t, t_o)
        The margins of τ̂'s side and of the other side for each candidate side share κ
        (increasing) the fit can choose, at :attr:`group_sizes` (only κ = ½ under equal
        opportunity).
    """

    n: int
    epsilon: float
    delta: float
    constraints: str
    min_group_share: float
    group_sizes: tuple[float, float]
    folds: int
    fail_prob: float
    epsilon_count: float
    epsilon_threshold: float
    epsilon_check: float
    margin: float
    slack: float
    threshold_spread: float
    check_noise: float
    target_rate: float
    min_alpha: float
    sampling_margin: float = 0.0
    calibration_share: float = 0.5
    side_margins: tuple[tuple[float, float, float], ...] = ()

    def side_choice(self, alpha: float) -> SideChoice:
        """The side allocation a fit at this α chooses (κ, margins, aim, pass probability
        per fold), as the estimator does with π̃ in place of the assumed shares."""
        table = self.side_margins or ((0.5, self.margin, self.margin),)
        return choose_from_margins(float(alpha), table, self.threshold_spread,
                                   self.check_noise, self.slack,
                                   flat=self.constraints == "demographic_parity")

    def aim(self, alpha: float) -> float:
        """The threshold's target at this α: max(α − t − g, 0) (t of τ̂'s side), raised by
        the flat-region rule (:func:`~dpfair.fairclass._certify.flat_aim`, demographic
        parity) where that is small or 0."""
        return self.side_choice(alpha).aim

    def certification_probability(self, alpha: float) -> float:
        """Predicted P(certified) of a fit at this α (all folds)."""
        return self.side_choice(alpha).probability ** self.folds

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        out = asdict(self)
        out["group_sizes"] = list(self.group_sizes)
        out["side_margins"] = [list(r) for r in self.side_margins]
        return out

    def summary_rows(self) -> list[tuple[str, str]]:
        """(label, text) rows for the CLI and reports."""
        what = "|DD|" if self.constraints == "demographic_parity" else "|EOD| (TPR difference)"
        rows = [
            ("constraints", self.constraints),
            ("n (public)", str(self.n)),
            ("assumed min group share", f"{self.min_group_share:g}"),
            ("calibration share", f"{self.calibration_share:g} of the rows"),
            ("calibration denominators",
             f"{self.group_sizes[0]:.0f}, {self.group_sizes[1]:.0f} (expected)"),
            ("budget", f"({self.epsilon:g}, {self.delta:.3g})-DP; S2 split count "
                       f"{self.epsilon_count:.4g} / threshold {self.epsilon_threshold:.4g} / "
                       f"check {self.epsilon_check:.4g}"),
            ("margin t", f"{self.margin:.4f} (certified iff released {what} <= alpha - t)"),
            ("sampling margin", f"{self.sampling_margin:.4f} (t without privacy noise: no "
                                "alpha below it certifies at any epsilon)"),
            ("aim slack", f"{self.slack:.4f} (threshold aims at alpha - t - slack)"),
            ("min alpha", f"{self.min_alpha:.4f} (certified in >= {self.target_rate:g} of "
                          "fits, predicted)"),
        ]
        for a in (0.05, 0.1, 0.2):
            c = self.side_choice(a)
            rows.append((f"P(certified) at alpha={a:g}",
                         f"{c.probability**self.folds:.3f} (side share {c.side_share:g}: "
                         f"margins {c.margin:.4f} / {c.margin_other:.4f})"))
        return rows


def _share(name: str, value: Any) -> float:
    if isinstance(value, bool):
        raise InvalidParameterError(f"{name}={value!r}: expected a number in (0, 0.5].")
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InvalidParameterError(f"{name}={value!r}: expected a number in (0, 0.5].") from None
    if not 0.0 < v <= 0.5:
        raise InvalidParameterError(
            f"{name}={value!r}: the smaller group's share must lie in (0, 0.5] (a public "
            "assumption, e.g. from a census; never measured on the private data)."
        )
    return v


def plan_certification(
    n: int,
    epsilon: float,
    delta: float,
    min_group_share: float,
    fail_prob: float = 0.05,
    constraints: str = "demographic_parity",
    *,
    max_group_share: float | None = None,
    cross_fit: bool = False,
    cross_fit_budget: str = "split",
    s1_share: float = 0.75,
    threshold_count_share: float = 0.25,
    check_share: float = 0.35,
    target_rate: float = PLAN_RATE,
    aim_fail: float = AIM_FAIL,
    calibration_share: float | str = 0.5,
    alpha: float | None = None,
) -> CertificationPlan:
    """Predict what a certified CDP-Fair fit can certify, before any data are read.

    Public quantities only: spends no privacy. Use it to choose α (or n, ε) so that the
    fit's certificate is likely to pass.

    Parameters
    ----------
    n : int
        Rows of the training data (public under replace-one neighbours).
    epsilon, delta : float
        The fit's (ε, δ), as passed to :class:`~dpfair.fairclass.CDPFairClassifier`.
    min_group_share : float in (0, 0.5]
        A public lower bound on the smaller group's share: P(A = a) for demographic parity,
        P(A = a, Y = 1) for equal opportunity (its denominators are the positive-label rows).
    fail_prob : float, default 0.05
        β of the certified rule.
    constraints : {"demographic_parity", "equal_opportunity"}
    max_group_share : float, optional
        The other group's share (default: 1 − ``min_group_share`` for demographic parity;
        ``min_group_share`` for equal opportunity, which is conservative).
    cross_fit, cross_fit_budget, s1_share, threshold_count_share, check_share
        As for the estimator (its certified defaults: no cross-fitting).
    target_rate : float, default 0.9
        ``min_alpha`` is the smallest α certified with at least this predicted probability.
    aim_fail : float, default AIM_FAIL
        The aim's failure allowance (the estimator's default).
    calibration_share : float in [0.1, 0.9] or "auto", default 0.5
        The calibration half's share of the rows (the estimator's ``calibration_share``;
        without cross-fitting when ≠ ½). ``"auto"`` (needs ``alpha``): the smallest share
        of :data:`AUTO_SHARES` (0.5 … 0.75) whose predicted certification probability at
        ``alpha`` reaches ``target_rate``, else the smallest whose rate is within 0.02 of
        the best (0.75 where the rate still rises, ½ where nothing certifies at any share:
        more calibration rows would only cost score error) — the plan's ``calibration_share`` is
        the choice; pass it to the estimator. Capped at 0.75: the score is trained on the
        rest, and at N = 6000, ε = 1, α = 0.05 a share of 0.8 measured +0.005 to +0.012 more
        error than halves against the fair-Bayes oracle, 0.7 at most +0.007
        (``docs/fairclass_certified.md``). 0.75 was added with the side allocation: on the
        paper's design at N = 6000 (100 fits each, α = 0.05) 0.7 certified 85/100 at
        +0.0195 error over the oracle, 0.75 93/100 at +0.0208, 0.8 93/100 at +0.0231
        (``benchmarks/fairclass_plan_study.py``); only designs where 0.7 is predicted below
        ``target_rate`` move.
    alpha : float, optional
        The α to plan the share for (``calibration_share="auto"`` only).

    Returns
    -------
    CertificationPlan
        ``.margin``, ``.min_alpha``, ``.certification_probability(alpha)``, …

    Examples
    --------
    The paper's simulation (N = 9000, P(A = 1) = 0.3) at ε = 1:

    >>> from dpfair.fairclass import plan_certification
    >>> plan = plan_certification(9000, 1.0, 4500.0**-2, min_group_share=0.3)
    >>> round(plan.margin, 3), round(plan.min_alpha, 3), round(plan.sampling_margin, 3)
    (0.035, 0.049, 0.027)
    >>> round(plan.certification_probability(0.1), 2)
    0.97
    """
    if isinstance(n, bool) or not hasattr(n, "__index__"):
        raise InvalidParameterError(f"n={n!r}: expected the (public) number of rows, an int.")
    n_rows = int(n)
    if n_rows < 8:
        raise InvalidParameterError(f"n={n!r}: a certified fit needs at least 8 rows.")
    eps, dl = check_budget(epsilon, delta)
    if constraints not in CONSTRAINTS:
        raise InvalidParameterError(
            f"constraints={constraints!r}: expected 'demographic_parity' or 'equal_opportunity'."
        )
    beta = check_positive("fail_prob", fail_prob)
    if not beta < 0.5:
        raise InvalidParameterError(f"fail_prob={fail_prob!r}: must lie in (0, 0.5).")
    lo = _share("min_group_share", min_group_share)
    eo = constraints == "equal_opportunity"
    if max_group_share is None:
        hi = lo if eo else 1.0 - lo
    else:
        hi = float(max_group_share)
        if not lo <= hi < 1.0:
            raise InvalidParameterError(
                f"max_group_share={max_group_share!r}: must lie in [min_group_share, 1)."
            )
    rate = float(target_rate)
    if not 0.0 < rate < 1.0:
        raise InvalidParameterError(f"target_rate={target_rate!r}: must lie in (0, 1).")
    plan = plan_budget(
        eps, dl, cross_fit=bool(cross_fit), has_s2=True,
        cross_fit_budget=cross_fit_budget,  # type: ignore[arg-type]
        s1_share=s1_share, threshold_count_share=threshold_count_share,
        check_share=check_share, constraints=constraints,
    )
    if isinstance(calibration_share, str):
        if calibration_share != "auto":
            raise InvalidParameterError(
                f"calibration_share={calibration_share!r}: expected a number in [0.1, 0.9] "
                "or 'auto'."
            )
        if alpha is None:
            raise InvalidParameterError(
                "calibration_share='auto' needs alpha=: the share is chosen for that alpha."
            )
        a = float(alpha)
        if not 0.0 < a < 1.0:
            raise InvalidParameterError(f"alpha={alpha!r}: must lie in (0, 1).")
        kw = {"fail_prob": fail_prob, "constraints": constraints,
              "max_group_share": max_group_share, "cross_fit": cross_fit,
              "cross_fit_budget": cross_fit_budget, "s1_share": s1_share,
              "threshold_count_share": threshold_count_share, "check_share": check_share,
              "target_rate": target_rate, "aim_fail": aim_fail}
        shares = (0.5,) if cross_fit else AUTO_SHARES
        plans = [plan_certification(n, epsilon, delta, min_group_share, calibration_share=c,
                                    **kw)  # type: ignore[arg-type]
                 for c in shares]
        rates = [p.certification_probability(a) for p in plans]
        for p, r in zip(plans, rates, strict=True):
            if r >= p.target_rate:
                return p
        # None reaches the target: the smallest share within _AUTO_TOLERANCE of the best
        # rate (a larger share costs score error and buys nothing where nothing certifies).
        best = max(rates)
        return next(p for p, r in zip(plans, rates, strict=True) if r >= best - _AUTO_TOLERANCE)
    if isinstance(calibration_share, bool):
        raise InvalidParameterError(
            f"calibration_share={calibration_share!r}: expected a number in [0.1, 0.9]."
        )
    share = float(calibration_share)
    if not 0.1 <= share <= 0.9:
        raise InvalidParameterError(
            f"calibration_share={calibration_share!r}: expected a number in [0.1, 0.9]."
        )
    if share != 0.5 and cross_fit:
        raise InvalidParameterError(
            f"calibration_share={calibration_share!r} with cross_fit=True: the halves must "
            "be equal when they are swapped."
        )
    folds = 2 if cross_fit else 1
    n_cal = float(calibration_size(n_rows, share))
    m1, m0 = max(lo * n_cal, 2.0), max(hi * n_cal, 2.0)
    beta_fold = beta / folds
    t = certification_margin(
        m1, m0, epsilon_count=plan.epsilon_count, epsilon_check=plan.epsilon_check,
        fail_prob_side=beta_fold / 2.0, counts=2 if eo else 1,
        n_public=n_cal if eo else None,
    )
    kw = {"counts": 2 if eo else 1, "n_public": n_cal if eo else None}
    # The fit's candidate side shares: equal opportunity keeps the symmetric split
    # (``_opportunity.s2_opportunity``: S1 releases no label rates).
    side_shares: tuple[float, ...] = (0.5,) if eo else tuple(sorted(set(SIDE_SHARES)))
    t0 = certification_margin(
        m1, m0, epsilon_count=_NO_NOISE, epsilon_check=_NO_NOISE,
        fail_prob_side=beta_fold * (1.0 - min(side_shares)), **kw,  # type: ignore[arg-type]
    )
    table = tuple(
        (k, *side_margins(m1, m0, epsilon_count=plan.epsilon_count,
                          epsilon_check=plan.epsilon_check, fail_prob=beta_fold,
                          side_share=k, **kw))  # type: ignore[arg-type]
        for k in side_shares
    )
    b_v, b_w = aim_scales(m1, m0, epsilon_threshold=plan.epsilon_threshold,
                          epsilon_check=plan.epsilon_check, n_bound=n_cal if eo else None)
    g = aim_slack(b_v, b_w, aim_fail=aim_fail, floor=TIE_SLACK)

    def prob(alpha: float) -> float:
        return float(choose_from_margins(alpha, table, b_v, b_w, g,
                                         flat=not eo).probability ** folds)

    top = 0.999
    if prob(top) < rate:
        min_alpha = math.inf
    else:
        # The predicted probability is not monotone in α: where the side share κ switches
        # it may drop by up to SIDE_TOLERANCE. So the first grid point reaching the rate is
        # found by a scan, and the root is refined only inside the cell before it (a root
        # finder on the whole range could return a later crossing).
        lo_a = min(r[1] for r in table)
        grid = [lo_a + (top - lo_a) * i / 2000 for i in range(2001)]
        # A window where the rate is reached can be narrower than the grid's cell (it
        # closes where κ switches): each side share's own crossing (its row alone, by
        # bisection) is added to the scan, so a window opened by one row is not missed.
        for row in table:
            def row_prob(a: float, row: tuple[float, float, float] = row) -> float:
                return float(choose_from_margins(a, (row,), b_v, b_w, g,
                                                 flat=not eo).probability ** folds)
            if row_prob(top) >= rate and row_prob(lo_a) < rate:
                lo_r, hi_r = lo_a, top
                while hi_r - lo_r > 1e-7:
                    mid = 0.5 * (lo_r + hi_r)
                    lo_r, hi_r = (lo_r, mid) if row_prob(mid) >= rate else (mid, hi_r)
                grid.append(hi_r)
        grid.sort()
        first = next(i for i, a in enumerate(grid) if prob(a) >= rate)
        if first == 0:
            min_alpha = float(grid[0])
        else:
            # Bisection on "prob(a) ≥ rate" (not a root of prob − rate): with the
            # flat-region aim the probability *equals* the rate on a whole range of α
            # above the crossing, where a root finder on prob − rate lands anywhere.
            lo_b, hi_b = float(grid[first - 1]), float(grid[first])
            while hi_b - lo_b > 1e-7:
                mid = 0.5 * (lo_b + hi_b)
                if prob(mid) >= rate:
                    hi_b = mid
                else:
                    lo_b = mid
            min_alpha = hi_b
    return CertificationPlan(
        n=n_rows, epsilon=eps, delta=dl, constraints=str(constraints), min_group_share=lo,
        group_sizes=(m1, m0), folds=folds, fail_prob=beta, epsilon_count=plan.epsilon_count,
        epsilon_threshold=plan.epsilon_threshold, epsilon_check=plan.epsilon_check,
        margin=t, slack=g, threshold_spread=b_v, check_noise=b_w, target_rate=rate,
        min_alpha=min_alpha, sampling_margin=t0, calibration_share=share,
        side_margins=table,
    )
