"""A site's own budget for FDP-Fair runs: its persistent ledger, its cap, single-use rounds.

The data holder decides its budget (THREATS.md rule 4): a site runs a round only if the
run's cost fits the cap of **its own** ledger (a :class:`~dpfair.privacy.LedgerFile`: the
one of its data, found by the data's fingerprint in the user's registry — THREATS.md rule
11), checked before any data are read. Each round of each run is recorded
under a single-use key, so a round cannot run twice (rule 3): a centre that sends a crafted
model for a second round 2 gets a refusal, not a second release with fresh noise.

What is charged, exactly (the per-site ledger equals the requested (ε_s, δ_s)):

* **round 1** charges the whole run: ``Budget.approx(ε_s, δ_s)`` (or ``Budget.zcdp(μ*²/2)``
  on a ρ-zCDP ledger), key ``fdp/run=<id>/round=1``. The two rounds of one run together
  are μ*-GDP for every row, μ* the Gaussian-DP level of (ε_s, δ_s) (``_protocol.py``):
  without cross-fitting, round 1 touches only half A (at μ*) and round 2 only half B (at
  μ*), disjoint data-independent halves, so parallel composition gives μ* for the run;
  with cross-fitting, every row is in one release of each round with μ₁² + μ₂² = μ*².
  μ*-GDP is exactly (ε_s, δ_s)-DP (analytic Gaussian) and exactly (μ*²/2)-zCDP.
* **round 2** is recorded at **zero extra cost** under ``fdp/run=<id>/round=2``: its privacy
  loss is already inside the run's charge made at round 1 (a reservation: if round 2
  never happens, the ledger over-counts, never under-counts). Round 2 is refused when the
  ledger holds no round 1 of the run.

So after a complete run the ledger shows exactly (ε_s, δ_s) (or μ*²/2) more than before.

Order of a round at the site: pre-flight (cap, remaining budget, single-use key, data
binding) before the data are read; the charge (exclusive lock, re-check, fsync) after the
data are read and before any noise is drawn; then the release. Two concurrent processes
running the same round: the second charge is refused under the lock. A crash between the
charge and the written message loses that run's round at this site (charged, nothing
released): the safe side.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from dpfair._errors import BudgetExceededError, InvalidParameterError, LedgerError
from dpfair.fairclass.federated._protocol import ProtocolConfig
from dpfair.privacy import Budget, LedgerFile

__all__ = [
    "charge_round",
    "local_ledger_path",
    "open_site_ledger",
    "preflight",
    "round_key",
    "run_cost",
    "zero_cost",
]


def round_key(run_id: str, round_no: int) -> str:
    """The single-use ledger key of one round of one run."""
    return f"fdp/run={run_id}/round={round_no}"


def run_cost(cfg: ProtocolConfig, site_id: str, cap: Budget) -> Budget:
    """The whole run's cost for ``site_id`` in the measure of ``cap`` (module docstring)."""
    spec, plan = cfg.site(site_id), cfg.plan(site_id)
    note = f"FDP-Fair run {cfg.protocol_id}: {plan.mu_total:.6g}-GDP per row (both rounds)"
    if cap.kind == "zcdp":
        return Budget.zcdp(plan.mu_total**2 / 2.0, note=note)
    return Budget.approx(spec.epsilon, spec.delta, note=note)


def zero_cost(cap: Budget) -> Budget:
    """Round 2's extra cost (zero, in the cap's measure; already charged at round 1)."""
    if cap.kind == "zcdp":
        return Budget.zcdp(0.0, note="round 2: inside the run's round-1 charge")
    return Budget.approx(0.0, 0.0, note="round 2: inside the run's round-1 charge")


def _check_cap_args(max_epsilon: float | None, max_delta: float | None) -> Budget | None:
    if max_epsilon is None and max_delta is None:
        return None
    if max_epsilon is None or max_delta is None:
        raise InvalidParameterError(
            "--max-epsilon and --max-delta: give both (the site's own (ε, δ) cap)."
        )
    if not (math.isfinite(max_epsilon) and max_epsilon > 0):
        raise InvalidParameterError(f"--max-epsilon={max_epsilon!r}: must be a number > 0.")
    if not 0 < max_delta < 1:
        raise InvalidParameterError(f"--max-delta={max_delta!r}: must lie in (0, 1).")
    return Budget.approx(max_epsilon, max_delta)


def local_ledger_path(state: Path, site_id: str) -> Path:
    """Where a new site-local journal is created: next to the state file."""
    return state.parent / f"{site_id}.fdp-ledger"


