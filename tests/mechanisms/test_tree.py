"""Tests for the noisy binary tree and Honaker's consistent estimator (mechanisms/tree.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy import stats

from dpfair._errors import InvalidDataError, InvalidParameterError, MissingPublicBoundError
from dpfair.mechanisms.gaussian_calibration import analytic_gaussian_delta
from dpfair.mechanisms.tree import (
    ConsistentTree,
    NoisyBinaryTree,
    NoisyTree,
    honaker_prefix_std,
    leaf_counts,
    leaf_edges,
    node_counts,
)

ROOTS = ("public", "noisy")


# ---------------------------------------------------------------------------- helpers
def _dense_gls(
    levels: tuple[NDArray[np.float64], ...], root: str
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Brute-force BLUE of the leaves and the unit-σ std of every prefix estimate.

    Measurement model y = A x + e over the noisy nodes, x = the 2^D leaves. Noisy root:
    ordinary least squares x̂ = (AᵀA)⁻¹Aᵀy. Public root: least squares under 1ᵀx = n, solved
    exactly by the parametrisation x = n·e_0 + Bθ with B's columns e_i − e_{i+1} (integer, so
    the prefix rows j = 0 and j = 2^D of L·B are exactly zero).
    """
    depth = len(levels) - 1
    n_leaves = 1 << depth
    rows, ys = [], []
    for ell, lvl in enumerate(levels):
        if ell == 0 and root == "public":
            continue
        width = n_leaves >> ell
        for i in range(1 << ell):
            row = np.zeros(n_leaves)
            row[i * width : (i + 1) * width] = 1.0
            rows.append(row)
            ys.append(lvl[i])
    a = np.array(rows)
    y = np.array(ys)
    lower = np.tril(np.ones((n_leaves + 1, n_leaves)), -1)  # prefix operator
    if root == "noisy":
        hat = np.linalg.solve(a.T @ a, a.T)
        est = hat @ y
    else:
        basis = np.zeros((n_leaves, n_leaves - 1))
        for i in range(n_leaves - 1):
            basis[i, i], basis[i + 1, i] = 1.0, -1.0
        x0 = np.zeros(n_leaves)
        x0[0] = levels[0][0]
        ab = a @ basis
        solve = np.linalg.solve(ab.T @ ab, ab.T)
        est = x0 + basis @ (solve @ (y - a @ x0))
        hat = basis @ solve
    prefix_noise = lower @ hat  # prefix error = prefix_noise @ e
    return est, np.sqrt(np.einsum("ij,ij->i", prefix_noise, prefix_noise))


def _true_prefix(counts: NDArray[np.int64]) -> NDArray[np.int64]:
    return np.concatenate(([0], np.cumsum(counts)))


def _true_suffix(counts: NDArray[np.int64]) -> NDArray[np.int64]:
    return np.concatenate((np.cumsum(counts[::-1])[::-1], [0]))


# ---------------------------------------------------------------------------- Honaker vs GLS
@pytest.mark.parametrize("root", ROOTS)
@pytest.mark.parametrize("depth", range(1, 9))
def test_consistent_matches_dense_gls(depth: int, root: str) -> None:
    sigma = 1.7
    rng = np.random.default_rng(100 + depth)
    counts = rng.integers(0, 50, size=1 << depth)
    noisy = NoisyBinaryTree(depth, sigma, root).release(counts, rng=rng)  # type: ignore[arg-type]
    fit = noisy.consistent()
    est, unit_std = _dense_gls(noisy.levels, root)

    np.testing.assert_allclose(fit.leaves, est, rtol=0, atol=1e-9)
    np.testing.assert_allclose(
        fit.prefix, np.concatenate(([0.0], np.cumsum(est))), rtol=0, atol=1e-9
    )
    np.testing.assert_allclose(fit.prefix_std, sigma * unit_std, rtol=0, atol=1e-9)
    # every level of the estimate is consistent, and equal to the aggregated GLS leaves
    for ell in range(depth):
        below = fit.levels[ell + 1]
        np.testing.assert_allclose(fit.levels[ell], below[0::2] + below[1::2], atol=1e-9)
    assert fit.prefix[0] == 0.0 and fit.prefix_std[0] == 0.0
    if root == "public":
        assert fit.prefix[-1] == counts.sum()
        assert fit.prefix_std[-1] == 0.0
        assert fit.total == counts.sum()


