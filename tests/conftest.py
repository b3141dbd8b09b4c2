"""Shared fixtures.

``seed``
    One seed (0) by default. ``DPFAIR_TEST_SEEDS`` widens it, like scikit-learn's
    ``global_random_seed``: ``"0-9"`` (a range, both ends included), ``"1,5,7"`` (a list),
    ``"3"`` (one seed), or a mix such as ``"0-4,42"``.
``shared_data``
    Path of the project's ``../shared/data`` folder (UCI Adult and law-school CSVs), or a
    skip with the reason when it is absent, as on a user's machine. ``DPFAIR_SHARED_DATA``
    points elsewhere.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


def _parse_seeds(spec: str | None) -> list[int]:
    """Parse ``DPFAIR_TEST_SEEDS``; an empty or missing value means ``[0]``."""
    if spec is None or not spec.strip():
        return [0]
    seeds: list[int] = []
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            if "-" in part:
                lo_text, hi_text = part.split("-", 1)
                lo, hi = int(lo_text), int(hi_text)
                if lo > hi or lo < 0:
                    raise ValueError
                seeds.extend(range(lo, hi + 1))
            else:
                value = int(part)
                if value < 0:
                    raise ValueError
                seeds.append(value)
        except ValueError:
            raise pytest.UsageError(
                f"DPFAIR_TEST_SEEDS={spec!r}: expected non-negative seeds such as '0', "
                "'0-9' or '0-4,42'."
            ) from None
    return sorted(set(seeds)) or [0]


_SEEDS = _parse_seeds(os.environ.get("DPFAIR_TEST_SEEDS"))


@pytest.fixture(params=_SEEDS, ids=[f"seed={s}" for s in _SEEDS])
def seed(request: pytest.FixtureRequest) -> int:
    """A test seed: 0 by default, each of ``DPFAIR_TEST_SEEDS`` when set."""
    return int(request.param)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The shared data folder, or skip when it is not there."""
    override = os.environ.get("DPFAIR_SHARED_DATA")
    path = Path(override) if override else REPO_ROOT.parent / "shared" / "data"
    if not path.is_dir():
        pytest.skip(
            f"shared data folder not found at {path} (set DPFAIR_SHARED_DATA to use "
            "another location); tests that need the UCI/LSAC files are skipped"
        )
    return path


@pytest.fixture(autouse=True)
def _private_state_dir(tmp_path_factory: pytest.TempPathFactory,
                       monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test gets its own dpfair state directory (ledgers' high-water marks, registry).

    Tests write the same small CSVs again and again; with one shared registry the second
    ``ledger init`` on the same bytes would (rightly) be refused. Subprocesses inherit it.
    """
    path = tmp_path_factory.mktemp("dpfair-state")
    monkeypatch.setenv("DPFAIR_STATE_DIR", str(path))
    return path


# --- a quiet summary --------------------------------------------------------------------
# pytest's "-ra" prints one line per expected failure; scikit-learn's estimator checks alone
# are ~150 of them (the checks that need fit(X, y) without groups), all with the same
# reason, and they bury the failures. addopts uses "-rfEs" (failures, errors, skips) and
# this hook adds the expected failures and unexpected passes grouped by reason: one line
# per reason with its count. "pytest -rxX" (or -ra) still lists them one by one.


def _xfail_reason(report: pytest.TestReport) -> str:
    reason = str(getattr(report, "wasxfail", "") or "").strip()
    reason = reason.removeprefix("reason: ").strip()
    return reason.splitlines()[0] if reason else "(no reason given)"


def pytest_terminal_summary(terminalreporter, exitstatus, config):  # type: ignore[no-untyped-def]
    """Expected failures and unexpected passes, one line per reason with its count."""
    chars = getattr(config.option, "reportchars", "") or ""
    for key, label, char in (("xfailed", "XFAIL", "x"), ("xpassed", "XPASS", "X")):
        if char in chars or "a" in chars or "A" in chars:
            continue  # asked for one line each: pytest prints them
        reports = terminalreporter.stats.get(key, [])
        if not reports:
            continue
        groups: dict[str, list[str]] = {}
        for rep in reports:
            groups.setdefault(_xfail_reason(rep), []).append(rep.nodeid)
        what = "expected failures" if key == "xfailed" else "unexpected passes (not strict)"
        terminalreporter.write_sep("-", f"{len(reports)} {what}, by reason (-r{char} lists each)")
        for reason, ids in sorted(groups.items(), key=lambda kv: -len(kv[1])):
            where = ids[0].split("::", 1)[0]
            short = reason if len(reason) <= 90 else reason[:89] + "…"
            terminalreporter.write_line(f"{label} {len(ids):4d} x {where}: {short}")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--refresh-doc-outputs",
        action="store_true",
        default=False,
        help="tests/test_readme.py: write the printed outputs into README.md and the docs "
        "pages instead of failing on a stale one (see tools/refresh_doc_outputs.py).",
    )
