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

__all__ = [
    "ExponentialMechanism",
    "GaussianMechanism",
    "PiecewiseConstantLaw",
    "analytic_gaussian_delta",
    "analytic_gaussian_sigma",
    "sample_piece_windowed",
]
