"""Every continuous random draw in the package, accounted for (issue 11).

A floating-point leak needs a continuous draw (numpy's ``normal``, ``laplace``, ``random``
…) combined in binary64 with a data-dependent number. This test lists every call of a
continuous sampler in ``src/dpfair`` (by syntax tree, so aliases such as ``gen``/``rng``
do not matter) and requires each one to be in the inventory below with the reason it is
safe. A new call fails the test until someone writes down why it cannot leak — the
adversary's first question made into a regression test.
"""

from __future__ import annotations

import ast
from pathlib import Path

import dpfair

SAMPLERS = {
    # every continuous sampler of numpy.random.Generator (and the legacy module functions)
    "normal", "standard_normal", "laplace", "exponential", "standard_exponential",
    "gumbel", "random", "uniform", "lognormal", "beta", "gamma", "standard_gamma",
    "logistic", "standard_cauchy", "standard_t", "chisquare", "noncentral_chisquare",
    "f", "noncentral_f", "weibull", "triangular", "pareto", "power", "rayleigh", "wald",
    "vonmises", "multivariate_normal", "dirichlet", "random_sample", "rand", "randn",
    # scipy.stats distributions
    "rvs",
}

#: Receivers whose attribute named like a sampler is a constructor, not a random draw.
CONSTRUCTORS = {"KroneckerGaussianGrid"}
#: Modules whose attributes of those names are functions or submodules (``np.power``,
#: ``np.random``, ``math.gamma``); a draw through them (``np.random.laplace``) is still
#: found. ``stats.uniform(...)`` (building a frozen law) is listed in the inventory.
MODULES = {"np", "numpy", "math", "special", "scipy"}
#: Names that are also ordinary attributes (``cfg.beta``, a failure probability): counted
#: only when called; the other sampler names count even when merely mentioned (aliases).
AMBIGUOUS = {"beta", "f", "power", "gamma", "random", "rand"}

PUBLIC_CELL = "uniform point of a public cell/interval: computed from public numbers only"
SIMULATION = "simulates data or a law for studies/tests; never meets private data"
UNUSED_PRIMITIVE = "continuous law/primitive for analysis; no release calls it"

#: (module path relative to the package, enclosing function) → why the draw cannot leak.
INVENTORY: dict[tuple[str, str], str] = {
    ("median/_expmech.py", "sample_order_statistic"):
        "continuous-edge ExpMech kept for the exact-law tests; released intervals use "
        "sample_order_statistic_cell (public cell edges only)",
    ("fairclass/_threshold.py", "ThresholdLaw.sample"):
        "uniform point of a public cell chosen exactly by _public_cell (public edges only)",
    ("facility/_mechanism.py", "_OutputGrid.release"):
        PUBLIC_CELL + " (the cell itself is chosen exactly by _choose_cells)",
    ("facility/_mechanism.py", "_sample_windowed"):
        "the continuous draw of DPExpMed's law inside a data-dependent piece, kept for the "
        "analysis/attack tests; DPExpMed.sample chooses a public cell exactly instead",
    ("facility/_families.py", "TriangularLaw._draw"): SIMULATION,
    ("facility/_families.py", "TruncatedNormalLaw._draw"): SIMULATION,
    ("facility/_families.py", "CustomSinglePeakedLaw._draw"): SIMULATION,
    ("data/designs.py", "simulate"): SIMULATION,
    ("fairclass/datasets.py", "simulate_many_features"): SIMULATION,
    ("data/synthetic.py", "lognormal_sample"): SIMULATION,
    ("data/synthetic.py", "normal_sample"): SIMULATION,
    ("data/synthetic.py", "uniform_sample"): SIMULATION,
    ("data/synthetic.py", "pareto_sample"): SIMULATION,
    ("data/synthetic.py", "<module>"): "scipy.stats laws of the synthetic generators (no draw)",
    ("experiments/_median_paper.py", "<module>"):
        "scipy.stats laws of the paper's data designs (no draw)",
    ("experiments/_median_paper.py", "_coverage_cell"): SIMULATION,
    ("experiments/_median_paper.py", "lognormal_population.sample"): SIMULATION,
    ("fairclass/_threshold.py", "paper_vertical_shift_threshold"):
        "the paper's non-private S2 rule, kept to document that it is not private; "
        "no estimator calls it",
    ("fairclass/_rff.py", "_frequencies"):
        "public random Fourier frequencies: drawn from a public seed, independent of data",
    ("fairclass/_linear.py", "fit_linear_release"):
        "objective-perturbation vector b: noise that never meets data additively; snapped "
        "to a public lattice, and the minimiser it perturbs is released through an exact "
        "lattice mechanism (docs/proofs/fairclass_cdp_fair.md §11); the centred design's "
        "row radius (choose_radius) draws no continuous noise: exact exponential mechanism "
        "on integer scores (tests/attacks/test_linear_last_bits.py)",
    ("mechanisms/gaussian_process.py", "KroneckerGaussianGrid.sample"): UNUSED_PRIMITIVE,
    ("mechanisms/exponential.py", "PiecewiseConstantLaw.sample"): UNUSED_PRIMITIVE,
    ("mechanisms/discrete.py", "DiscreteLaw.sample"): UNUSED_PRIMITIVE,
}


