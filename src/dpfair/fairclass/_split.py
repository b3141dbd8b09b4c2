"""The one split abstraction: rows into two halves, seeded and independent of the data.

Every CDP-Fair source (arrays in memory, a file through DuckDB, a Dask DataFrame) splits its
rows with one of two :class:`Split` implementations, drawn from the fit's generator by
:func:`draw_split` as the fit's *first* draw:

* :class:`PermutationSplit` — ``rng.permutation(n)``, halves of exactly ⌊n/2⌋ and ⌈n/2⌉
  rows (the in-memory default; it needs all n positions in memory);
* :class:`PositionSplit` — a seeded hash of the row *position* (below), evaluated in SQL on
  a file of any size, on Dask partitions, or in NumPy on arrays. The same seed and the
  same rows in the same order give the same halves whatever holds the rows.

Both give the package one interface: ``half_sizes(n)`` (public, a function of n and the
seed), ``rows(n)`` (sorted positions of each half, O(n) memory) and ``labels(start, count)``
(the half of each position of a range). Position hash: a file larger than memory cannot be
permuted, so row number i (0-based position in the file) goes to

    half(i) = 0 if h(i) < (p − 1)/2 else 1,    h(i) = c₃i³ + c₂i² + c₁i + c₀  (mod p),

with p = 2^61 − 1 (a Mersenne prime) and coefficients c_k drawn uniformly from [0, p) by the
fit's random generator. The polynomials of degree 3 over GF(p) form a 4-wise independent
hash family, so for every fixed set of positions the halves are (up to a bias of 1/(2p))
independent fair coins for any 4 of them — the half sizes concentrate around n/2 whatever
order the file is in (sorted by label, by group, …).

Why it keeps the privacy argument. The assignment depends only on (n, the coefficients),
never on the values of a row, so: the split is independent of the data; the half sizes
|S1|, |S2| are functions of (n, seed) and therefore public when n is; and a replace-one
neighbour (the record at position i replaced) keeps its position and so its half.

The hash is computed in DuckDB with HUGEINT arithmetic (every product is < 2^122, far from
HUGEINT's 2^127 limit); :meth:`PositionSplit.half_of` is the same formula with Python
integers, tested equal to the SQL on sample positions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal, Protocol

import numpy as np
from numpy.typing import NDArray

from dpfair._errors import InvalidParameterError
from dpfair.data.fairclass_sql import (
    MERSENNE_61,
    position_half_sizes,
    position_half_sql,
    position_labels,
)

__all__ = [
    "HALF_LABELS",
    "MERSENNE_61",
    "SPLITS",
    "PermutationSplit",
    "PositionSplit",
    "Split",
    "calibration_size",
    "draw_split",
    "position_cut",
]

#: Names of the two halves in ledgers and messages.
HALF_LABELS = ("half A", "half B")
#: The split kinds :func:`draw_split` knows.
SPLITS = ("permutation", "position")

_HALF = (MERSENNE_61 - 1) // 2


@dataclass(frozen=True)
class PositionSplit:
    """Row position → half (0 or 1) by a seeded degree-3 polynomial hash mod 2^61 − 1.

    Attributes
    ----------
    coefficients : tuple of 4 int
        (c₃, c₂, c₁, c₀), each in [0, 2^61 − 1).
    cut : int
        Position i is in half 0 (training) iff h(i) < cut. (p − 1)/2 gives halves; a
        calibration share c gives cut = ⌊(1 − c)·p⌋ (:func:`position_cut`), so each
        position is in the calibration half with probability ⌈c·p⌉/p = c + O(2^-61).
    """

    coefficients: tuple[int, int, int, int]
    cut: int = _HALF

    @classmethod
    def from_rng(cls, rng: np.random.Generator, calibration_share: float = 0.5
                 ) -> PositionSplit:
        """Draw the four coefficients (one ``rng.integers`` call of size 4, whatever the
        public ``calibration_share``)."""
        c = rng.integers(0, MERSENNE_61, size=4, dtype=np.int64)
        return cls((int(c[0]), int(c[1]), int(c[2]), int(c[3])),
                   position_cut(calibration_share))

    def half_of(self, position: int) -> int:
        """The half of one position, in Python integers (reference implementation)."""
        x = int(position) % MERSENNE_61
        h = self.coefficients[0]
        for c in self.coefficients[1:]:
            h = (h * x + c) % MERSENNE_61
        return 0 if h < self.cut else 1

    def sql(self, position: str) -> str:
        """A DuckDB expression (INTEGER 0/1) for the half of the row at ``position``.

        ``position`` is an SQL expression for the 0-based row number, e.g. DuckDB's
        ``file_row_number`` of ``read_parquet(..., file_row_number = true)``.
        """
        return position_half_sql(self.coefficients, position, self.cut)

    def half_sizes(self, n: int) -> tuple[int, int]:
        """(|half 0|, |half 1|) for ``n`` rows: a function of (n, seed) only."""
        return position_half_sizes(self.coefficients, n, self.cut)

    def labels(self, start: int, count: int) -> NDArray[np.intp]:
        """The half (0/1) of positions ``start`` .. ``start + count − 1``, in order (by the
        same SQL expression as the file path)."""
        return position_labels(self.coefficients, start, count, self.cut)

    def halves(self, n: int) -> NDArray[np.int8]:
        """The half of every position 0..n−1 (O(n) memory: for tests and small files)."""
        return self.labels(0, n).astype(np.int8)

    def rows(self, n: int) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
        """Sorted positions of halves 0 and 1 among 0..n−1 (O(n) memory)."""
        lab = self.labels(0, n)
        return np.flatnonzero(lab == 0), np.flatnonzero(lab == 1)


def _share_fraction(calibration_share: float) -> Fraction:
    return Fraction(float(calibration_share)).limit_denominator(10**6)


def position_cut(calibration_share: float = 0.5) -> int:
    """The hash cut of a position split with calibration share c: ⌊(1 − c)·p⌋, p = 2^61 − 1.

    Exact rational arithmetic on the share read as in :func:`calibration_size`; c = ½ gives
    (p − 1)/2, the halves' cut (bit-identical to the split before shares existed).
    """
    share = _share_fraction(calibration_share)
    if not 0 < share < 1:
        raise InvalidParameterError(
            f"calibration_share={calibration_share!r}: expected a number in (0, 1)."
        )
    return math.floor((1 - share) * MERSENNE_61)


def calibration_size(n: int, calibration_share: float = 0.5) -> int:
    """|half 1| (the calibration half) of a permutation split of n rows: ⌈share·n⌉.

    A function of public numbers only; share ½ gives ⌈n/2⌉ (the default halves). The share
    is read as the nearest fraction with denominator ≤ 10⁶, so 0.7·6000 is 4200 exactly.
    """
    return math.ceil(_share_fraction(calibration_share) * int(n))


@dataclass(frozen=True, eq=False)
class PermutationSplit:
    """Halves of exactly ⌊n/2⌋ and ⌈n/2⌉ rows from one ``rng.permutation(n)``.

    Data-independent; the half sizes are functions of n (and the public calibration share)
    alone. Needs the n positions in memory (arrays, a site's rows). With a calibration share
    c ≠ ½ (:func:`calibration_size`) half 0 (training) has n − ⌈c·n⌉ rows and half 1
    (calibration) ⌈c·n⌉: the first n − ⌈c·n⌉ positions of the same permutation.
    """

    n: int
    order: NDArray[np.intp]
    train: int | None = None  # |half 0|; None: ⌊n/2⌋

    @classmethod
    def from_rng(
        cls, rng: np.random.Generator, n: int, calibration_share: float = 0.5
    ) -> PermutationSplit:
        """One ``rng.permutation(n)`` call."""
        order = np.asarray(rng.permutation(int(n)), dtype=np.intp)
        if calibration_share == 0.5:
            return cls(int(n), order)
        return cls(int(n), order, int(n) - calibration_size(int(n), calibration_share))

    @property
    def _k(self) -> int:
        return self.n // 2 if self.train is None else self.train

    def _check(self, n: int) -> None:
        if int(n) != self.n:
            raise InvalidParameterError(
                f"n={n}: this permutation split was drawn for {self.n} rows."
            )

    def half_sizes(self, n: int) -> tuple[int, int]:
        """(⌊n/2⌋, ⌈n/2⌉), or (n − ⌈c·n⌉, ⌈c·n⌉) with a calibration share c."""
        self._check(n)
        return self._k, self.n - self._k

    def rows(self, n: int) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
        """Sorted positions of halves 0 and 1."""
        self._check(n)
        k = self._k
        return np.sort(self.order[:k]), np.sort(self.order[k:])

    def labels(self, start: int, count: int) -> NDArray[np.intp]:
        """The half of positions ``start`` .. ``start + count − 1``."""
        lab = np.empty(self.n, dtype=np.intp)
        lab[self.order[: self._k]] = 0
        lab[self.order[self._k :]] = 1
        return lab[int(start) : int(start) + int(count)]


class Split(Protocol):
    """What every source needs of a split (both implementations above provide it)."""

    def half_sizes(self, n: int) -> tuple[int, int]:
        """Public (|half 0|, |half 1|) for n rows."""
        ...

    def rows(self, n: int) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
        """Sorted positions of each half (O(n) memory)."""
        ...

    def labels(self, start: int, count: int) -> NDArray[np.intp]:
        """The half of each position of a range."""
        ...


def draw_split(
    kind: Literal["permutation", "position"] | str, rng: np.random.Generator, n: int,
    calibration_share: float = 0.5,
) -> PermutationSplit | PositionSplit:
    """The fit's first draw: a :class:`PermutationSplit` of n rows or a
    :class:`PositionSplit` (``rng.integers`` of size 4, whatever n).

    ``calibration_share`` (public): the calibration half's share of the rows — exactly
    ⌈c·n⌉ rows with the permutation, each row independently (4-wise) with probability c
    with the position hash (sizes a function of (n, seed, c), public either way)."""
    if kind == "permutation":
        return PermutationSplit.from_rng(rng, n, calibration_share)
    if kind == "position":
        return PositionSplit.from_rng(rng, calibration_share)
    raise InvalidParameterError(
        f"split={kind!r}: expected 'permutation' (exact halves, in memory) or 'position' "
        "(a seeded hash of the row position, as out of core)."
    )
