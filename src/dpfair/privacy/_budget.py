"""Privacy budgets in four measures, with the conversions between them.

Neighbouring data sets differ by replacing one record (n is public); see ALGORITHMS.md §0.

Measures: pure ε-DP, approximate (ε, δ)-DP, ρ-zCDP (Bun & Steinke 2016) and μ-Gaussian
DP (Dong, Roth & Su 2022). Conversions implemented (each cited where it is used):

* pure ε-DP ⇒ ε²/2-zCDP (Bun & Steinke 2016, Prop. 1.4);
* μ-GDP ⇒ μ²/2-zCDP (a μ-GDP mechanism is a post-processing of the pair
  N(0, 1), N(μ, 1) (Dong, Roth & Su 2022, Thm 2.10), whose Rényi divergence of order a is
  aμ²/2);
* μ-GDP ⇒ (ε, δ(ε))-DP for every ε ≥ 0 with δ(ε) = Φ(−ε/μ + μ/2) − e^ε·Φ(−ε/μ − μ/2)
  (Dong, Roth & Su 2022, Cor. 2.13; the analytic Gaussian of Balle & Wang 2018, Thm 8):
  :func:`gdp_delta` and :func:`gdp_epsilon`;
* μ₁-GDP and μ₂-GDP compose to sqrt(μ₁² + μ₂²)-GDP (Dong, Roth & Su 2022, Cor. 3.3);
* the exponential mechanism with parameter ε ⇒ ε²/8-zCDP (bounded-range property,
  Cesar & Rogers 2021, Lemma 3.2 / Cor. 3.4): :func:`exponential_mechanism_zcdp`;
* ρ-zCDP ⇒ (ε, δ)-DP with ε = ρ + 2·sqrt(ρ·ln(1/δ)) (Bun & Steinke 2016, Prop. 1.3), or the
  tighter Canonne–Kamath–Steinke (2020, Prop. 12) bound
  δ = exp((a−1)(aρ−ε)) / (a−1) · (1 − 1/a)^a, minimised over the Rényi order a > 1.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, Literal

from dpfair._errors import InvalidParameterError

# SciPy is imported inside the functions that need it (the GDP curve's ``log_ndtr``):
# `import dpfair.privacy`, every command line that only charges a ledger, and the zCDP ⇒
# (ε, δ) conversion must not pay for scipy.optimize / scipy.special.

__all__ = [
    "Budget",
    "BudgetKind",
    "exponential_mechanism_zcdp",
    "gdp_delta",
    "gdp_epsilon",
    "zcdp_to_approx_epsilon",
]

BudgetKind = Literal["pure", "approx", "zcdp", "gdp"]


def _check_in_open_interval(name: str, value: Any, low: float, high: float) -> float:
    """A real number strictly between ``low`` and ``high`` (else InvalidParameterError)."""
    if isinstance(value, bool):
        raise InvalidParameterError(f"{name}={value!r}: expected a real number, got a bool.")
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise InvalidParameterError(f"{name}={value!r}: expected a real number.") from None
    if math.isnan(out):
        raise InvalidParameterError(f"{name}=nan: expected a real number.")
    if not low < out < high:
        raise InvalidParameterError(
            f"{name}={value!r}: must lie strictly between {low:g} and {high:g}."
        )
    return out


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


@dataclass(frozen=True, slots=True, repr=False)
class Budget:
    """A privacy guarantee: pure ε-DP, approximate (ε, δ)-DP, ρ-zCDP or μ-GDP.

    Build one with :meth:`pure`, :meth:`approx`, :meth:`zcdp` or :meth:`gdp`. For a zCDP
    or GDP budget ``epsilon`` is ``None`` (such a guarantee implies a whole curve of
    (ε, δ) pairs: ask for one with :meth:`to_approx`).

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
    mu : float or None
        Set for Gaussian-DP budgets (μ-GDP, Dong, Roth & Su 2022).
    """

    kind: BudgetKind
    epsilon: float | None = None
    delta: float = 0.0
    rho: float | None = None
    note: str = ""
    mu: float | None = None

    def __repr__(self) -> str:
        mu = "" if self.mu is None else f", mu={self.mu!r}"
        return (
            f"Budget(kind={self.kind!r}, epsilon={self.epsilon!r}, delta={self.delta!r}, "
            f"rho={self.rho!r}, note={self.note!r}{mu})"
        )

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

    @classmethod
    def gdp(cls, mu: float, *, note: str = "") -> Budget:
        """μ-Gaussian DP (Dong, Roth & Su 2022): as hard to tell apart as N(0, 1) from N(μ, 1).

        The Gaussian mechanism with noise σ on a query of L2 sensitivity Δ is exactly
        (Δ/σ)-GDP; μ-GDP budgets compose by adding μ².
        """
        return cls("gdp", mu=_check_nonneg("mu", mu), note=note)

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
        if self.kind == "gdp":
            assert self.mu is not None
            return Budget.zcdp(self.mu**2 / 2, note="mu-GDP -> mu^2/2 zCDP")
        raise InvalidParameterError(
            "An (epsilon, delta)-DP budget cannot be expressed as rho-zCDP; account it in an "
            "approximate-DP accountant instead."
        )

    def to_approx(self, delta: float, *, method: Literal["cks", "classic"] = "cks") -> Budget:
        """Express this budget as (ε, δ)-DP at the given δ.

        For zCDP budgets ``method="cks"`` uses the Canonne–Kamath–Steinke bound, which is
        never worse than ``method="classic"`` (ε = ρ + 2·sqrt(ρ·ln(1/δ))).
        """
        d = _check_in_open_interval("delta", delta, 0.0, 1.0)
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
        if self.kind == "gdp":
            assert self.mu is not None
            return Budget.approx(gdp_epsilon(self.mu, d), d,
                                 note=f"{self.mu:.6g}-GDP -> (eps, delta) exactly")
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
        if self.kind == other.kind == "gdp":
            assert self.mu is not None and other.mu is not None
            return Budget.gdp(math.hypot(self.mu, other.mu))
        if {"zcdp", "gdp"} & {self.kind, other.kind}:
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
        if self.kind == "gdp":
            assert self.mu is not None
            return Budget.gdp(self.mu * math.sqrt(f), note=self.note)
        if self.kind == "zcdp":
            assert self.rho is not None
            return Budget.zcdp(self.rho * f, note=self.note)
        assert self.epsilon is not None
        if self.kind == "pure":
            return Budget.pure(self.epsilon * f, note=self.note)
        return Budget.approx(self.epsilon * f, min(self.delta * f, 1.0 - 1e-300), note=self.note)

    def covers(self, other: Budget, *, rtol: float = 1e-9) -> bool:
        """True if spending ``other`` stays within this budget (up to float rounding)."""
        if self.kind == "gdp":
            return other.kind == "gdp" and (other.mu or 0.0) <= (self.mu or 0.0) * (1 + rtol)
        if self.kind == "zcdp":
            rho = other.to_zcdp().rho
            assert rho is not None and self.rho is not None
            return rho <= self.rho * (1 + rtol)
        if other.kind in ("zcdp", "gdp"):
            return False
        assert self.epsilon is not None and other.epsilon is not None
        if self.kind == "pure" and other.kind != "pure":
            return False
        return (
            other.epsilon <= self.epsilon * (1 + rtol)
            and other.delta <= self.delta * (1 + rtol)
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``mu`` only for GDP budgets)."""
        out: dict[str, Any] = {
            "kind": self.kind,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "rho": self.rho,
            "note": self.note,
        }
        if self.mu is not None:
            out["mu"] = self.mu
        return out

    def __str__(self) -> str:
        if self.kind == "gdp":
            return f"{self.mu:.6g}-GDP"
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
    r"""Smallest ε (under the chosen bound) such that ρ-zCDP implies (ε, δ)-DP.

    ``classic``: ε = ρ + 2·sqrt(ρ·ln(1/δ)) (Bun & Steinke 2016, Prop. 1.3).
    ``cks``: ε = min over a > 1 of aρ + [ln(1/δ) + (a−1)·ln(1 − 1/a) − ln a]/(a − 1)
    (Canonne, Kamath & Steinke 2020, Prop. 12), which is never larger than ``classic``.

    The minimum is found without SciPy (a command line that prints "(implies ε …)" must not
    import ``scipy.optimize``). With t = a − 1 > 0 and L = ln(1/δ) > 0 the objective is

    .. math:: ε(t) = (1 + t)ρ + \frac{L - \ln(1 + t)}{t} + \ln\Bigl(1 - \frac{1}{1 + t}\Bigr),
              \qquad ε'(t) = ρ - \frac{L - \ln(1 + t)}{t^2},

    so ε'(t) < 0 exactly when g(t) = ρt² + ln(1 + t) − L < 0. g is strictly increasing
    (g' = 2ρt + 1/(1 + t) > 0) from g(0) = −L < 0 to +∞: ε has a single stationary point,
    its global minimum, at the root t* of g, found here by bisection in ln t to a relative
    2^-50. Any t gives a valid ε(t) (the bound holds at every order a > 1), and the value
    returned is ε at the t found plus twice a forward bound on its own rounding error, so
    it is never below the true optimum of the bound. ε is flat at t*, so the bisection's
    error in t moves ε only to second order (far below that rounding bound). SciPy's
    bounded Brent search, used before, gave the same values to a relative 1e-10 (tested).
    """
    r = _check_nonneg("rho", rho)
    d = _check_in_open_interval("delta", delta, 0.0, 1.0)
    classic = r + 2.0 * math.sqrt(r * math.log(1.0 / d))
    if method == "classic" or r == 0.0:
        return classic
    if method != "cks":
        raise InvalidParameterError(f"method={method!r}: expected 'cks' or 'classic'.")
    return _cks_epsilon(r, d, classic)


