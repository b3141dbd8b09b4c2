"""Shared references for the quantile speed work's identity tests (used by tests/median and
tests/attacks): the code before it (commit a9411e1, extracted with ``git archive`` and run
in a subprocess) and the former envelope-threshold search (bracketing, + 1e-9, the check).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dpfair.median._cdf import _bracket_root, mixture_sf

REPO = Path(__file__).resolve().parents[1]
#: The HEAD before the envelope Newton search and the in-place windows.
REFERENCE_COMMIT = "a9411e1ad9d7d1d552f3384b06dd56a8b149dca9"


def extract_reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """src/ of :data:`REFERENCE_COMMIT`, extracted from git (skip if unavailable)."""
    out = tmp_path_factory.mktemp("reference")
    try:
        archive = subprocess.run(["git", "-C", str(REPO), "archive", REFERENCE_COMMIT, "src"],
                                 capture_output=True, check=True, timeout=120).stdout
        subprocess.run(["tar", "-x", "-C", str(out)], input=archive, check=True, timeout=120)
    except (OSError, subprocess.SubprocessError):
        pytest.skip(f"commit {REFERENCE_COMMIT[:7]} not available to git archive")
    return out / "src"


def run_reference(src: Path, code: str, payload: object, timeout: float = 900) -> object:
    """Run ``code`` (reads ``payload`` as JSON from stdin, prints JSON) on the old code."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(src)
    r = subprocess.run([sys.executable, "-c", code], input=json.dumps(payload), text=True,
                       capture_output=True, env=env, timeout=timeout, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout)


def bracketing_threshold(n: int, s_min: float, s_max: float, level: float, p: float
                         ) -> float:
    """The envelope threshold as computed before the Newton search (a9411e1): Illinois
    regula falsi from the normal-approximation bracket, + 1e-9, the same check."""
    from scipy import special

    def gap(a: float) -> float:
        return float(mixture_sf(np.array([a]), s_max, n, sigma_above=s_min, p=p)[0]) - level

    lo, hi = -10.0 * s_max, n + 10.0 * s_max + 10.0
    sd = math.sqrt(n * p * (1.0 - p) + s_max**2)
    guess = n * p + sd * -float(special.ndtri(min(max(level, 1e-300), 0.5)))
    near_lo, near_hi = max(lo, guess - 2.0 * sd - 2.0), min(hi, guess + 2.0 * sd + 2.0)
    if near_lo < near_hi and gap(near_lo) > 0.0 >= gap(near_hi):
        lo, hi = near_lo, near_hi
    thresh = _bracket_root(gap, lo, hi) + 1e-9
    step = 1e-9 + 4e-14 * abs(thresh)
    while gap(thresh) > 0.0:
        thresh += step
        step *= 2.0
    return thresh
