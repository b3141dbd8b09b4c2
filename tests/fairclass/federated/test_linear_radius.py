"""Each site's private clip radius of FDP-Fair's linear estimator (``radius="auto"``).

Privacy as computed: the norm histogram over the public ladder has L2 sensitivity √2 in
exact integers, for records on a rung, an ulp either side, and last-bit neighbours, through
the site's own code path; the released histogram is an exact translate of data-independent
noise, and an attacker's best neighbour pair yields a privacy profile (the exact hockey-stick
divergence of the two output laws) within the μ_r-GDP the site's ledger charges. The radius
is charged exactly (own record per fold, composed with both rounds; the cap refuses an
overspend before anything is released), covered by the signature (tampered, relabelled,
replayed or off-ladder radii are refused), and the same seed releases the same radius in
process and through the file CLI.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest
from scipy.signal import fftconvolve
from scipy.stats import norm

from dpfair._errors import BudgetExceededError
from dpfair.fairclass._linear import radius_ladder
from dpfair.fairclass.federated import Centre, Site, make_protocol
from dpfair.fairclass.federated._keys import Signer
from dpfair.fairclass.federated._linear import (
    CELL_BITS,
    RADIUS_SHARE,
    choose_rung,
    default_radius,
    fit_theta,
    noisy_histogram,
    norm_bins,
    norm_histogram,
    radius_noise_variance,
    structural_zeros,
)
from dpfair.fairclass.federated._messages import ProtocolError, canonical, decode, encode
from dpfair.fairclass.federated._protocol import ProtocolConfig
from tests.fairclass.federated.test_linear import _BOUNDS, _CATEGORIES, _cfg, _cli, _design

D = 5
N = 64
LO, HI = -1.0, 3.0  # midpoint 1, half-width 2: v = (x − 1)/2


def _num_cfg(**kw) -> ProtocolConfig:
    return make_protocol([("h0", N, 1.0, 1e-6)], feature_bounds=[(LO, HI)] * D, alpha=0.1,
                         estimator="linear", protocol_id="radius-attack", **kw)


def _hist(cfg, X, y, A) -> tuple[np.ndarray, np.ndarray]:
    """(rows of half A, the exact histogram of half A) through the site's own code."""
    site = Site("h0", X, y, A, config=cfg, random_state=0)
    return site._halves[0], site._radius_histogram(0)


def _gap2(a: np.ndarray, b: np.ndarray) -> int:
    return sum(int(u) ** 2 for u in (a.astype(object) - b.astype(object)))


def _rung_records(rng: np.random.Generator, box: float) -> list[np.ndarray]:
    """Records whose computed norm ‖v‖ sits on a ladder rung or within a few ulps of it."""
    ladder = radius_ladder(box)
    out = []
    for j in (0, 1, 2, 9, 20, 40, 63):
        sign = rng.choice([-1.0, 1.0], size=D)
        v = sign * (ladder[j] / math.sqrt(D))  # |v_k| ≤ 1 as r_j ≤ √D
        x = 1.0 + 2.0 * v
        for k in (-3, -1, 0, 1, 3):
            y = x.copy()
            for _ in range(abs(k)):
                y = np.nextafter(y, np.where(sign > 0, 9.0, -9.0) * np.sign(k))
            out.append(np.clip(y, LO, HI))
    for _ in range(6):  # box corners, one ulp inside
        c = rng.choice([LO, HI], size=D)
        out.append(np.array([np.nextafter(u, 1.0) if rng.random() < 0.5 else u for u in c]))
    return out


