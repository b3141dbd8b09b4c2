"""Synthetic designs with a known population median (simulation studies, tests, demos).

The paper's design (paper 004, §5) is log-normal: X = exp(Z), Z ~ N(ln 1.5, σ²), so the
population median is exactly 1.5 for every σ; the paper uses σ ∈ {1, 5}, n = 1000 and the
public range R = [−5, 15]. Alongside it, dpfair checks coverage on a normal, a uniform and
a skewed heavy-tailed law, each with its median in that same range.

Examples
--------
>>> from dpfair.data.synthetic import DESIGNS
>>> d = DESIGNS["lognormal"]
>>> x = d.sample(1000, rng=0)
>>> d.median, x.shape
(1.5, (1000,))
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats

from dpfair._errors import InvalidParameterError
from dpfair._rng import RandomLike, as_generator
from dpfair._validation import check_positive, check_positive_int

__all__ = [
    "DESIGNS",
    "PAPER_BOUNDS",
    "Design",
    "get_design",
    "lognormal_sample",
    "normal_sample",
    "pareto_sample",
    "uniform_sample",
]

#: The paper's public range R for its simulations (paper 004, §5).
PAPER_BOUNDS: tuple[float, float] = (-5.0, 15.0)

_LOGNORMAL_MEDIAN = 1.5


def lognormal_sample(n: int, sigma: float = 1.0, rng: RandomLike = None) -> NDArray[np.float64]:
    """Draw ``n`` points of exp(N(ln 1.5, sigma²)), the paper's design.

    Parameters
    ----------
    n : int
        Sample size, >= 1.
    sigma : float, default=1.0
        Standard deviation of the underlying normal (the paper uses 1 and 5). Must be > 0.
    rng : None, int, SeedSequence or Generator, default=None
        Randomness; see :func:`dpfair._rng.as_generator`.

    Returns
    -------
    ndarray of shape (n,)
        Positive values with population median exactly 1.5.
    """
    n = check_positive_int("n", n)
    s = check_positive("sigma", sigma)
    gen = as_generator(rng)
    return np.exp(gen.normal(math.log(_LOGNORMAL_MEDIAN), s, size=n))


def normal_sample(
    n: int, loc: float = 0.0, scale: float = 1.0, rng: RandomLike = None
) -> NDArray[np.float64]:
    """Draw ``n`` points of N(loc, scale²); population median ``loc``."""
    n = check_positive_int("n", n)
    s = check_positive("scale", scale)
    return as_generator(rng).normal(float(loc), s, size=n)


def uniform_sample(
    n: int, low: float = 0.0, high: float = 10.0, rng: RandomLike = None
) -> NDArray[np.float64]:
    """Draw ``n`` points of U(low, high); population median (low + high) / 2."""
    n = check_positive_int("n", n)
    if not float(low) < float(high):
        raise InvalidParameterError(f"low={low!r}, high={high!r}: need low < high.")
    return as_generator(rng).uniform(float(low), float(high), size=n)


def pareto_sample(
    n: int, shape: float = 1.0, scale: float = 1.0, rng: RandomLike = None
) -> NDArray[np.float64]:
    """Draw ``n`` points of a Pareto (type I) law: P(X > x) = (scale / x)^shape, x ≥ scale.

    Right-skewed with a power-law tail of index ``shape``; for the default ``shape=1`` the
    mean is infinite. Population median ``scale · 2^(1/shape)``.
    """
    n = check_positive_int("n", n)
    a = check_positive("shape", shape)
    m = check_positive("scale", scale)
    # numpy's pareto() is the Lomax law (Pareto II, support [0, inf)); adding 1 gives type I.
    return m * (as_generator(rng).pareto(a, size=n) + 1.0)


@dataclass(frozen=True)
class Design:
    """A sampling design with a known population median.

    Attributes
    ----------
    name : str
        Registry key.
    description : str
        The law in words and symbols.
    median : float
        Exact population median.
    bounds : tuple of float
        A public range R containing the median (the paper's R = [−5, 15] for all designs).
    sampler : callable
        ``sampler(n, rng) -> ndarray``; use :meth:`sample`.
    cdf : callable
        Population CDF, vectorised; ``cdf(median) == 0.5``.
    """

    name: str
    description: str
    median: float
    bounds: tuple[float, float]
    sampler: Callable[..., NDArray[np.float64]]
    cdf: Callable[[ArrayLike], Any]

    def sample(self, n: int, rng: RandomLike = None) -> NDArray[np.float64]:
        """Draw ``n`` independent points.

        Parameters
        ----------
        n : int
            Sample size, >= 1.
        rng : None, int, SeedSequence or Generator, default=None
            Randomness; same seed, same sample.
        """
        return self.sampler(n, rng=rng)

    def __repr__(self) -> str:
        return f"Design({self.name!r}: {self.description}; median={self.median:g})"


DESIGNS: dict[str, Design] = {
    "lognormal": Design(
        name="lognormal",
        description="exp(N(ln 1.5, 1)), the paper's design with sigma = 1",
        median=1.5,
        bounds=PAPER_BOUNDS,
        sampler=partial(lognormal_sample, sigma=1.0),
        cdf=stats.lognorm(s=1.0, scale=1.5).cdf,
    ),
    "lognormal_sigma5": Design(
        name="lognormal_sigma5",
        description="exp(N(ln 1.5, 25)), the paper's design with sigma = 5",
        median=1.5,
        bounds=PAPER_BOUNDS,
        sampler=partial(lognormal_sample, sigma=5.0),
        cdf=stats.lognorm(s=5.0, scale=1.5).cdf,
    ),
    "normal": Design(
        name="normal",
        description="N(0, 1)",
        median=0.0,
        bounds=PAPER_BOUNDS,
        sampler=partial(normal_sample, loc=0.0, scale=1.0),
        cdf=stats.norm(loc=0.0, scale=1.0).cdf,
    ),
    "uniform": Design(
        name="uniform",
        description="U(0, 10)",
        median=5.0,
        bounds=PAPER_BOUNDS,
        sampler=partial(uniform_sample, low=0.0, high=10.0),
        cdf=stats.uniform(loc=0.0, scale=10.0).cdf,
    ),
    "skewed_heavy": Design(
        name="skewed_heavy",
        description="Pareto type I, shape 1, scale 1: right-skewed, infinite mean",
        median=2.0,
        bounds=PAPER_BOUNDS,
        sampler=partial(pareto_sample, shape=1.0, scale=1.0),
        cdf=stats.pareto(b=1.0, scale=1.0).cdf,
    ),
}


def get_design(name: str) -> Design:
    """Look up a design by name, with an error that lists the available ones."""
    try:
        return DESIGNS[name]
    except (KeyError, TypeError):
        known = ", ".join(repr(k) for k in DESIGNS)
        raise InvalidParameterError(f"name={name!r}: unknown design. Available: {known}.") from None
