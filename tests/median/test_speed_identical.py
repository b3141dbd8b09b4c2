"""The fast paths release exactly what the implementation before the speed work released.

``speed_reference.json`` was recorded at commit 169084b (see ``speed_cases.py``): for each
case the interval, the DP CDF (digest of its bytes) and the generator's next draw after the
call, which pins the number and order of random draws consumed.
"""

from __future__ import annotations

import json

import pytest

from tests.median import speed_cases

_ROWS = json.loads(speed_cases.REFERENCE.read_text())
_DATA = speed_cases._designs()


@pytest.mark.parametrize("row", _ROWS, ids=lambda r: "-".join(str(v) for v in r["case"].values()))
def test_same_release_as_before(row):
    assert speed_cases.run_case(row["case"], _DATA) == row["out"]