def test_histogram_sensitivity_is_sqrt2_in_exact_integers_at_rungs_and_last_bits():
    """Replacing one record by one whose norm is on a rung (± ulps), by a box corner, or by
    the same record with its last bits moved changes the exact histogram by Σ(h − h′)² ≤ 2;
    the last-bit neighbours do cross rungs (the boundary is exercised)."""
    cfg = _num_cfg(radius="auto")
    box = default_radius(cfg.feature_map())
    rng = np.random.default_rng(1)
    X = rng.uniform(LO, HI, size=(N, D))
    y, A = rng.integers(0, 2, N), np.tile([0, 1], N // 2)
    rows, base = _hist(cfg, X, y, A)
    assert int(base.sum()) == rows.size
    crossings = 0
    for k, adv in enumerate(_rung_records(rng, box)):
        i = int(rows[k % 6])
        X2 = X.copy()
        X2[i] = adv
        X3 = X2.copy()
        X3[i] = [np.nextafter(u, HI if u < HI else LO) for u in adv]
        _r, h2 = _hist(cfg, X2, y, A)
        _r, h3 = _hist(cfg, X3, y, A)
        for a, b in ((base, h2), (h2, h3), (base, h3)):
            assert _gap2(a, b) <= 2
        crossings += _gap2(h2, h3) == 2
    assert crossings >= 3


def test_norm_bins_match_the_ladder_definition_exactly():
    """b(x) = #{j : r_j ≥ ‖v‖}: a norm equal to r_j counts as ≤ r_j, one ulp above does not;
    norms above r_0 (only by rounding) land in bin 0, the rest sum to n."""
    ladder = radius_ladder(math.sqrt(7.0))
    norms = np.concatenate([ladder, np.nextafter(ladder, 9.0), np.nextafter(ladder, 0.0),
                            [0.0, 1e-300, float(np.nextafter(ladder[0], 9.0))]])
    b = norm_bins(norms, ladder)
    L = ladder.size
    j = np.arange(L)
    np.testing.assert_array_equal(b[:L], j + 1)  # on r_j: r_0, …, r_j are ≥ it
    np.testing.assert_array_equal(b[L:2 * L], j)  # an ulp above r_j: only r_0, …, r_{j−1}
    np.testing.assert_array_equal(b[2 * L:3 * L], j + 1)
    assert list(b[-3:]) == [L, L, 0]
    h = norm_histogram(norms, ladder)
    assert h.shape == (L + 1,) and int(h.sum()) == norms.size


def test_noisy_histogram_is_an_exact_translate_of_data_independent_noise():
    """Same noise stream, neighbouring data: released − 2^6·exact agree to the integer."""
    cfg = _num_cfg(radius="auto")
    sig = cfg.linear_sigmas("h0")
    rng = np.random.default_rng(4)
    X = rng.uniform(LO, HI, size=(N, D))
    y, A = rng.integers(0, 2, N), np.tile([0, 1], N // 2)
    rows, h1 = _hist(cfg, X, y, A)
    X2 = X.copy()
    X2[rows[0]] = HI
    _r, h2 = _hist(cfg, X2, y, A)
    assert _gap2(h1, h2) == 2
    out = [noisy_histogram(h, sig.radius, np.random.default_rng(11)) - h * 2**CELL_BITS
           for h in (h1, h2)]
    np.testing.assert_array_equal(out[0], out[1])


def _dg_pmf(S: int, half_width: int) -> np.ndarray:
    k = np.arange(-half_width, half_width + 1, dtype=np.float64)
    p = np.exp(-k * k / (2.0 * S))
    return p / p.sum()


def _gdp_delta(mu: float, eps: np.ndarray) -> np.ndarray:
    return norm.cdf(-eps / mu + mu / 2) - np.exp(eps) * norm.cdf(-eps / mu - mu / 2)


@pytest.mark.parametrize("eps_site", [1.0, 8.0])
def test_attacker_last_bit_neighbours_stay_within_the_charged_gdp(eps_site):
    """The attacker's best pair: two records differing only in their last bits, on either
    side of a rung, so the histograms differ in two bins (the maximal gap 2). The released
    laws are 2^6·h + Z and 2^6·h′ + Z with Z iid N_ℤ(0, S): their log density ratio at o is
    exactly (‖o − 2^6h′‖² − ‖o − 2^6h‖²)/(2S) (equal normalisers), a function of
    Z_i − Z_j alone. From the exact law of Z_i − Z_j, the hockey-stick divergence
    δ(ε) = E[(1 − e^{ε − L})₊] is within the μ_r-GDP profile of the ledger's record for
    every ε on a grid."""
    cfg = make_protocol([("h0", N, eps_site, 1e-6)], feature_bounds=[(LO, HI)] * D,
                        alpha=0.1, estimator="linear", protocol_id="radius-attack")
    sig = cfg.linear_sigmas("h0")
    box = default_radius(cfg.feature_map())
    rng = np.random.default_rng(2)
    X = rng.uniform(LO, HI, size=(N, D))
    y, A = rng.integers(0, 2, N), np.tile([0, 1], N // 2)
    rows = Site("h0", X, y, A, config=cfg, random_state=0)._halves[0]
    pair = None
    for adv in _rung_records(rng, box):
        X2, X3 = X.copy(), X.copy()
        X2[rows[0]] = adv
        X3[rows[0]] = [np.nextafter(u, HI if u < HI else LO) for u in adv]
        h2, h3 = _hist(cfg, X2, y, A)[1], _hist(cfg, X3, y, A)[1]
        if _gap2(h2, h3) == 2:
            pair = (h2, h3)
            break
    assert pair is not None
    d = pair[0].astype(np.int64) - pair[1].astype(np.int64)
    S = radius_noise_variance(sig.radius)
    shift = 2**CELL_BITS * d  # a − b, in lattice units
    m = math.sqrt(float(shift @ shift) / S)
    site = Site("h0", X, y, A, config=cfg, random_state=0)
    site.round1()
    rec = next(r for r in site.ledger.to_dict()["records"] if "clip radius" in r["label"])
    mu_r = math.sqrt(2.0 * rec["rho"])
    assert m <= mu_r <= sig.mu_radius * (1 + 1e-12)
    # exact law of L = (2⟨Z, a − b⟩ + ‖a − b‖²)/(2S) = (64(Z_i − Z_j) + 64²)/S
    w = int(40 * math.sqrt(S))
    pmf = _dg_pmf(S, w)
    diff = np.clip(fftconvolve(pmf, pmf[::-1]), 0.0, None)  # Z_i − Z_j on [−2w, 2w]
    z = np.arange(-2 * w, 2 * w + 1, dtype=np.float64)
    g = float(2**CELL_BITS)
    L = (g * z + g * g) / S
    eps = np.linspace(0.0, 4.0 * mu_r + 0.5, 60)
    delta = np.array([np.sum(diff * np.clip(1.0 - np.exp(e - L), 0.0, None)) for e in eps])
    assert np.all(delta <= _gdp_delta(mu_r, eps) + 1e-9)
    assert delta[0] > 0.5 * _gdp_delta(mu_r, eps[:1])[0]  # the bound is nearly attained


@pytest.mark.parametrize("cross_fit", [False, True])
def test_cap_refuses_an_overspend_before_any_radius_is_released(cross_fit):
    """A site whose ledger already spent a little on a training half refuses the whole round
    1 (radius + statistics) before drawing noise or writing a record."""
    cfg = _cfg(S=1, cross_fit=cross_fit)
    site = Site("h0", *_design(600, np.random.default_rng(3)), config=cfg, random_state=0)
    plan = site.plan  # leave a little less than round 1's μ₁ on half A
    site.ledger.charge("an earlier release", "half A",
                       math.sqrt(max(plan.mu_total**2 - plan.mu_round1**2, 0.0)) + 0.01, "test")
    before = len(site.ledger.records)
    with pytest.raises(BudgetExceededError):
        site.round1()
    assert len(site.ledger.records) == before
    assert site._round == 0


def test_radius_choice_is_the_noisy_median():
    """choose_rung projects onto Σh = n and picks the rung whose count above is nearest
    n/2; without noise it is the exact median rung."""
    ladder = radius_ladder(2.0)
    norms = np.random.default_rng(0).uniform(0.5, 1.5, 2001)
    h = norm_histogram(norms, ladder)
    j = choose_rung(h.astype(float), norms.size)
    above = np.array([(norms > r).sum() for r in ladder])
    assert j == int(np.argmin(np.abs(above - norms.size / 2)))
    shifted = h.astype(float) + 3.0  # a constant offset is removed by the projection
    assert choose_rung(shifted, norms.size) == j


# ---------------------------------------------------------------------------- protocol
def _signed(cfg_kw=None):
    signers = {p: Signer.generate(p) for p in ("centre", "h0", "h1", "h2")}
    cfg = replace(_cfg(**(cfg_kw or {})),
                  keys=tuple(sorted((p, s.public) for p, s in signers.items())))
    rng = np.random.default_rng(3)
    r1 = [Site(s, *_design(600, rng), config=cfg, random_state=i).round1()
          for i, s in enumerate(cfg.site_ids)]
    return cfg, signers, r1


def test_site_radius_is_signed_and_checked_by_the_centre():
    cfg, signers, r1 = _signed()
    ring = cfg.keyring()
    assert cfg.private_radius and cfg.radius_share == RADIUS_SHARE
    env = cfg.to_envelope()
    assert env.fields["radius"] == "auto" and env.fields["radius_share"] == RADIUS_SHARE
    assert ProtocolConfig.from_envelope(env) == cfg
    box = default_radius(cfg.feature_map())
    for m in r1:
        assert len(m.fields["radius"]) == cfg.n_folds
        assert all(float(r) in radius_ladder(box) for r in m.fields["radius"])
    raw = encode(r1[0], signers["h0"])
    ok = decode(raw, keys=ring, kind="round1", protocol_id=cfg.protocol_id,
                shapes=cfg.message_shapes("round1"))
    assert ok.fields["radius"] == r1[0].fields["radius"]
    # tampered radius (another rung), relabelled sender, another run: refused at decoding
    doc = json.loads(raw)
    doc["body"]["fields"]["radius"] = [float(radius_ladder(box)[0])]
    with pytest.raises(ProtocolError, match="signature"):
        decode(canonical(doc), keys=ring)
    doc = json.loads(raw)
    doc["body"]["sender"] = "h1"
    with pytest.raises(ProtocolError, match="signature"):
        decode(canonical(doc), keys=ring)
    with pytest.raises(ProtocolError, match="another run"):
        decode(raw, keys=ring, kind="round1", protocol_id="other-run")
    # validly signed but off the ladder, the wrong number, or a wrong sigma: refused by name
    centre = Centre(cfg)
    for bad in ([1.2345], [r1[0].fields["radius"][0]] * 2, ["auto"], [math.inf]):
        msg = replace(r1[0], fields={**r1[0].fields, "radius": bad})
        with pytest.raises(ProtocolError, match="radius"):
            centre.aggregate([msg, *r1[1:]])
    msg = replace(r1[1], fields={**r1[1].fields,
                                 "sigma_radius": r1[1].fields["sigma_radius"] * 2})
    with pytest.raises(ProtocolError, match="sigma_radius"):
        Centre(cfg).aggregate([r1[0], msg, r1[2]])
    missing = replace(r1[2], fields={k: v for k, v in r1[2].fields.items() if k != "radius"})
    with pytest.raises(ProtocolError, match="radius"):
        Centre(cfg).aggregate([*r1[:2], missing])
    # a public-radius centre refuses a site radius; a model without the common radius or
    # with one outside the ladder is refused by the sites
    public = replace(cfg, radius=1.0, radius_share=0.0)
    with pytest.raises(ProtocolError, match="radius"):
        Centre(public).aggregate(r1)
    model = Centre(cfg).aggregate(r1)
    assert model.arrays["radius"].shape == (cfg.n_folds,)
    site = Site("h0", *_design(600, np.random.default_rng(3)), config=cfg, random_state=0)
    site.round1()
    for arrays in ({k: v for k, v in model.arrays.items() if k != "radius"},
                   {**model.arrays, "radius": np.array([1e-6])},
                   {**model.arrays, "radius": np.array([1e3])}):
        with pytest.raises(ProtocolError):
            site.round2(replace(model, arrays=arrays))


def test_centre_combines_sites_with_different_radii_in_common_units():
    """Two sites with different spreads choose different radii; the centre's θ̃ is exactly
    the fit of the released statistics rescaled to the common r̄ — (r_s/r̄)·sums,
    (r_s/r̄)²·moments, moment noise variance (r_s/r̄)⁴·σ_M,s² (post-processing)."""
    rng = np.random.default_rng(8)
    wide = _design(3000, rng)
    narrow = _design(1500, rng)
    narrow[0][:, :6] = 5.0 + 0.3 * (narrow[0][:, :6].astype(float) - 5.0)
    cfg = make_protocol([("h0", 3000, 100.0, 1e-6), ("h1", 1500, 100.0, 1e-6)],
                        feature_bounds=_BOUNDS, categories=_CATEGORIES, alpha=0.1,
                        estimator="linear")
    sites = [Site(f"h{i}", *d, config=cfg, random_state=i) for i, d in enumerate((wide, narrow))]
    r1 = [s.round1() for s in sites]
    radii = [m.fields["radius"][0] for m in r1]
    assert radii[0] > radii[1]
    model = Centre(cfg).aggregate(r1)
    r_bar = float(model.arrays["radius"][0])
    rows = [m.fields["n_train"][0] for m in r1]
    expect = math.exp(sum(n * math.log(r) for n, r in zip(rows, radii, strict=True)) / sum(rows))
    assert r_bar == pytest.approx(expect, rel=1e-12)
    p = cfg.linear_width
    sums, cells, moments, var, n1 = np.zeros((p, 3)), np.zeros((2, 2)), 0.0, 0.0, 0.0
    for m, r in zip(r1, radii, strict=True):
        k = r / r_bar
        sums = sums + k * m.arrays["sums"][0]
        cells = cells + m.arrays["cells"][0]
        moments = moments + k * k * m.arrays["moments"][0]
        var += k**4 * cfg.linear_sigmas(m.sender).moments ** 2
        n1 += min(max(float(m.arrays["count"][0]), 1.0), m.fields["n_train"][0] - 1.0)
    theta = fit_theta(sums, cells, moments, float(sum(rows)), n1, math.sqrt(var),
                      structural_zeros(cfg.feature_map()))
    np.testing.assert_allclose(model.arrays["theta"][0], theta, rtol=1e-9, atol=1e-12)
    # ... and those released statistics are the exact ones at each site's radius plus
    # noise of the announced size: the rescaled exact fit is close at ε = 100
    q = 2.0**12
    exact_s = sum(r / r_bar * s._linear_training_stats(0, r)[1][0] / q
                  for s, r in zip(sites, radii, strict=True))
    sd = max(cfg.linear_sigmas(s.site_id).sums for s in sites)
    assert float(np.max(np.abs(exact_s - sums))) < 8 * sd * math.sqrt(2)


def test_same_seed_same_radius_in_process_and_over_the_file_cli(tmp_path):
    """``dpfair fdp site round1 --seed 7`` (default radius auto) releases exactly what
    ``Site(…, random_state=7).round1()`` on the same file's rows releases."""
    from dpfair.fairclass.federated._messages import read_message
    from dpfair.fairclass.federated._siteio import categorical_positions, read_site_data
    from dpfair.privacy import Budget, LedgerFile

    t = tmp_path
    rng = np.random.default_rng(21)
    n = 1200
    x = rng.uniform(0, 1, size=(n, 3))
    a = rng.integers(0, 2, n)
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-(2 * x[:, 0] - 1 + 0.8 * (2 * a - 1))))).astype(int)
    lines = ["x1,x2,x3,a,y"] + [",".join(f"{v:.17g}" for v in x[i]) + f",{a[i]},{y[i]}"
                                for i in range(n)]
    (t / "h1").mkdir()
    (t / "h1" / "data.csv").write_text("\n".join(lines) + "\n")
    LedgerFile.create(t / "h1" / "h1.fdp-ledger", Budget.approx(3.0, 3e-6),
                      data=t / "h1" / "data.csv")
    (t / "keys").mkdir()
    for party in ("centre", "h1"):
        _cli("keygen", "--out", f"keys/{party}", cwd=t)
    info = _cli("centre", "setup", "--key", "keys/centre.key", "--site", f"h1:{n}:1.0:1e-6",
                "--site-key", "h1=keys/h1.pub", *[b for _ in range(3) for b in
                                                   ("--bounds", "0", "--bounds", "1")],
                "--alpha", "0.2", "--estimator", "linear", "--out", "setup.json", cwd=t)
    assert info["radius"] == "auto" and info["radius_share"] == RADIUS_SHARE
    _cli("site", "round1", "h1/data.csv", "--setup", "setup.json", "--site-id", "h1", "--key",
         "keys/h1.key", "--centre-key", "keys/centre.pub", "--ledger", "h1/h1.fdp-ledger",
         "--features", "x1,x2,x3", "--target", "y", "--sensitive", "a", "--state",
         "h1/state.json", "--out", "h1.r1.json", "--seed", "7", cwd=t)
    keys = {p: (t / "keys" / f"{p}.pub").read_text().strip() for p in ("centre", "h1")}
    setup = read_message(t / "setup.json", keys={"centre": keys["centre"]}, kind="setup")
    cfg = ProtocolConfig.from_envelope(setup)
    msg = read_message(t / "h1.r1.json", keys=cfg.keyring(), kind="round1")
    X, yy, A = read_site_data(t / "h1" / "data.csv", "x1,x2,x3", "y", "a",
                              categorical_positions(cfg))
    ref = Site("h1", X, yy, A, config=cfg, random_state=7).round1()
    assert msg.fields["radius"] == ref.fields["radius"]
    for k in ref.arrays:
        np.testing.assert_array_equal(msg.arrays[k], ref.arrays[k])
    assert msg.fields["radius"][0] in radius_ladder(default_radius(cfg.feature_map()))


