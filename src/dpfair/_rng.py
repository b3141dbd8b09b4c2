"""One helper to turn every accepted seed form into a ``numpy.random.Generator``."""

from __future__ import annotations

from typing import TypeAlias

import numpy as np

from dpfair._errors import InvalidParameterError

__all__ = ["RandomLike", "as_generator"]

RandomLike: TypeAlias = int | np.random.SeedSequence | np.random.Generator | None


def as_generator(rng: RandomLike, *, name: str = "rng") -> np.random.Generator:
    """Return a ``numpy.random.Generator`` for ``rng``.

    Parameters
    ----------
    rng : None, int, numpy.random.SeedSequence or numpy.random.Generator
        ``None`` draws fresh OS entropy (use this, or a generator seeded from
        ``secrets``, in deployments); an int or a ``SeedSequence`` gives a reproducible
        stream; a ``Generator`` is returned as is (and advanced by the caller's draws).
    name : str
        Argument name used in the error message.
    """
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None or isinstance(rng, np.random.SeedSequence):
        return np.random.default_rng(rng)
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
        if rng < 0:
            raise InvalidParameterError(f"{name}={rng}: a seed must be a non-negative integer.")
        return np.random.default_rng(int(rng))
    raise InvalidParameterError(
        f"{name}={rng!r}: expected None, a non-negative int, a numpy SeedSequence or a "
        "numpy Generator."
    )
