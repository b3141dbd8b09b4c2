"""Boundary checks shared by all packages. Messages name the argument and the fix."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpfair._errors import InvalidDataError, InvalidParameterError, MissingPublicBoundError

__all__ = [
    "check_alpha",
    "check_budget",
    "check_finite_1d",
    "check_in_open_interval",
    "check_interval_bounds",
    "check_not_masked",
    "check_positive",
    "check_positive_int",
    "finite_clipped_copy",
    "finite_float64_view",
]


def _as_real(name: str, value: Any) -> float:
    if isinstance(value, bool):
        raise InvalidParameterError(f"{name}={value!r}: expected a real number, got a bool.")
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise InvalidParameterError(f"{name}={value!r}: expected a real number.") from None
    if math.isnan(out):
        raise InvalidParameterError(f"{name}=nan: expected a real number.")
    return out


def check_positive(name: str, value: Any, *, allow_inf: bool = False) -> float:
    """Return ``value`` as a float, raising unless it is > 0 (and finite unless allowed)."""
    out = _as_real(name, value)
    if not out > 0:
        raise InvalidParameterError(f"{name}={value!r}: must be > 0.")
    if math.isinf(out) and not allow_inf:
        raise InvalidParameterError(f"{name}={value!r}: must be finite.")
    return out


def check_positive_int(name: str, value: Any) -> int:
    """Return ``value`` as an int, raising unless it is an integer >= 1."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise InvalidParameterError(f"{name}={value!r}: expected a positive integer.")
    if value < 1:
        raise InvalidParameterError(f"{name}={value!r}: must be a positive integer (>= 1).")
    return int(value)


def check_in_open_interval(name: str, value: Any, low: float, high: float) -> float:
    """Return ``value`` as a float, raising unless ``low < value < high``."""
    out = _as_real(name, value)
    if not low < out < high:
        raise InvalidParameterError(
            f"{name}={value!r}: must lie strictly between {low:g} and {high:g}."
        )
    return out


def check_interval_bounds(
    name: str, bounds: Sequence[float] | None, *, example: str = "(0.0, 100.0)"
) -> tuple[float, float]:
    """Validate a public ``(lo, hi)`` pair with finite ``lo < hi`` and finite ``hi − lo``.

    Bounds are public inputs: they are never read off the data, because the minimum and
    maximum of private data are themselves a release.
    """
    if bounds is None:
        raise MissingPublicBoundError(
            f"{name}=None: a public range is required, e.g. {name}={example}. It cannot be "
            "taken from the data, because the min/max of private data is itself a release."
        )
    try:
        lo, hi = (float(b) for b in bounds)
    except (TypeError, ValueError, OverflowError):
        raise InvalidParameterError(
            f"{name}={bounds!r}: expected a pair (lo, hi) of real numbers, e.g. {example}."
        ) from None
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise InvalidParameterError(f"{name}={bounds!r}: both ends must be finite.")
    if not lo < hi:
        raise InvalidParameterError(
            f"{name}={bounds!r}: lo must be strictly smaller than hi; swap them or widen "
            "the range."
        )
    if not math.isfinite(hi - lo):
        raise InvalidParameterError(
            f"{name}={bounds!r}: the width hi - lo overflows a float (inf); every method "
            "works with that width, so use a narrower public range or rescale the data "
            "(e.g. other units)."
        )
    return lo, hi


def check_not_masked(name: str, x: Any) -> None:
    """Raise on a numpy masked array with masked entries: converting it would either read
    the values under the mask as records or drop them, and dpfair does neither silently."""
    if isinstance(x, np.ma.MaskedArray) and np.ma.is_masked(x):
        raise InvalidDataError(
            f"{name} is a masked array with {int(np.ma.count_masked(x))} masked value(s): "
            "dpfair does not guess what a masked record means. Pass x.compressed() to drop "
            "them or x.filled(value) to impute them."
        )


def check_finite_1d(name: str, x: Any, *, min_size: int = 1) -> NDArray[np.float64]:
    """Return ``x`` as a 1-D float64 array, raising on NaN/inf, wrong shape or too few rows.

    The input is copied, so later in-place work (sorting, clipping) never touches the
    caller's array.
    """
    check_not_masked(name, x)
    try:
        arr = np.array(x, dtype=np.float64, copy=True)
    except (TypeError, ValueError):
        raise InvalidDataError(f"{name}: expected a 1-D array of real numbers.") from None
    if arr.ndim == 0:
        raise InvalidDataError(f"{name}: expected a 1-D array, got a scalar.")
    if arr.ndim != 1:
        arr = np.squeeze(arr)
        if arr.ndim != 1:
            raise InvalidDataError(f"{name}: expected a 1-D array, got shape {np.shape(x)}.")
    if arr.size < min_size:
        raise InvalidDataError(
            f"{name} has {arr.size} values: at least {min_size} required."
            if arr.size
            else f"{name} is empty: at least {min_size} value(s) required."
        )
    bad = ~np.isfinite(arr)
    if bad.any():
        idx = np.flatnonzero(bad)
        raise InvalidDataError(
            f"{name} contains {idx.size} non-finite value(s) (NaN or inf), first at index "
            f"{idx[0]}: remove or impute them before calling; dpfair never drops rows "
            "silently."
        )
    return arr