@pytest.mark.parametrize("root", ROOTS)
def test_prefix_std_is_data_free_and_scales_with_sigma(root: str) -> None:
    a = honaker_prefix_std(5, 1.0, root)  # type: ignore[arg-type]
    b = honaker_prefix_std(5, 2.5, root)  # type: ignore[arg-type]
    np.testing.assert_allclose(b, 2.5 * a, rtol=1e-15)
    fit = NoisyBinaryTree(5, 2.5, root).release(np.arange(32), rng=1).consistent()  # type: ignore[arg-type]
    np.testing.assert_array_equal(fit.prefix_std, b)
    np.testing.assert_array_equal(NoisyBinaryTree(5, 2.5, root).prefix_std(), b)  # type: ignore[arg-type]
    # the tree is mirror-symmetric, so the suffix std is the reversed prefix std
    np.testing.assert_array_equal(fit.suffix_std, b[::-1])
    # a consistent estimate is never worse than the raw dyadic one
    _, dyadic_std = NoisyTree(fit.levels, 2.5, 5, root).dyadic_prefix()  # type: ignore[arg-type]
    assert np.all(b <= dyadic_std + 1e-12)


@pytest.mark.parametrize("root", ROOTS)
@pytest.mark.parametrize("depth", [1, 2, 9, 14])
def test_prefix_std_equals_closed_form(depth: int, root: str) -> None:
    """The O(2^D) tiling equals the per-level closed form of docs/proofs/honaker_tree.md."""
    n_leaves = 1 << depth
    j = np.arange(n_leaves + 1)

    def v(height: int) -> float:  # variance of a subtree-only estimate, σ = 1
        return 2.0**height / (2.0 ** (height + 1) - 1.0)

    var: NDArray[np.float64] = np.zeros(j.size)
    if root == "noisy":
        var = var + (j / n_leaves) ** 2 * v(depth)
    for k in range(depth):
        size = n_leaves >> k
        u = (j % size) / size
        var = var + (2 * np.minimum(u, 1 - u)) ** 2 * v(depth - k - 1) / 2
    got = honaker_prefix_std(depth, 0.7, root)  # type: ignore[arg-type]
    np.testing.assert_allclose(got, 0.7 * np.sqrt(var), rtol=1e-12, atol=0)


def test_prefix_std_closed_form_small_cases() -> None:
    # D = 1, public root: leaves y1, y2 with y1 + y2 = n fixed -> x̂1 = (n + y1 - y2)/2,
    # Var = σ²/2.
    np.testing.assert_allclose(honaker_prefix_std(1, 1.0, "public"), [0, math.sqrt(0.5), 0])
    # D = 1, noisy root: A = [[1, 1], [1, 0], [0, 1]], Cov(x̂) = σ²(AᵀA)⁻¹ = σ²/3·[[2, -1],
    # [-1, 2]], so Var(x̂1) = 2/3 and Var(x̂1 + x̂2) = (2 + 2 - 2)/3 = 2/3.
    np.testing.assert_allclose(
        honaker_prefix_std(1, 1.0, "noisy"), [0, math.sqrt(2 / 3), math.sqrt(2 / 3)]
    )
    # D = 2, public root, closed form at j = 1: root level u = 1/4, tent = 1/2, Var(δ) =
    # V_1/2 = 1/3; level 1 u = 1/2, tent = 1, Var(δ) = V_0/2 = 1/2 -> 1/12 + 1/2 = 7/12.
    assert honaker_prefix_std(2, 1.0, "public")[1] == pytest.approx(math.sqrt(7 / 12))