def open_site_ledger(
    *,
    ledger: Path | None,
    max_epsilon: float | None,
    max_delta: float | None,
    state: Path,
    site_id: str,
    data: Path,
    create: bool,
) -> tuple[LedgerFile, Budget | None]:
    """The site's ledger and its per-run cap (``--max-epsilon/--max-delta``, if given).

    * ``--ledger FILE``: that ledger (it must exist: ``dpfair ledger init``, or
      :meth:`LedgerFile.create`); with ``--max-*`` also, those bound each run.
    * only ``--max-epsilon/--max-delta``: the ledger of the site's data, found by the
      data's fingerprint in the user's registry (:meth:`LedgerFile.for_data`), whatever
      directory the run starts in — a run in a new directory on the same data meets the
      same cap. Without one, a site-local journal with that cap is created next to the
      state file by round 1's charge, and registered; a refused check writes nothing (a
      retry with a corrected cap starts afresh). The ledger's cap must be the one given.
      Nothing is read here: the data are fingerprinted at the ledger's first use, after
      :func:`preflight` has checked the setup against the cap.
    * neither: refused — the site must state its own budget.
    """
    cap = _check_cap_args(max_epsilon, max_delta)
    if ledger is not None:
        led = LedgerFile.open(ledger)
        return led, cap
    if cap is None:
        raise InvalidParameterError(
            "the site's budget: give --ledger FILE (the site's privacy ledger with its cap) "
            "or --max-epsilon E --max-delta D (a site-local journal with that cap); the "
            "setup's per-site budget is the centre's request, not the site's consent."
        )
    path = local_ledger_path(state, site_id)
    led = LedgerFile.for_data(
        data, cap, path=path, create=create, purpose=f"fdp-site {site_id}",
        missing=(
            f"ledger={path}: no site-local journal for these data (none is registered for "
            "their content, and none is next to the state file); round 1 of this run was "
            "not made here (or give the --ledger used in round 1)."
        ),
    )
    return led, cap


def preflight(
    led: LedgerFile,
    per_run_cap: Budget | None,
    cfg: ProtocolConfig,
    site_id: str,
    round_no: int,
    data: Path,
) -> Budget:
    """Everything checked before the site's data are read; returns the cost to charge.

    Refuses (BudgetExceededError / ReleaseReplayError / LedgerError / IncompatibleBudgetError)
    a setup asking for more than the per-run cap or than the ledger has left, a round
    already made for this run, round 2 without round 1, and data other than the ledger's.
    """
    spec = cfg.site(site_id)
    if per_run_cap is not None and (
        spec.epsilon > float(per_run_cap.epsilon or 0.0) * (1 + 1e-12)
        or spec.delta > per_run_cap.delta * (1 + 1e-12)
    ):
        raise BudgetExceededError(
            f"site {site_id!r}: the setup of run {cfg.protocol_id} asks this site for "
            f"(ε, δ) = ({spec.epsilon:g}, {spec.delta:g}), over the site's own cap "
            f"(--max-epsilon, --max-delta) = ({per_run_cap.epsilon:g}, "
            f"{per_run_cap.delta:g}). Refused before reading any data; nothing was charged."
        )
    key = round_key(cfg.protocol_id, round_no)
    cap = led.cap
    if round_no == 1:
        cost = run_cost(cfg, site_id, cap)
    else:
        if not led.has_key(round_key(cfg.protocol_id, 1)):
            raise LedgerError(
                f"ledger={led.path}: no round 1 of run {cfg.protocol_id} is recorded for "
                f"site {site_id!r}; round 2 runs only after this site's own round 1."
            )
        cost = zero_cost(cap)
    try:
        led.check(cost, label=f"fdp run {cfg.protocol_id} round {round_no}", key=key)
    except BudgetExceededError as exc:
        raise type(exc)(
            f"site {site_id!r}, run {cfg.protocol_id}, round {round_no}: {exc} (refused before "
            "reading any data)."
        ) from None
    if data.is_file():
        led.check_data(data)
    return cost


def charge_round(
    led: LedgerFile, cfg: ProtocolConfig, site_id: str, round_no: int, cost: Budget
) -> None:
    """Record the round under its single-use key (exclusive lock, fsync) before releasing."""
    spec, plan = cfg.site(site_id), cfg.plan(site_id)
    led.charge(
        cost,
        label=(
            f"FDP-Fair run {cfg.protocol_id}, site {site_id}, round {round_no}"
            + (" (charges the whole run: both rounds)" if round_no == 1 else
               " (inside the round-1 charge)")
        ),
        params={
            "run": cfg.protocol_id,
            "site": site_id,
            "round": round_no,
            "epsilon_s": spec.epsilon,
            "delta_s": spec.delta,
            "mu_star": plan.mu_total,
            "cross_fit": cfg.cross_fit,
            "pid": os.getpid(),
        },
        key=round_key(cfg.protocol_id, round_no),
    )
