"""Attack on d9f5b05: ExpMech reads the caller's float64 array in place (no clipped copy).

Claim under attack: ``dpfair.median.confidence_interval(x, method="expmech")`` on a
C-contiguous 1-D float64 ndarray (tested finite in chunks, never copied; records clipped
as they are read, the pilot's value window mapped to raw thresholds) releases bit for bit
what the former path (a clipped copy, then selection) releases — low, high, diagnostics,
privacy and the number of random draws — for every input and generator state; the
caller's array is never modified; non-finite values raise the same error naming the first
bad index; every other input takes the copying path.

The reference is the copying path of the same tree (``x[None, :]`` is squeezed by
``check_finite_1d``: the unchanged former code path) and ``expmech_interval`` on
``np.sort(np.clip(x, lo, hi))``. (A by-hand run of a battery of these designs against the
tree of d9f5b05~1 in a subprocess gave identical output, except for the masked array; a
by-hand fuzz of ~25,000 random designs, bounds, rho, alpha and generator states, raw vs
copying path, found no other difference.)

Held: ±0 with bounds at ±0, subnormals, atoms exactly on lo/hi, pilots that see only
out-of-range values (±1e308, ±max float), every record out of range, n = 2^15 − 1, 2^15,
2^15 + 1, 2^16, 2^17 + 3 (stride changes), the rare O(n) branch, read-only arrays, memmaps,
unaligned buffers, big-endian and strided inputs, ndarray subclasses without a mask,
pandas Series, NaN/inf at the 2^16 chunk boundaries, and no n-sized allocation.

Broken, then fixed: an ``np.ma.MaskedArray`` with masked entries is an ndarray of dtype
float64, so it took the in-place path, where ``np.sort`` is mask-aware (masked records go
to the end) while the counting pass of the selection compares the raw data: the release
differed from the former one, and was not the mechanism run on any fixed clipped sample
(the "sorted" sample it read was not monotone). The former copying path read the values
under the mask as records, silently. Now only plain ndarrays (and memmaps) take the
in-place path, and a masked array with masked entries is refused by every entry point
that validates through ``check_finite_1d`` (the error names ``x.compressed()`` and
``x.filled(value)``).
"""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest

import dpfair
from dpfair import InvalidDataError
from dpfair.median import _expmech
from dpfair.median._expmech import SelectedSample, expmech_interval

CHUNK = 1 << 16
FMAX = float(np.finfo(np.float64).max)


def _release(x, bounds, rho, state):
    """(bit pattern of low/high, diagnostics, privacy, next draw): the whole release."""
    g = np.random.default_rng(state)
    r = dpfair.median.confidence_interval(x, rho=rho, bounds=bounds, rng=g, method="expmech")
    return (r.low.hex(), r.high.hex(), math.copysign(1.0, r.low), math.copysign(1.0, r.high),
            repr(r.diagnostics), repr(r.privacy), g.random().hex())


def _copy_path(x):
    """The same values as a (1, n) array: squeezed and copied, i.e. the former path."""
    return np.asarray(x)[None, :]