# ---------------------------------------------------------------------------- sensitivity
@pytest.mark.parametrize("depth", [1, 2, 3, 4])
def test_each_record_touches_one_node_per_level(depth: int) -> None:
    n_leaves = 1 << depth
    for leaf in range(n_leaves):
        counts = np.zeros(n_leaves, dtype=np.int64)
        counts[leaf] = 1
        levels = node_counts(counts)
        assert len(levels) == depth + 1
        for ell, lvl in enumerate(levels):
            assert lvl.shape == (1 << ell,)
            assert lvl.sum() == 1 and lvl.max() == 1
            assert lvl[leaf >> (depth - ell)] == 1


@pytest.mark.parametrize("depth", [1, 2, 3, 4])
def test_replace_one_sensitivity_is_attained(depth: int) -> None:
    """Exhaustive over pairs of records: max squared change = 2D (levels 1..D)."""
    n_leaves = 1 << depth
    one = [
        np.concatenate(node_counts(np.eye(n_leaves, dtype=np.int64)[i])) for i in range(n_leaves)
    ]
    worst_within = max(
        float(np.sum((one[i] - one[j]) ** 2)) for i in range(n_leaves) for j in range(n_leaves)
    )
    # the root (index 0) never changes under replacement within one tree
    assert worst_within == 2 * depth
    assert NoisyBinaryTree(depth, 1.0, "public").l2_sensitivity ** 2 == pytest.approx(
        worst_within, rel=1e-15
    )
    # noisy root, one tree per group: a record moving from group a's tree to group b's
    # removes one node per level (D + 1 levels) there and adds one per level here.
    worst_between = max(
        float(np.sum(one[i] ** 2) + np.sum(one[j] ** 2))
        for i in range(n_leaves)
        for j in range(n_leaves)
    )
    assert worst_between == 2 * (depth + 1)
    assert NoisyBinaryTree(depth, 1.0, "noisy").l2_sensitivity ** 2 == pytest.approx(
        worst_between, rel=1e-15
    )


@pytest.mark.parametrize("root", ROOTS)
@pytest.mark.parametrize("depth", [1, 7, 20])
@pytest.mark.parametrize("rho", [0.01, 0.5, 3.0])
def test_for_zcdp_spends_exactly_rho(depth: int, rho: float, root: str) -> None:
    mech = NoisyBinaryTree.for_zcdp(depth, rho, root=root)  # type: ignore[arg-type]
    levels = depth + (root == "noisy")
    assert mech.n_noisy_levels == levels
    assert mech.l2_sensitivity == pytest.approx(math.sqrt(2 * levels), rel=1e-15)
    assert mech.sigma == pytest.approx(math.sqrt(levels / rho), rel=1e-15)
    assert mech.privacy.kind == "zcdp"
    assert mech.privacy.rho == pytest.approx(rho, rel=1e-12)


@pytest.mark.parametrize("root", ROOTS)
def test_for_approx_is_tight(root: str) -> None:
    eps, delta = 1.0, 1e-6
    mech = NoisyBinaryTree.for_approx(10, eps, delta, root=root)  # type: ignore[arg-type]
    sens = mech.l2_sensitivity
    assert analytic_gaussian_delta(mech.sigma, sens, eps) <= delta
    assert analytic_gaussian_delta(mech.sigma * (1 - 1e-6), sens, eps) > delta
    got = mech.privacy_at(delta)
    assert got.kind == "approx" and got.delta == delta
    assert got.epsilon == pytest.approx(eps, rel=1e-6)


