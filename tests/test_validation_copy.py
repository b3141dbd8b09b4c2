"""The one-pass validated, clipped copy equals check_finite_1d + np.clip, and fails alike.

An attacker feeds it what a chunked pass could get wrong: a bad value in the last chunk
or right at a chunk boundary, signed zeros and values on the bounds, non-contiguous and
non-float inputs (the general path), an empty input, and checks that the caller's array
is never modified.
"""

from __future__ import annotations

import numpy as np
import pytest

from dpfair._errors import InvalidDataError
from dpfair._validation import _CLIP_CHUNK, check_finite_1d, finite_clipped_copy


def _reference(x: object, lo: float, hi: float) -> np.ndarray:
    out = check_finite_1d("x", x)
    np.clip(out, lo, hi, out=out)
    return out


@pytest.mark.parametrize("n", [1, 7, _CLIP_CHUNK - 1, _CLIP_CHUNK, _CLIP_CHUNK + 1,
                               3 * _CLIP_CHUNK + 5])
def test_same_values_as_check_then_clip(n: int) -> None:
    rng = np.random.default_rng(n)
    x = rng.normal(0.0, 10.0, n)
    x[::7] = -0.0
    x[1::11] = 5.0  # on the upper bound
    x[2::13] = -5.0
    before = x.copy()
    got = finite_clipped_copy("x", x, -5.0, 5.0)
    want = _reference(x, -5.0, 5.0)
    assert got.tobytes() == want.tobytes()  # bit for bit, signed zeros included
    assert np.array_equal(x, before) and got is not x


@pytest.mark.parametrize("where", [0, _CLIP_CHUNK - 1, _CLIP_CHUNK, 2 * _CLIP_CHUNK + 3])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_raises_the_standard_error(where: int, bad: float) -> None:
    x = np.zeros(2 * _CLIP_CHUNK + 10)
    x[where] = bad
    with pytest.raises(InvalidDataError) as got:
        finite_clipped_copy("x", x, -1.0, 1.0)
    with pytest.raises(InvalidDataError) as want:
        check_finite_1d("x", x)
    assert str(got.value) == str(want.value)
    assert f"first at index {where}" in str(got.value)


@pytest.mark.parametrize("x", [np.arange(10, dtype=np.int32), [1.0, 2.0, 30.0],
                               np.linspace(0, 9, 20)[::2], np.ones((1, 5))])
def test_general_inputs_take_the_reference_path(x: object) -> None:
    assert np.array_equal(finite_clipped_copy("x", x, 0.0, 5.0), _reference(x, 0.0, 5.0))


def test_empty_is_refused_alike() -> None:
    with pytest.raises(InvalidDataError, match="empty"):
        finite_clipped_copy("x", np.zeros(0), 0.0, 1.0)


def test_masked_entries_are_refused_everywhere_a_1d_sample_enters():
    """A masked array with masked entries: neither the values under the mask nor a silent
    drop; the error names both fixes. Without masked entries it is an ordinary array."""
    import dpfair

    data = np.linspace(0.0, 1.0, 2000)
    mask = np.zeros(data.size, bool)
    mask[5] = True
    masked = np.ma.array(data, mask=mask)
    calls = [
        lambda x: dpfair.median.confidence_interval(x, rho=0.5, bounds=(0, 1), rng=0),
        lambda x: dpfair.median.confidence_interval(x, rho=0.5, bounds=(0, 1), rng=0,
                                                    method="cdf"),
        lambda x: dpfair.quantiles.confidence_interval(x, 0.3, rho=0.5, bounds=(0, 1), rng=0),
        lambda x: dpfair.median.nonprivate_interval(x),
    ]
    for call in calls:
        with pytest.raises(InvalidDataError, match=r"1 masked value\(s\).*x\.compressed\(\).*"
                                                   r"x\.filled\(value\)"):
            call(masked)
        unmasked = np.ma.array(data, mask=np.zeros(data.size, bool))
        a, b = call(unmasked), call(data)
        assert repr(a) == repr(b)


def test_masked_agent_locations_are_refused():
    from dpfair.facility._mechanism import check_locations

    masked = np.ma.array([0.1, 0.5, 0.9], mask=[False, True, False])
    with pytest.raises(InvalidDataError, match=r"1 masked value\(s\)"):
        check_locations(masked, (0.0, 1.0))
    assert np.array_equal(check_locations(np.ma.array([0.1, 0.5]), (0.0, 1.0)), [0.1, 0.5])