def test_cli_setup_radius_options(tmp_path):
    """``--radius auto|box|R`` and ``--radius-share``: box is the public √(k + c), a number
    is public, auto carries its share; a bad value or a share without auto is refused."""
    t = tmp_path
    (t / "keys").mkdir()
    for party in ("centre", "h1"):
        _cli("keygen", "--out", f"keys/{party}", cwd=t)
    base = ["centre", "setup", "--key", "keys/centre.key", "--site", "h1:1000:1.0:1e-6",
            "--site-key", "h1=keys/h1.pub", *[b for _ in range(4) for b in
                                              ("--bounds", "0", "--bounds", "1")],
            "--alpha", "0.2", "--estimator", "linear", "--out", "setup.json"]
    assert _cli(*base, "--radius", "box", cwd=t)["radius"] == pytest.approx(2.0)
    assert _cli(*base, "--radius", "0.75", cwd=t)["radius"] == 0.75
    info = _cli(*base, "--radius-share", "0.1", cwd=t)
    assert info["radius"] == "auto" and info["radius_share"] == 0.1
    for bad in (["--radius", "median"], ["--radius", "-1"],
                ["--radius", "1.0", "--radius-share", "0.1"], ["--radius-share", "0.9"]):
        assert "radius" in _cli(*base, *bad, cwd=t, code=2)["error"]
