"""Out-of-core S1 inputs: linear-binning weights on the public kernel grid, by DuckDB.

CDP-Fair's S1 reads the data only through the four (group a, label y) binned kernel sums
F_{a,y} = K · W_{a,y} on a public grid (:mod:`dpfair.fairclass`, ``_model.py``), where
W_{a,y}[t] = Σ_{i: A_i = a, Y_i = y} w_t(U_i) are the multilinear (linear-binning) weights
of the rows on the grid nodes. W is a sum over rows, so a file far larger than memory
reduces to ``4 · grid.size`` numbers in one streaming SQL pass: DuckDB maps each row to
its grid cell (i_1, …, i_d) and fractional offsets, and ``GROUP BY a, y, i_1, …, i_d``
sums the 2^d corner products. Only the grouped sums (at most 4 · Π(g_j − 1) rows) come
back to Python, where they are added onto the nodes.

Exactness. The unit-box map u = (x − lo)/(hi − lo) is the same IEEE expression as the
in-memory path, so u is bit-identical. The cell index is floor(u·(g − 1)) clipped to
[0, g − 2] and the offset f = u·(g − 1) − i clipped to [0, 1]; the in-memory path finds the
cell by ``searchsorted`` on the ``linspace`` nodes. The two can disagree only for a u
within rounding of a node, and there the linear-binning weights are continuous (a point on
a node gives weight 1 to it from either side), so the results agree to floating-point
rounding (plus summation order): tests check ``rtol = 1e-12`` on adversarial values
(points on nodes, on the box's faces, duplicates, values one ulp away).

Privacy. Nothing here is released: the weights are the exact input of the Gaussian-process
mechanism of S1. For every row the weights are ≥ 0 and sum to 1 (up to one rounding), so a
row contributes Σ_t w_t k(·, t) with RKHS norm ≤ 1 — the sensitivity argument of
``docs/proofs/fairclass_cdp_fair.md`` applies unchanged to the aggregated input, and the
released noisy function has the same law as on the in-memory path (the noise is added by
the same mechanism to sums equal up to rounding).
"""

from dpfair.data.fairclass_sql import GridAggregate, kernel_grid_weights

__all__ = ["GridAggregate", "kernel_grid_weights"]
