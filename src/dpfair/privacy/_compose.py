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
(E, Δ)                 μ-GDP                    refused unless a conversion δ' is given; then
                                                (ε(μ, δ'), δ') exactly (Dong, Roth & Su 2022,
                                                Cor. 2.13)
ρ-zCDP                 μ-GDP                    μ²/2 (a μ-GDP release is μ²/2-zCDP)
μ*-GDP                 μ-GDP                    μ² adds (Dong, Roth & Su 2022, Cor. 3.3)
μ*-GDP                 anything else            refused
pure E                 pure ε                   ε adds
pure E                 anything else            refused
=====================  =======================  ===============================================

Composition, coded here once for every ledger:

* **sequential** (:func:`compose`): releases on the same rows add in the cap's measure
  (ε and δ add; ρ adds; μ² adds) — valid as a filter under full adaptivity (Rogers et al.
  2016 for pre-set per-release (ε, δ); Whitehouse et al. 2023 for zCDP; μ² for GDP
  filters, Smith & Thakurta 2022);
* **parallel** (:func:`compose_parallel`): releases on *disjoint* row sets (chosen
  independently of the data, so a replaced record lies in exactly one) compose to the
  largest of their totals (componentwise for (ε, δ): the record in set p is protected by
  (ε_p, δ_p) ≤ (max ε, max δ)). A release on every row counts in every set.

Neighbouring data sets differ by replacing one record; n is public.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from dpfair._errors import IncompatibleBudgetError
from dpfair.privacy._budget import Budget

__all__ = [
    "RTOL",
    "compose",
    "compose_parallel",
    "cost_in_measure",
    "fits",
    "remaining_of",
    "zero_of",
]

#: Float slack when comparing a composed total with the cap.
RTOL = 1e-9


def zero_of(cap: Budget) -> Budget:
    """The zero budget in ``cap``'s measure."""
    if cap.kind == "zcdp":
        return Budget.zcdp(0.0)
    if cap.kind == "pure":
        return Budget.pure(0.0)
    if cap.kind == "gdp":
        return Budget.gdp(0.0)
    return Budget.approx(0.0, 0.0)


def add_in_measure(kind: str, total: Budget, charged: Budget) -> Budget:
    """Sequential composition of two budgets already in the measure ``kind``."""
    if kind == "zcdp":
        assert total.rho is not None and charged.rho is not None
        return Budget.zcdp(total.rho + charged.rho)
    if kind == "gdp":
        assert total.mu is not None and charged.mu is not None
        return Budget.gdp(math.sqrt(total.mu**2 + charged.mu**2))
    assert total.epsilon is not None and charged.epsilon is not None
    if kind == "pure":
        return Budget.pure(total.epsilon + charged.epsilon)
    delta = min(total.delta + charged.delta, 0.999999)
    return Budget.approx(total.epsilon + charged.epsilon, delta)


def compose(cap: Budget, charges: Iterable[Budget]) -> Budget:
    """Sequential composition of ``charges`` (each already in ``cap``'s measure)."""
    total = zero_of(cap)
    for charged in charges:
        total = add_in_measure(cap.kind, total, charged)
    return total


def _max_in_measure(kind: str, a: Budget, b: Budget) -> Budget:
    if kind == "zcdp":
        return Budget.zcdp(max(a.rho or 0.0, b.rho or 0.0))
    if kind == "gdp":
        return Budget.gdp(max(a.mu or 0.0, b.mu or 0.0))
    if kind == "pure":
        return Budget.pure(max(a.epsilon or 0.0, b.epsilon or 0.0))
    return Budget.approx(max(a.epsilon or 0.0, b.epsilon or 0.0), max(a.delta, b.delta))


def compose_parallel(cap: Budget, by_rows: Mapping[str, Budget]) -> Budget:
    """Parallel composition over disjoint row sets: the largest total (module docstring)."""
    out = zero_of(cap)
    for spent in by_rows.values():
        out = _max_in_measure(cap.kind, out, spent)
    return out


def fits(cap: Budget, total: Budget, *, rtol: float = RTOL) -> bool:
    """Does ``total`` (in ``cap``'s measure) stay within ``cap`` up to float rounding?"""
    if cap.kind == "zcdp":
        assert cap.rho is not None and total.rho is not None
        return total.rho <= cap.rho * (1 + rtol)
    if cap.kind == "gdp":
        assert cap.mu is not None and total.mu is not None
        return total.mu <= cap.mu * (1 + rtol)
    assert cap.epsilon is not None and total.epsilon is not None
    return total.epsilon <= cap.epsilon * (1 + rtol) and total.delta <= cap.delta * (1 + rtol)


def remaining_of(cap: Budget, spent: Budget) -> Budget:
    """What ``cap`` still allows after ``spent`` (in its measure, floored at zero)."""
    if cap.kind == "zcdp":
        assert cap.rho is not None and spent.rho is not None
        return Budget.zcdp(max(cap.rho - spent.rho, 0.0))
    if cap.kind == "gdp":
        assert cap.mu is not None and spent.mu is not None
        return Budget.gdp(math.sqrt(max(cap.mu**2 - spent.mu**2, 0.0)))
    assert cap.epsilon is not None and spent.epsilon is not None
    eps = max(cap.epsilon - spent.epsilon, 0.0)
    if cap.kind == "pure":
        return Budget.pure(eps)
    return Budget.approx(eps, max(cap.delta - spent.delta, 0.0))


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
    if cap.kind == "gdp":
        if cost.kind == "gdp":
            return cost
        raise IncompatibleBudgetError(
            f"a release spending {cost} cannot be charged to a mu-GDP budget: only "
            "Gaussian-DP releases compose exactly there. Use a rho-zCDP or (epsilon, delta) "
            "budget instead."
        )
    if cap.kind == "zcdp":
        if cost.kind == "zcdp":
            return cost
        if cost.kind == "gdp":
            assert cost.mu is not None
            return Budget.zcdp(cost.mu**2 / 2, note=f"{cost.mu:.6g}-GDP -> mu^2/2 zCDP")
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
            f"a release spending {cost} ({'GDP' if cost.kind == 'gdp' else 'zCDP'}) needs an "
            "explicit conversion to be charged to "
            f"the (epsilon, delta) budget {cap}: pass convert_delta=δ' (CLI: "
            "--convert-delta), which charges (rho + 2 sqrt(rho ln(1/δ')) or tighter, δ')."
        )
    converted = cost.to_approx(convert_delta)
    assert converted.epsilon is not None
    if cost.kind == "gdp":
        note = f"{cost.mu:.6g}-GDP converted at delta'={convert_delta:g} (exact)"
    else:
        note = f"rho={cost.rho:.6g}-zCDP converted at delta'={convert_delta:g} (CKS)"
    return Budget.approx(converted.epsilon, converted.delta, note=note)
