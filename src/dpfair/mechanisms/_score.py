"""What every exponential mechanism of this package shares: its parameters and guarantees.

:class:`~dpfair.mechanisms.exponential.ExponentialMechanism` (a piecewise-constant score
on an interval) and :class:`~dpfair.mechanisms.discrete.DiscreteExponentialMechanism`
(finitely many candidates) differ only in their output space; both weight an output r by
exp(ε·u(r) / (2Δu)), validate (ε, Δu) the same way and have the same privacy.
"""

from __future__ import annotations

from dataclasses import dataclass

from dpfair._validation import check_positive
from dpfair.privacy import Budget, exponential_mechanism_zcdp


@dataclass(frozen=True, slots=True)
class ScoreMechanism:
    """Parameters (ε, Δu) of an exponential mechanism P(r) ∝ exp(ε·u(r) / (2Δu)).

    Parameters
    ----------
    epsilon : float
        Privacy parameter, > 0.
    sensitivity : float, default=1
        Δu, the largest change of any output's score between neighbouring data sets.

    Notes
    -----
    Privacy: pure ε-DP (McSherry & Talwar 2007) and, being ε-bounded-range, ε²/8-zCDP
    (Cesar & Rogers 2021); the subclasses state the argument for their output space.
    """

    epsilon: float
    sensitivity: float = 1.0

    def __post_init__(self) -> None:
        check_positive("epsilon", self.epsilon)
        check_positive("sensitivity", self.sensitivity)

    @property
    def privacy(self) -> Budget:
        """Pure ε-DP."""
        return Budget.pure(self.epsilon)

    @property
    def privacy_zcdp(self) -> Budget:
        """ε²/8-zCDP, from the bounded-range property."""
        return exponential_mechanism_zcdp(self.epsilon)