# ---------------------------------------------------------------------------- noiseless
@pytest.mark.parametrize("root", ROOTS)
@pytest.mark.parametrize("depth", [1, 3, 10])
def test_noiseless_reconstruction_is_exact(depth: int, root: str) -> None:
    rng = np.random.default_rng(depth)
    counts = rng.integers(0, 1000, size=1 << depth)
    exact = NoisyTree(node_counts(counts), sigma=1.0, depth=depth, root=root)  # type: ignore[arg-type]
    p_est, p_std = exact.dyadic_prefix()
    s_est, s_std = exact.dyadic_suffix()
    np.testing.assert_array_equal(p_est, _true_prefix(counts))
    np.testing.assert_array_equal(s_est, _true_suffix(counts))
    fit = exact.consistent()
    np.testing.assert_allclose(fit.leaves, counts, rtol=0, atol=1e-8)
    np.testing.assert_allclose(fit.prefix, _true_prefix(counts), rtol=0, atol=1e-8)
    np.testing.assert_allclose(fit.suffix, _true_suffix(counts), rtol=0, atol=1e-8)

    # node counts used: popcount(j) for the prefix, popcount(2^D - j) for the suffix
    n = 1 << depth
    pop = np.array([bin(j).count("1") for j in range(n + 1)], dtype=float)
    pop_p, pop_s = pop.copy(), pop[::-1].copy()
    pop_p[n] = 1.0 if root == "noisy" else 0.0  # the root
    pop_s[0] = 1.0 if root == "noisy" else 0.0
    pop_s[n] = 0.0
    np.testing.assert_allclose(p_std, np.sqrt(pop_p), rtol=1e-15)
    np.testing.assert_allclose(s_std, np.sqrt(pop_s), rtol=1e-15)

    # the release path with negligible noise: the exact discrete Gaussian on the 2^-11
    # lattice keeps a floor of variance 64·4^-11 (sd 0.0039, the (ε, δ) smoothing term),
    # so "negligible" means |error| ≤ 0.05 (> 12 sd of any prefix here)
    tiny = NoisyBinaryTree(depth, 1e-12, root).release(counts, rng=3)  # type: ignore[arg-type]
    np.testing.assert_allclose(tiny.consistent().prefix, _true_prefix(counts), atol=0.05)
    np.testing.assert_allclose(tiny.dyadic_suffix().estimate, _true_suffix(counts), atol=0.05)


def test_release_is_seeded_and_keeps_public_root() -> None:
    counts = np.arange(16)
    mech = NoisyBinaryTree(4, 2.0, "public")
    a, b = mech.release(counts, rng=7), mech.release(counts, rng=7)
    for x, y in zip(a.levels, b.levels, strict=True):
        np.testing.assert_array_equal(x, y)
    assert a.levels[0][0] == counts.sum()
    c = NoisyBinaryTree(4, 2.0, "noisy").release(counts, rng=7)
    assert c.levels[0][0] != counts.sum()
    assert not np.array_equal(mech.release(counts, rng=8).levels[4], a.levels[4])
    with pytest.raises(ValueError):
        a.levels[1][0] = 0.0  # released arrays are read-only
    rebuilt = NoisyTree(**a.to_dict())
    np.testing.assert_array_equal(rebuilt.consistent().prefix, a.consistent().prefix)
    assert isinstance(a.consistent(), ConsistentTree)


