"""Bad input raises a dpfair error whose message names the argument (never silent clipping)."""

from __future__ import annotations

import numpy as np
import pytest

from dpfair import (
    DPFairError,
    InvalidDataError,
    InvalidParameterError,
    MissingPublicBoundError,
)
from dpfair.facility import (
    DPExpMed,
    GridExpMed,
    LaplaceMedian,
    fair,
    optimal_location,
    swdiff,
    widened_loss,
)

DOMAIN = (0.0, 1.0)
X = np.linspace(0.1, 0.9, 11)


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"epsilon": 0.0}, r"epsilon=0\.0: must be > 0"),
        ({"epsilon": -1}, r"epsilon=-1: must be > 0"),
        ({"epsilon": float("nan")}, r"epsilon=nan"),
        ({"epsilon": float("inf")}, r"epsilon=inf: must be finite"),
        ({"epsilon": "a"}, r"epsilon='a'"),
        ({"domain": (1.0, 0.0)}, r"domain=\(1\.0, 0\.0\): lo must be strictly smaller"),
        ({"domain": (0.5, 0.5)}, r"domain=\(0\.5, 0\.5\)"),
        ({"domain": (0.0, float("inf"))}, r"domain=.*finite"),
        ({"widening": -0.1}, r"widening=-0\.1: must be a finite number >= 0"),
        ({"widening": float("nan")}, r"widening=nan"),
        ({"widening": True}, r"widening=True"),
        ({"median": "middle"}, r"median='middle': expected 'lower' or 'upper'"),
    ],
)
def test_bad_parameters(kwargs, pattern):
    args = {"epsilon": 1.0, "domain": DOMAIN, **kwargs}
    with pytest.raises(InvalidParameterError, match=pattern):
        DPExpMed(**args)


def test_missing_domain_is_a_missing_public_bound():
    with pytest.raises(MissingPublicBoundError, match=r"domain=None: a public range is required"):
        DPExpMed(1.0, None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("x", "error", "pattern"),
    [
        ([], InvalidDataError, r"x is empty"),
        ([0.2, float("nan"), 0.4], InvalidDataError,
         r"x contains 1 non-finite value\(s\).*index 1"),
        ([0.2, float("inf")], InvalidDataError, r"non-finite"),
        ([0.2, 1.5, -0.1], InvalidDataError,
         r"x has 2 location\(s\) outside domain=\(0, 1\), first at index 1 \(value 1\.5\).*"
         r"never clips them silently"),
        ([[0.1, 0.2], [0.3, 0.4]], InvalidDataError, r"x: expected a 1-D array"),
        (0.5, InvalidDataError, r"got a scalar"),
        (["a", "b"], InvalidDataError, r"x: expected a 1-D array of real numbers"),
    ],
)
def test_bad_data(x, error, pattern):
    mech = DPExpMed(1.0, DOMAIN)
    for call in (mech.sample, mech.distribution, LaplaceMedian(1.0, DOMAIN).sample,
                 GridExpMed(1.0, DOMAIN).distribution):
        with pytest.raises(error, match=pattern):
            call(x)


def test_outside_domain_is_never_clipped():
    mech = DPExpMed(1.0, DOMAIN)
    with pytest.raises(InvalidDataError, match="outside domain"):
        mech.sample([0.5, 1.0 + 1e-12])
    assert mech.sample([0.0, 1.0], rng=0) <= 1.0  # the ends themselves are fine


def test_errors_are_value_errors_and_dpfair_errors():
    with pytest.raises(ValueError):
        DPExpMed(-1.0, DOMAIN)
    with pytest.raises(DPFairError):
        DPExpMed(1.0, DOMAIN).sample([])


def test_other_bad_arguments():
    mech = DPExpMed(1.0, DOMAIN)
    with pytest.raises(InvalidParameterError, match=r"size=-1"):
        mech.sample(X, size=-1)
    with pytest.raises(InvalidParameterError, match=r"size=2\.0"):
        mech.sample(X, size=2.0)  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match=r"rng=-3"):
        mech.sample(X, rng=-3)
    with pytest.raises(InvalidDataError, match="presorted=True"):
        mech.distribution([0.3, 0.1], presorted=True)
    with pytest.raises(InvalidParameterError, match=r"level="):
        mech.distribution(X).fair_quantile(1.5)
    with pytest.raises(InvalidParameterError, match=r"method='exact'"):
        fair(X, 0.3, method="exact")  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match=r"median='mid'"):
        optimal_location(X, median="mid")  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match=r"loc: must be finite"):
        swdiff(X, float("nan"))
    with pytest.raises(InvalidParameterError, match=r"widening=-1"):
        widened_loss(X, 0.3, widening=-1, domain=DOMAIN)
    with pytest.raises(InvalidParameterError, match=r"grid_size=1"):
        GridExpMed(1.0, DOMAIN, grid_size=1)
    with pytest.raises(InvalidParameterError, match=r"score='median'"):
        GridExpMed(1.0, DOMAIN, score="median")  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match=r"epsilon=0"):
        LaplaceMedian(0, DOMAIN)


def test_privacy_statement():
    mech = DPExpMed(0.7, DOMAIN)
    assert mech.privacy.kind == "pure" and mech.privacy.epsilon == pytest.approx(0.7)
    assert mech.privacy_zcdp.rho == pytest.approx(0.7**2 / 8)
    assert LaplaceMedian(0.7, DOMAIN).privacy.epsilon == pytest.approx(0.7)
    assert GridExpMed(0.7, DOMAIN).privacy.epsilon == pytest.approx(0.7)
    assert mech.widening_for(100) == pytest.approx(1 / 70)
    assert DPExpMed(0.7, DOMAIN, widening=0.2).widening_for(100) == 0.2
