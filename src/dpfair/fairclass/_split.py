"""A seeded, data-independent split of a file's rows into halves by row *position*.

The in-memory fit splits with ``rng.permutation(n)``; a file larger than memory cannot be
permuted, so the out-of-core fit assigns row number i (0-based position in the file) to

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

from dataclasses import dataclass

import duckdb
import numpy as np
from numpy.typing import NDArray

__all__ = ["MERSENNE_61", "PositionSplit"]

#: The field of the hash: p = 2^61 − 1.
MERSENNE_61 = (1 << 61) - 1
_HALF = (MERSENNE_61 - 1) // 2


@dataclass(frozen=True)
class PositionSplit:
    """Row position → half (0 or 1) by a seeded degree-3 polynomial hash mod 2^61 − 1.

    Attributes
    ----------
    coefficients : tuple of 4 int
        (c₃, c₂, c₁, c₀), each in [0, 2^61 − 1).
    """

    coefficients: tuple[int, int, int, int]

    @classmethod
    def from_rng(cls, rng: np.random.Generator) -> PositionSplit:
        """Draw the four coefficients (one ``rng.integers`` call of size 4)."""
        c = rng.integers(0, MERSENNE_61, size=4, dtype=np.int64)
        return cls((int(c[0]), int(c[1]), int(c[2]), int(c[3])))

    def half_of(self, position: int) -> int:
        """The half of one position, in Python integers (reference implementation)."""
        x = int(position) % MERSENNE_61
        h = self.coefficients[0]
        for c in self.coefficients[1:]:
            h = (h * x + c) % MERSENNE_61
        return 0 if h < _HALF else 1

    def sql(self, position: str) -> str:
        """A DuckDB expression (INTEGER 0/1) for the half of the row at ``position``.

        ``position`` is an SQL expression for the 0-based row number, e.g. DuckDB's
        ``file_row_number`` of ``read_parquet(..., file_row_number = true)``.
        """
        x = f"CAST({position} AS HUGEINT)"
        h = f"CAST({self.coefficients[0]} AS HUGEINT)"
        for c in self.coefficients[1:]:
            h = f"(({h}) * {x} + {c}) % {MERSENNE_61}"
        return f"(CASE WHEN {h} < {_HALF} THEN 0 ELSE 1 END)"

    def half_sizes(self, n: int) -> tuple[int, int]:
        """(|half 0|, |half 1|) for a file of ``n`` rows: a function of (n, seed) only."""
        expr = self.sql("range")
        with duckdb.connect(":memory:") as con:
            con.execute("SET enable_progress_bar = false")
            row = con.execute(
                f"SELECT count(*) FILTER (WHERE {expr} = 0), count(*) FILTER (WHERE {expr} = 1) "
                f"FROM range({int(n)})"
            ).fetchone()
        assert row is not None
        return int(row[0]), int(row[1])

    def halves(self, n: int) -> NDArray[np.int8]:
        """The half of every position 0..n−1 (O(n) memory: for tests and small files)."""
        with duckdb.connect(":memory:") as con:
            con.execute("SET enable_progress_bar = false")
            got = con.execute(
                f"SELECT range AS i, {self.sql('range')} AS half FROM range({int(n)})"
            ).fetchnumpy()
        out = np.empty(int(n), dtype=np.int8)
        out[np.asarray(got["i"], dtype=np.int64)] = np.asarray(got["half"], dtype=np.int8)
        return out
