"""S2 under equal opportunity: the private true-positive-rate difference curve and its τ̂.

Equal opportunity (Hardt et al. 2016; Fairlearn's ``"equal_opportunity"``) caps

    EOD(f) = P(Ŷ = 1 | A = 1, Y = 1) − P(Ŷ = 1 | A = 0, Y = 1).

The fair-Bayes rule is again a group-wise threshold on η with one scalar (Zeng, Cheng &
Dobriban 2024): predict 1 iff Z ≥ τ (group 1), Z ≤ τ (group 0) with the score
Z = (2a − 1)·p_{a,1}·(2 − 1/η_a(x)), p_{a,1} = P(A = a, Y = 1)
(:func:`~dpfair.fairclass._rule.opportunity_scores`). On the calibration half,

    EOD̂(τ) = #{A = 1, Y = 1, Z ≥ τ}/m₁ − #{A = 0, Y = 1, Z ≤ τ}/m₀,

the demographic-parity step function of the *positive-label* rows, with denominators the
positive counts of each group. So S2 is the demographic-parity S2 of those rows, with two
changes (derivation: ``docs/proofs/equal_opportunity.md``):

* the denominators are two private counts, m̃_a = n_{a,1}(C) + Laplace(2/ε_c) each (the
  pair (n_{0,1}, n_{1,1}) has L1 sensitivity 2 under replace-one: ε_c-DP together; exact
  discrete Laplace at ε_c/2 each, :func:`~dpfair.fairclass._laplace_count.noisy_count`),
  which also give the score's p̃_{a,1} = m̃_a/n_C (n_C public);
* given (η̃, m̃) every record's score is fixed, so replacing one record moves each count of
  the curve by ≤ 1 at every τ: |ΔEOD̂(τ)| ≤ Δ = 1/m̃₁ + 1/m̃₀, and the exponential
  mechanism (ε_e) and the certificate's check (ε_k) are as for demographic parity.

S2 is (ε_c + ε_e + ε_k)-DP, the same total as under demographic parity.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from dpfair._errors import InvalidDataError
from dpfair.fairclass._budget import BudgetPlan
from dpfair.fairclass._certify import (
    FairnessCertificate,
    certified_target,
    check_threshold,
    choose_side_share,
    side_margins,
)
from dpfair.fairclass._laplace_count import noisy_count
from dpfair.fairclass._rule import opportunity_scores
from dpfair.fairclass._threshold import (
    AIM_WINDOW,
    SCORE_LATTICE_BINS,
    DDSteps,
    dd_steps,
    exact_fair_threshold,
    snap_scores,
    threshold_law_from_steps,
)

__all__ = ["ASSUMED_POSITIVE_RATE", "OpportunityCalibration", "OpportunityInput",
           "s2_opportunity"]

#: The P(Y = 1 | A = a) assumed for the side choice's expected denominators
#: π̃_a·n_C·rate (S1 releases no label rates; the choice only moves power, never the
#: guarantee, ``_certify.choose_side_share``).
ASSUMED_POSITIVE_RATE = 0.5

#: r < 1 always (one lattice step below 1), so clipping the score to [−1, 1] never
#: changes a decision at a τ the mechanism can draw.
_MAX_RADIUS = 1.0 - 2.0 / SCORE_LATTICE_BINS


@dataclass(frozen=True, eq=False)
class OpportunityCalibration:
    """The positive-label rows of one calibration half, as S2 under equal opportunity
    reads them: their η̃ (the score is formed once p̃ is released) and groups.

    Attributes
    ----------
    eta : ndarray
        η̃_a(x) of the calibration rows with Y = 1, under the released S1 fold.
    groups : ndarray of int8
        Their groups.
    n_cal : int
        The number of calibration rows (all labels; public).
    """

    eta: NDArray[np.float64]
    groups: NDArray[np.int8]
    n_cal: int

    def positive_counts(self) -> tuple[int, int]:
        """(n_{1,1}, n_{0,1}): positive-label rows of groups 1 and 0 (private)."""
        n1 = int(np.sum(self.groups == 1))
        return n1, int(self.groups.size) - n1

    def _z(self, m1: float, m0: float) -> NDArray[np.float64]:
        positive = np.array([m0 / self.n_cal, m1 / self.n_cal])
        return opportunity_scores(self.eta, self.groups, positive)

    def steps(self, m1: float, m0: float) -> DDSteps:
        """EOD̂ of the lattice-rounded scores, denominators m̃₁, m̃₀ (p̃_{a,1} = m̃_a/n_C)."""
        z = snap_scores(self._z(m1, m0))
        return dd_steps(z[self.groups == 1], z[self.groups == 0], m1, m0)

    def exact_steps(self) -> DDSteps:
        """EOD̂ with the true positive counts (non-private use only)."""
        n1, n0 = self.positive_counts()
        z = self._z(float(n1), float(n0))
        return dd_steps(z[self.groups == 1], z[self.groups == 0])


class OpportunityInput(Protocol):
    """The calibration half as S2 under equal opportunity reads it: the rows in memory
    (:class:`OpportunityCalibration`) or a file/cluster source streaming the lattice-rounded
    scores of its positive-label rows once p̃ is released
    (:class:`dpfair.fairclass.outofcore.PositiveScoreHistogram`)."""

    @property
    def n_cal(self) -> int:
        """Rows of the calibration half, all labels (public)."""
        ...

    def positive_counts(self) -> tuple[int, int]:
        """(n_{1,1}, n_{0,1}) (private)."""
        ...

    def steps(self, m1: float, m0: float) -> DDSteps:
        """EOD̂ of the lattice-rounded scores with p̃_{a,1} = m̃_a/n_C, denominators m̃_a."""
        ...

    def exact_steps(self) -> DDSteps:
        """EOD̂ with the true positive counts (non-private use only)."""
        ...


def s2_opportunity(
    cal: OpportunityInput,
    entry: tuple[float, float],
    plan: BudgetPlan | None,
    rng: np.random.Generator,
    fail_prob: float | None = None,
    pi: NDArray[np.float64] | None = None,
) -> tuple[float, FairnessCertificate | None, NDArray[np.float64]]:
    """S2 under equal opportunity: (τ̂, certificate or None, released (p̃_{0,1}, p̃_{1,1})).

    Non-private (``plan`` None): the exact argmin{|τ| : |EOD̂(τ)| ≤ α − margin} with the
    true positive counts. Private: the two counts (exact discrete Laplace, ε_c/2 each),
    then τ̂ by the exponential mechanism on the lattice-rounded EOD̂ (ε_e), and with
    ``fail_prob`` and ε_k > 0 the certified rule (windowed aim, check, margin for two
    counts: :func:`~dpfair.fairclass._certify.certification_margin` with ``counts=2``).
    With ``pi`` the fold's β is split between the two sides by the sign of τ̂ as under
    demographic parity, with κ from ``pi`` (S1's π̃, released on the training half) times
    :data:`ASSUMED_POSITIVE_RATE` and n_C — never from this calibration half (valid for any
    such κ: ``tests/fairclass/test_certified_sides.py``). Without ``pi`` (what the pipeline
    does) the symmetric rule κ = ½: S1 releases no label rates, and with the assumed rate
    ½ the choice was wrong where a group's positive rate is far from ½ (unseen design, EO,
    ε = 1, α = 0.1, calibration share 0.7: certified 19/30 symmetric, 15/30 with κ from
    π̃·½, where the true group-0 positive count is 0.1·n_C, not 0.25·n_C).
    Draws from ``rng``: the two counts, the threshold, the check — in that order.
    """
    alpha, margin = entry
    n_cal = int(cal.n_cal)
    n1, n0 = cal.positive_counts()
    if plan is None:
        if min(n1, n0) < 1:
            raise InvalidDataError(
                "constraints='equal_opportunity': a group has no positive label (y = 1) in a "
                "calibration half, so its true-positive rate is undefined; collect more data."
            )
        tau = exact_fair_threshold(cal.exact_steps(), alpha - margin).tau
        return tau, None, np.array([n0 / n_cal, n1 / n_cal])
    eps_each = plan.epsilon_count / 2.0
    m1 = noisy_count(n1, n_cal, eps_each, rng)
    m0 = noisy_count(n0, n_cal, eps_each, rng)
    m1 = min(max(m1, 1.0), n_cal - 1.0)
    m0 = min(max(m0, 1.0), n_cal - 1.0)
    positive = np.array([m0 / n_cal, m1 / n_cal])
    steps = cal.steps(m1, m0)
    r = float(min(max(m1, m0) / n_cal, _MAX_RADIUS))
    if fail_prob is None or plan.epsilon_check <= 0:
        law = threshold_law_from_steps(
            steps, m1, m0, alpha - margin, plan.epsilon_threshold, r, n_cal=n_cal
        )
        return law.sample(rng), None, positive
    kappa = 0.5
    if pi is not None:
        rate = ASSUMED_POSITIVE_RATE
        exp_sizes = (max(rate * float(pi[1]) * n_cal, 2.0), max(rate * float(pi[0]) * n_cal, 2.0))
        kappa = choose_side_share(
            alpha, *exp_sizes, epsilon_count=plan.epsilon_count,
            epsilon_threshold=plan.epsilon_threshold, epsilon_check=plan.epsilon_check,
            fail_prob=fail_prob, counts=2, n_public=n_cal, extra_margin=margin, flat=False,
        ).side_share
    t, t_other = side_margins(
        m1, m0, epsilon_count=plan.epsilon_count, epsilon_check=plan.epsilon_check,
        fail_prob=fail_prob, side_share=kappa, counts=2, n_public=n_cal,
    )
    aim = certified_target(
        alpha, t, m1, m0, epsilon_threshold=plan.epsilon_threshold,
        epsilon_check=plan.epsilon_check, extra_margin=margin, n_bound=n_cal,
    )
    law = threshold_law_from_steps(
        steps, m1, m0, aim, plan.epsilon_threshold, r, n_cal=n_cal, window=AIM_WINDOW
    )
    tau = law.sample(rng)
    cert = check_threshold(
        steps, tau, m1, m0, alpha, margin=t, target=aim, epsilon_check=plan.epsilon_check,
        fail_prob=fail_prob, rng=rng, n_bound=n_cal, margin_other=t_other, side_share=kappa,
    )
    return tau, cert, positive
