"""Free warnings: advice computed from released outputs and public inputs only.

Nothing here reads private data, so a warning costs no privacy (post-processing of the
release and of the analyst's own parameters). Two kinds, shared by every release:

* :func:`on_public_bound` — a released interval end sits on a public bound. For the median
  (or a quantile) that means the bounds may not contain it, or n, ρ or α are too small for
  a two-sided interval: the interval is only as trustworthy as the promise that the
  statistic lies inside the bounds (``--bounds 50 100`` on ages whose median is 37 gives a
  confident-looking ``[50, 50.02]``);
* :func:`little_privacy` — a budget so large that little privacy remains: ε above
  :data:`LARGE_EPSILON` for pure or (ε, δ)-DP, or a ρ-zCDP budget whose (ε, δ)-DP
  equivalent at δ = :data:`REFERENCE_DELTA` (Canonne–Kamath–Steinke, as the command line
  prints it) is above it. At ε = 10 one output can be e¹⁰ ≈ 22 000 times likelier on one
  neighbour than on the other.

:func:`warn_free` issues them as :class:`~dpfair._warnings.FreeWarning` and returns their
texts (for a result's JSON); the command line prints each as one ``dpfair: warning:`` line.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Final

from dpfair._warnings import FreeWarning

if TYPE_CHECKING:
    from dpfair.privacy import Budget

__all__ = ["LARGE_EPSILON", "REFERENCE_DELTA", "little_privacy", "on_public_bound", "warn_free"]

#: ε above which a release is said to leave little privacy.
LARGE_EPSILON: Final[float] = 10.0
#: δ at which a ρ-zCDP budget is expressed as (ε, δ)-DP for that judgement.
REFERENCE_DELTA: Final[float] = 1e-6


def on_public_bound(
    low: float, high: float, bounds: tuple[float, float], what: str = "median"
) -> str | None:
    """The warning for an interval ``[low, high]`` with an end on ``bounds``, or None."""
    lo, hi = float(bounds[0]), float(bounds[1])
    sides = [s for s, hit in (("lower", low <= lo), ("upper", high >= hi)) if hit]
    if not sides:
        return None
    ends = " and ".join(sides)
    verb = "sit" if len(sides) > 1 else "sits"
    return (
        f"the {ends} end{'s' if len(sides) > 1 else ''} {verb} on a public bound "
        f"[{lo:g}, {hi:g}]: the bounds may not contain the {what} (or n, rho or alpha are "
        f"too small for a two-sided interval); the interval is only as trustworthy as the "
        f"promise that the {what} lies inside the bounds."
    )


def little_privacy(budget: Budget) -> str | None:
    """The warning for a budget that leaves little privacy (ε > 10 at δ = 1e-6), or None."""
    if budget.kind == "zcdp":
        rho = float(budget.rho or 0.0)
        eps = float(budget.to_approx(REFERENCE_DELTA).epsilon or 0.0) if rho > 0 else 0.0
        if eps <= LARGE_EPSILON:
            return None
        return (
            f"rho={rho:g} is large: it implies only (epsilon={eps:.3g}, "
            f"delta={REFERENCE_DELTA:g})-DP, little privacy is left."
        )
    eps = float(budget.epsilon or 0.0)
    if budget.kind not in ("pure", "approx") or eps <= LARGE_EPSILON:
        return None
    return (
        f"epsilon={eps:g} is large (above {LARGE_EPSILON:g}): one output can be e^{eps:g} "
        "times likelier on one neighbour than on the other, little privacy is left."
    )


def warn_free(
    privacy: Budget | None = None,
    *,
    low: float | None = None,
    high: float | None = None,
    bounds: tuple[float, float] | None = None,
    what: str = "median",
    stacklevel: int = 2,
) -> tuple[str, ...]:
    """Issue the free warnings that apply (as :class:`FreeWarning`); return their texts."""
    msgs: list[str] = []
    if low is not None and high is not None and bounds is not None:
        msgs.append(on_public_bound(low, high, bounds, what) or "")
    if privacy is not None:
        msgs.append(little_privacy(privacy) or "")
    out = tuple(m for m in msgs if m)
    for m in out:
        warnings.warn(m, FreeWarning, stacklevel=stacklevel)
    return out
