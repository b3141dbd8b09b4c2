"""A privacy ledger in memory: one total budget across many releases.

:class:`Ledger` keeps the releases of one data set in memory (what :class:`dpfair.Session`
uses). It charges a release *before* it is released and refuses one that would pass the
cap, recording nothing. Costs are converted into the cap's measure by
:func:`dpfair.privacy.cost_in_measure` (the one table of composition rules). The on-disk
journal with the same rules, shared by processes and surviving crashes, is
:class:`dpfair.privacy.LedgerFile`.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dpfair._errors import (
    BudgetExceededError,
    InvalidParameterError,
    LedgerError,
    ReleaseReplayError,
)
from dpfair.privacy._budget import Budget
from dpfair.privacy._compose import cost_in_measure, zero_of

__all__ = ["Ledger", "LedgerRecord", "budget_from_dict", "now_utc"]

_RTOL = 1e-9  # float slack when comparing a composed total with the cap


def now_utc() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="microseconds")


def budget_from_dict(d: Any, *, where: str = "budget") -> Budget:
    """Rebuild a :class:`Budget` from :meth:`Budget.to_dict`, validating every field."""
    if not isinstance(d, Mapping):
        raise LedgerError(f"{where}: expected an object, got {type(d).__name__}.")
    kind = d.get("kind")
    note = d.get("note", "")
    if not isinstance(note, str):
        note = ""
    try:
        if kind == "zcdp":
            return Budget.zcdp(d["rho"], note=note)
        if kind == "pure":
            return Budget.pure(d["epsilon"], note=note)
        if kind == "approx":
            return Budget.approx(d["epsilon"], d["delta"], note=note)
    except (KeyError, InvalidParameterError) as exc:
        raise LedgerError(f"{where}: invalid budget {dict(d)!r} ({exc}).") from None
    raise LedgerError(f"{where}: unknown budget kind {kind!r}.")


@dataclass(frozen=True, slots=True)
class LedgerRecord:
    """One charged release.

    Attributes
    ----------
    seq : int
        Position in the ledger (1, 2, ...).
    time : str
        UTC time of the charge (ISO 8601).
    label : str
        What was released (e.g. ``"median_ci"``).
    params : dict
        Public parameters of the release (never data).
    cost : Budget
        The release's guarantee in its own measure.
    charged : Budget
        What it cost in the ledger's measure (see :func:`dpfair.privacy.cost_in_measure`).
    key : str or None
        Single-use key (e.g. ``"fdp/run=.../round=1"``): a second charge with the same key
        is refused.
    """

    seq: int
    time: str
    label: str
    params: dict[str, Any]
    cost: Budget
    charged: Budget
    key: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (the journal's line, without the hash chain)."""
        return {
            "seq": self.seq,
            "time": self.time,
            "label": self.label,
            "params": self.params,
            "cost": self.cost.to_dict(),
            "charged": self.charged.to_dict(),
            "key": self.key,
        }


def _add(cap: Budget, total: Budget, charged: Budget) -> Budget:
    """Add ``charged`` (already in the cap's measure) to ``total``."""
    if cap.kind == "zcdp":
        assert total.rho is not None and charged.rho is not None
        return Budget.zcdp(total.rho + charged.rho)
    assert total.epsilon is not None and charged.epsilon is not None
    if cap.kind == "pure":
        return Budget.pure(total.epsilon + charged.epsilon)
    delta = min(total.delta + charged.delta, 0.999999)
    return Budget.approx(total.epsilon + charged.epsilon, delta)


def _fits(cap: Budget, total: Budget) -> bool:
    if cap.kind == "zcdp":
        assert cap.rho is not None and total.rho is not None
        return total.rho <= cap.rho * (1 + _RTOL)
    assert cap.epsilon is not None and total.epsilon is not None
    return total.epsilon <= cap.epsilon * (1 + _RTOL) and total.delta <= cap.delta * (1 + _RTOL)


def _remaining(cap: Budget, spent: Budget) -> Budget:
    if cap.kind == "zcdp":
        assert cap.rho is not None and spent.rho is not None
        return Budget.zcdp(max(cap.rho - spent.rho, 0.0))
    assert cap.epsilon is not None and spent.epsilon is not None
    eps = max(cap.epsilon - spent.epsilon, 0.0)
    if cap.kind == "pure":
        return Budget.pure(eps)
    return Budget.approx(eps, max(cap.delta - spent.delta, 0.0))


def _check_params(params: Mapping[str, Any] | None) -> dict[str, Any]:
    if params is None:
        return {}
    if not isinstance(params, Mapping):
        raise InvalidParameterError(f"params={params!r}: expected a mapping of public values.")
    try:
        return dict(json.loads(json.dumps(dict(params), allow_nan=False, default=str)))
    except ValueError as exc:
        raise InvalidParameterError(f"params: not JSON-serialisable ({exc}).") from None


