"""Privacy mechanisms, one module per job; import them from here.

* exact samplers, integers only: :mod:`~dpfair.mechanisms.discrete_gaussian` (CKS discrete
  Gaussian, with the exact exp tables of ``_exp_tables``),
  :mod:`~dpfair.mechanisms.discrete_laplace` (discrete Laplace, its lattice release and the
  law of a clipped grid release), :mod:`~dpfair.mechanisms.exact_choice` (exact
  exponential-mechanism choice among pieces);
* lattice noise: :mod:`~dpfair.mechanisms.lattice` (:class:`LatticeNoise`, lattice bits and
  variance);
* Gaussian calibration and (ε, δ) accounting: :mod:`~dpfair.mechanisms.gaussian_calibration`
  (analytic Gaussian, the discrete Gaussian's δ slack and its check);
* mechanisms: :mod:`~dpfair.mechanisms.gaussian` (:class:`GaussianMechanism`),
  :mod:`~dpfair.mechanisms.gaussian_process`, :mod:`~dpfair.mechanisms.tree` (noisy binary
  tree with Honaker post-processing), :mod:`~dpfair.mechanisms.exponential`
  (piecewise-constant exponential mechanism and its exact law),
  :mod:`~dpfair.mechanisms.discrete` (exponential mechanism over finite candidates); both
  exponential mechanisms take their (ε, Δu), validation and guarantees from ``_score``.

Imports go one way (no circle): ``_exp_tables``, ``discrete_laplace`` → ``discrete_gaussian``
→ ``lattice`` ← ``gaussian_calibration``; ``gaussian``, ``gaussian_process`` and ``tree``
sit on top. :data:`__all__` is exactly what the rest of the library uses; the domain
packages import mechanisms only from here (``tests/test_layering.py``). Names are loaded
on first access (PEP 562), so importing one pulls in only its own module: the command
line's start-up does not pay for the Gaussian process or the tree.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dpfair.mechanisms.discrete import DiscreteExponentialMechanism, DiscreteLaw
    from dpfair.mechanisms.discrete_gaussian import MAX_VARIANCE as GAUSSIAN_MAX_VARIANCE
    from dpfair.mechanisms.discrete_gaussian import round_to_scale, sample_discrete_gaussian
    from dpfair.mechanisms.discrete_laplace import MAX_SCALE as LAPLACE_MAX_SCALE
    from dpfair.mechanisms.discrete_laplace import SAFE_SCALE as LAPLACE_SAFE_SCALE
    from dpfair.mechanisms.discrete_laplace import (
        ClippedDiscreteLaplaceLaw,
        discrete_laplace_scale,
        lattice_laplace,
    )
    from dpfair.mechanisms.exact_choice import (
        PieceMasses,
        choose_piece,
        choose_pieces,
        choose_windowed,
        exact_rate,
    )
    from dpfair.mechanisms.exponential import ExponentialMechanism, PiecewiseConstantLaw
    from dpfair.mechanisms.gaussian import GaussianMechanism
    from dpfair.mechanisms.gaussian_calibration import (
        SMOOTHING_VARIANCE,
        analytic_gaussian_delta,
        analytic_gaussian_sigma,
        approx_dp_sigma_target,
        check_delta_form,
        discrete_gaussian_sigma,
    )
    from dpfair.mechanisms.gaussian_process import GaussianProcessMechanism, KroneckerGaussianGrid
    from dpfair.mechanisms.lattice import (
        LatticeNoise,
        approx_dp_variance,
        lattice_bits,
        lattice_variance,
        snap_to_lattice,
    )
    from dpfair.mechanisms.tree import (
        NoisyBinaryTree,
        NoisyTree,
        leaf_counts,
        leaf_counts_sorted,
        leaf_edges,
    )

#: Exported name → (submodule, its name there).
_EXPORTS: dict[str, tuple[str, str]] = {
    # exact samplers
    "sample_discrete_gaussian": ("discrete_gaussian", "sample_discrete_gaussian"),
    "round_to_scale": ("discrete_gaussian", "round_to_scale"),
    "GAUSSIAN_MAX_VARIANCE": ("discrete_gaussian", "MAX_VARIANCE"),
    "ClippedDiscreteLaplaceLaw": ("discrete_laplace", "ClippedDiscreteLaplaceLaw"),
    "LAPLACE_MAX_SCALE": ("discrete_laplace", "MAX_SCALE"),
    "LAPLACE_SAFE_SCALE": ("discrete_laplace", "SAFE_SCALE"),
    "discrete_laplace_scale": ("discrete_laplace", "discrete_laplace_scale"),
    "lattice_laplace": ("discrete_laplace", "lattice_laplace"),
    "PieceMasses": ("exact_choice", "PieceMasses"),
    "choose_piece": ("exact_choice", "choose_piece"),
    "choose_pieces": ("exact_choice", "choose_pieces"),
    "choose_windowed": ("exact_choice", "choose_windowed"),
    "exact_rate": ("exact_choice", "exact_rate"),
    # lattice noise
    "LatticeNoise": ("lattice", "LatticeNoise"),
    "approx_dp_variance": ("lattice", "approx_dp_variance"),
    "lattice_bits": ("lattice", "lattice_bits"),
    "lattice_variance": ("lattice", "lattice_variance"),
    "snap_to_lattice": ("lattice", "snap_to_lattice"),
    # Gaussian calibration and (ε, δ) accounting
    "SMOOTHING_VARIANCE": ("gaussian_calibration", "SMOOTHING_VARIANCE"),
    "analytic_gaussian_delta": ("gaussian_calibration", "analytic_gaussian_delta"),
    "analytic_gaussian_sigma": ("gaussian_calibration", "analytic_gaussian_sigma"),
    "approx_dp_sigma_target": ("gaussian_calibration", "approx_dp_sigma_target"),
    "check_delta_form": ("gaussian_calibration", "check_delta_form"),
    "discrete_gaussian_sigma": ("gaussian_calibration", "discrete_gaussian_sigma"),
    # mechanisms
    "GaussianMechanism": ("gaussian", "GaussianMechanism"),
    "GaussianProcessMechanism": ("gaussian_process", "GaussianProcessMechanism"),
    "KroneckerGaussianGrid": ("gaussian_process", "KroneckerGaussianGrid"),
    "NoisyBinaryTree": ("tree", "NoisyBinaryTree"),
    "NoisyTree": ("tree", "NoisyTree"),
    "leaf_counts": ("tree", "leaf_counts"),
    "leaf_counts_sorted": ("tree", "leaf_counts_sorted"),
    "leaf_edges": ("tree", "leaf_edges"),
    "ExponentialMechanism": ("exponential", "ExponentialMechanism"),
    "PiecewiseConstantLaw": ("exponential", "PiecewiseConstantLaw"),
    "DiscreteExponentialMechanism": ("discrete", "DiscreteExponentialMechanism"),
    "DiscreteLaw": ("discrete", "DiscreteLaw"),
}

__all__ = [
    "GAUSSIAN_MAX_VARIANCE",
    "LAPLACE_MAX_SCALE",
    "LAPLACE_SAFE_SCALE",
    "SMOOTHING_VARIANCE",
    "ClippedDiscreteLaplaceLaw",
    "DiscreteExponentialMechanism",
    "DiscreteLaw",
    "ExponentialMechanism",
    "GaussianMechanism",
    "GaussianProcessMechanism",
    "KroneckerGaussianGrid",
    "LatticeNoise",
    "NoisyBinaryTree",
    "NoisyTree",
    "PieceMasses",
    "PiecewiseConstantLaw",
    "analytic_gaussian_delta",
    "analytic_gaussian_sigma",
    "approx_dp_sigma_target",
    "approx_dp_variance",
    "check_delta_form",
    "choose_piece",
    "choose_pieces",
    "choose_windowed",
    "discrete_gaussian_sigma",
    "discrete_laplace_scale",
    "exact_rate",
    "lattice_bits",
    "lattice_laplace",
    "lattice_variance",
    "leaf_counts",
    "leaf_counts_sorted",
    "leaf_edges",
    "round_to_scale",
    "sample_discrete_gaussian",
    "snap_to_lattice",
]


def __getattr__(name: str) -> Any:
    """Load an exported name from its submodule on first access (PEP 562)."""
    try:
        module, attr = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'dpfair.mechanisms' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(f"dpfair.mechanisms.{module}"), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
