"""FDPConfig: one validated configuration shared by make_protocol and FDPFairClassifier.

* The classifier and make_protocol + run_protocol built from the same FDPConfig release the
  same model for the same seed (public API only).
* The flat keywords of make_protocol are the FDPConfig; a setup rebuilds from its own
  ``fdp_config()``; validation errors name the argument.
* ``rho=`` (the tolerance band's old name) still works, with a DeprecationWarning, and a
  version-2 setup (field ``rho``) is still read.
"""

from __future__ import annotations

import json
import math
import warnings
from dataclasses import replace

import numpy as np
import pytest

import dpfair
from dpfair._errors import InvalidParameterError
from dpfair.fairclass.datasets import simulate
from dpfair.fairclass.federated import (
    SCHEMA_VERSION,
    FDPConfig,
    FDPFairClassifier,
    ProtocolConfig,
    ProtocolError,
    Signer,
    SiteSpec,
    decode,
    encode,
    make_protocol,
    run_protocol,
)
from dpfair.fairclass.federated._messages import canonical

N, EPS, DELTA = 600, 2.0, 1e-6


def _data(S: int = 2, seed: int = 0):
    return [simulate(N, rng=seed * 10 + s) for s in range(S)]


def _specs(S: int = 2) -> list[SiteSpec]:
    return [SiteSpec(f"site-{i + 1}", N, EPS, DELTA) for i in range(S)]


@pytest.mark.parametrize(
    "config",
    [
        FDPConfig(feature_bounds=[(0, 1), (0, 1)], alpha=0.2, tolerance=0.02, depth=6),
        FDPConfig(feature_bounds=[(0, 1), (0, 1)], alpha=0.2, threshold_rule="paper",
                  correction="isotonic", tail="dyadic"),
        FDPConfig(feature_bounds=[(0, 1), (0, 1)], alpha=0.2, estimator="rff",
                  features_dim=64, depth=6),
    ],
    ids=["kernel-confidence", "kernel-paper", "rff"],
)
def test_classifier_and_make_protocol_release_the_same_model(config: FDPConfig) -> None:
    sites = _data()
    X, y, A = [d.X for d in sites], [d.y for d in sites], [d.A for d in sites]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # an uncertified fit warns; not the point here
        clf = FDPFairClassifier.from_config(
            config, epsilon=EPS, delta=DELTA, random_state=11
        ).fit(X, y, sensitive_features=A)
    assert clf.config_ == config
    setup = make_protocol(
        _specs(), config, protocol_id=clf.protocol_.protocol_id,
        rff_seed=clf.protocol_.rff_seed if config.is_rff else None,
    )
    assert setup == clf.protocol_
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        final, _ = run_protocol(setup, list(zip(X, y, A, strict=True)), random_state=11)
    got = clf.released_model_
    assert set(final.arrays) == set(got.arrays)
    for name, arr in final.arrays.items():
        np.testing.assert_array_equal(arr, got.arrays[name], err_msg=name)
    assert final.fields["thresholds"] == got.fields["thresholds"]
    assert final.fields["site_privacy"] == got.fields["site_privacy"]
    # and a second fit with the same seed releases the same model again
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        again = FDPFairClassifier.from_config(
            config, epsilon=EPS, delta=DELTA, random_state=11
        ).fit(X, y, sensitive_features=A)
    np.testing.assert_array_equal(again.tau_, clf.tau_)


def test_flat_keywords_are_the_config_and_a_setup_rebuilds_from_its_own() -> None:
    flat = dict(feature_bounds=[(0, 1), (0, 2)], alpha=0.15, alpha_margin=0.01,
                tolerance=0.025, threshold_rule="paper", count_share=0.1)
    a = make_protocol(_specs(3), protocol_id="run-a", **flat)
    b = make_protocol(_specs(3), FDPConfig(**flat), protocol_id="run-a")
    assert a == b
    assert a.cross_fit is True and a.tolerance == 0.025
    keys = {p: Signer.generate(p).public for p in ("centre", *a.site_ids)}
    c = replace(a, keys=tuple(sorted(keys.items())))
    again = make_protocol(c.sites, c.fdp_config(), protocol_id=c.protocol_id, keys=keys)
    assert again == c
    assert ProtocolConfig.from_envelope(c.to_envelope()) == c
    with pytest.raises(InvalidParameterError, match="not both"):
        make_protocol(_specs(), FDPConfig(**flat), alpha=0.2)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"tolerance": -0.1}, "tolerance="),
        ({"tolerance": float("nan")}, "tolerance="),
        ({"alpha": 1.5}, "alpha"),
        ({"threshold_rule": "best"}, "threshold_rule="),
        ({"estimator": "bogus"}, "estimator="),
        ({"estimator": "kernel", "categories": {0: ["a"]}}, "categories"),
        ({"depth": 99}, "depth="),
        ({"bandwidth": 1e-9}, "bandwidth="),
        ({"grid_shape": (4,)}, "grid_shape="),
        ({"features_dim": 3, "estimator": "rff"}, "features_dim="),
        ({"s1_share": 1.0}, "s1_share="),
    ],
)
def test_config_refuses_bad_values_naming_the_argument(kw: dict, match: str) -> None:
    with pytest.raises(InvalidParameterError, match=match):
        FDPConfig(feature_bounds=[(0, 1), (0, 1)], **kw)