@dataclass
class Ledger:
    """An in-memory privacy ledger with a hard cap (a privacy filter).

    Parameters
    ----------
    cap : Budget
        Total budget (ρ-zCDP, (ε, δ)-DP or pure ε-DP). Every release is converted to this
        measure by :func:`~dpfair.privacy.cost_in_measure`; one that cannot be converted, or
        that would pass the cap, is refused and nothing is recorded.
    convert_delta : float, optional
        Default δ' at which ρ-zCDP releases are converted for an (ε, δ) cap. ``None``
        refuses zCDP releases on an (ε, δ) cap unless a charge gives its own.

    Examples
    --------
    >>> led = Ledger(Budget.zcdp(1.0))
    >>> rec = led.charge(Budget.zcdp(0.25), label="median_ci")
    >>> led.remaining
    Budget(kind='zcdp', epsilon=None, delta=0.0, rho=0.75, note='')
    """

    cap: Budget
    convert_delta: float | None = None
    records: list[LedgerRecord] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not isinstance(self.cap, Budget):
            raise InvalidParameterError(
                f"budget={self.cap!r}: expected a dpfair Budget, e.g. Budget.zcdp(1.0) or "
                "Budget.approx(3.0, 1e-6)."
            )
        if self.cap.kind == "approx" and self.cap.delta <= 0:
            raise InvalidParameterError(
                f"budget={self.cap}: an (epsilon, delta) cap needs delta > 0; use "
                "Budget.pure(epsilon) for pure DP."
            )
        if self.convert_delta is not None:
            d = float(self.convert_delta)
            if not (0 < d < 1) or math.isnan(d):
                raise InvalidParameterError(
                    f"convert_delta={self.convert_delta!r}: must lie in (0, 1)."
                )
            if self.cap.kind != "approx":
                raise InvalidParameterError(
                    "convert_delta only applies to an (epsilon, delta) cap."
                )

    # ------------------------------------------------------------------ state
    @property
    def spent(self) -> Budget:
        """Composed total of every charge, in the cap's measure."""
        total = zero_of(self.cap)
        for rec in self.records:
            total = _add(self.cap, total, rec.charged)
        return total

    @property
    def remaining(self) -> Budget:
        """What can still be spent, in the cap's measure."""
        return _remaining(self.cap, self.spent)

    def has_key(self, key: str) -> bool:
        """Has a single-use release with this key been charged?"""
        return any(rec.key == key for rec in self.records)

    # ------------------------------------------------------------------ charging
    def price(
        self,
        cost: Budget,
        *,
        bounded_range: bool = False,
        convert_delta: float | None = None,
    ) -> Budget:
        """The cost of a release in this ledger's measure (raises if not convertible)."""
        return cost_in_measure(
            cost,
            self.cap,
            bounded_range=bounded_range,
            convert_delta=self.convert_delta if convert_delta is None else convert_delta,
        )

    def check(
        self,
        cost: Budget,
        *,
        label: str = "",
        bounded_range: bool = False,
        convert_delta: float | None = None,
        key: str | None = None,
    ) -> Budget:
        """Raise as :meth:`charge` would, without recording; return the converted cost."""
        charged = self.price(cost, bounded_range=bounded_range, convert_delta=convert_delta)
        if key is not None and self.has_key(key):
            raise ReleaseReplayError(
                f"release {key!r} was already made (ledger entry "
                f"{next(r.seq for r in self.records if r.key == key)}); a single-use release "
                "cannot run twice. Nothing was charged or released."
            )
        total = _add(self.cap, self.spent, charged)
        if not _fits(self.cap, total):
            raise BudgetExceededError(
                f"{label or 'this release'} costs {charged} but only {self.remaining} of "
                f"{self.cap} remains; nothing was released or charged."
            )
        return charged

    def charge(
        self,
        cost: Budget,
        *,
        label: str = "",
        params: Mapping[str, Any] | None = None,
        bounded_range: bool = False,
        convert_delta: float | None = None,
        key: str | None = None,
    ) -> LedgerRecord:
        """Record a release, or raise and record nothing.

        Parameters
        ----------
        cost : Budget
            The release's guarantee in its own measure.
        label : str
            What is released.
        params : mapping, optional
            Public parameters of the release (JSON-serialisable).
        bounded_range : bool
            The release is an exponential mechanism (pure ε charged ε²/8 in zCDP).
        convert_delta : float, optional
            δ' for converting a zCDP release to an (ε, δ) cap (default: the ledger's).
        key : str, optional
            Single-use key; a second charge with the same key is refused.

        Raises
        ------
        BudgetExceededError
            The release would pass the cap.
        ReleaseReplayError
            ``key`` was already charged.
        IncompatibleBudgetError
            The release's measure cannot be charged to this cap without a conversion.
        """
        clean = _check_params(params)
        charged = self.check(
            cost, label=label, bounded_range=bounded_range, convert_delta=convert_delta, key=key
        )
        rec = LedgerRecord(
            seq=len(self.records) + 1,
            time=now_utc(),
            label=str(label),
            params=clean,
            cost=cost,
            charged=charged,
            key=key,
        )
        self.records.append(rec)
        return rec

    def summary(self) -> dict[str, Any]:
        """JSON-ready summary: cap, spent, remaining and every record."""
        return {
            "cap": self.cap.to_dict(),
            "spent": self.spent.to_dict(),
            "remaining": self.remaining.to_dict(),
            "convert_delta": self.convert_delta,
            "releases": [rec.to_dict() for rec in self.records],
        }
