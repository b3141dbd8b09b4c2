"""The privacy engine in memory: one total budget across many releases.

:class:`Ledger` is the only accountant of dpfair: :class:`dpfair.Session` keeps one per
data set, a CDP-Fair fit keeps one per fit (``privacy_ledger_``), an FDP-Fair site keeps
one in GDP (:class:`~dpfair.fairclass.federated.SiteLedger` is a view of it), the median
and facility mechanisms charge one as a filter, and the on-disk
:class:`~dpfair.privacy.LedgerFile` replays its journal into one. It charges a release
*before* it is released and refuses one that would pass the cap, recording nothing. Costs
are converted into the cap's measure by :func:`dpfair.privacy.cost_in_measure`, and
composed by :mod:`dpfair.privacy._compose` (sequential within a row set, parallel across
disjoint row sets): the one table of composition rules.
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
from dpfair.privacy._compose import (
    compose,
    compose_parallel,
    cost_in_measure,
    fits,
    remaining_of,
    zero_of,
)

__all__ = ["Ledger", "LedgerRecord", "budget_from_dict", "now_utc"]


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
        if kind == "gdp":
            return Budget.gdp(d["mu"], note=note)
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
    rows : str or None
        The row set the release touches (e.g. ``"half A"``); ``None`` for every row. Row
        sets with different names must be disjoint and chosen independently of the data:
        they compose in parallel.
    noise : str
        Noise law and scale, for audits (e.g. ``"N(0, 41.2^2)"``).
    part_of : str
        Empty for a charged release; for a *part* of an already charged release (listed
        for audit, charged zero), the label of that release.
    """

    seq: int
    time: str
    label: str
    params: dict[str, Any]
    cost: Budget
    charged: Budget
    key: str | None = None
    rows: str | None = None
    noise: str = ""
    part_of: str = ""

    @property
    def budget(self) -> Budget:
        """The release's guarantee in its own measure (same as :attr:`cost`)."""
        return self.cost

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (the journal's line, without the hash chain).

        ``rows``, ``noise`` and ``part_of`` appear only when set, so the journal lines of
        whole-data releases keep their format.
        """
        out: dict[str, Any] = {
            "seq": self.seq,
            "time": self.time,
            "label": self.label,
            "params": self.params,
            "cost": self.cost.to_dict(),
            "charged": self.charged.to_dict(),
            "key": self.key,
        }
        if self.rows is not None:
            out["rows"] = self.rows
        if self.noise:
            out["noise"] = self.noise
        if self.part_of:
            out["part_of"] = self.part_of
        return out


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
    """An in-memory privacy ledger with a hard cap (a privacy filter): the engine.

    Parameters
    ----------
    cap : Budget
        Total budget (ρ-zCDP, (ε, δ)-DP, pure ε-DP or μ-GDP). Every release is converted
        to this measure by :func:`~dpfair.privacy.cost_in_measure`; one that cannot be
        converted, or that would pass the cap, is refused and nothing is recorded.
    convert_delta : float, optional
        Default δ' at which ρ-zCDP (or μ-GDP) releases are converted for an (ε, δ) cap.
        ``None`` refuses them on an (ε, δ) cap unless a charge gives its own.

    Notes
    -----
    Composition (:mod:`dpfair.privacy._compose`): releases on the same rows compose
    sequentially; releases charged with different ``rows`` names touch disjoint row sets
    (the caller's claim: sets chosen independently of the data, replace-one neighbours) and
    compose in parallel, so :attr:`spent` is the largest per-set total, and a release
    without ``rows`` counts in every set. The cap bounds :attr:`spent`: a charge is refused
    when its row set's total would pass it. ``Accountant`` and
    ``dpfair.fairclass.PrivacyLedger`` are other names of this class.

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
    def limit(self) -> Budget:
        """The cap (the name the former ``Accountant`` and ``PrivacyLedger`` used)."""
        return self.cap

    def _spent_on(self, rows: str | None) -> Budget:
        """Sequential total of the releases that touch row set ``rows`` (None: all rows)."""
        return compose(
            self.cap,
            (r.charged for r in self.records if r.rows is None or r.rows == rows),
        )

    @property
    def spent_by_rows(self) -> dict[str, Budget]:
        """Sequential total per named row set (each including the all-row releases)."""
        names = list(dict.fromkeys(r.rows for r in self.records if r.rows is not None))
        return {name: self._spent_on(name) for name in names}

    @property
    def spent(self) -> Budget:
        """Composed total in the cap's measure: sequential within, parallel across row sets."""
        by_rows = self.spent_by_rows
        if not by_rows:
            return compose(self.cap, (r.charged for r in self.records))
        return compose_parallel(self.cap, by_rows)

    @property
    def total(self) -> Budget:
        """:attr:`spent`, with a note saying how it was composed (for reports)."""
        spent = self.spent
        if not self.spent_by_rows:
            return spent
        return Budget(
            spent.kind, spent.epsilon, spent.delta, spent.rho,
            note="parallel over disjoint row sets, sequential within each", mu=spent.mu,
        )

    @property
    def remaining(self) -> Budget:
        """What can still be spent, in the cap's measure (on the fullest row set)."""
        return remaining_of(self.cap, self.spent)

    def can_charge(self, cost: Budget, *, rows: str | None = None, **kwargs: Any) -> bool:
        """Would :meth:`charge` accept ``cost`` now (same keywords)?"""
        try:
            self.check(cost, rows=rows, **kwargs)
        except (BudgetExceededError, InvalidParameterError):
            return False
        return True

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
        rows: str | None = None,
    ) -> Budget:
        """Raise as :meth:`charge` would, without recording; return the converted cost."""
        if not isinstance(cost, Budget):
            raise InvalidParameterError(f"budget={cost!r}: expected a dpfair Budget.")
        charged = self.price(cost, bounded_range=bounded_range, convert_delta=convert_delta)
        if key is not None and self.has_key(key):
            raise ReleaseReplayError(
                f"release {key!r} was already made (ledger entry "
                f"{next(r.seq for r in self.records if r.key == key)}); a single-use release "
                "cannot run twice. Nothing was charged or released."
            )
        if rows is not None and not isinstance(rows, str):
            raise InvalidParameterError(f"rows={rows!r}: expected the name of a row set.")
        # a release on every row must fit in the fullest set; one on a set, in that set
        before = self.spent if rows is None else self._spent_on(rows)
        total = compose(self.cap, (before, charged))
        if not fits(self.cap, total):
            left = remaining_of(self.cap, before)
            where = "" if rows is None or not self.spent_by_rows else f" on {rows}"
            raise BudgetExceededError(
                f"{label or 'this release'} costs {charged} but only {left} of "
                f"{self.cap} remains{where}; it would exceed the cap, so nothing was "
                "released or charged."
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
        rows: str | None = None,
        noise: str = "",
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
        rows : str, optional
            The row set the release touches (class notes: disjoint sets compose in
            parallel); default every row.
        noise : str
            Noise law and scale, for audits.

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
            cost, label=label, bounded_range=bounded_range, convert_delta=convert_delta,
            key=key, rows=rows,
        )
        rec = LedgerRecord(
            seq=len(self.records) + 1,
            time=now_utc(),
            label=str(label),
            params=clean,
            cost=cost,
            charged=charged,
            key=key,
            rows=rows,
            noise=str(noise),
        )
        self.records.append(rec)
        return rec

    def note_part(
        self, cost: Budget, *, label: str, part_of: str, rows: str | None = None,
        noise: str = "",
    ) -> LedgerRecord:
        """List a component of an already charged release (audit only: charged zero).

        ``cost`` is the component's own guarantee (in any measure); it is recorded, never
        composed — the enclosing release ``part_of`` was charged for all its parts.
        """
        if not isinstance(cost, Budget):
            raise InvalidParameterError(f"budget={cost!r}: expected a dpfair Budget.")
        if not part_of:
            raise InvalidParameterError("part_of: name the charged release this is part of.")
        rec = LedgerRecord(
            seq=len(self.records) + 1,
            time=now_utc(),
            label=str(label),
            params={},
            cost=cost,
            charged=zero_of(self.cap),
            rows=rows,
            noise=str(noise),
            part_of=str(part_of),
        )
        self.records.append(rec)
        return rec

    def summary(self) -> dict[str, Any]:
        """JSON-ready summary: cap, spent, remaining, per-row-set totals and every record."""
        out: dict[str, Any] = {
            "cap": self.cap.to_dict(),
            "spent": self.spent.to_dict(),
            "remaining": self.remaining.to_dict(),
            "convert_delta": self.convert_delta,
        }
        by_rows = self.spent_by_rows
        if by_rows:
            out["by_rows"] = {k: v.to_dict() for k, v in by_rows.items()}
        out["releases"] = [rec.to_dict() for rec in self.records]
        return out

    def to_dict(self) -> dict[str, Any]:
        """Same as :meth:`summary`."""
        return self.summary()
