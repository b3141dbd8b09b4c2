"""``dpfair.Session``: one total privacy budget for every release on one data set."""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import threading
import warnings
from collections.abc import Callable, Hashable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from dpfair._errors import (
    DPFairError,
    InsufficientDataError,
    InvalidDataError,
    InvalidParameterError,
    LedgerError,
)
from dpfair._validation import check_in_open_interval, check_positive
from dpfair._warnings import DPFairWarning, UncertifiedFairnessWarning
from dpfair.privacy import Budget, Ledger, LedgerFile, LedgerRecord
from dpfair.session._sources import DataSource, FileSource, as_source

if TYPE_CHECKING:
    from dpfair.fairclass import CDPFairClassifier
    from dpfair.median import MedianInterval

__all__ = ["AGGREGATE_ROWS", "ReproducibleSeedWarning", "Session", "charged_on_failure",
           "withheld_message"]

T = TypeVar("T")


class ReproducibleSeedWarning(DPFairWarning):
    """A release of a :class:`Session` opened with ``reproducible_seed``: its noise is a
    fixed function of the seed, so anyone who knows the seed can undo it. Issued on every
    release of such a session (tests and studies only, never on real data)."""

#: ``aggregate="auto"`` reads files with more rows than this out of core: the row count is
#: public (replace-one neighbours), a file's size in bytes is not (``dpfair.data._paths``).
AGGREGATE_ROWS = 2**24

_AGGREGATE_CHOICES = ("auto", "always", "never")


def _check_cap(budget: Any) -> Budget:
    """A total budget: a :class:`Budget` whose numbers are finite and > 0."""
    if not isinstance(budget, Budget):
        raise InvalidParameterError(
            f"budget={budget!r}: expected a dpfair Budget, e.g. Budget.zcdp(1.0), "
            "Budget.approx(3.0, 1e-6) or Budget.pure(1.0)."
        )
    values = {"rho": budget.rho, "epsilon": budget.epsilon, "delta": budget.delta}
    for name, v in values.items():
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v) or v < 0 or (
            math.isinf(v)
        ):
            raise InvalidParameterError(f"budget: {name}={v!r} must be a finite number >= 0.")
    main = budget.rho if budget.kind == "zcdp" else budget.epsilon
    if main is None or main <= 0:
        raise InvalidParameterError(
            f"budget={budget}: a total budget must be > 0 (nothing could be released)."
        )
    return budget


_GENERIC_PROBLEM = (
    "the data failed this release's checks (non-finite values, labels or groups outside "
    "{0, 1}, too few rows of a group, ...)"
)


def withheld_message(
    label: str, planned: Budget, exc: BaseException, columns: Sequence[Hashable] = ()
) -> str:
    """The one error text of a release that failed on the data, under a budget.

    Names the column and the *kind* of problem (the ``problem`` and ``column`` attributes
    the readers of :mod:`dpfair.data` attach), never a value, a row number or a count.
    """
    problem = getattr(exc, "problem", None) or _GENERIC_PROBLEM
    column = getattr(exc, "column", None)
    if column is not None:
        where = f"column={column!r}: "
    elif columns:
        where = f"column(s) {', '.join(repr(c) for c in columns)}: "
    else:
        where = ""
    return (
        f"{label}: {where}{problem}. The details depend on the data and are withheld; the "
        f"planned cost {planned} was charged because the failure is itself a release. The "
        "data owner can look at the rows outside any budget with `dpfair inspect DATA "
        "--column C` (not a release)."
    )


@contextmanager
def charged_on_failure(
    charge_planned: Callable[[], object],
    *,
    label: str,
    planned: Budget,
    columns: Sequence[Hashable] = (),
    public: tuple[type[BaseException], ...] = (),
) -> Iterator[None]:
    """Run the data-touching part of a release; on *any* exception charge, then re-raise.

    An exception raised after the data were touched is an output that depends on them
    (a data check, a warning the caller's filters turn into an error, a signal), so
    ``charge_planned()`` runs first. An :class:`~dpfair.InvalidDataError` is re-raised
    with :func:`withheld_message` (no value, row or count); anything else is re-raised
    unchanged, and so is an exception of the ``public`` types (errors whose text depends
    only on public quantities: n under replace-one neighbours and the parameters, e.g. the
    median's :class:`~dpfair.InsufficientDataError`). If the charge itself fails, that
    error is raised; the first error is then withheld as well (its text and chain are
    replaced in place, so nothing about the data survives in ``__context__``). Used by
    :meth:`Session._release` and the ``dpfair fdp site`` rounds.
    """
    try:
        yield
    except BaseException as exc:
        if isinstance(exc, InvalidDataError) and not isinstance(exc, public):
            _withhold(exc, withheld_message(label, planned, exc, columns))
        try:
            charge_planned()
        except BaseException as charge_error:
            # the original (withheld above) stays only as the context, without details
            raise charge_error from None
        raise


def _withhold(exc: BaseException, message: str) -> None:
    """Replace, in place, everything ``exc`` carries about the data by ``message``.

    A new exception raised while handling ``exc`` would keep it on ``__context__`` (and
    ``raise ... from None`` only hides it from the printed traceback): so the original
    object itself is emptied — its text, its chained causes, its notes — and re-raised.
    Only the kind of problem and the column (public) are kept as attributes.
    """
    keep = {k: getattr(exc, k) for k in ("problem", "column") if hasattr(exc, k)}
    exc.args = (message,)
    exc.__cause__ = None
    exc.__context__ = None
    exc.__suppress_context__ = False
    for name in list(vars(exc)):
        if name not in keep:
            with contextlib.suppress(AttributeError, TypeError):
                delattr(exc, name)
    for name, value in keep.items():
        setattr(exc, name, value)


def _refuse_caller_randomness(value: object, name: str) -> None:
    """Refuse any per-release seed or Generator (before the data are touched)."""
    if value is None:
        return
    kind = type(value).__name__  # never repr(): a subclass's repr is the caller's code
    raise InvalidParameterError(
        f"{name}: got a {kind}; a Session draws every release's randomness itself from "
        "fresh OS entropy and accepts no seed or Generator per release (a known seed makes "
        "the output a fixed function of the data; a Generator object sees the mechanism's "
        "data-dependent calls). To reproduce a run in a test or study, open the session "
        "with Session(..., reproducible_seed=S)."
    )


