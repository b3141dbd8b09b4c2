"""Privacy budgets in three units, with the conversions between them.

Neighbouring data sets differ by replacing one record (n is public); see ALGORITHMS.md §0.

Conversions implemented (each cited where it is used):

* pure ε-DP ⇒ ε²/2-zCDP (Bun & Steinke 2016, Prop. 1.4);
* the exponential mechanism with parameter ε ⇒ ε²/8-zCDP (bounded-range property,
  Cesar & Rogers 2021, Lemma 3.2 / Cor. 3.4): :func:`exponential_mechanism_zcdp`;
* ρ-zCDP ⇒ (ε, δ)-DP with ε = ρ + 2·sqrt(ρ·ln(1/δ)) (Bun & Steinke 2016, Prop. 1.3), or the
  tighter Canonne–Kamath–Steinke (2020, Prop. 12) bound
  δ = exp((a−1)(aρ−ε)) / (a−1) · (1 − 1/a)^a, minimised over the Rényi order a > 1.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np
from scipy import optimize

from dpfair._errors import InvalidParameterError
from dpfair._validation import check_in_open_interval

__all__ = ["Budget", "BudgetKind", "exponential_mechanism_zcdp", "zcdp_to_approx_epsilon"]

BudgetKind = Literal["pure", "approx", "zcdp"]


def _check_nonneg(name: str, value: float, *, allow_inf: bool = False) -> float:
    if isinstance(value, bool):
        raise InvalidParameterError(f"{name}={value!r}: expected a real number.")
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise InvalidParameterError(f"{name}={value!r}: expected a real number.") from None
    if math.isnan(out) or out < 0 or (math.isinf(out) and not allow_inf):
        raise InvalidParameterError(f"{name}={value!r}: must be a finite number >= 0.")
    return out


@dataclass(frozen=True, slots=True)
class Budget:
    """A privacy guarantee: pure ε-DP, approximate (ε, δ)-DP or ρ-zCDP.

    Build one with :meth:`pure`, :meth:`approx` or :meth:`zcdp`. For a zCDP budget
    ``epsilon`` is ``None`` (a ρ-zCDP guarantee implies a whole curve of (ε, δ) pairs:
    ask for one with :meth:`to_approx`).

    Attributes
    ----------
    kind : {"pure", "approx", "zcdp"}
    epsilon : float or None
    delta : float
        0 for pure DP and zCDP.
    rho : float or None
        Set for zCDP budgets; for pure budgets the generic conversion ε²/2 is available
        from :meth:`to_zcdp`.
    note : str
        Which conversion produced this budget, if any (for reports and audits).
    """

    kind: BudgetKind
    epsilon: float | None = None
    delta: float = 0.0
    rho: float | None = None
    note: str = ""

    # ------------------------------------------------------------------ constructors
    @classmethod
    def pure(cls, epsilon: float, *, note: str = "") -> Budget:
        """ε-DP."""
        return cls("pure", epsilon=_check_nonneg("epsilon", epsilon), note=note)

    @classmethod
    def approx(cls, epsilon: float, delta: float, *, note: str = "") -> Budget:
        """(ε, δ)-DP with 0 ≤ δ < 1."""
        eps = _check_nonneg("epsilon", epsilon)
        d = _check_nonneg("delta", delta)
        if d >= 1:
            raise InvalidParameterError(f"delta={delta!r}: must be < 1 (typically 1/n^2).")
        return cls("approx", epsilon=eps, delta=d, note=note)

    @classmethod
    def zcdp(cls, rho: float, *, note: str = "") -> Budget:
        """ρ-zCDP (Bun & Steinke 2016)."""
        return cls("zcdp", rho=_check_nonneg("rho", rho), note=note)

    # ------------------------------------------------------------------ conversions
    def to_zcdp(self) -> Budget:
        """Express this budget in zCDP.

        Pure ε-DP becomes ε²/2-zCDP (Bun & Steinke 2016, Prop. 1.4). Approximate DP has
        no zCDP equivalent and raises.
        """
        if self.kind == "zcdp":
            return self
        if self.kind == "pure":
            assert self.epsilon is not None
            return Budget.zcdp(self.epsilon**2 / 2, note="pure eps -> eps^2/2 zCDP")
        raise InvalidParameterError(
            "An (epsilon, delta)-DP budget cannot be expressed as rho-zCDP; account it in an "
            "approximate-DP accountant instead."
        )

    def to_approx(self, delta: float, *, method: Literal["cks", "classic"] = "cks") -> Budget:
        """Express this budget as (ε, δ)-DP at the given δ.

        For zCDP budgets ``method="cks"`` uses the Canonne–Kamath–Steinke bound, which is
        never worse than ``method="classic"`` (ε = ρ + 2·sqrt(ρ·ln(1/δ))).
        """
        d = check_in_open_interval("delta", delta, 0.0, 1.0)
        if self.kind == "pure":
            assert self.epsilon is not None
            return Budget.approx(self.epsilon, 0.0 if delta is None else d, note=self.note)
        if self.kind == "approx":
            assert self.epsilon is not None
            if d < self.delta:
                raise InvalidParameterError(
                    f"delta={delta!r}: smaller than this budget's own delta={self.delta!r}."
                )
            return Budget.approx(self.epsilon, d, note=self.note)
        assert self.rho is not None
        eps = zcdp_to_approx_epsilon(self.rho, d, method=method)
        return Budget.approx(eps, d, note=f"rho={self.rho:.6g}-zCDP -> ({method})")

    # ------------------------------------------------------------------ composition
    def __add__(self, other: object) -> Budget:
        """Sequential composition (basic: ε and δ add, ρ adds).

        A pure budget composes with a zCDP one after the ε²/2 conversion; mixing
        approximate DP with zCDP raises (convert the zCDP part with :meth:`to_approx`).
        """
        if not isinstance(other, Budget):
            return NotImplemented
        if self.kind == other.kind == "pure":
            assert self.epsilon is not None and other.epsilon is not None
            return Budget.pure(self.epsilon + other.epsilon)
        if "zcdp" in (self.kind, other.kind):
            a, b = self.to_zcdp(), other.to_zcdp()
            assert a.rho is not None and b.rho is not None
            return Budget.zcdp(a.rho + b.rho)
        assert self.epsilon is not None and other.epsilon is not None
        return Budget.approx(self.epsilon + other.epsilon, min(self.delta + other.delta, 1.0))

    def __radd__(self, other: object) -> Budget:
        if other == 0:  # lets sum() work
            return self
        return NotImplemented

    def scaled(self, factor: float) -> Budget:
        """This budget composed ``factor`` times (``factor`` may be fractional for splits)."""
        f = _check_nonneg("factor", factor)
        if self.kind == "zcdp":
            assert self.rho is not None
            return Budget.zcdp(self.rho * f, note=self.note)
        assert self.epsilon is not None
        if self.kind == "pure":
            return Budget.pure(self.epsilon * f, note=self.note)
        return Budget.approx(self.epsilon * f, min(self.delta * f, 1.0 - 1e-300), note=self.note)

    def covers(self, other: Budget, *, rtol: float = 1e-9) -> bool:
        """True if spending ``other`` stays within this budget (up to float rounding)."""
        if self.kind == "zcdp":
            rho = other.to_zcdp().rho
            assert rho is not None and self.rho is not None
            return rho <= self.rho * (1 + rtol)
        if other.kind == "zcdp":
            return False
        assert self.epsilon is not None and other.epsilon is not None
        if self.kind == "pure" and other.kind != "pure":
            return False
        return (
            other.epsilon <= self.epsilon * (1 + rtol)
            and other.delta <= self.delta * (1 + rtol)
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)

    def __str__(self) -> str:
        if self.kind == "zcdp":
            return f"{self.rho:.6g}-zCDP"
        if self.kind == "pure":
            return f"{self.epsilon:.6g}-DP"
        return f"({self.epsilon:.6g}, {self.delta:.3g})-DP"


def exponential_mechanism_zcdp(epsilon: float) -> Budget:
    """zCDP guarantee of the exponential mechanism with parameter ε.

    The exponential mechanism run with privacy parameter ε (density ∝ exp(ε·u/(2Δu))) is
    ε-bounded-range, hence ε²/8-zCDP (Cesar & Rogers 2021, Lemma 3.2 and Cor. 3.4). This is
    4x smaller than the generic ε-DP ⇒ ε²/2-zCDP conversion.
    """
    eps = _check_nonneg("epsilon", epsilon)
    return Budget.zcdp(eps**2 / 8, note="exponential mechanism, bounded range: eps^2/8")


def zcdp_to_approx_epsilon(
    rho: float, delta: float, *, method: Literal["cks", "classic"] = "cks"
) -> float:
    """Smallest ε (under the chosen bound) such that ρ-zCDP implies (ε, δ)-DP.

    ``classic``: ε = ρ + 2·sqrt(ρ·ln(1/δ)) (Bun & Steinke 2016, Prop. 1.3).
    ``cks``: ε = min over a > 1 of aρ + [ln(1/δ) + (a−1)·ln(1 − 1/a) − ln a]/(a − 1)
    (Canonne, Kamath & Steinke 2020, Prop. 12), which is never larger than ``classic``.
    """
    r = _check_nonneg("rho", rho)
    d = check_in_open_interval("delta", delta, 0.0, 1.0)
    classic = r + 2.0 * math.sqrt(r * math.log(1.0 / d))
    if method == "classic" or r == 0.0:
        return classic
    if method != "cks":
        raise InvalidParameterError(f"method={method!r}: expected 'cks' or 'classic'.")

    def eps_of(log_am1: float) -> float:
        a = 1.0 + math.exp(log_am1)
        am1 = a - 1.0
        return a * r + (math.log(1.0 / d) + am1 * math.log1p(-1.0 / a) - math.log(a)) / am1

    res = optimize.minimize_scalar(eps_of, bounds=(-20.0, 20.0), method="bounded",
                                   options={"xatol": 1e-10})
    best = float(min(eps_of(float(res.x)), classic))
    return max(best, 0.0) if np.isfinite(best) else classic