def _continuous_draws() -> set[tuple[str, str]]:
    root = Path(dpfair.__file__).parent
    found: set[tuple[str, str]] = set()
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        called = {id(c.func) for c in ast.walk(tree) if isinstance(c, ast.Call)}
        stack: list[str] = []

        def visit(node: ast.AST, rel: str = rel, stack: list[str] = stack,
                  called: set[int] = called) -> None:
            named = isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            if named:
                stack.append(node.name)  # type: ignore[union-attr]
            # any *mention* of a sampler, called or not (``draw = gen.normal``), on any
            # receiver, and ``getattr(x, "normal")``; class constructors named like a
            # sampler (``KroneckerGaussianGrid.uniform``) are excluded by name below
            hit = (isinstance(node, ast.Attribute) and node.attr in SAMPLERS
                   and not (isinstance(node.value, ast.Name)
                            and node.value.id in CONSTRUCTORS | MODULES)
                   and (node.attr not in AMBIGUOUS or id(node) in called))
            hit = hit or (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                          and node.func.id == "getattr" and len(node.args) >= 2
                          and isinstance(node.args[1], ast.Constant)
                          and node.args[1].value in SAMPLERS)
            if hit:
                funcs = list(stack)
                found.add((rel, ".".join(funcs[-2:]) if len(funcs) > 1 else funcs[0]
                           if funcs else "<module>"))
            for child in ast.iter_child_nodes(node):
                visit(child)
            if named:
                stack.pop()

        visit(tree)
    return found


def test_every_continuous_draw_is_in_the_inventory_with_a_reason():
    found = _continuous_draws()
    unexplained = sorted(found - set(INVENTORY))
    assert not unexplained, (
        "continuous random draws without a written reason they cannot leak through "
        f"floating point (add them to INVENTORY or use an exact sampler): {unexplained}"
    )


def test_the_inventory_has_no_stale_entries():
    stale = sorted(set(INVENTORY) - _continuous_draws())
    assert not stale, f"INVENTORY lists draws that no longer exist: {stale}"


def test_the_scan_finds_a_planted_draw(tmp_path, monkeypatch):
    """Power: a continuous draw added to a release would be found."""
    pkg = tmp_path / "dpfair"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "leak.py").write_text(
        "def release(count, gen):\n    return count + gen.laplace(0.0, 1.0)\n"
        "def alias(count, G):\n    draw = G.normal\n    return count + draw()\n"
        "def by_name(count, gen):\n    return count + getattr(gen, 'normal')()\n"
        "def module_level(count):\n    import numpy as np\n"
        "    return count + np.random.laplace()\n"
        "def scipy_rvs(count, gen):\n    from scipy import stats\n"
        "    return count + stats.laplace.rvs(random_state=gen)\n"
        "def other(count, rng):\n    return count + rng.pareto(3.0) + rng.wald(1, 1)\n"
    )
    monkeypatch.setattr(dpfair, "__file__", str(pkg / "__init__.py"))
    found = _continuous_draws()
    for name in ("release", "alias", "by_name", "module_level", "scipy_rvs", "other"):
        assert ("leak.py", name) in found, name