def _file_identity(path: str | os.PathLike[str]) -> tuple[int, ...]:
    """What changes when a file is replaced or written: device, inode, size, times (ns)."""
    st = os.stat(path)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _check_seed(seed: object) -> int | None:
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or int(seed) < 0:
        raise InvalidParameterError(
            f"reproducible_seed: expected None or a non-negative int, got a "
            f"{type(seed).__name__}."
        )
    return int(seed)


def _check_aggregate(aggregate: str) -> str:
    if aggregate not in _AGGREGATE_CHOICES:
        raise InvalidParameterError(
            f"aggregate={aggregate!r}: expected 'auto', 'always' or 'never'."
        )
    return aggregate


#: Options of an out-of-core fit that configure the file scan, not the estimator.
_FILE_FIT_OPTIONS = ("score_bins", "batch_size", "memory_limit", "threads", "tmp_dir")
#: ``constraints`` accepted by :meth:`Session.fit_fair_classifier` (CDP-Fair's).
_FAIR_CONSTRAINTS = ("demographic_parity", "equal_opportunity")


class Session:
    """One total privacy budget for every release on one data set.

    A session holds a data set and a *ledger* with a hard cap. Each method runs one
    release of the three papers on the data — :meth:`median_ci` (paper 004),
    :meth:`place_facility` (paper 000), :meth:`fit_fair_classifier` (paper 003) — and

    1. validates its arguments, then checks the ledger *before* reading the data: a request
       that would pass the cap raises :class:`~dpfair.BudgetExceededError` and costs no
       computation;
    2. computes the release;
    3. charges the ledger with what the release *really* spent (its ``privacy`` /
       ``privacy_spent_``), converted to the cap's measure, *before* returning it. If the
       charge is refused (another process sharing a ledger file spent the budget in the
       meantime) the result is discarded and the error raised: nothing is released,
       nothing is charged.

    Composition (the single table is :func:`dpfair.privacy.cost_in_measure`; neighbours
    differ by replacing one record, n is public):

    ==================  ==============================  ================================
    session budget      release                         charged
    ==================  ==============================  ================================
    ρ-zCDP              median_ci (ρ-zCDP)              ρ
    ρ-zCDP              place_facility (ε-DP, an        ε²/8 (bounded range; Cesar &
                        exponential mechanism)          Rogers 2021)
    ρ-zCDP              any other pure ε-DP release     ε²/2 (Bun & Steinke 2016)
    ρ-zCDP              fit_fair_classifier ((ε, δ))    refused: no zCDP equivalent
    (E, Δ)              (ε, δ) or pure ε                ε and δ add (basic composition)
    (E, Δ)              ρ-zCDP                          refused unless ``convert_delta``
                                                        δ' is set: then (ε(ρ, δ'), δ')
                                                        per release (CKS 2020)
    pure E              pure ε                          ε adds; anything else refused
    ==================  ==============================  ================================

    The cap works as a privacy filter (adaptive choice of each release's parameters is
    allowed: Whitehouse et al. 2023 for zCDP, Rogers et al. 2016 for (ε, δ)).

    Parameters
    ----------
    data : array, DataFrame, mapping, path or Dask DataFrame
        A 1-D NumPy array (one column, named ``"x"``; ``column`` may then be omitted), a
        2-D array (columns 0, 1, …), a pandas DataFrame, a mapping ``{name: column}``, a
        CSV/Parquet path (read through DuckDB; big files are aggregated out of core), or a
        Dask DataFrame (sufficient statistics computed on the cluster). Values are never
        dropped or imputed silently: NaN, missing and infinite values raise.
    budget : Budget, optional
        The total: ``Budget.zcdp(ρ)``, ``Budget.approx(ε, δ)`` or ``Budget.pure(ε)``
        (finite, > 0). Required unless ``ledger`` names an existing ledger file, whose cap
        is then used (if both are given they must agree).
    ledger : path or LedgerFile, optional
        Back the session with a persistent ledger file (the one ``dpfair ledger`` and
        ``--ledger`` use), so Python and the command line share one budget across
        processes and crashes. An existing file is opened (and must be bound to this data
        file's content, if bound); a new one is created with ``budget`` and bound to
        ``data`` when that is a file (a ledger created for in-memory data is bound to no
        file, and the command line refuses it). Every release re-checks the binding, so a
        data file changed after the session was opened is refused. Default: the ledger
        registered for the data file's content, if it has one (one ledger per data set,
        THREATS.md rule 11: ``budget``, if given, must then be its cap), else an in-memory
        ledger that lives with the session.
    convert_delta : float, optional
        δ' at which ρ-zCDP releases are converted for an (ε, δ) budget (in-memory ledger or
        a new ledger file). Without it, a zCDP release on an (ε, δ) budget is refused.
    reproducible_seed : int, optional
        Open the session *for reproduction* (tests, studies): release k of this session
        (k = 0, 1, ...) draws from ``SeedSequence(reproducible_seed, spawn_key=(k,))``, so a
        script gives the same outputs when run again. Every release then warns
        (:class:`ReproducibleSeedWarning`) and its ledger entry records
        ``"reproducible": True`` and its stream index (never the seed: the noise must not be
        regenerable from the ledger, THREATS.md rule 2). Default ``None``: every release
        draws fresh OS entropy, the only mode for real data.

    Randomness
    ----------
    The releases accept no ``rng``/``random_state`` of their own: an int, a
    ``SeedSequence`` or any ``numpy.random.Generator`` (subclasses included) is refused
    before the data are read. A known seed would make the output a fixed function of the
    data; a Generator object sees the mechanism's data-dependent calls and can abort them.

    Failures
    --------
    Once a release has touched the data, *any* exception (a data check, a warning turned
    into an error by the caller's filters, an interrupt) charges the planned cost before it
    propagates. An error about the data names the column and the kind of problem, never a
    value, a row number or a count (:func:`withheld_message`).

    Attributes
    ----------
    budget : Budget
        The cap.
    spent, remaining : Budget
        In the cap's measure.
    ledger : Ledger or LedgerFile
        Every release: ``records`` (what, when, public parameters, cost in its own measure
        and in the session's), ``summary()``.

    Examples
    --------
    >>> import numpy as np, dpfair
    >>> from dpfair.privacy import Budget
    >>> x = np.random.default_rng(0).normal(10.0, 2.0, 2000)
    >>> s = dpfair.Session(x, budget=Budget.zcdp(1.0))
    >>> ci = s.median_ci(rho=0.5, bounds=(0.0, 20.0))
    >>> loc = s.place_facility(epsilon=1.0, domain=(-100.0, 100.0))
    >>> round(s.spent.rho, 6)  # 0.5 + 1²/8
    0.625
    """

    def __init__(
        self,
        data: Any,
        budget: Budget | None = None,
        *,
        ledger: str | os.PathLike[str] | LedgerFile | None = None,
        convert_delta: float | None = None,
        reproducible_seed: int | None = None,
    ) -> None:
        self._seed = _check_seed(reproducible_seed)
        self._streams = 0  # releases drawn in reproduction mode
        self._via: str | None = None  # "cli" for a command-line session (ledger params)
        self._last: LedgerRecord | None = None
        self._source: DataSource = as_source(data)
        self._lock = threading.Lock()
        self._ledger: Ledger | LedgerFile
        self._bound_stat: tuple[int, ...] | None = None  # the data file, at the binding check
        registered = self._registered_ledger() if ledger is None else None
        if registered is not None:
            # one ledger per data set (THREATS.md rule 11): a file whose content has a
            # registered ledger is charged to that ledger, never to a fresh budget
            try:
                self._ledger = self._open_ledger(registered, budget, convert_delta)
            except InvalidParameterError as exc:
                raise LedgerError(
                    f"data {self._source.path}: these data have the registered ledger "
                    f"{registered.path} (cap {registered.cap}); a session on them charges "
                    f"that ledger, one ledger per data set. {exc} Open "
                    f"Session(data, ledger='{registered.path}') without budget=."
                ) from None
            self._check_binding()
        elif ledger is None:
            if budget is None:
                raise InvalidParameterError(
                    "budget=None: a session needs a total budget, e.g. "
                    "budget=Budget.zcdp(1.0), or ledger=FILE naming an existing ledger."
                )
            self._ledger = Ledger(_check_cap(budget), convert_delta=convert_delta)
        else:
            self._ledger = self._open_ledger(ledger, budget, convert_delta)
            self._check_binding()

    # ------------------------------------------------------------------ ledger
    def _open_ledger(
        self,
        ledger: str | os.PathLike[str] | LedgerFile,
        budget: Budget | None,
        convert_delta: float | None,
    ) -> LedgerFile:
        if isinstance(ledger, LedgerFile):
            led = ledger
        elif isinstance(ledger, (str, os.PathLike)):
            path = Path(ledger).expanduser()
            if path.exists():
                led = LedgerFile.open(path)
            else:
                if budget is None:
                    raise InvalidParameterError(
                        f"ledger={ledger}: no such ledger file; pass budget=... to create it "
                        "(or create it with `dpfair ledger init`)."
                    )
                bind = self._source.path if isinstance(self._source, FileSource) else None
                try:
                    return LedgerFile.create(
                        path, _check_cap(budget), data=bind, convert_delta=convert_delta
                    )
                except InvalidParameterError:
                    if not path.is_file():
                        raise
                    led = LedgerFile.open(path)  # another process created it meanwhile
        else:
            raise InvalidParameterError(
                f"ledger={ledger!r}: expected a path to a ledger file or a LedgerFile."
            )
        cap = led.cap
        if budget is not None and _check_cap(budget).to_dict() | {"note": ""} != (
            cap.to_dict() | {"note": ""}
        ):
            raise InvalidParameterError(
                f"budget={budget}: the ledger {led.path} has the cap {cap}; a ledger's cap "
                "never changes. Omit budget to use the ledger's, or use another ledger."
            )
        stored = led.header.get("convert_delta")
        if convert_delta is not None and convert_delta != stored:
            raise InvalidParameterError(
                f"convert_delta={convert_delta!r}: the ledger {led.path} was created with "
                f"convert_delta={stored!r}; it cannot be changed."
            )
        return led

    def _registered_ledger(self) -> LedgerFile | None:
        """The ledger registered for the session's data file's content, or None."""
        if not isinstance(self._source, FileSource) or self._source.path is None:
            return None
        return LedgerFile.registered(self._source.path)

    def _check_binding(self) -> None:
        """Refuse a ledger file bound to another data set (checked by content).

        Also records the data file's identity (inode, size, modification and change
        times) *before* its content is fingerprinted: :meth:`_check_unchanged` compares
        it after the release has read the file, so a file replaced between the binding
        check and the read is never released from (its content was not the one checked).
        """
        led = self._ledger
        if not isinstance(led, LedgerFile):
            return
        if isinstance(self._source, FileSource):
            assert self._source.path is not None
            self._bound_stat = _file_identity(self._source.path)
            led.check_data(self._source.path)
            return
        if led.header.get("data") is not None:
            raise LedgerError(
                f"ledger={led.path} is bound to the file {led.header['data'].get('path')}; "
                f"this session's data are {self._source.describe()}, whose content cannot be "
                "checked against it. Open the session on that file."
            )

    @property
    def budget(self) -> Budget:
        """The total budget (cap)."""
        return self._ledger.cap

    @property
    def spent(self) -> Budget:
        """What every release so far cost in total, in the cap's measure."""
        return self._ledger.spent

    @property
    def remaining(self) -> Budget:
        """What can still be spent, in the cap's measure."""
        return self._ledger.remaining

    @property
    def ledger(self) -> Ledger | LedgerFile:
        """The ledger: the shared file, or a *copy* of the in-memory ledger.

        The in-memory ledger is handed out as a snapshot (its own list of records), so
        changing what this returns (``records.clear()``, a charge) changes nothing of the
        session's budget. A Python object is still no process boundary (THREATS.md rule
        12): code in the same process can reach the session's internals.
        """
        led = self._ledger
        if isinstance(led, Ledger):
            return dataclasses.replace(led, records=list(led.records))
        return led

    @property
    def records(self) -> list[LedgerRecord]:
        """Every release charged to this session's ledger, oldest first."""
        return list(self._ledger.records)

    @property
    def data(self) -> DataSource:
        """The data source (columns, description)."""
        return self._source

    @property
    def last_record(self) -> LedgerRecord | None:
        """The ledger entry of this session's last successful release (None before one).

        Unlike ``records[-1]``, never another process's entry of a shared ledger file."""
        return self._last

    @property
    def reproducible(self) -> bool:
        """Whether the session was opened for reproduction (``reproducible_seed``)."""
        return self._seed is not None

    def summary(self) -> dict[str, object]:
        """JSON-ready: cap, spent, remaining and every release."""
        return dict(self._ledger.summary())

    def __getstate__(self) -> dict[str, Any]:
        raise TypeError(
            "a Session cannot be pickled or copied: a copy of its ledger would hold the same "
            "remaining budget a second time. Share one budget across processes with "
            "Session(data, ledger=FILE) instead."
        )

    def __repr__(self) -> str:
        return (
            f"Session({self._source.describe()}, budget={self.budget}, spent={self.spent}, "
            f"releases={len(self._ledger.records)})"
        )

    # ------------------------------------------------------------------ the release protocol
    def _random_source(self) -> np.random.Generator | None:
        """The randomness of the next release: ``None`` (fresh OS entropy) or, opened for
        reproduction, the generator of stream k (class docstring)."""
        if self._seed is None:
            return None
        with self._lock:
            k = self._streams
            self._streams += 1
        return np.random.default_rng(np.random.SeedSequence(self._seed, spawn_key=(k,)))

    def _mode_params(self) -> dict[str, Any]:
        via = {"via": self._via} if self._via else {}
        if self._seed is None:
            return {"reproducible": False, **via}
        return {"reproducible": True, "stream": self._streams - 1, **via}

    def _release(
        self,
        *,
        label: str,
        planned: Budget,
        bounded_range: bool,
        compute: Callable[[], T],
        spent_of: Callable[[T], Budget],
        params: Callable[[T], dict[str, Any]],
        columns: Sequence[Hashable] = (),
        public_errors: tuple[type[BaseException], ...] = (),
    ) -> T:
        """Pre-check ``planned``, compute, charge what was spent, then return.

        The one road of every release (THREATS.md rule 9): arguments are validated by the
        caller before this; then the ledger is checked (refused: nothing read, nothing
        charged), the data binding re-checked, and ``compute`` touches the data. Any
        exception from there on charges ``planned`` before it propagates
        (:func:`charged_on_failure`): a release that fails *on the data* is itself an
        output that depends on them, so an analyst cannot probe the data for free by
        provoking errors (issue-11 and issue-23 attack reviews), and its message names the
        column and the kind of problem only. Values outside the public bounds never raise
        in a session: they are clamped (see each release). On success the release's real
        cost ``spent_of(result)`` is charged before the result is returned.

        ``columns`` names the columns the release reads (for the withheld message);
        ``public_errors`` are error types shown unchanged (still charged), see
        :func:`charged_on_failure`.
        """
        self._ledger.check(planned, label=label, bounded_range=bounded_range)
        self._check_binding()
        if self._seed is not None:  # before the data: an error here is not a release
            warnings.warn(
                f"{label}: this session was opened with reproducible_seed, so this "
                "release's noise is a fixed function of the seed; anyone who knows it can "
                "undo the noise. Use it for tests and studies only, never on real data.",
                ReproducibleSeedWarning,
                stacklevel=3,
            )
        mode = self._mode_params()

        def charge_planned() -> None:
            with self._lock:
                self._ledger.charge(
                    planned, label=f"{label} (failed on the data)",
                    params={"failed_on_data": True, **mode}, bounded_range=bounded_range,
                )

        with charged_on_failure(charge_planned, label=label, planned=planned, columns=columns,
                                public=public_errors):
            result = compute()
            self._check_unchanged()
            cost = spent_of(result)
            public = {**params(result), **mode}
        with self._lock:  # LedgerFile.charge also locks the file across processes
            self._last = self._ledger.charge(
                cost, label=label, params=public, bounded_range=bounded_range
            )
        return result

    def _check_unchanged(self) -> None:
        """Refuse a release whose data file changed after its binding check."""
        if self._bound_stat is None or not isinstance(self._source, FileSource):
            return
        assert self._source.path is not None
        try:
            now: tuple[int, ...] | None = _file_identity(self._source.path)
        except OSError:
            now = None
        if now != self._bound_stat:
            raise LedgerError(
                f"data {self._source.path}: the file changed while this release read it "
                "(replaced or written to after its content was checked against the ledger); "
                "nothing is released. The planned cost was charged, since the file was read. "
                "Do not modify a data file while a release runs on it."
            )

    def _auto_out_of_core(self) -> bool:
        """Whether ``aggregate="auto"`` will read this source out of core, decided before
        the release so that a request only the in-memory path serves is refused uncharged.

        The row count is public under replace-one neighbours. A file the row count cannot
        read answers False here: that failure depends on the file's content, so it is
        left to the release, where it is charged (the release counts again on the file it
        binds, so a file replaced in between is decided on what is actually read).
        """
        if not isinstance(self._source, FileSource):
            return False
        try:
            return self._source.row_count() > AGGREGATE_ROWS
        except (DPFairError, OSError):
            return False

    def _use_aggregates(self, aggregate: str) -> bool:
        if self._source.kind == "dask":
            return aggregate != "never"
        if isinstance(self._source, FileSource):
            return aggregate == "always" or (
                aggregate == "auto" and self._source.row_count() > AGGREGATE_ROWS
            )
        return False

    # ------------------------------------------------------------------ releases
    def median_ci(
        self,
        column: Hashable | None = None,
        *,
        rho: float,
        bounds: tuple[float, float],
        alpha: float = 0.05,
        method: str = "expmech",
        granularity: float | None = None,
        rng: None = None,
        aggregate: str = "auto",
    ) -> MedianInterval:
        """Private (1 − α) confidence interval for the median of one column (ρ-zCDP).

        Wraps :func:`dpfair.median.confidence_interval` (data in memory) and
        :func:`dpfair.median.confidence_interval_from_counts` (big files through DuckDB,
        Dask DataFrames on the cluster: only the 2^D bin counts come back). Charged
        ``result.privacy`` (ρ-zCDP) before it is returned.

        Parameters
        ----------
        column : hashable, optional
            The column (may be omitted when the data have one).
        rho, bounds, alpha, method, granularity
            As in :func:`dpfair.median.confidence_interval`.
        rng : None
            Must be None: the session draws the randomness (class docstring,
            *Randomness*); an int or any Generator is refused before the data are read.
        aggregate : {"auto", "always", "never"}
            For a file: aggregate with DuckDB instead of loading the column ("auto": files
            over 2^24 rows, a public count, never the byte size). For a Dask DataFrame:
            "never" brings the column back instead of the bin counts. Ignored for
            in-memory data.

        Returns
        -------
        MedianInterval

        Raises
        ------
        BudgetExceededError
            ρ would pass the session's budget (nothing computed, released or charged).
        IncompatibleBudgetError
            The session's budget is (ε, δ) without ``convert_delta``, or pure ε.
        """
        from dpfair.median import (
            aggregation_depth,
            confidence_interval,
            confidence_interval_from_counts,
        )

        _refuse_caller_randomness(rng, "rng")
        col = self._source.resolve(column)
        r = check_positive("rho", rho)
        a = check_in_open_interval("alpha", alpha, 0.0, 1.0)
        try:
            depth = aggregation_depth(str(method), bounds, granularity)  # checks method, bounds
        except OverflowError:  # public parameters only: (HI - LO) / granularity overflows
            raise InvalidParameterError(
                f"bounds={tuple(bounds)!r}, granularity={granularity!r}: the range over the "
                "granularity overflows a float (no grid that fine exists); use a coarser "
                "granularity or narrower public bounds."
            ) from None
        lo, hi = float(bounds[0]), float(bounds[1])
        agg = _check_aggregate(aggregate)
        source = self._source
        gen = self._random_source()
        used_counts: list[bool] = []

        def compute() -> MedianInterval:
            use_counts = self._use_aggregates(agg)  # a row count: reads the file
            used_counts.append(use_counts)
            if use_counts:
                def refine(sub: tuple[float, float], d: int) -> np.ndarray:
                    return source.histogram(col, sub, d)  # type: ignore[attr-defined]

                counts = source.histogram(col, (lo, hi), depth)  # type: ignore[attr-defined]
                return confidence_interval_from_counts(
                    counts, rho=r, bounds=(lo, hi), alpha=a, method=method,
                    granularity=granularity, rng=gen, refine=refine,
                )
            return confidence_interval(
                source.column(col), rho=r, bounds=(lo, hi), alpha=a, method=method,
                granularity=granularity, rng=gen,
            )

        def params(res: MedianInterval) -> dict[str, Any]:
            return {
                "column": col, "rho": r, "bounds": [lo, hi], "alpha": a,
                "method": str(method), "granularity": res.granularity, "n": res.n,
                "aggregated": used_counts[0],
            }

        return self._release(
            label="median_ci",
            planned=Budget.zcdp(r),
            bounded_range=False,
            compute=compute,
            spent_of=lambda res: res.privacy,
            params=params,
            columns=[col],
            # "n too small for this rho and alpha": public n and parameters only
            public_errors=(InsufficientDataError,),
        )

    def place_facility(
        self,
        column: Hashable | None = None,
        *,
        epsilon: float,
        domain: tuple[float, float],
        widening: float | None = None,
        median: str = "lower",
        rng: None = None,
    ) -> float:
        """Place one facility privately on ``domain`` (DPExpMed_α, paper 000): ε-DP.

        Wraps :meth:`dpfair.facility.DPExpMed.sample` (one location). DPExpMed is an
        exponential mechanism, hence ε-bounded-range: a ρ-zCDP session is charged ε²/8
        (:attr:`~dpfair.facility.DPExpMed.privacy_zcdp`), an (ε, δ) or pure session ε.
        The whole column is read (for a Dask DataFrame it is brought back to this
        process: the exact sampler needs order statistics).

        Parameters
        ----------
        column : hashable, optional
            The locations (may be omitted when the data have one column).
        epsilon, domain, widening, median
            As in :class:`dpfair.facility.DPExpMed`. Locations outside ``domain`` are
            clamped to it (per record, so the guarantee holds; unlike
            :class:`~dpfair.facility.DPExpMed`, which refuses them, since a refusal that
            names the records would be a release of them).
        rng : None
            Must be None (class docstring, *Randomness*).

        Returns
        -------
        float
            The released location.
        """
        from dpfair.facility import DPExpMed

        _refuse_caller_randomness(rng, "rng")
        col = self._source.resolve(column)
        mech = DPExpMed(epsilon, domain, widening=widening, median=median)  # type: ignore[arg-type]
        source = self._source
        gen = self._random_source()
        n_rows: list[int] = []

        def compute() -> float:
            # clamped to the public domain (a per-record map, so ε-DP is unchanged): a
            # refusal naming out-of-domain records would leak them (attack review)
            x = np.clip(np.asarray(source.column(col), dtype=np.float64), *mech.domain)
            n_rows.append(int(x.size))
            return float(mech.sample(x, rng=gen))

        def params(_loc: float) -> dict[str, Any]:
            return {
                "column": col, "epsilon": mech.epsilon, "domain": list(mech.domain),
                "widening": mech.widening_for(n_rows[0]),
                "widening_rule": "1/(n*epsilon)" if widening is None else "given",
                "median": mech.median, "n": n_rows[0],
            }

        return self._release(
            label="place_facility",
            planned=mech.privacy,
            bounded_range=True,
            compute=compute,
            spent_of=lambda _loc: mech.privacy,
            params=params,
            columns=[col],
        )

    def fit_fair_classifier(
        self,
        *,
        features: Sequence[Hashable],
        target: Hashable,
        sensitive: Hashable,
        epsilon: float,
        delta: float,
        alpha: float,
        feature_bounds: Sequence[tuple[float, float]],
        random_state: None = None,
        cross_fit: bool | None = None,
        aggregate: str = "auto",
        **options: Any,
    ) -> CDPFairClassifier:
        """Fit CDP-Fair (paper 003) on the session's data: an (ε, δ)-DP release.

        Wraps :class:`dpfair.fairclass.CDPFairClassifier` (data in memory) and
        :func:`dpfair.fairclass.fit_cdp_fair_from_file` (big files, out of core). The
        request's planned total (``plan_budget(...).limit``) is checked first; the fitted
        model's ``privacy_spent_`` is charged before the model is returned. An (ε, δ)
        release cannot be charged to a ρ-zCDP budget (no zCDP equivalent): open the
        session with ``Budget.approx``.

        Parameters
        ----------
        features : sequence of column names
            Feature columns, in the order of ``feature_bounds``.
        target, sensitive : column names
            0/1 label and 0/1 group columns.
        epsilon, delta, alpha, feature_bounds, cross_fit
            As in :class:`~dpfair.fairclass.CDPFairClassifier` (``cross_fit=None``: the
            threshold rule's default).
        random_state : None
            Must be None (class docstring, *Randomness*).
        aggregate : {"auto", "always", "never"}
            For a file: fit from DuckDB aggregates ("auto": files over 2^24 rows, a public
            count, never the byte size). For a Dask DataFrame: "never" brings the columns
            back (the default computes the kernel-grid weights and score histograms on the
            cluster).
        **options
            Other :class:`~dpfair.fairclass.CDPFairClassifier` parameters (``bandwidth``,
            ``clip`` — **True by default in a session**: features outside
            ``feature_bounds`` are clamped, per record —, ``alpha_margin``,
            ``cross_fit_budget``, ``s1_share``, ``count_share``, ``threshold_count_share``,
            ``threshold_rule``, ``fail_prob``, ``check_share``, ``estimator``,
            ``categories``, ``grid_resolution``, ``max_grid_nodes``, ``constraints``,
            ``on_uncertified``, ``radius``). ``constraints="equal_opportunity"`` works on
            every path: from aggregates it adds, per S2 draw, one pass over the
            calibration half's positive-label rows (the score needs S2's released
            p̃_{a,1}); the same seed gives the in-memory release.

        Notes
        -----
        Whether the fit is certified (``certified_``) depends on the data, so the
        :class:`~dpfair.UncertifiedFairnessWarning` of an uncertified fit is part of the
        release: it is held back during the fit and issued only after the charge. With
        ``on_uncertified="raise"`` an uncertified fit returns nothing: the session charges
        the fit's planned budget (what it spent) and the
        :class:`~dpfair.fairclass.UncertifiedFairnessError` propagates unchanged (its
        text and certificates are released numbers, like the warning's).

        Returns
        -------
        CDPFairClassifier
            Fitted; ``privacy_spent_`` is what was charged (in its own measure).
        """
        from dpfair._validation import check_alpha, check_budget
        from dpfair.fairclass import CDPFairClassifier, fit_cdp_fair_from_file, plan_budget

        _refuse_caller_randomness(random_state, "random_state")
        allowed = {"bandwidth", "clip", "alpha_margin", "cross_fit_budget", "s1_share",
                   "count_share", "threshold_count_share", "threshold_rule", "fail_prob",
                   "check_share", "estimator", "categories", "grid_resolution",
                   "max_grid_nodes", "constraints", "on_uncertified", "radius",
                   "calibration_share"}
        unknown = sorted(set(options) - allowed)
        if unknown:
            raise InvalidParameterError(
                f"{', '.join(unknown)}: unknown option(s); accepted: {', '.join(sorted(allowed))}."
            )
        constraints = options.get("constraints", "demographic_parity")
        if constraints not in _FAIR_CONSTRAINTS:
            raise InvalidParameterError(
                f"constraints={constraints!r}: expected 'demographic_parity' or "
                "'equal_opportunity'."
            )
        if options.get("on_uncertified", "warn") not in ("warn", "raise"):
            raise InvalidParameterError(
                f"on_uncertified={options['on_uncertified']!r}: expected 'warn' (return the "
                "model, certified_ False, and warn) or 'raise' (return nothing; the budget "
                "is still charged)."
            )
        share = options.get("calibration_share", 0.5)
        if (isinstance(share, bool) or not isinstance(share, (int, float))
                or not 0.1 <= float(share) <= 0.9):
            raise InvalidParameterError(
                f"calibration_share={share!r}: expected a public number in [0.1, 0.9] (the "
                "calibration half's share of the rows; plan it with "
                "dpfair.fairclass.plan_certification)."
            )
        if float(share) != 0.5 and cross_fit:
            raise InvalidParameterError(
                f"calibration_share={share!r} with cross_fit=True: cross-fitting swaps the "
                "halves, so they must be equal; use calibration_share=0.5 or cross_fit=False."
            )
        agg = _check_aggregate(aggregate)  # before anything is read or charged
        # Which path "auto" takes is a public fact (the row count), so a request the
        # out-of-core path cannot serve is refused here, uncharged, like with "always"
        # (the release re-decides on the file it binds; see _auto_out_of_core).
        out_of_core = (agg == "always" or (self._source.kind == "dask" and agg != "never")
                       or (agg == "auto" and self._auto_out_of_core()))
        if isinstance(features, (str, bytes)) or not isinstance(features, Sequence):
            raise InvalidParameterError(
                f"features={features!r}: expected a list of column names."
            )
        names = list(features)
        cols = [*names, target, sensitive]
        if not names or len(set(cols)) != len(cols):
            raise InvalidParameterError(
                f"features={names!r}, target={target!r}, sensitive={sensitive!r}: need at "
                "least one feature and distinct columns."
            )
        self._source.check_columns(cols)
        eps, dl = check_budget(epsilon, delta)
        check_alpha(alpha, options.get("alpha_margin", 0.0))
        if cross_fit is not None and not isinstance(cross_fit, (bool, np.bool_)):
            raise InvalidParameterError(
                f"cross_fit={cross_fit!r}: expected True, False or None (the rule's default)."
            )
        plan_opts = {k: options[k] for k in ("cross_fit_budget", "s1_share", "count_share",
                                             "threshold_count_share") if k in options}
        planned = plan_budget(eps, dl, cross_fit=bool(cross_fit), has_s2=True,
                              constraints=constraints, **plan_opts).limit
        source = self._source
        gen = self._random_source()
        used: list[bool] = []
        # In a session features outside the public box are clamped (clip=True) unless the
        # caller asks otherwise: with clip=False an out-of-box value fails the release,
        # which is then charged and reported without details (see _release).
        options.setdefault("clip", True)
        settings = dict(epsilon=eps, delta=dl, alpha=alpha, feature_bounds=feature_bounds,
                        random_state=gen, cross_fit=cross_fit, **options)
        # the aggregate fits take a bool: the threshold rule's default, as in memory
        rule_default = options.get("threshold_rule", "certified") == "target"
        agg_settings = {**settings, "cross_fit": rule_default if cross_fit is None else cross_fit}
        # every public parameter is checked by the estimator's own checks before anything
        # is read or charged (THREATS rule 9): a typo costs nothing
        CDPFairClassifier(**settings).check_params(len(names), [str(f) for f in names])
        if out_of_core:
            from dpfair.fairclass.outofcore import validate_request

            validate_request(CDPFairClassifier(**agg_settings),
                             features=[str(f) for f in names], target=str(target),
                             sensitive=str(sensitive))
        held: list[warnings.WarningMessage] = []

        def compute() -> CDPFairClassifier:
            used.append(self._use_aggregates(agg))  # a row count: reads the file
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always", UncertifiedFairnessWarning)
                out = fit()
            held.extend(w for w in seen if issubclass(w.category, UncertifiedFairnessWarning))
            for w in seen:  # anything else passes through unchanged
                if not issubclass(w.category, UncertifiedFairnessWarning):
                    warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
            return out

        def fit() -> CDPFairClassifier:
            use_aggregates = used[0]
            if use_aggregates and isinstance(source, FileSource):
                file_settings = dict(agg_settings)
                file_opts = {k: file_settings.pop(k) for k in _FILE_FIT_OPTIONS
                             if k in file_settings}
                return fit_cdp_fair_from_file(
                    source.path,  # type: ignore[arg-type]
                    CDPFairClassifier(**file_settings),
                    features=[str(f) for f in names], target=str(target),
                    sensitive=str(sensitive), **file_opts,
                )
            if use_aggregates and source.kind == "dask":
                from dpfair.session._dask_fair import fit_cdp_fair_from_dask

                return fit_cdp_fair_from_dask(
                    source.frame,  # type: ignore[attr-defined]
                    features=names, target=target, sensitive=sensitive, **agg_settings,
                )
            data = source.columns(cols)
            X = np.column_stack([data[f] for f in names])
            clf = CDPFairClassifier(**settings)
            return clf.fit(X, data[target], sensitive_features=data[sensitive])

        def params(clf: CDPFairClassifier) -> dict[str, Any]:
            return {
                "features": names, "target": target, "sensitive": sensitive,
                "feature_bounds": [list(map(float, b)) for b in feature_bounds],
                "epsilon": eps, "delta": dl, "alpha": alpha, "cross_fit": cross_fit,
                "aggregated": used[0], **{k: v for k, v in options.items()},
            }

        def spent_of(clf: CDPFairClassifier) -> Budget:
            spent = clf.privacy_spent_
            if not isinstance(spent, Budget):  # pragma: no cover - defensive
                raise InvalidParameterError("internal: the fit reported no privacy spent.")
            return spent

        model = self._release(
            label="fit_fair_classifier",
            planned=planned,
            bounded_range=False,
            compute=compute,
            spent_of=spent_of,
            params=params,
            columns=cols,
        )
        for w in held:  # released only now that the fit has been charged
            warnings.warn(w.message, w.category, stacklevel=2)
        return model

    def quantile_ci(
        self,
        column: Hashable | None = None,
        q: float | Sequence[float] = 0.5,
        *,
        rho: float,
        bounds: tuple[float, float],
        alpha: float = 0.05,
        method: str = "cdf",
        granularity: float | None = None,
        localize: bool | None = None,
        by: Hashable | None = None,
        groups: Sequence[Any] | None = None,
        group_sizes: str | None = None,
        rng: None = None,
        aggregate: str = "auto",
    ) -> Any:
        """Private confidence interval(s) for quantiles of one column, optionally by group.

        Wraps :func:`dpfair.quantiles.confidence_interval` (one level ``q``) and
        :func:`dpfair.quantiles.confidence_intervals` (a sequence of levels, simultaneous
        coverage), and, for big files, :func:`dpfair.quantiles.confidence_intervals_from_queries`
        (count queries through DuckDB, the column never loaded). Charged before it is
        returned.

        Parameters
        ----------
        column : hashable, optional
            The column (may be omitted when the data have one).
        q : float or sequence of float
            Quantile level(s) in (0, 1).
        rho, bounds, alpha, method, granularity, localize
            As in :func:`dpfair.quantiles.confidence_interval`.
        rng : None
            Must be None (class docstring, *Randomness*): the session draws fresh OS
            entropy, or the stream of its ``reproducible_seed``.
        by : hashable, optional
            A group column: one interval (or family) per group, under parallel composition.
        groups : sequence, required with ``by``
            The PUBLIC list of groups to report (never read off the data: the set of values
            present is itself a release). Rows whose group is not listed are ignored.
        group_sizes : {"public"}, required with ``by``
            The declaration that the number of rows of each listed group is public.
        aggregate : {"auto", "always", "never"}
            For a file and the methods ``"cdf"``, ``"binsearch"``, ``"binsearch_cdf"``:
            answer from DuckDB count queries instead of loading the column ("auto": files
            over 2^24 rows, a public count). The result is the SAME as in memory for the
            same stream (the methods read the data only through exact counts). ExpMech
            needs order statistics: ``aggregate="always"`` with it is refused before the
            data are read, "auto" loads the column. Ignored for in-memory data and with
            ``by`` (group rows are read into memory).

        Returns
        -------
        QuantileInterval, QuantileIntervals, or dict
            With ``by``: a dict group → result, in the order of ``groups``.

        Notes
        -----
        Neighbour relation and charge with ``by``. The library's relation is replace-one
        with n public. The quantile methods also need each group's size n_g to be public
        (it sets the target ranks and the tree's root). A replaced record that *changes
        group* would change two sizes by one, i.e. touch two groups' data sets by an
        addition and a removal — which a public-size method does not cover, and whose cost
        cannot be bounded without releasing the sizes. So the caller declares the sizes
        public (``group_sizes="public"``, e.g. published census counts, or sizes released
        earlier and charged then). Given public sizes, neighbouring data sets (replace-one,
        same sizes) differ in one record that stays in its group: exactly one group's data
        set changes by replace-one, and the others are identical. Each group's release is
        ρ-zCDP for its own rows, so the whole family is ρ-zCDP (parallel composition) and
        the session is charged ρ once — not ρ per group. The groups' rows are disjoint;
        each group draws from its own stream (``Generator.spawn``).
        """
        from dpfair.quantiles import (
            QUERY_METHODS,
            confidence_interval,
            confidence_intervals,
            confidence_intervals_from_queries,
            file_queries,
        )
        from dpfair.quantiles import check_request as check_quantile_request

        col = self._source.resolve(column)
        agg = _check_aggregate(aggregate)
        if agg == "always" and str(method) not in QUERY_METHODS and isinstance(
                self._source, FileSource) and by is None:
            raise InvalidParameterError(
                f"aggregate='always' with method={method!r}: the out-of-core path serves "
                f"{list(QUERY_METHODS)} (ExpMech needs order statistics); use one of them "
                "or aggregate='auto'/'never' to load the column."
            )
        r = check_positive("rho", rho)
        a = check_in_open_interval("alpha", alpha, 0.0, 1.0)
        many = not np.isscalar(q)
        # every public parameter through the engine's own checks, before anything is read
        # or charged (THREATS rule 9): a typo in q, bounds, method or granularity is free
        try:
            levels, _r, _a, (lo, hi), _loc, _theta = check_quantile_request(
                q, rho=r, bounds=bounds, alpha=a, method=str(method),
                granularity=granularity, localize=localize)
        except OverflowError:  # public parameters only: (HI - LO) / granularity overflows
            raise InvalidParameterError(
                f"bounds={tuple(bounds)!r}, granularity={granularity!r}: the range over the "
                "granularity overflows a float; use a coarser granularity or narrower "
                "public bounds."
            ) from None
        source = self._source
        _refuse_caller_randomness(rng, "rng")
        gen = self._random_source()
        if by is not None:
            self._source.check_columns([by])
            if groups is None or len(groups) == 0:
                raise InvalidParameterError(
                    "groups=None: with by=... pass the public list of groups to report, e.g. "
                    "groups=['north', 'south']; it cannot be read off the data (the set of "
                    "values present is itself a release)."
                )
            if group_sizes != "public":
                raise InvalidParameterError(
                    f"group_sizes={group_sizes!r}: per-group intervals need each group's size "
                    "to be public (a record that changes group would change two sizes, see "
                    "the Notes); pass group_sizes='public' if the sizes are public, or "
                    "release them first."
                )
            if len(set(groups)) != len(groups):
                raise InvalidParameterError(f"groups={list(groups)!r}: contains duplicates.")
        elif groups is not None or group_sizes is not None:
            raise InvalidParameterError("groups/group_sizes: only meaningful with by=COLUMN.")

        def one(values: Any, stream: Any) -> Any:
            if many:
                return confidence_intervals(
                    values, levels, rho=r, bounds=(lo, hi), alpha=a, method=method,
                    granularity=granularity, localize=localize, rng=stream)
            return confidence_interval(
                values, levels[0], rho=r, bounds=(lo, hi), alpha=a, method=method,
                granularity=granularity, localize=localize, rng=stream)

        def group_labels() -> Any:
            raw = getattr(source, "_cols", None)
            if isinstance(raw, dict) and by in raw:  # in-memory: any hashable labels
                values = raw[by]
                to_numpy = getattr(values, "to_numpy", None)
                return to_numpy() if to_numpy is not None else np.asarray(values)
            if isinstance(source, FileSource) and source.path is not None:
                # any labels: read as text in file order (the value column is read by
                # the same ordered scan); groups are then matched as strings
                from dpfair.data.sql import read_text_column

                return read_text_column(source.path, str(by))
            return source.column(by)

        used: list[bool] = []

        def compute() -> Any:
            if (by is None and isinstance(source, FileSource) and source.path is not None
                    and str(method) in QUERY_METHODS and self._use_aggregates(agg)):
                used.append(True)
                n, count, hist = file_queries(source.path, str(col))
                res = confidence_intervals_from_queries(
                    n, count, hist, levels, rho=r, bounds=(lo, hi), alpha=a,
                    method=str(method), granularity=granularity, localize=localize,
                    rng=gen)
                return res if many else res.intervals[0]
            used.append(False)
            x = source.column(col)
            if by is None:
                return one(x, gen)
            labels = group_labels()
            out: dict[Any, Any] = {}
            # one independent stream per group: a group's noise never depends on how much
            # randomness another group's sampler happened to consume
            streams = (gen.spawn(len(groups or ())) if gen is not None
                       else [None] * len(groups or ()))
            as_text = labels.dtype == object and isinstance(source, FileSource)
            for g, stream in zip(groups or (), streams, strict=True):
                rows = x[labels == (str(g) if as_text else g)]
                if rows.size == 0:  # sizes are public: naming an empty group leaks nothing
                    raise InvalidParameterError(
                        f"groups: group {g!r} has no rows (its size is public); drop it.")
                out[g] = one(rows, stream)
            return out

        def spent_of(res: Any) -> Budget:
            if by is None:
                budget: Budget = res.privacy
                return budget
            # parallel composition over disjoint groups (Notes): the largest group cost
            return Budget.zcdp(max(float(v.privacy.rho or 0.0) for v in res.values()))

        def params(res: Any) -> dict[str, Any]:
            return {
                "column": col, "q": levels, "rho": r, "bounds": [lo, hi], "alpha": a,
                "method": str(method), "by": by, "groups": list(groups or []),
                "group_sizes": group_sizes, "aggregated": bool(used and used[0]),
            }

        return self._release(
            label="quantile_ci",
            planned=Budget.zcdp(r),
            bounded_range=False,
            compute=compute,
            spent_of=spent_of,
            params=params,
        )
