"""Shared privacy mechanisms: Gaussian, exponential (piecewise-constant, exact law), noisy tree."""

from dpfair.mechanisms.exponential import (
    ExponentialMechanism,
    PiecewiseConstantLaw,
    sample_piece_windowed,
)
from dpfair.mechanisms.gaussian import (
    GaussianMechanism,
    analytic_gaussian_delta,
    analytic_gaussian_sigma,
)
from dpfair.mechanisms.tree import (
    ConsistentTree,
    DyadicEstimate,
    NoisyBinaryTree,
    NoisyTree,
    honaker_prefix_std,
    leaf_counts,
    leaf_edges,
    node_counts,
)

__all__ = [
    "ConsistentTree",
    "DyadicEstimate",
    "ExponentialMechanism",
    "GaussianMechanism",
    "NoisyBinaryTree",
    "NoisyTree",
    "PiecewiseConstantLaw",
    "analytic_gaussian_delta",
    "analytic_gaussian_sigma",
    "honaker_prefix_std",
    "leaf_counts",
    "leaf_edges",
    "node_counts",
    "sample_piece_windowed",
]
