"""Seeded outputs of dpfair.quantiles pinned bit for bit (speed work must not change them).

Recorded before the per-call overheads were removed (rank-target caching, one ledger
charge per search, shared localisation in confidence_intervals): same seed, same
floating-point outputs and the same reported privacy total.
"""

from __future__ import annotations

import numpy as np
import pytest

import dpfair

PINNED: dict[str, list] = {'binsearch/0.1': ['0x1.a63ce40000000p-2', '0x1.bc41240000000p-2',
                   '0x1.0000000000000p-1'],
 'binsearch/0.5': ['0x1.7b138ef000000p+0', '0x1.892d5e8000000p+0',
                   '0x1.0000000000000p-1'],
 'binsearch/0.9': ['0x1.53eb95c000000p+2', '0x1.6652a82000000p+2',
                   '0x1.0000000000000p-1'],
 'binsearch/five': [['0x1.a0d1280000000p-2', '0x1.c1fe37c000000p-2'],
                    ['0x1.79dae24000000p-1', '0x1.8f60ec4000000p-1'],
                    ['0x1.7777bd2000000p+0', '0x1.8b53c28000000p+0'],
                    ['0x1.7061adc000000p+1', '0x1.85f0f42000000p+1'],
                    ['0x1.4fb3fa7400000p+2', '0x1.6ae71f7400000p+2'],
                    '0x1.ffffffffffffep-2'],
 'binsearch_cdf/0.1': ['0x1.a58cc20000000p-2', '0x1.bb91020000000p-2',
                       '0x1.0000000000000p-1'],
 'binsearch_cdf/0.5': ['0x1.7b138ef000000p+0', '0x1.88fbeb7000000p+0',
                       '0x1.0000000000000p-1'],
 'binsearch_cdf/0.9': ['0x1.53a848b000000p+2', '0x1.6588c0f000000p+2',
                       '0x1.0000000000000p-1'],
 'binsearch_cdf/five': [['0x1.9f715d6800000p-2',
                         '0x1.c0ae983800000p-2'],
                        ['0x1.78afef0000000p-1',
                         '0x1.8ed8c0e000000p-1'],
                        ['0x1.7750625200000p+0',
                         '0x1.8ab419f600000p+0'],
                        ['0x1.71c7ae1200000p+1',
                         '0x1.868df2d400000p+1'],
                        ['0x1.51edc07c00000p+2',
                         '0x1.6816925c00000p+2'],
                        '0x1.0000000000000p-1'],
 'cdf/0.1': ['0x1.a58cc20000000p-2', '0x1.bb91020000000p-2',
             '0x1.0000000000000p-1'],
 'cdf/0.5': ['0x1.7b138ef000000p+0', '0x1.88fbeb7000000p+0',
             '0x1.0000000000000p-1'],
 'cdf/0.9': ['0x1.53a848b000000p+2', '0x1.6588c0f000000p+2',
             '0x1.0000000000000p-1'],
 'cdf/five': [['0x1.9f715d6800000p-2', '0x1.c0ae983800000p-2'],
              ['0x1.78afef0000000p-1', '0x1.8ed8c0e000000p-1'],
              ['0x1.7750625200000p+0', '0x1.8ab419f600000p+0'],
              ['0x1.71c7ae1200000p+1', '0x1.868df2d400000p+1'],
              ['0x1.51edc07c00000p+2', '0x1.6816925c00000p+2'],
              '0x1.0000000000000p-1'],
 'expmech/0.1': ['0x1.a4f143fc00000p-2', '0x1.bce7a42400000p-2',
                 '0x1.0000000000000p-1'],
 'expmech/0.5': ['0x1.7ab862ca80000p+0', '0x1.8917bc2900000p+0',
                 '0x1.0000000000000p-1'],
 'expmech/0.9': ['0x1.53a5211340000p+2', '0x1.6617c4b200000p+2',
                 '0x1.0000000000000p-1'],
 'expmech/five': [['0x1.a098ecfb00000p-2', '0x1.c190018300000p-2'],
                  ['0x1.792eb1f000000p-1', '0x1.8f29eb0a00000p-1'],
                  ['0x1.7770432400000p+0', '0x1.8c251a1000000p+0'],
                  ['0x1.6fef307f40000p+1', '0x1.85ca4b7e80000p+1'],
                  ['0x1.4f93adb810000p+2', '0x1.69dc3998f0000p+2'],
                  '0x1.ffffffffffffep-2']}

METHODS = ("expmech", "cdf", "binsearch", "binsearch_cdf")


@pytest.fixture(scope="module")
def x() -> np.ndarray:
    return np.random.default_rng(3).lognormal(np.log(1.5), 1.0, 20000)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("q", [0.1, 0.5, 0.9])
def test_single_quantile_pinned(x: np.ndarray, method: str, q: float) -> None:
    r = dpfair.quantiles.confidence_interval(x, q, rho=0.5, bounds=(-5, 15), method=method,
                                             rng=11)
    assert [r.low.hex(), r.high.hex(), r.privacy.rho.hex()] == PINNED[f"{method}/{q}"]


@pytest.mark.parametrize("method", METHODS)
def test_five_quantiles_pinned(x: np.ndarray, method: str) -> None:
    rs = dpfair.quantiles.confidence_intervals(x, [0.1, 0.25, 0.5, 0.75, 0.9], rho=0.5,
                                               bounds=(-5, 15), method=method, rng=12)
    got = [[i.low.hex(), i.high.hex()] for i in rs.intervals] + [rs.privacy.rho.hex()]
    assert got == PINNED[f"{method}/five"]
