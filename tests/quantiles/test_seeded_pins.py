"""Seeded outputs of dpfair.quantiles pinned bit for bit (speed work must not change them).

Recorded before the per-call overheads were removed (rank-target caching, one ledger
charge per search, shared localisation in confidence_intervals): same seed, same
floating-point outputs and the same reported privacy total. Re-recorded when the
localised design changed on purpose (exact-law ExpMech targets, α₁ = 1 % of α, the tree
depth from the public width model; the padded, split ExpMech with its width-model
K_E); speed work must still leave them unchanged.
"""

from __future__ import annotations

import numpy as np
import pytest

import dpfair

PINNED: dict[str, list] = {'binsearch/0.1': ['0x1.a5812d0000000p-2',
                   '0x1.bcd5b20000000p-2',
                   '0x1.0000000000000p-1'],
 'binsearch/0.5': ['0x1.7b4956c000000p+0',
                   '0x1.891e610000000p+0',
                   '0x1.0000000000000p-1'],
 'binsearch/0.9': ['0x1.53b573f000000p+2',
                   '0x1.65ed95c000000p+2',
                   '0x1.0000000000000p-1'],
 'binsearch/five': [['0x1.a12383c000000p-2', '0x1.c185418000000p-2'],
                    ['0x1.7996936000000p-1', '0x1.8f8c9c0000000p-1'],
                    ['0x1.77c2fd8000000p+0', '0x1.8b05a1e000000p+0'],
                    ['0x1.708657b000000p+1', '0x1.85d49f5000000p+1'],
                    ['0x1.4fe1aaf000000p+2', '0x1.6a2c1d2800000p+2'],
                    '0x1.ffffffffffffep-2'],
 'binsearch_cdf/0.1': ['0x1.a644ff0000000p-2',
                       '0x1.bbaff70000000p-2',
                       '0x1.0000000000000p-1'],
 'binsearch_cdf/0.5': ['0x1.7b12dc8000000p+0',
                       '0x1.88b16c8000000p+0',
                       '0x1.0000000000000p-1'],
 'binsearch_cdf/0.9': ['0x1.53b573f000000p+2',
                       '0x1.65a11fb000000p+2',
                       '0x1.0000000000000p-1'],
 'binsearch_cdf/five': [['0x1.a30b258000000p-2', '0x1.bf9d9fc000000p-2'],
                        ['0x1.7a309aa000000p-1', '0x1.8e588d8000000p-1'],
                        ['0x1.78adc86000000p+0', '0x1.8ab75e4000000p+0'],
                        ['0x1.71426bd000000p+1', '0x1.85d49f5000000p+1'],
                        ['0x1.51b9fad000000p+2', '0x1.6767a55800000p+2'],
                        '0x1.0000000000000p-1'],
 'cdf/0.1': ['0x1.a644ff0000000p-2', '0x1.bbaff70000000p-2', '0x1.0000000000000p-1'],
 'cdf/0.5': ['0x1.7b12dc8000000p+0', '0x1.88b16c8000000p+0', '0x1.0000000000000p-1'],
 'cdf/0.9': ['0x1.53b573f000000p+2', '0x1.65a11fb000000p+2', '0x1.0000000000000p-1'],
 'cdf/five': [['0x1.a30b258000000p-2', '0x1.bf9d9fc000000p-2'],
              ['0x1.7a309aa000000p-1', '0x1.8e588d8000000p-1'],
              ['0x1.78adc86000000p+0', '0x1.8ab75e4000000p+0'],
              ['0x1.71426bd000000p+1', '0x1.85d49f5000000p+1'],
              ['0x1.51b9fad000000p+2', '0x1.6767a55800000p+2'],
              '0x1.0000000000000p-1'],
 'expmech/0.1': ['0x1.a549a88000000p-2',
                 '0x1.bcaaead0d7943p-2',
                 '0x1.0000000000000p-1'],
 'expmech/0.5': ['0x1.7afa897126301p+0',
                 '0x1.88f493893180bp+0',
                 '0x1.0000000000000p-1'],
 'expmech/0.9': ['0x1.53b2a6826bca2p+2',
                 '0x1.65dc8a3af286cp+2',
                 '0x1.0000000000000p-1'],
 'expmech/five': [['0x1.a0ef5e4924925p-2', '0x1.c0fbf86ae6ae7p-2'],
                  ['0x1.79895fa35e50dp-1', '0x1.8f4901c000000p-1'],
                  ['0x1.77e5bf150d794p+0', '0x1.8b236e41435e5p+0'],
                  ['0x1.7145696de50d8p+1', '0x1.8688ea479435ep+1'],
                  ['0x1.4fe4362f1ef1fp+2', '0x1.697956af4bf4cp+2'],
                  '0x1.ffffffffffffdp-2']}

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