@functools.lru_cache(maxsize=4096)
def _cks_epsilon(r: float, d: float, classic: float) -> float:
    """The ``cks`` value of :func:`zcdp_to_approx_epsilon` (validated r > 0, d in (0, 1)):
    a pure function of public numbers, cached (a release converts the same ρ many times,
    e.g. once per quantile for its warnings)."""
    big_l = -math.log(d)

    def g(t: float) -> float:
        return r * t * t + math.log1p(t) - big_l

    # Bracket: g(lo) ≤ 0 (both terms ≤ L/2) and g(hi) > 0 (ρt² ≥ L, ln(1 + t) > 0).
    lo = min(math.sqrt(big_l / (2.0 * r)), math.expm1(big_l / 2.0))
    hi = max(math.sqrt(big_l / r), lo)
    if not (lo > 0.0 and math.isfinite(hi)):
        return classic
    log_lo, log_hi = math.log(lo), math.log(hi)
    while log_hi - log_lo > 2.0**-50 * max(1.0, abs(log_hi)):
        mid = 0.5 * (log_lo + log_hi)
        if mid in (log_lo, log_hi):
            break
        if g(math.exp(mid)) <= 0.0:
            log_lo = mid
        else:
            log_hi = mid
    t = math.exp(0.5 * (log_lo + log_hi))
    log1p_t = math.log1p(t)
    # ln(t/(1 + t)) without cancellation: as ln t − ln(1 + t) (same signs) for t < 1, as
    # log1p(−1/(1 + t)) (argument ≥ −1/2, well conditioned) for t ≥ 1.
    log_ratio = math.log(t) - log1p_t if t < 1.0 else math.log1p(-1.0 / (1.0 + t))
    terms = ((1.0 + t) * r, (big_l - log1p_t) / t, log_ratio)
    value = math.fsum(terms)
    # Forward rounding-error bound of this evaluation (u = 2^-53, libm log/log1p within
    # 1 ulp): 2u|T1|, u(L + ln(1 + t))/t + 2u|T2| (the subtraction may cancel), 3u|T3|,
    # u|sum|; doubled. Adding it makes the value an upper bound on ε(t) itself.
    u = 2.0**-53
    err = u * (2.0 * abs(terms[0]) + (big_l + log1p_t) / t + 2.0 * abs(terms[1])
               + 3.0 * abs(terms[2]) + abs(value))
    value += 2.0 * err
    best = min(value, classic)
    return max(best, 0.0) if math.isfinite(best) else classic