# ---------------------------------------------------------------------------- Monte Carlo
@pytest.mark.statistical
@pytest.mark.parametrize("root", ROOTS)
def test_prefix_std_matches_monte_carlo(root: str) -> None:
    """Σ_r (P̂_j − P_j)²/std_j² ~ χ²(R) exactly when std_j is right (the error is Gaussian).

    Checked for every j with std_j > 0 and both estimators (consistent and dyadic), with
    two-sided χ² bounds, plus a z-test of unbiasedness of the mean error; Bonferroni over all
    of them at a total false-alarm probability of 1e-6. Power: with R = 4000 a std that is
    10% off at any single j falls outside the χ² band with probability > 0.998 (8% off:
    > 0.9); the entries with std 0 must be exact.
    """
    depth, sigma, reps = 4, 3.0, 4000
    rng = np.random.default_rng(20240601)
    counts = rng.integers(0, 30, size=1 << depth)
    truth = _true_prefix(counts).astype(float)
    mech = NoisyBinaryTree(depth, sigma, root)  # type: ignore[arg-type]
    err_c = np.empty((reps, truth.size))
    err_d = np.empty((reps, truth.size))
    for r in range(reps):
        tree = mech.release(counts, rng=rng)
        err_c[r] = tree.consistent().prefix - truth
        err_d[r] = tree.dyadic_prefix().estimate - truth
    std_c = honaker_prefix_std(depth, sigma, root)  # type: ignore[arg-type]
    std_d = mech.release(counts, rng=0).dyadic_prefix().std

    n_tests = 2 * int(np.sum(std_c > 0))  # two estimators, same zero pattern
    assert np.array_equal(std_c > 0, std_d > 0)
    q = 5e-7 / (2 * n_tests)  # half the budget for χ², half for the mean; two-sided each
    lo, hi = float(stats.chi2.ppf(q, reps)), float(stats.chi2.isf(q, reps))
    z_max = float(stats.norm.isf(q))
    for err, std in ((err_c, std_c), (err_d, std_d)):
        zero = std == 0
        assert np.all(np.abs(err[:, zero]) < 1e-9)
        stat = np.sum((err[:, ~zero] / std[~zero]) ** 2, axis=0)
        assert np.all((stat > lo) & (stat < hi)), (stat / reps, lo / reps, hi / reps)
        z = err[:, ~zero].mean(axis=0) / (std[~zero] / math.sqrt(reps))
        assert np.all(np.abs(z) < z_max), z


# ---------------------------------------------------------------------------- leaf counts
@pytest.mark.parametrize("bounds", [(0.0, 1.0), (-3.7, -1.2), (-5.0, 11.0)])
@pytest.mark.parametrize("depth", [1, 3, 6])
def test_leaf_counts_brute_force(bounds: tuple[float, float], depth: int) -> None:
    lo, hi = bounds
    grid = leaf_edges(bounds, depth)
    assert grid[0] == lo and grid[-1] == hi and np.all(np.diff(grid) > 0)
    rng = np.random.default_rng(depth)
    # random points, every grid point (twice), lo and hi, and the floats adjacent to each
    # grid point (where an arithmetic bin index would be off by one without the exact check)
    near = np.clip(
        np.concatenate((np.nextafter(grid, -np.inf), np.nextafter(grid, np.inf))), lo, hi
    )
    x = np.concatenate((rng.uniform(lo, hi, 500), grid, grid, [lo, lo, hi], near))
    got = leaf_counts(x, bounds, depth)
    assert got.dtype == np.int64 and got.shape == (1 << depth,)
    want = np.zeros(1 << depth, dtype=np.int64)
    for v in x:
        for j in range(1 << depth):
            if grid[j] < v <= grid[j + 1] or (j == 0 and v == lo):
                want[j] += 1
                break
    np.testing.assert_array_equal(got, want)
    # prefix sums are empirical CDF values at the grid points
    cdf = np.array([np.sum(x <= g) for g in grid[1:]])
    np.testing.assert_array_equal(np.cumsum(got), cdf)
    assert leaf_counts(np.zeros(0), bounds, depth).sum() == 0


def test_leaf_counts_rejects_bad_values() -> None:
    with pytest.raises(InvalidDataError, match=r"values contains 1 value\(s\) outside bounds"):
        leaf_counts([0.5, 1.5], (0.0, 1.0), 3)
    with pytest.raises(InvalidDataError, match="values contains 1 non-finite"):
        leaf_counts([0.5, np.nan], (0.0, 1.0), 3)
    with pytest.raises(MissingPublicBoundError, match="bounds=None"):
        leaf_counts([0.5], None, 3)  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="depth=0"):
        leaf_counts([0.5], (0.0, 1.0), 0)


