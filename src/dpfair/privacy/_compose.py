"""Express a release's cost in a cap's measure: the composition rules of every ledger.

A ledger (in memory for :class:`dpfair.Session`, on disk for ``dpfair ledger``) has one
*measure*, that of its cap. Each release states its guarantee in its *own* measure; this
module is the single place that converts it into the cap's, and refuses what cannot be
converted without an explicit choice. The rules, with their sources:

=====================  =======================  ===============================================
cap measure            release measure          charged as
=====================  =======================  ===============================================
ρ-zCDP                 ρ'-zCDP                  ρ' (zCDP composes additively, also as a filter
                                                under full adaptivity: Whitehouse et al. 2023)
ρ-zCDP                 pure ε                   ε²/2 (Bun & Steinke 2016, Prop. 1.4)
ρ-zCDP                 pure ε, bounded range    ε²/8 (Cesar & Rogers 2021, Cor. 3.4) — only
                       (exponential mechanism)  when the release says that is what ran
ρ-zCDP                 (ε, δ)                   refused: no zCDP equivalent
(E, Δ)                 (ε, δ) or pure ε         ε and δ add (basic composition; valid as a
                                                filter, Rogers et al. 2016, Thm 5.1)
(E, Δ)                 ρ-zCDP                   refused unless a conversion δ' is given; then
                                                (ρ + 2√(ρ ln 1/δ') or the CKS bound, δ')
                                                (Bun & Steinke 2016 Prop. 1.3; Canonne,
                                                Kamath & Steinke 2020 Prop. 12)
pure E                 pure ε                   ε adds
pure E                 anything else            refused
=====================  =======================  ===============================================

Neighbouring data sets differ by replacing one record; n is public.
"""

from __future__ import annotations

from dpfair._errors import IncompatibleBudgetError
from dpfair.privacy._budget import Budget

__all__ = ["cost_in_measure", "zero_of"]


def zero_of(cap: Budget) -> Budget:
    """The zero budget in ``cap``'s measure."""
    if cap.kind == "zcdp":
        return Budget.zcdp(0.0)
    if cap.kind == "pure":
        return Budget.pure(0.0)
    return Budget.approx(0.0, 0.0)


def cost_in_measure(
    cost: Budget,
    cap: Budget,
    *,
    bounded_range: bool = False,
    convert_delta: float | None = None,
) -> Budget:
    """Convert a release's guarantee ``cost`` into the measure of ``cap``.

    Parameters
    ----------
    cost : Budget
        The release's guarantee in its own measure.
    cap : Budget
        The ledger's cap; only its measure (``kind``) matters here.
    bounded_range : bool
        The release is an exponential mechanism with parameter ε (ε-bounded range), so a
        pure ``cost`` is charged ε²/8 rather than ε²/2 in zCDP.
    convert_delta : float, optional
        δ' at which a ρ-zCDP release is converted to (ε, δ') for an (ε, δ) cap. Without it
        such a release is refused.

    Returns
    -------
    Budget
        The cost in the cap's measure, with a ``note`` naming the conversion used.

    Raises
    ------
    IncompatibleBudgetError
        When no valid conversion exists or one needs an explicit choice.
    """
    if not isinstance(cost, Budget):
        raise IncompatibleBudgetError(f"cost={cost!r}: expected a dpfair Budget.")
    if cap.kind == "zcdp":
        if cost.kind == "zcdp":
            return cost
        if cost.kind == "pure":
            assert cost.epsilon is not None
            if bounded_range:
                return Budget.zcdp(
                    cost.epsilon**2 / 8, note="bounded-range exponential mechanism: eps^2/8"
                )
            return Budget.zcdp(cost.epsilon**2 / 2, note="pure eps -> eps^2/2 zCDP")
        raise IncompatibleBudgetError(
            f"a release spending {cost} cannot be charged to a rho-zCDP budget: "
            "(epsilon, delta)-DP has no zCDP equivalent. Open the session or ledger with an "
            "(epsilon, delta) budget (Budget.approx / --epsilon E --delta D) instead."
        )
    if cap.kind == "pure":
        if cost.kind == "pure":
            return cost
        raise IncompatibleBudgetError(
            f"a release spending {cost} cannot be charged to a pure epsilon-DP budget; "
            "open the session or ledger with an (epsilon, delta) or rho-zCDP budget."
        )
    # approximate-DP cap
    if cost.kind in ("pure", "approx"):
        assert cost.epsilon is not None
        return Budget.approx(cost.epsilon, cost.delta, note=cost.note)
    if convert_delta is None:
        raise IncompatibleBudgetError(
            f"a release spending {cost} (zCDP) needs an explicit conversion to be charged to "
            f"the (epsilon, delta) budget {cap}: pass convert_delta=δ' (CLI: "
            "--convert-delta), which charges (rho + 2 sqrt(rho ln(1/δ')) or tighter, δ')."
        )
    converted = cost.to_approx(convert_delta)
    assert converted.epsilon is not None
    return Budget.approx(
        converted.epsilon,
        converted.delta,
        note=f"rho={cost.rho:.6g}-zCDP converted at delta'={convert_delta:g} (CKS)",
    )