def gdp_delta(mu: float, epsilon: float) -> float:
    """Exact δ(ε) of μ-GDP: the smallest δ with μ-GDP ⇒ (ε, δ)-DP.

    δ(ε) = Φ(−ε/μ + μ/2) − e^ε·Φ(−ε/μ − μ/2) (Dong, Roth & Su 2022, Cor. 2.13), which is the
    exact (ε, δ) curve of the Gaussian mechanism with σ/Δ = 1/μ (Balle & Wang 2018, Thm 8).
    Evaluated with ``log_ndtr`` so that large ε or tiny δ neither overflow nor cancel.

    Parameters
    ----------
    mu : float
        μ > 0.
    epsilon : float
        ε ≥ 0.
    """
    m = _check_nonneg("mu", mu)
    if m == 0.0:
        return 0.0
    e = _check_nonneg("epsilon", epsilon, allow_inf=True)
    from scipy.special import log_ndtr  # here, not at import

    sigma = 1.0 / m  # the same floating-point steps as the analytic Gaussian's δ(σ, Δ=1, ε)
    a, b = 1.0 / (2 * sigma), e * sigma / 1.0
    log_first = float(log_ndtr(a - b))
    log_second = e + float(log_ndtr(-a - b))
    if log_second >= log_first:
        return 0.0
    return float(math.exp(log_first) * -math.expm1(log_second - log_first))


def gdp_epsilon(mu: float, delta: float) -> float:
    """Smallest ε (to a relative 10^-12, rounded up) with μ-GDP ⇒ (ε, δ)-DP.

    Inverts :func:`gdp_delta` (strictly decreasing in ε) by bisection; the returned ε
    satisfies ``gdp_delta(mu, ε) <= delta``. This is the exact conversion for a continuous
    Gaussian release; a release drawn from a *discrete* Gaussian on a lattice must add its
    lattice slack (see ``dpfair.mechanisms.discrete_gaussian.approx_dp_sigma_target``).
    """
    m = _check_nonneg("mu", mu)
    d = _check_in_open_interval("delta", delta, 0.0, 1.0)
    if m == 0.0 or gdp_delta(m, 0.0) <= d:
        return 0.0
    lo, hi = 0.0, 1.0
    while gdp_delta(m, hi) > d:
        lo, hi = hi, 2.0 * hi
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if gdp_delta(m, mid) > d:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * max(hi, 1.0):
            break
    return hi