def _designs(n: int) -> dict[str, tuple[np.ndarray, tuple[float, float]]]:
    rng = np.random.default_rng(n)
    stride = max(1, n // _expmech._PILOT)
    out: dict[str, tuple[np.ndarray, tuple[float, float]]] = {}
    x = rng.normal(0.0, 1.0, n)
    x[::stride] = 1e308  # the pilot sees only a huge value above hi
    out["pilot_above"] = (x, (-1.0, 1.0))
    x = rng.normal(0.0, 1.0, n)
    x[::stride] = -FMAX  # ... or only -max float below lo
    out["pilot_below"] = (x, (-1.0, 1.0))
    z = rng.choice([-0.0, 0.0, 5e-324, -5e-324, 1.0, -2.0], n)
    out["zeros_lo_0"] = (z, (0.0, 1.0))
    out["zeros_lo_m0"] = (z, (-0.0, 1.0))
    out["zeros_hi_m0"] = (z, (-1.0, -0.0))
    x = rng.choice([-1.0, 1.0, 0.5, 3.0, -3.0], n, p=[0.3, 0.3, 0.1, 0.15, 0.15])
    out["atoms_on_bounds"] = (x, (-1.0, 1.0))  # v_lo == lo and v_hi == hi ties
    x = np.full(n, 7.0)
    x[: n // 3] = -7.0
    out["all_outside"] = (x, (-1.0, 1.0))
    x = rng.normal(0.0, 1.0, n)
    x[x > 0.1] = 1e308
    x[x < -0.1] = -1e308
    out["narrow_core"] = (x, (-0.05, 0.05))
    x = np.sort(rng.normal(0.0, 1.0, n))
    x[::stride] = -1e300
    out["sorted_fooled"] = (x, (-2.0, 2.0))
    x = rng.uniform(0.0, 1.0, n) * 1e-290
    x[::5] = 1e-320  # subnormal records ...
    x[1::7] = -0.0
    out["tiny"] = (x, (5e-324, 1e-290))  # ... and a subnormal lo (the grid step stays normal)
    return out


SIZES = [(1 << 15) - 1, 1 << 15, (1 << 15) + 1, 1 << 16, (1 << 17) + 3]


@pytest.mark.parametrize("n", SIZES)
def test_release_bit_identical_to_copying_path(n):
    for name, (x, bounds) in _designs(n).items():
        before = x.tobytes()
        for rho, state in ((0.02, 1), (0.5, 2), (20.0, 3)):
            got = _release(x, bounds, rho, state)
            ref = _release(_copy_path(x), bounds, rho, state)
            assert got == ref, (name, n, rho)
        assert x.tobytes() == before, name  # bit for bit, sign of zero included


@pytest.mark.parametrize("n", [1 << 15, (1 << 17) + 3])
def test_expmech_interval_clip_equals_sorted_clipped(n):
    for name, (x, bounds) in _designs(n).items():
        for rho in (0.05, 3.0):
            g1, g2 = np.random.default_rng(9), np.random.default_rng(9)
            ref = expmech_interval(np.sort(np.clip(x, *bounds)), rho, bounds, 0.05,
                                   (bounds[1] - bounds[0]) / 500, g1)
            got = expmech_interval(x, rho, bounds, 0.05, (bounds[1] - bounds[0]) / 500, g2,
                                   presorted=False, clip=True)
            assert (got[0].hex(), got[1].hex()) == (ref[0].hex(), ref[1].hex()), (name, rho)
            assert got[3] == ref[3] and got[2] == ref[2]
            assert g1.random() == g2.random()


@pytest.mark.parametrize("n", [1 << 15, (1 << 17) + 3])
def test_selected_sample_windows_are_clipped_order_statistics(n):
    """Windows at the ends, around the median and far apart; both thresholds finite or ±inf."""
    for name, (x, bounds) in _designs(n).items():
        ref = np.sort(np.clip(x, *bounds))
        windows = [(0, 3), (n // 2 - 50, n // 2 + 50), (n // 5, n // 5 + 2), (n - 4, n - 1),
                   (n // 2 + 200, n // 2 + 260)]  # the last merges with the median window
        sample = SelectedSample(x, windows, clip=bounds)
        for r0, r1 in windows:
            idx = np.arange(r0, r1 + 1)
            assert np.array_equal(sample.take(idx), ref[idx]), (name, r0)
        full = sample._full()
        assert np.array_equal(full, ref), name


@pytest.mark.parametrize("n", [1 << 15, (1 << 16) + 1])
def test_rare_full_branch_identical(monkeypatch, n):
    """ExpMech's O(n) branch (window margin patched negative) on the raw array."""
    monkeypatch.setattr(_expmech, "_WINDOW_MARGIN_DIGITS", -3.5)
    designs = _designs(n)
    for name in ("pilot_above", "zeros_lo_0", "atoms_on_bounds", "narrow_core"):
        x, bounds = designs[name]
        for state in range(4):
            got = _release(x, bounds, 0.5, state)
            ref = _release(_copy_path(x), bounds, 0.5, state)
            assert got == ref, (name, state)


def _storage_variants(base: np.ndarray, tmp_path) -> dict[str, object]:
    n = base.size
    ro = base.copy()
    ro.flags.writeable = False
    path = tmp_path / "x.f8"
    base.tofile(path)
    buf = bytearray(n * 8 + 1)
    unaligned = np.ndarray((n,), np.float64, buffer=buf, offset=1)
    unaligned[:] = base

    class Sub(np.ndarray):
        pass

    return {
        "readonly": ro,
        "memmap": np.memmap(path, dtype=np.float64, mode="r", shape=(n,)),
        "unaligned": unaligned,
        "bigendian": base.astype(">f8"),
        "strided": np.repeat(base, 2)[::2],
        "reversed_view": base[::-1][::-1],
        "subclass": base.view(Sub),
        "recarray": base.view(np.recarray),
        "masked_nomask": np.ma.array(base),
        "masked_all_false": np.ma.array(base, mask=np.zeros(n, bool)),
    }


def test_storage_variants_same_release(tmp_path):
    rng = np.random.default_rng(5)
    n = 200_003
    base = rng.normal(0.0, 1.0, n)
    base[rng.integers(0, n, 5000)] = 1e9
    base[:: n // _expmech._PILOT] = -1e9
    ref = _release(base.copy()[None, :], (-2.0, 2.0), 0.5, 5)
    for name, x in _storage_variants(base, tmp_path).items():
        assert _release(x, (-2.0, 2.0), 0.5, 5) == ref, name
    assert _release(base.tolist(), (-2.0, 2.0), 0.5, 5) == ref


def test_pandas_series_same_release():
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(6)
    base = rng.lognormal(0.0, 1.0, 100_000)
    assert _release(pd.Series(base), (0.0, 3.0), 0.5, 6) == _release(base, (0.0, 3.0), 0.5, 6)


@pytest.mark.parametrize("where", [CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK, 3 * CHUNK - 1])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_at_chunk_boundaries(where, bad):
    n = 3 * CHUNK
    x = np.random.default_rng(0).normal(0.0, 1.0, n)
    x[where] = bad
    x[n - 1] = np.nan  # a later bad value: the first one is named
    msgs = []
    for arg in (x, _copy_path(x)):
        with pytest.raises(InvalidDataError, match=f"first at index {where}:") as info:
            dpfair.median.confidence_interval(arg, rho=0.5, bounds=(-1, 1), method="expmech")
        msgs.append(str(info.value))
    assert msgs[0] == msgs[1]
    assert np.isnan(x[n - 1]) and (x[where] == bad or np.isnan(x[where]))  # untouched


def test_non_finite_readonly_and_last_record():
    x = np.random.default_rng(1).normal(0.0, 1.0, CHUNK + 5)
    x[-1] = -np.inf
    x.flags.writeable = False
    with pytest.raises(InvalidDataError, match=f"first at index {x.size - 1}:"):
        dpfair.median.confidence_interval(x, rho=0.5, bounds=(-1, 1), method="expmech")


def test_no_n_sized_allocation_with_outliers():
    """A pilot fooled on purpose still falls back to a full sort (n values, documented)."""
    n = 1 << 20
    rng = np.random.default_rng(2)
    x = rng.normal(0.0, 1.0, n)
    x[rng.integers(0, n, 20_000)] = 1e308  # outliers on both sides, clipped as read
    x[rng.integers(0, n, 20_000)] = -1e308
    dpfair.median.confidence_interval(x, rho=0.5, bounds=(-1, 1), rng=0, method="expmech")
    tracemalloc.start()
    try:
        dpfair.median.confidence_interval(x, rho=0.5, bounds=(-1, 1), rng=1, method="expmech")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < x.nbytes / 4, (peak, x.nbytes)


@pytest.mark.parametrize("n", [1000, 100_000])
@pytest.mark.parametrize("method", ["expmech", "cdf"])
def test_masked_array_with_masked_entries_is_refused(n, method):
    """Fixed after this attack: a masked array with masked entries is refused with a clear
    error (it used to take the in-place path, where ``np.sort`` is mask-aware while the
    counting pass read the raw data; the copying path read the values under the mask)."""
    rng = np.random.default_rng(1)
    data = rng.normal(0.0, 1.0, n)
    mask = np.zeros(n, bool)
    mask[::3] = True
    x = np.ma.array(data, mask=mask)
    for arg in (x, x[None, :]):
        with pytest.raises(InvalidDataError, match=r"masked array with \d+ masked value"):
            dpfair.median.confidence_interval(arg, rho=1.0, bounds=(-2.0, 2.0), rng=7,
                                              method=method)
    with pytest.raises(InvalidDataError, match=r"x\.compressed\(\)"):
        dpfair.quantiles.confidence_interval(x, 0.5, rho=1.0, bounds=(-2.0, 2.0), rng=7)
    # what the message suggests works, and is the release on the kept records
    kept = _release(x.compressed(), (-2.0, 2.0), 1.0, 7)
    assert kept == _release(data[~mask], (-2.0, 2.0), 1.0, 7)