# ---------------------------------------------------------------------------- bad inputs
@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"depth": 0, "sigma": 1.0}, "depth=0"),
        ({"depth": -2, "sigma": 1.0}, "depth=-2"),
        ({"depth": 2.0, "sigma": 1.0}, r"depth=2\.0"),
        ({"depth": 31, "sigma": 1.0}, "depth=31"),
        ({"depth": 3, "sigma": 0.0}, r"sigma=0\.0"),
        ({"depth": 3, "sigma": -1.0}, r"sigma=-1\.0"),
        ({"depth": 3, "sigma": float("nan")}, "sigma=nan"),
        ({"depth": 3, "sigma": 1.0, "root": "exact"}, "root='exact'"),
    ],
)
def test_bad_parameters(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(InvalidParameterError, match=match):
        NoisyBinaryTree(**kwargs)  # type: ignore[arg-type]


def test_bad_calibration_parameters() -> None:
    with pytest.raises(InvalidParameterError, match="rho=0"):
        NoisyBinaryTree.for_zcdp(3, 0)
    with pytest.raises(InvalidParameterError, match="root='x'"):
        NoisyBinaryTree.for_zcdp(3, 1.0, root="x")  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match=r"delta=1\.5"):
        NoisyBinaryTree.for_approx(3, 1.0, 1.5)
    with pytest.raises(InvalidParameterError, match="sigma=0"):
        honaker_prefix_std(3, 0)
    with pytest.raises(InvalidParameterError, match="depth=0"):
        honaker_prefix_std(0, 1.0)


@pytest.mark.parametrize(
    ("counts", "match"),
    [
        (np.ones(7), r"leaf_counts has shape \(7,\).*2\*\*depth = 8"),
        (np.ones((2, 4)), r"leaf_counts has shape \(2, 4\)"),
        (np.array([1, 2, -1, 0, 0, 0, 0, 0]), r"leaf_counts\[2\] = -1 is negative"),
        (np.array([1, 2, np.nan, 0, 0, 0, 0, 0]), "leaf_counts contains 1 NaN"),
        (np.array([1, 2, 0.5, 0, 0, 0, 0, 0]), r"leaf_counts\[2\] is not an integer"),
    ],
)
def test_bad_leaf_counts(counts: NDArray[np.float64], match: str) -> None:
    with pytest.raises(InvalidDataError, match=match):
        NoisyBinaryTree(3, 1.0).release(counts, rng=0)


def test_bad_noisy_tree_and_node_counts() -> None:
    with pytest.raises(InvalidDataError, match="levels has 2 arrays"):
        NoisyTree((np.zeros(1), np.zeros(2)), sigma=1.0, depth=2)
    with pytest.raises(InvalidDataError, match=r"levels\[1\] has shape \(3,\)"):
        NoisyTree((np.zeros(1), np.zeros(3)), sigma=1.0, depth=1)
    with pytest.raises(InvalidDataError, match=r"levels\[1\] contains NaN"):
        NoisyTree((np.zeros(1), np.array([0.0, np.nan])), sigma=1.0, depth=1)
    with pytest.raises(InvalidParameterError, match="sigma=-1"):
        NoisyTree((np.zeros(1), np.zeros(2)), sigma=-1, depth=1)
    with pytest.raises(InvalidDataError, match="expected a power of two"):
        node_counts(np.ones(6))
    with pytest.raises(InvalidDataError, match="is negative"):
        node_counts(np.array([1, -1]))


# ---------------------------------------------------------------------------- scale
def test_depth_20_is_fast_and_exact_at_the_ends() -> None:
    import time

    depth = 20
    counts = np.random.default_rng(5).integers(0, 3, size=1 << depth)
    tree = NoisyBinaryTree.for_zcdp(depth, 0.5, root="public").release(counts, rng=6)
    start = time.perf_counter()
    fit = tree.consistent()
    elapsed = time.perf_counter() - start
    assert elapsed < 5.0  # typically ~0.1 s; generous bound for loaded CI machines
    assert fit.prefix.shape == (2**depth + 1,)
    assert fit.prefix[-1] == counts.sum() and fit.prefix_std[-1] == 0.0
    assert np.all(np.isfinite(fit.prefix_std))
    # the largest std sits at the middle-ish, far below the dyadic worst case sqrt(D)·σ
    assert fit.prefix_std.max() < math.sqrt(depth) * tree.sigma
