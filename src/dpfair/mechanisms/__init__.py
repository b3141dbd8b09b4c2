"""Shared privacy mechanisms: Gaussian, Gaussian process (functions), Laplace, exponential
(piecewise-constant with exact law, and discrete), noisy binary tree with Honaker
post-processing."""

from dpfair.mechanisms.discrete import DiscreteExponentialMechanism, DiscreteLaw
from dpfair.mechanisms.discrete_laplace import (
    ClippedDiscreteLaplaceLaw,
    bernoulli_exp,
    sample_discrete_laplace,
)
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
from dpfair.mechanisms.gaussian_process import (
    GaussianProcessMechanism,
    KroneckerGaussianGrid,
    gaussian_kernel_matrix,
)
from dpfair.mechanisms.laplace import ClippedLaplaceLaw, LaplaceMechanism
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
from dpfair.mechanisms.windowed import sample_pieces_windowed

__all__ = [
    "ClippedDiscreteLaplaceLaw",
    "ClippedLaplaceLaw",
    "ConsistentTree",
    "DiscreteExponentialMechanism",
    "DiscreteLaw",
    "DyadicEstimate",
    "ExponentialMechanism",
    "GaussianMechanism",
    "GaussianProcessMechanism",
    "KroneckerGaussianGrid",
    "LaplaceMechanism",
    "NoisyBinaryTree",
    "NoisyTree",
    "PiecewiseConstantLaw",
    "analytic_gaussian_delta",
    "analytic_gaussian_sigma",
    "bernoulli_exp",
    "gaussian_kernel_matrix",
    "honaker_prefix_std",
    "leaf_counts",
    "leaf_edges",
    "node_counts",
    "sample_discrete_laplace",
    "sample_piece_windowed",
    "sample_pieces_windowed",
]
