"""Vectorised exact piece sampling that looks mostly at a window of pieces.

:func:`sample_pieces_windowed` is the many-draws twin of
:func:`dpfair.mechanisms.sample_piece_windowed`: the same exact algorithm (a uniform draw on
``[0, W_in + U_out)`` where ``W_in`` is the window's exact mass and ``U_out`` an upper bound
on the mass outside it), applied to ``size`` independent draws at once.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpfair._errors import InvalidParameterError
from dpfair._rng import RandomLike, as_generator
from dpfair.mechanisms.exponential import fallback_draws

__all__ = ["sample_pieces_windowed"]


def sample_pieces_windowed(
    log_mass_window: ArrayLike,
    offset: int,
    log_outside_bound: float,
    full_log_mass: Callable[[], NDArray[np.float64]],
    size: int,
    rng: RandomLike = None,
) -> NDArray[np.intp]:
    """``size`` independent exact draws of a piece index j with P(j) ∝ exp(log_mass[j]).

    Each draw takes u uniform on ``[0, W_in + U_out)``. If ``u < W_in`` it returns the
    window piece that u lands in. Otherwise (probability at most ``U_out / (W_in + U_out)``)
    the masses of all pieces are computed once (``full_log_mass()``, O(K)) and the draw
    keeps an outside piece drawn ∝ mass with probability ``W_out / U_out``, else is
    replaced by a draw from the full law (what a restart would return in law). Every draw
    is exact as long as ``U_out >= W_out``, and the call ends after at most one O(K) step
    whatever the masses (no restart loop that an underflowing ``W_out`` could stall).

    Parameters
    ----------
    log_mass_window : array of shape (w,)
        Log-masses of the pieces ``offset, …, offset + w - 1``.
    offset : int
        Global index of the first window piece.
    log_outside_bound : float
        log of an upper bound on the total mass outside the window (``-inf`` if the window
        holds every piece).
    full_log_mass : callable
        Returns the log-masses of *all* pieces in global order (called at most once).
    size : int
        Number of draws, >= 0.
    rng : None, int, SeedSequence or Generator

    Returns
    -------
    ndarray of shape (size,), dtype intp
        Global piece indices.
    """
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 0:
        raise InvalidParameterError(f"size={size!r}: expected a non-negative integer.")
    gen = as_generator(rng)
    window = np.asarray(log_mass_window, dtype=np.float64)
    if window.ndim != 1 or window.size == 0:
        raise InvalidParameterError("log_mass_window must be a non-empty 1-D array.")
    shift = float(np.max(window))
    if not math.isfinite(shift):
        shift = log_outside_bound
    if not math.isfinite(shift):
        raise InvalidParameterError("the window has no mass and the outside bound is not finite.")
    cum_in = np.cumsum(np.exp(window - shift))
    total_in = float(cum_in[-1])
    bound_out = math.exp(min(log_outside_bound - shift, 700.0))
    width = window.size

    u = gen.random(int(size)) * (total_in + bound_out)
    out = offset + np.searchsorted(cum_in, u, side="right")
    rest = np.flatnonzero(u >= total_in)
    if rest.size:
        full = np.asarray(full_log_mass(), dtype=np.float64)
        in_window = np.zeros(full.size, dtype=bool)
        in_window[offset : offset + width] = True
        _, pick = fallback_draws(full, in_window, log_outside_bound, rest.size, gen)
        out[rest] = pick
    return out.astype(np.intp)