#: Values per chunk of :func:`finite_clipped_copy` (512 KiB of float64: stays in cache
#: between the copy, the finiteness test and the clip).
_CLIP_CHUNK = 1 << 16


def _plain_array(x: Any) -> bool:
    """Whether ``x`` is a plain ndarray (or a memmap): no subclass whose methods (a masked
    array's mask-aware sort, say) could read other values than its buffer holds."""
    return type(x) is np.ndarray or type(x) is np.memmap


def finite_clipped_copy(name: str, x: Any, lo: float, hi: float, *,
                        min_size: int = 1) -> NDArray[np.float64]:
    """:func:`check_finite_1d` of ``x``, clipped into [lo, hi]: the same array, one pass.

    A 1-D float64 input is copied, tested and clipped chunk by chunk while each chunk is
    in cache (one read and one write of the data instead of three of each); any other
    input, and any failure, goes through :func:`check_finite_1d` (so every error is its
    error, naming the first bad index) and :func:`numpy.clip`. Both give the same values:
    a copy, then the element-wise clip.
    """
    src = x if _plain_array(x) else None
    if (src is None or src.dtype != np.float64 or src.ndim != 1 or src.size < min_size
            or not src.flags.c_contiguous):
        out = check_finite_1d(name, x, min_size=min_size)
        np.clip(out, lo, hi, out=out)
        return out
    out = np.empty(src.size, dtype=np.float64)
    ok = np.empty(min(_CLIP_CHUNK, src.size), dtype=np.bool_)
    for start in range(0, src.size, _CLIP_CHUNK):
        part = out[start : start + _CLIP_CHUNK]
        np.copyto(part, src[start : start + _CLIP_CHUNK])
        flags = ok[: part.size]
        np.isfinite(part, out=flags)
        if not flags.all():
            check_finite_1d(name, src, min_size=min_size)  # raises the standard message
        np.clip(part, lo, hi, out=part)
    return out


def finite_float64_view(name: str, x: Any, *, min_size: int = 1) -> NDArray[np.float64] | None:
    """The caller's array itself, once tested finite without a copy; ``None`` otherwise.

    For a C-contiguous 1-D float64 ndarray with at least ``min_size`` values, the values
    are tested chunk by chunk (one read, no write, no allocation of the data's size) and
    ``x`` is returned as it is: the caller must only READ it (and clip what it reads).
    A non-finite value raises :func:`check_finite_1d`'s error (naming the first bad index);
    any other input (a subclass such as a masked array included) returns ``None``, and the
    caller takes :func:`finite_clipped_copy`.
    """
    if not (_plain_array(x) and x.dtype == np.float64 and x.ndim == 1
            and x.size >= min_size and x.flags.c_contiguous):
        return None
    ok = np.empty(min(_CLIP_CHUNK, x.size), dtype=np.bool_)
    for start in range(0, x.size, _CLIP_CHUNK):
        part = x[start : start + _CLIP_CHUNK]
        flags = ok[: part.size]
        np.isfinite(part, out=flags)
        if not flags.all():
            check_finite_1d(name, x, min_size=min_size)  # raises the standard message
    return x


def check_budget(epsilon: Any, delta: Any) -> tuple[float, float]:
    """ε > 0 finite and δ ∈ (0, 1), with messages that name the argument."""
    eps = check_positive("epsilon", epsilon)
    dl = check_in_open_interval("delta", delta, 0.0, 1.0)
    return eps, dl


def check_alpha(alpha: Any, margin: Any = 0.0) -> tuple[float, float]:
    """α ∈ (0, 1) and 0 ≤ margin < α; returns (α, margin)."""
    a = check_in_open_interval("alpha", alpha, 0.0, 1.0)
    if isinstance(margin, bool):
        raise InvalidParameterError(f"alpha_margin={margin!r}: expected a real number.")
    try:
        m = float(margin)
    except (TypeError, ValueError):
        raise InvalidParameterError(f"alpha_margin={margin!r}: expected a real number.") from None
    if not (math.isfinite(m) and 0.0 <= m < a):
        raise InvalidParameterError(
            f"alpha_margin={margin!r}: must satisfy 0 <= alpha_margin < alpha={a:g} (the "
            "classifier targets |DD| <= alpha - alpha_margin)."
        )
    return a, m