def test_config_resolves_auto_and_cross_fit() -> None:
    assert FDPConfig(feature_bounds=[(0, 1)] * 3, estimator="auto").estimator == "kernel"
    # many or categorical features: auto picks the linear score (as CDP-Fair does)
    many = FDPConfig(feature_bounds=[(0, 1)] * 4, estimator="auto")
    assert many.estimator == "linear" and many.features_dim is None
    cat = FDPConfig(feature_bounds=[(0, 1), None], estimator="auto", categories={1: ["a", "b"]})
    assert cat.is_linear and cat.categories == ((1, ("a", "b")),)
    rff = FDPConfig(feature_bounds=[(0, 1)] * 4, estimator="rff")
    assert rff.estimator == "rff" and rff.features_dim == 2048
    # "linear" is its own estimator since issue 19 (no longer an alias of "rff")
    lin = FDPConfig(feature_bounds=[(0, 1)] * 2, estimator="linear")
    assert lin.is_linear and lin.is_mapped and not lin.is_rff and lin.features_dim is None
    assert lin.radius == "auto" and lin.radius_share == pytest.approx(0.04)
    box = FDPConfig(feature_bounds=[(0, 1)] * 2, estimator="linear", radius="box")
    assert box.radius == pytest.approx(math.sqrt(2.0)) and box.radius_share is None
    with pytest.raises(InvalidParameterError, match="radius_share"):
        FDPConfig(feature_bounds=[(0, 1)] * 2, estimator="linear", radius=1.0,
                  radius_share=0.04)
    with pytest.raises(InvalidParameterError, match="radius_share"):
        FDPConfig(feature_bounds=[(0, 1)] * 2, estimator="linear", radius_share=0.6)
    with pytest.raises(InvalidParameterError, match="radius_share"):
        FDPConfig(feature_bounds=[(0, 1)] * 2, estimator="kernel", radius_share=0.04)
    with pytest.raises(InvalidParameterError, match="radius"):
        FDPConfig(feature_bounds=[(0, 1)] * 2, estimator="linear", radius="median")
    with pytest.raises(InvalidParameterError, match="features_dim"):
        FDPConfig(feature_bounds=[(0, 1)] * 2, estimator="linear", features_dim=8)
    with pytest.raises(InvalidParameterError, match="radius"):
        FDPConfig(feature_bounds=[(0, 1)] * 2, estimator="rff", radius=1.0)
    assert FDPConfig(feature_bounds=[(0, 1)], threshold_rule="paper").cross_fit is True
    assert FDPConfig(feature_bounds=[(0, 1)]).cross_fit is False


def test_rho_is_a_deprecated_alias_of_tolerance() -> None:
    with pytest.warns(DeprecationWarning, match="tolerance="):
        cfg = make_protocol(_specs(), feature_bounds=[(0, 1), (0, 1)], alpha=0.2, rho=0.05)
    assert cfg.tolerance == 0.05
    with pytest.warns(DeprecationWarning, match="tolerance"):
        assert cfg.rho == 0.05
    with pytest.raises(InvalidParameterError, match="only tolerance"):
        FDPConfig.from_params({"feature_bounds": [(0, 1)], "rho": 0.05, "tolerance": 0.04})
    sites = _data(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=UserWarning)
        with pytest.warns(DeprecationWarning, match="FDPFairClassifier"):
            clf = FDPFairClassifier(
                epsilon=EPS, delta=DELTA, alpha=0.2, feature_bounds=[(0, 1), (0, 1)], rho=0.05,
                depth=6, random_state=1,
            ).fit([sites[0].X], [sites[0].y], sensitive_features=[sites[0].A])
    assert clf.protocol_.tolerance == 0.05
    assert "rho" in clf.get_params() and "tolerance" in clf.get_params()


def test_a_version_2_setup_with_rho_is_still_read() -> None:
    signer = Signer.generate("centre")
    keys = {"centre": signer.public, **{s.site_id: Signer.generate(s.site_id).public
                                         for s in _specs()}}
    cfg = make_protocol(_specs(), feature_bounds=[(0, 1), (0, 1)], alpha=0.2, tolerance=0.04,
                        keys=keys)
    doc = json.loads(encode(cfg.to_envelope(), signer))
    assert doc["body"]["version"] == SCHEMA_VERSION == 3
    body = doc["body"]
    body["version"] = 2
    body["fields"]["rho"] = body["fields"].pop("tolerance")
    old = canonical({"body": body, "signature": {"alg": "ed25519",
                                                 "value": signer.sign(canonical(body))}})
    env = decode(old, keys={"centre": signer.public}, kind="setup")
    assert ProtocolConfig.from_envelope(env) == cfg
    # a version-2 setup that already uses the new name is not a version-2 setup
    body["fields"]["tolerance"] = 0.04
    bad = canonical({"body": body, "signature": {"alg": "ed25519",
                                                 "value": signer.sign(canonical(body))}})
    with pytest.raises(ProtocolError, match="version-2"):
        decode(bad, keys={"centre": signer.public}, kind="setup")


def test_design_call_estimator_linear_and_tolerance() -> None:
    """DESIGN.md: ``FDPFairClassifier(..., estimator="linear", tolerance=...)``."""
    sites = _data(3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=UserWarning)
        fed = dpfair.fairclass.FDPFairClassifier(
            epsilon=EPS, delta=DELTA, alpha=0.2, feature_bounds=[(0, 1), (0, 1)],
            random_state=0, estimator="linear", tolerance=0.02,
        ).fit([d.X for d in sites], [d.y for d in sites],
              sensitive_features=[d.A for d in sites])
    assert fed.estimator_ == "linear" and fed.protocol_.tolerance == 0.02
    pred = fed.predict(sites[0].X, sensitive_features=sites[0].A)
    assert pred.shape == (N,) and set(np.unique(pred)) <= {0, 1}
