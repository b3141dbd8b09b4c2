"""Gaussian calibration and (ε, δ) accounting (`mechanisms/gaussian_calibration.py`)."""

from __future__ import annotations

from dpfair.mechanisms.gaussian_calibration import (
    approx_dp_sigma_target,
    delta_form_holds,
    discrete_gaussian_delta_slack,
)


def test_delta_slack_is_astronomically_small():
    # (2 + 8e^ε)·d·η_s with η_s ≈ 2e^{−2π²·64}: log ≈ ε + log d − 1258
    assert discrete_gaussian_delta_slack(1.0, 1) < -1250
    assert discrete_gaussian_delta_slack(10.0, 2**30) < -1220
    assert approx_dp_sigma_target(1.0, 1e-6, 1000) == 1e-6 * (1 - 2.0**-40)
    assert delta_form_holds(1.0, 1e-6, 2**40)
    assert not delta_form_holds(1000.0, 1e-300, 1000)  # then the ε-form applies
