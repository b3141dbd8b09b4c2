"""The density at the ends of the closed domain is the one-sided limit (issue 15, item 2).

When agents sit at the upper end, trailing pieces of zero length (with a different level)
used to decide the density at ``hi`` itself: all 31 agents at the two ends, ε = 1, gave a
log-density 7.5 below the one just under ``hi``; one agent at ``hi`` gave ε/2 less.
"""

from __future__ import annotations

import numpy as np
import pytest

from dpfair.facility import DPExpMed, widened_loss


def _cases():
    rng = np.random.default_rng(5)
    yield "two-ends-31", np.array([0.0] * 15 + [1.0] * 16), 1.0, None, "lower"
    yield "n=1-at-hi", np.array([1.0]), 1.0, None, "lower"
    yield "n=1-at-lo", np.array([0.0]), 1.0, None, "lower"
    yield "all-at-hi-unwidened", np.full(9, 1.0), 0.8, 0.0, "upper"
    yield "all-at-lo-unwidened", np.full(9, 0.0), 0.8, 0.0, "lower"
    for i in range(20):
        n = int(rng.integers(1, 40))
        x = rng.choice([0.0, 1.0, 0.3, 0.97], size=n)
        w = [None, 0.0, 0.02, 0.5][i % 4]
        yield f"random-{i}", x, float(rng.uniform(0.2, 3.0)), w, ["lower", "upper"][i % 2]


CASES = list(_cases())


@pytest.mark.parametrize(("name", "x", "eps", "w", "median"), CASES, ids=[c[0] for c in CASES])
def test_density_at_the_domain_ends_is_the_one_sided_limit(name, x, eps, w, median):
    d = DPExpMed(eps, (0.0, 1.0), widening=w, median=median).distribution(x)
    e = d.edges
    nonempty = np.flatnonzero(np.diff(e) > 0)
    first, last = nonempty[0], nonempty[-1]
    inside_hi = 0.5 * (e[last] + e[last + 1])  # interior of the last piece carrying mass
    inside_lo = 0.5 * (e[first] + e[first + 1])
    assert d.logpdf(1.0) == d.logpdf(inside_hi)
    assert d.logpdf(0.0) == d.logpdf(inside_lo)
    assert d.pdf(1.0) == d.pdf(inside_hi) and d.pdf(0.0) == d.pdf(inside_lo)
    # and both agree with the definition exp(−ε p_α / 2) / Z next to the ends
    near = np.array([np.nextafter(1.0, 0.0), np.nextafter(0.0, 1.0)])
    near = near[(near > e[last]) | (near < e[first + 1])]
    p = widened_loss(x, near, widening=d.widening, domain=(0.0, 1.0), median=median,
                     method="definition")
    ref = -0.5 * eps * np.asarray(p) - d.law.log_norm
    np.testing.assert_allclose(d.logpdf(near), ref, rtol=0, atol=1e-9)
    np.testing.assert_allclose(d.logpdf(np.array([1.0, 0.0])),
                               d.logpdf(np.array([inside_hi, inside_lo])), rtol=0, atol=0)
