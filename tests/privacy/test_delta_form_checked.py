"""The discrete Gaussian's (ε, δ) statement is charged only where it is proven.

Attack review of issue 11: ``approx_dp_sigma_target`` said it checked the δ-form of the
slack bound but never did, so setups with ε beyond ~1200 + ln δ were charged an (ε, δ)
that only holds in its ε-form. They are now refused, everywhere an (ε, δ) is planned or
read off.
"""

from __future__ import annotations

import pytest

from dpfair._errors import InvalidParameterError
from dpfair.fairclass.federated._protocol import gdp_epsilon
from dpfair.mechanisms import GaussianMechanism
from dpfair.mechanisms.gaussian_calibration import (
    approx_dp_sigma_target,
    check_delta_form,
    delta_form_holds,
    discrete_gaussian_sigma,
)


def test_ordinary_settings_pass_and_the_limit_is_where_the_bound_says():
    assert delta_form_holds(10.0, 1e-9, 2**40)
    check_delta_form(100.0, 1e-300, 2**40)
    assert not delta_form_holds(600.0, 1e-300, 2**40)
    assert not delta_form_holds(1300.0, 1e-5, 1)


@pytest.mark.parametrize(("eps", "delta"), [(600.0, 1e-300), (1300.0, 1e-5)])
def test_unproven_settings_are_refused_where_they_are_planned(eps, delta):
    with pytest.raises(InvalidParameterError, match="beyond"):
        approx_dp_sigma_target(eps, delta, 1)
    with pytest.raises(InvalidParameterError, match="beyond"):
        discrete_gaussian_sigma(eps, delta, 1.0, 1)


def test_unproven_settings_are_refused_where_epsilon_is_read_off():
    assert 4.3 < gdp_epsilon(1.0, 1e-5) < 4.5
    with pytest.raises(InvalidParameterError, match="beyond"):
        gdp_epsilon(60.0, 1e-300)
    with pytest.raises(InvalidParameterError, match="beyond"):
        GaussianMechanism(1e-3, 1.0).privacy_at(1e-300)

