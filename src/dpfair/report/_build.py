"""Assemble the report: run each section, write ``index.html`` and ``results.json``."""

from __future__ import annotations

import json
import os
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

import dpfair
from dpfair._atomic import strict_json, write_text_atomic
from dpfair._errors import InvalidParameterError
from dpfair.report._facility import FacilityReportConfig, facility_section
from dpfair.report._fairclass import FairclassReportConfig, fairclass_section
from dpfair.report._federated import federated_section
from dpfair.report._html import render_page
from dpfair.report._median import MedianReportConfig, median_section

__all__ = ["ReportConfig", "build_report"]

ProgressCallback = Callable[[int, int, str], None]

#: The report's opening, for a reader who has not seen the papers.
INTRO: tuple[str, ...] = (
    "This report runs the four parts of dpfair on simulated data and on small public data "
    "sets, and shows what a user of each gets: how wide or how accurate the private "
    "answers are, how often they are right, and what privacy each one costs.",
    "Differential privacy limits how much any one person's record can change what is "
    "published. The privacy parameter says by how much: ε for facility location and fair "
    "classification, ρ (zero-concentrated DP) for the median; smaller is more private, "
    "and each figure also gives ρ as an ε. Every figure says first what to look at, then "
    "its exact setting, the seed that reproduces it and the privacy spent. The figures "
    "are simulations that illustrate the methods: none of them is a private release.",
)


@dataclass(frozen=True)
class ReportConfig:
    """Settings of every section: median CIs (paper 004), facility location (paper 000)
    and fair classification (paper 003).

    Attributes
    ----------
    median : MedianReportConfig
    facility : FacilityReportConfig
    fairclass : FairclassReportConfig
    """

    median: MedianReportConfig = field(default_factory=MedianReportConfig.quick)
    facility: FacilityReportConfig = field(default_factory=FacilityReportConfig.quick)
    fairclass: FairclassReportConfig = field(default_factory=FairclassReportConfig.quick)

    @classmethod
    def quick(cls) -> ReportConfig:
        """Small repetition counts and sizes: the demo (well under 3 minutes on 2 cores)."""
        return cls(
            median=MedianReportConfig.quick(),
            facility=FacilityReportConfig.quick(),
            fairclass=FairclassReportConfig.quick(),
        )

    @classmethod
    def full(cls) -> ReportConfig:
        """The papers' repetition counts and settings (n up to 10^6 + 1 for facility)."""
        return cls(
            median=MedianReportConfig.full(),
            facility=FacilityReportConfig.full(),
            fairclass=FairclassReportConfig.full(),
        )

    @classmethod
    def tiny(cls) -> ReportConfig:
        """A handful of repetitions: checks that the report builds (unit tests)."""
        return cls(
            median=MedianReportConfig.tiny(),
            facility=FacilityReportConfig.tiny(),
            fairclass=FairclassReportConfig.tiny(),
        )


def build_report(
    out_dir: str | os.PathLike[str],
    quick: bool = True,
    seed: int = 0,
    *,
    config: ReportConfig | None = None,
    progress: ProgressCallback | None = None,
) -> Path:
    """Build the HTML report and return the path of its ``index.html``.

    Parameters
    ----------
    out_dir : str or path-like
        Directory to write into (created if missing). It receives ``index.html``, a
        self-contained page with every figure embedded as a base64 PNG, and
        ``results.json`` with the numbers behind the figures (no raw data).
    quick : bool, default=True
        Small repetition counts and sizes (well under a minute on 2 cores) instead of the
        papers' settings.
    seed : int, default=0
        Root seed of every simulation; same seed, same report (up to the time stamp).
    config : ReportConfig, optional
        Explicit sizes; overrides ``quick``.
    progress : callable, optional
        ``progress(done, total, label)`` after each step, e.g. to drive a progress bar.

    Returns
    -------
    pathlib.Path
        ``out_dir / "index.html"``.

    Notes
    -----
    Every private interval in the median section comes from
    :func:`dpfair.median.confidence_interval`; the facility section computes exact output
    laws of :class:`dpfair.facility.DPExpMed` and its baselines (and runs the registered
    ``facility-*`` studies' ``run_one`` cell by cell); the fair-classification section runs
    the registered ``fairclass-*`` studies' ``run_one`` cell by cell (CDP-Fair and its
    baselines through :mod:`dpfair.fairclass`). Each figure states, in its caption,
    the setting, the seed and the privacy spent as reported by the result or mechanism.
    Non-private intervals are drawn for reference only, on synthetic data or on a bundled
    data set that is already public.
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InvalidParameterError(f"seed={seed!r}: expected a non-negative integer.")
    cfg = config or (ReportConfig.quick() if quick else ReportConfig.full())
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)

    total = cfg.median.units() + cfg.facility.units() + cfg.fairclass.units()
    done = 0

    def tick(label: str, units: int) -> None:
        nonlocal done
        done += units
        if progress is not None:
            progress(done, total, label)

    started = time.perf_counter()
    sections = [
        median_section(cfg.median, int(seed), tick),
        facility_section(cfg.facility, int(seed), tick),
        fairclass_section(cfg.fairclass, int(seed), tick),
        federated_section(cfg.fairclass, int(seed), tick),
    ]
    elapsed = time.perf_counter() - started

    mode = "full" if config is None and not quick else ("quick" if config is None else "custom")
    meta = [
        f"dpfair {dpfair.__version__} · numpy {np.__version__} · Python "
        f"{platform.python_version()} · {platform.machine()}",
        f"Built {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')} in {elapsed:.1f} s · "
        f"mode: {mode} · seed {seed}",
        f"Reproduce: dpfair report{' --quick' if mode == 'quick' else ''} --seed {seed} "
        f"--out {out}",
    ]
    page = render_page("dpfair report", meta, sections, intro=INTRO)
    index = out / "index.html"
    results = {
        "dpfair_version": dpfair.__version__,
        "seed": int(seed),
        "mode": mode,
        "elapsed_seconds": elapsed,
        "sections": {s.ident: s.results for s in sections},
    }
    # Both files atomically (temporary file + rename), the results first and the page last:
    # an interrupted build leaves the previous report or none, never a truncated page, and
    # an index.html that exists always has its results.json beside it.
    write_text_atomic(
        out / "results.json", json.dumps(strict_json(results), indent=2, allow_nan=False)
    )
    write_text_atomic(index, page)
    return index
