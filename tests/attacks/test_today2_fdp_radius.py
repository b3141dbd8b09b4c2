"""Attacks on FDP-Fair linear's per-site private clip radius (``radius="auto"``).

Adversaries (THREATS.md): the FDP centre (writes the setup, reads every message, may send
anything), an attacker who controls one record of a site, an observer of every released
double. Claims under attack (``federated/_linear.py``, ``_site.py``, ``_centre.py``,
``docs/proofs/fdp_linear.md`` §7):

* the radius release is composed into the site's ledger: per half, μ_r² + μ_c² + μ_L² of
  round 1 plus round 2 stays within μ*; μ_r² = radius_share·μ₁²; one radius record per
  fold on that fold's training half (with and without cross-fitting);
* the cap is checked for the whole round (radius + statistics) on *every* half before the
  first record — including a pre-spent half B under cross-fitting;
* a failure after the histogram (e.g. in the statistics) leaves everything charged and a
  retry is refused by the cap, never a second free release;
* the statistics are computed at exactly the radius the site reports (the signed r_s),
  and at every ladder rung their exact integer change between neighbours stays within the
  stated sensitivities (one-hot + numeric rows at the box corner, an ulp either side of
  the rung);
* every public setup parameter the site accepts is one it can serve: a setup the site
  cannot run is refused before its budget is charged (rules 1 and 7).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from dpfair._errors import BudgetExceededError
from dpfair.fairclass._linear import radius_ladder
from dpfair.fairclass.federated import Site, make_protocol
from dpfair.fairclass.federated import _linear as fed_linear
from dpfair.fairclass.federated._linear import LINEAR_LATTICE_BITS, default_radius
from dpfair.fairclass.federated._protocol import ProtocolConfig

Q = LINEAR_LATTICE_BITS
K = 4
CATS = {K: ["a", "b", "c"], K + 1: [0, 1]}
BOUNDS = [(-1.0, 3.0)] * K + [None, None]
N = 48


def _cfg(n: int = N, eps: float = 1.0, **kw) -> ProtocolConfig:
    return make_protocol([("h0", n, eps, 1e-6)], feature_bounds=BOUNDS, categories=CATS,
                         alpha=0.1, estimator="linear", protocol_id="attack-today2-radius",
                         **kw)


def _keyed(cfg: ProtocolConfig) -> ProtocolConfig:
    """The setup with pinned keys (what a site receives and parses)."""
    from dpfair.fairclass.federated._keys import Signer

    keys = {p: Signer.generate(p).public for p in ("centre", *cfg.site_ids)}
    return replace(cfg, keys=tuple(sorted(keys.items())))


def _design(rng: np.random.Generator, n: int = N):
    X = np.empty((n, K + 2), dtype=object)
    X[:, :K] = rng.uniform(-1.0, 3.0, size=(n, K))
    X[:, K] = rng.choice(CATS[K], size=n)
    X[:, K + 1] = rng.integers(0, 2, size=n)
    return X, rng.integers(0, 2, n), np.tile([0, 1], n // 2)


# ----------------------------------------------------------------------------- ledger
@pytest.mark.parametrize("cross_fit", [False, True])
def test_today2_radius_is_composed_per_half_over_both_rounds(cross_fit):
    """Round 1 (radius + count + statistics) and round 2 compose to at most μ* on every
    half; μ_r² = radius_share·μ₁² exactly (up to the 2^-40 slack that lowers it); one
    radius record per fold, on that fold's training half."""
    from dpfair.fairclass.federated import Centre

    cfg = _cfg(n=400, cross_fit=cross_fit)
    site = Site("h0", *_design(np.random.default_rng(1), 400), config=cfg, random_state=3)
    plan, sig = site.plan, cfg.linear_sigmas("h0")
    model = Centre(cfg).aggregate([site.round1()])
    site.round2(model)
    recs = site.ledger.to_dict()["records"]
    radius = [r for r in recs if "clip radius" in r["label"]]
    assert [r["rows"] for r in radius] == (["half A", "half B"] if cross_fit else ["half A"])
    mu_r = math.sqrt(2 * radius[0]["rho"])
    assert mu_r**2 <= cfg.radius_share * plan.mu_round1**2 * (1 + 1e-12)
    assert mu_r**2 >= cfg.radius_share * plan.mu_round1**2 * (1 - 1e-9)
    by_rows: dict[str, float] = {}
    for r in recs:
        by_rows[r["rows"]] = by_rows.get(r["rows"], 0.0) + 2 * r["rho"]
    for rows, mu2 in by_rows.items():
        assert mu2 <= plan.mu_total**2 * (1 + 1e-12), rows
        assert mu2 >= plan.mu_total**2 * (1 - 1e-9), rows  # the whole budget is used
    # the site's own composed view agrees (exact GDP within a half)
    for rows, mu in site.ledger.mu_by_rows().items():
        assert mu == pytest.approx(math.sqrt(by_rows[rows]), rel=1e-12)
    assert math.hypot(sig.mu_radius, 1 / plan.sigma_count, sig.mu_stats) <= plan.mu_round1


def test_today2_cap_is_checked_on_half_b_before_the_first_radius_record():
    """Cross-fitted: half B already spent a little more than round 2 leaves it. Round 1
    charges fold 1 (half A) and fold 2 (half B): the check of half B must refuse the whole
    round before fold 1's radius record is written on half A."""
    cfg = _cfg(n=400, cross_fit=True)
    site = Site("h0", *_design(np.random.default_rng(2), 400), config=cfg, random_state=0)
    plan = site.plan
    site.ledger.charge("an earlier release", "half B",
                       math.sqrt(plan.mu_total**2 - plan.mu_round1**2) + 1e-3, "test")
    before = len(site.ledger.records)
    with pytest.raises(BudgetExceededError):
        site.round1()
    assert len(site.ledger.records) == before
    assert site._round == 0


def test_today2_failure_after_the_histogram_is_charged_and_a_retry_is_refused(monkeypatch):
    """The radius histogram is drawn, then the statistics fail (a crash, a signal): the
    whole round was charged before, no message exists, and calling round 1 again (the
    round counter did not move) is refused by the cap instead of releasing a second
    radius of the same rows."""
    cfg = _cfg(n=400)
    site = Site("h0", *_design(np.random.default_rng(4), 400), config=cfg, random_state=0)
    drawn = []
    real = fed_linear.private_radius

    def spy(*a, **k):
        out = real(*a, **k)
        drawn.append(out)
        return out

    monkeypatch.setattr(fed_linear, "private_radius", spy)

    def boom(*_a, **_k):
        raise KeyboardInterrupt

    monkeypatch.setattr(Site, "_linear_training_stats", boom)
    with pytest.raises(KeyboardInterrupt):
        site.round1()
    assert len(drawn) == 1  # the histogram was released internally
    labels = [r.label for r in site.ledger.records]
    assert any("clip radius" in lb for lb in labels)
    assert any("count + 4" in lb for lb in labels)
    spent = site.ledger.mu_by_rows()["half A"]
    assert spent == pytest.approx(site.plan.mu_round1, rel=1e-9)
    with pytest.raises(BudgetExceededError):
        site.round1()
    assert len(drawn) == 1


# ------------------------------------------------------------------ radius used = radius sent
@pytest.mark.parametrize("cross_fit", [False, True])
def test_today2_statistics_are_clipped_at_exactly_the_reported_radius(monkeypatch, cross_fit):
    """The exact integer statistics handed to the noise are those of the rows clipped at
    the radius the site signs in its message, fold by fold (not the box, not another
    fold's radius)."""
    cfg = _cfg(n=400, cross_fit=cross_fit)
    site = Site("h0", *_design(np.random.default_rng(5), 400), config=cfg, random_state=1)
    seen = []
    real = fed_linear.release_linear_stats

    def spy(sums, cells, moments, *rest, **kw):
        seen.append((sums.copy(), cells.copy(), moments.copy()))
        return real(sums, cells, moments, *rest, **kw)

    monkeypatch.setattr(fed_linear, "release_linear_stats", spy)
    msg = site.round1()
    radii = msg.fields["radius"]
    assert len(radii) == len(seen) == cfg.n_folds
    ladder = radius_ladder(default_radius(cfg.feature_map()))
    for k, (tr, r) in enumerate(zip((0, 1)[: cfg.n_folds], radii, strict=True)):
        assert r in ladder
        _n1, exact, _n = site._linear_training_stats(tr, float(r))
        for a, b in zip(exact, seen[k], strict=True):
            np.testing.assert_array_equal(a, b)


# --------------------------------------------------------------------------- sensitivity
def _extreme_records():
    out = []
    for num in ((3.0,) * K, (-1.0,) * K, (3.0, -1.0) * (K // 2),
                tuple(np.nextafter(3.0, 0.0) for _ in range(K)), (1.0,) * K):
        for c1 in CATS[K]:
            for c2 in CATS[K + 1]:
                out.append([*num, c1, c2])
    return out


def _gap2(a, b, p):
    s = sum(int(v) ** 2 for v in (a[0] - b[0]).ravel())
    c = sum(int(v) ** 2 for v in (a[1] - b[1]).ravel())
    j = np.arange(p)
    diag = np.zeros(p * (p + 1) // 2, dtype=bool)
    diag[j * p - j * (j - 1) // 2] = True
    dm = a[2] - b[2]
    m = sum(int(v) ** 2 for v in dm[diag]) + 2 * sum(int(v) ** 2 for v in dm[~diag])
    return s, c, m


@pytest.mark.parametrize("rung", [0, 1, 8, 20, 40, 62, 63])
def test_today2_exact_sensitivity_at_every_kind_of_rung(rung):
    """At a ladder rung r_j (the site's possible radii, down to the smallest r_63), replacing
    one record by an extreme one (numeric at the box corners or an ulp inside, with every
    one-hot set; or the centre of the box, norm √2 from the one-hots alone) moves the exact
    integers by at most 8·4^q (sums: (G_0, G_1, V), 2√2 in w units), 2 (cells), 2·16^q
    (moments, Frobenius)."""
    cfg = _cfg()
    box = default_radius(cfg.feature_map())
    r = float(radius_ladder(box)[rung])
    rng = np.random.default_rng(6)
    X, y, A = _design(rng)
    p = cfg.linear_width
    site = Site("h0", X, y, A, config=cfg, random_state=0)
    rows = site._halves[0]

    def stats(XX, yy, AA):
        s = Site("h0", XX, yy, AA, config=cfg, random_state=0)
        return [v.astype(object) for v in s._linear_training_stats(0, r)[1]]

    base = stats(X, y, A)
    worst = [0, 0, 0]
    for k, rec in enumerate(_extreme_records()):
        i = int(rows[k % rows.size])
        X2, y2, A2 = X.copy(), y.copy(), A.copy()
        X2[i] = rec
        if k % 3 == 1:
            y2[i] = 1 - y2[i]  # the record also moves cell
        got = _gap2(base, stats(X2, y2, A2), p)
        worst = [max(w, g) for w, g in zip(worst, got, strict=True)]
    assert worst[0] <= 8 * 4**Q
    assert worst[1] <= 2
    assert worst[2] <= 2 * 16**Q
    assert worst[2] > 0  # the attack moved something


def test_today2_rung_edge_records_keep_the_bounds_at_that_rung():
    """Records whose computed norm is exactly a rung r_j, one ulp above or below it, with
    the site clipping at that same r_j (the division by r rounds either way): every
    lattice row still has ‖Q‖² ≤ 4^q exactly."""
    cfg = _cfg()
    numeric = fed_linear.numeric_mask(cfg.feature_map())
    box = default_radius(cfg.feature_map())
    ladder = radius_ladder(box)
    p = numeric.size
    rows = []
    for j in (0, 3, 17, 33, 63):
        r = float(ladder[j])
        # only numeric coordinates, equal magnitude: ‖v‖ = r (rounded), then ulps
        v = np.zeros(p)
        v[numeric] = r / math.sqrt(K)
        for step in (-2, -1, 0, 1, 2):
            w = v.copy()
            for _ in range(abs(step)):
                w[numeric] = np.nextafter(w[numeric], 9.0 if step > 0 else -9.0)
            U = w.copy()
            U[numeric] = (w[numeric] + 1.0) / 2.0  # row_map's 2u − 1 inverted
            rows.append((U, r))
    for U, r in rows:
        Qr = fed_linear.lattice_rows(fed_linear.row_map(U[None, :], numeric, r))
        assert int((Qr.astype(object) ** 2).sum()) <= 4**Q


# ------------------------------------------------------------ public parameters it cannot serve
def test_today2_unservable_radius_share_is_refused_before_any_charge():
    """A radius_share whose σ_r needs a sampler variance above 2^104 is refused when the
    setup is written (fixed: ``ProtocolConfig.check_servable`` in make_protocol)."""
    try:
        cfg = _cfg(n=400, radius_share=1e-30)
    except Exception:  # refused at setup: the fix
        return
    # a centre's setup as a site receives it
    cfg = ProtocolConfig.from_envelope(_keyed(cfg).to_envelope())
    assert cfg.radius_share == 1e-30
    site = Site("h0", *_design(np.random.default_rng(7), 400), config=cfg, random_state=0)
    try:
        site.round1()
    except Exception:
        assert site.ledger.records == [], [r.label for r in site.ledger.records]
        return
    # it ran: then it must have been a real, charged release
    assert site.ledger.records


def test_today2_unservable_setup_is_refused_at_parse_and_by_the_site_before_its_charge():
    """A centre that signs a setup with radius_share = 1e-30 anyway: the site's parse
    refuses it by name; a ProtocolConfig built around make_protocol (dataclasses.replace)
    is refused by the site's round 1 before the ledger is touched."""
    from dpfair._errors import InvalidParameterError
    from dpfair.fairclass.federated._messages import ProtocolError

    env = _keyed(_cfg(n=400)).to_envelope()
    forged = replace(env, fields={**env.fields, "radius_share": 1e-30})
    with pytest.raises(ProtocolError, match="radius_share"):
        ProtocolConfig.from_envelope(forged)
    bad = replace(_cfg(n=400), radius_share=1e-30)
    site = Site("h0", *_design(np.random.default_rng(7), 400), config=bad, random_state=0)
    with pytest.raises(InvalidParameterError, match="radius_share"):
        site.round1()
    assert site.ledger.records == []
    assert site._round == 0
    # the smallest servable shares still run (the limit is the sampler's, not lower)
    ok = _cfg(n=400, radius_share=1e-20)
    Site("h0", *_design(np.random.default_rng(7), 400), config=ok, random_state=0).round1()


def test_today2_setup_refuses_radius_share_out_of_range_from_a_centre():
    """A received setup with radius_share ≥ 0.5, ≤ 0, or count_share + share ≥ 1 is
    refused by the site (never derives a negative or infinite noise scale)."""
    from dpfair._errors import InvalidParameterError
    from dpfair.fairclass.federated._messages import ProtocolError

    env = _keyed(_cfg(n=400)).to_envelope()
    assert ProtocolConfig.from_envelope(env).radius_share > 0  # the honest one parses
    for bad in (0.0, -0.1, 0.5, 0.9, math.inf, "0.1", True):
        forged = replace(env, fields={**env.fields, "radius_share": bad})
        with pytest.raises((ProtocolError, InvalidParameterError), match="radius_share"):
            ProtocolConfig.from_envelope(forged)
    forged = replace(env, fields={**env.fields, "count_share": 0.7, "radius_share": 0.45})
    with pytest.raises((ProtocolError, InvalidParameterError), match="radius_share"):
        ProtocolConfig.from_envelope(forged)


# ------------------------------------------------------------------------------- the CLI
def _cli_site(tmp_path, share: str | None):
    """A one-site linear run through ``dpfair fdp``: keys, a ledger of (3, 3e-6) on the
    site's CSV, the centre's setup (``--radius-share`` if given), and the round-1 args."""
    from dpfair.privacy import Budget, LedgerFile
    from tests.fairclass.federated.test_linear import _cli

    t = tmp_path
    rng = np.random.default_rng(21)
    n = 400
    x = rng.uniform(0, 1, size=(n, 3))
    a = rng.integers(0, 2, n)
    y = (rng.uniform(size=n) < 0.5).astype(int)
    lines = ["x1,x2,x3,a,y"] + [",".join(f"{v:.17g}" for v in x[i]) + f",{a[i]},{y[i]}"
                                for i in range(n)]
    (t / "h1").mkdir()
    (t / "h1" / "data.csv").write_text("\n".join(lines) + "\n")
    LedgerFile.create(t / "h1" / "h1.fdp-ledger", Budget.approx(3.0, 3e-6),
                      data=t / "h1" / "data.csv")
    (t / "keys").mkdir()
    for party in ("centre", "h1"):
        _cli("keygen", "--out", f"keys/{party}", cwd=t)
    extra = [] if share is None else ["--radius-share", share]
    _cli("centre", "setup", "--key", "keys/centre.key", "--site", f"h1:{n}:1.0:1e-6",
         "--site-key", "h1=keys/h1.pub", *[b for _ in range(3) for b in
                                            ("--bounds", "0", "--bounds", "1")],
         "--alpha", "0.2", "--estimator", "linear", *extra, "--out", "setup.json", cwd=t)

    def round1(state: str, out: str, code: int = 0) -> dict:
        return _cli("site", "round1", "h1/data.csv", "--setup", "setup.json", "--site-id",
                    "h1", "--key", "keys/h1.key", "--centre-key", "keys/centre.pub",
                    "--ledger", "h1/h1.fdp-ledger", "--features", "x1,x2,x3", "--target",
                    "y", "--sensitive", "a", "--state", state, "--out", out, cwd=t,
                    code=code)

    def spent() -> float:
        return float(LedgerFile.open(t / "h1" / "h1.fdp-ledger").spent.epsilon or 0.0)

    return round1, spent


def test_today2_cli_second_round1_of_the_same_run_is_refused(tmp_path):
    """``dpfair fdp site round1`` again for the same run with a fresh --state and --out
    (the centre asks twice): refused, so no second radius of the same rows is released and
    the ledger holds the run once."""
    round1, spent = _cli_site(tmp_path, None)
    first = round1("h1/state.json", "h1.r1.json")
    assert first["privacy_spent"]["epsilon"] == pytest.approx(1.0, rel=1e-6)
    assert spent() == pytest.approx(1.0, rel=1e-6)
    round1("h1/state2.json", "h1.r1b.json", code=2)
    assert not (tmp_path / "h1.r1b.json").exists()
    assert spent() == pytest.approx(1.0, rel=1e-6)


def test_today2_cli_unservable_radius_share_burns_no_budget(tmp_path):
    """The CLI centre refuses ``--radius-share 1e-30`` (nothing signed, nothing charged)."""
    try:
        round1, spent = _cli_site(tmp_path, "1e-30")
    except AssertionError:  # setup refused: the fix
        return
    try:
        round1("h1/state.json", "h1.r1.json")
    except AssertionError:  # refused or failed
        assert spent() == 0.0
        return
    assert spent() > 0.0  # it ran: a real, charged release


def test_today2_each_fold_releases_the_radius_of_its_own_training_half():
    """Cross-fitted, ε_s = 50: half A's rows are short (numeric at the box's centre), half
    B's long (numeric at the corners). Fold 1 (trained on A) must clip at a small rung and
    fold 2 (trained on B) at a large one — a site that reused fold 1's radius, read the
    other half, or a previous run's radius would not. The exact histograms are those of
    each half alone."""
    n = 800
    cfg = make_protocol([("h0", n, 50.0, 1e-6)], feature_bounds=[(-1.0, 3.0)] * K,
                        alpha=0.1, estimator="linear", protocol_id="attack-today2-halves",
                        cross_fit=True)
    probe = Site("h0", np.ones((n, K)), np.tile([0, 1], n // 2), np.repeat([0, 1], n // 2),
                 config=cfg, random_state=0)
    half_a, half_b = probe._halves
    rng = np.random.default_rng(9)
    X = np.empty((n, K))
    X[half_a] = 1.0 + 0.02 * rng.uniform(-1, 1, size=(half_a.size, K))  # ‖v‖ ≈ 0.01
    X[half_b] = np.where(rng.uniform(size=(half_b.size, K)) < 0.5, -1.0, 3.0)  # ‖v‖ = 2
    y = rng.integers(0, 2, n)
    A = np.zeros(n, dtype=int)
    A[half_a[::2]] = 1
    A[half_b[::2]] = 1
    site = Site("h0", X, y, A, config=cfg, random_state=0)
    box = default_radius(cfg.feature_map())
    ladder = radius_ladder(box)
    ha, hb = site._radius_histogram(0), site._radius_histogram(1)
    assert int(ha.sum()) == half_a.size and int(hb.sum()) == half_b.size
    assert int(hb[1]) == half_b.size  # every long row on the top rung's bin
    r1, r2 = site.round1().fields["radius"]
    assert r2 in (float(ladder[0]), float(ladder[1]))  # the median sits on r_0 (a tie)
    assert r1 <= float(ladder[40])
    # and the exact histograms are those of each half alone (one changed row of B
    # leaves A's histogram as it was)
    X2 = X.copy()
    X2[half_b[0]] = 1.0
    other = Site("h0", X2, y, A, config=cfg, random_state=0)
    np.testing.assert_array_equal(other._radius_histogram(0), ha)
    assert int(np.abs(other._radius_histogram(1) - hb).sum()) == 2


# -------------------------------------------------------------- malformed signed numbers
def _signed_round1():
    from dpfair.fairclass.federated._keys import Signer
    from tests.fairclass.federated.test_linear import _cfg as _lin_cfg
    from tests.fairclass.federated.test_linear import _design as _lin_design

    signers = {p: Signer.generate(p) for p in ("centre", "h0", "h1", "h2")}
    cfg = replace(_lin_cfg(), keys=tuple(sorted((p, s.public) for p, s in signers.items())))
    rng = np.random.default_rng(3)
    r1 = [Site(s, *_lin_design(600, rng), config=cfg, random_state=i).round1()
          for i, s in enumerate(cfg.site_ids)]
    return cfg, signers, r1


@pytest.mark.parametrize("field", ["radius", "sigma_radius", "setup.radius_share"])
def test_today2_huge_integer_in_a_signed_round1_is_refused_by_name(field):
    """A JSON integer 10**400 (no binary64 value) in a signed round 1 or setup is refused
    by a ProtocolError naming the field, never an uncaught OverflowError."""
    from dpfair.fairclass.federated import Centre
    from dpfair.fairclass.federated._messages import ProtocolError, decode, encode

    if field.startswith("setup."):
        env = _keyed(_cfg(n=400)).to_envelope()
        forged = replace(env, fields={**env.fields, field[6:]: 10**400})
        with pytest.raises(ProtocolError, match=field[6:]):
            ProtocolConfig.from_envelope(forged)
        return
    cfg, signers, r1 = _signed_round1()
    val = [10**400] if field == "radius" else 10**400
    msg = replace(r1[0], fields={**r1[0].fields, field: val})
    got = decode(encode(msg, signers["h0"]), keys=cfg.keyring(), kind="round1",
                 protocol_id=cfg.protocol_id, shapes=cfg.message_shapes("round1"))
    with pytest.raises(ProtocolError, match=field):
        Centre(cfg).aggregate([got, *r1[1:]])


@pytest.mark.parametrize("where", ["sites.epsilon", "sites.delta", "feature_bounds",
                                   "alpha", "tolerance"])
def test_today2_huge_integer_anywhere_in_a_setup_is_a_protocol_error(where):
    """The same 10**400 in a site's ε/δ, inside the bounds list, or in a scalar field of
    the setup: refused as a ProtocolError naming the centre (the sender)."""
    from dpfair.fairclass.federated._messages import ProtocolError

    env = _keyed(_cfg(n=400)).to_envelope()
    fields = dict(env.fields)
    if where.startswith("sites."):
        fields["sites"] = [{**fields["sites"][0], where[6:]: 10**400}]
    elif where == "feature_bounds":
        fields["feature_bounds"] = [[0, 10**400], *fields["feature_bounds"][1:]]
    else:
        fields[where] = 10**400
    with pytest.raises(ProtocolError) as info:
        ProtocolConfig.from_envelope(replace(env, fields=fields))
    assert info.value.args and "centre" in str(info.value)


def test_today2_overflowing_public_box_is_refused_before_the_data_are_read():
    """(-1e308, 1e308) has no finite width: the FDP setup refuses it (fixed:
    ``check_bound_width`` in FeatureMap and check_feature_bounds)."""
    from dpfair._errors import InvalidParameterError

    n = 64
    try:
        cfg = make_protocol([("h0", n, 1.0, 1e-6)], feature_bounds=[(-1e308, 1e308)] * 3,
                            alpha=0.1, estimator="linear", protocol_id="attack-today2-box")
    except InvalidParameterError:
        return
    X = np.full((n, 3), -1e308)
    X[::2] = 1e308
    site = Site("h0", X, np.tile([0, 1], n // 2), np.repeat([0, 1], n // 2), config=cfg,
                random_state=0)
    assert np.all(np.isfinite(site._U)), "the public map produced non-finite rows"


@pytest.mark.parametrize("estimator", ["kernel", "rff", "linear"])
def test_today2_overflowing_box_is_refused_by_every_bounds_validator(estimator):
    """The same box in every validator of public bounds: the FDP setup of each estimator,
    the centralised classifier (before the data: X is not even an array), the public
    feature map, and a JSON integer 10**400 as a bound (no binary64 value)."""
    from dpfair._errors import InvalidParameterError
    from dpfair.fairclass import CDPFairClassifier
    from dpfair.fairclass._linear import FeatureMap
    from dpfair.fairclass._validation import check_feature_bounds

    with pytest.raises(InvalidParameterError, match=r"feature_bounds.*width"):
        make_protocol([("h0", 64, 1.0, 1e-6)], feature_bounds=[(0.0, 1.0), (-1e308, 1e308)],
                      alpha=0.1, estimator=estimator, protocol_id="attack-today2-box")
    if estimator != "rff":  # CDP-Fair has the kernel grid and the linear estimator
        clf = CDPFairClassifier(epsilon=1.0, delta=1e-6, alpha=0.1, estimator=estimator,
                                feature_bounds=[(0.0, 1.0), (-1e308, 1e308)])
        with pytest.raises(InvalidParameterError, match="feature_bounds"):
            clf.fit(np.zeros((64, 2)), np.tile([0, 1], 32),
                    sensitive_features=np.repeat([0, 1], 32))
    with pytest.raises(InvalidParameterError, match="width"):
        check_feature_bounds([(0.0, 1.0), (-1e308, 1e308)], 2)
    with pytest.raises(InvalidParameterError, match="width"):
        FeatureMap.build([(0.0, 1.0), (-1e308, 1e308)], None, 2)
    for bad in ([(0, 10**400)], [(-(10**400), 0)]):
        with pytest.raises(InvalidParameterError, match="feature_bounds"):
            check_feature_bounds(bad, 1)
    # the narrowest overflow still refused, the widest finite width still accepted
    big = float(np.finfo(np.float64).max)
    check_feature_bounds([(-big / 2, big / 2)], 1)
    with pytest.raises(InvalidParameterError, match="width"):
        check_feature_bounds([(-big / 2, np.nextafter(big / 2, np.inf) * 1.0000001)], 1)


@pytest.mark.parametrize("bounds", [(-1e308, 1e308), (0, 10**400), (-(10**400), 0)])
def test_today2_interval_bounds_refuse_overflow_and_huge_integers(bounds):
    """The median/quantile/facility validator (check_interval_bounds) refuses an
    overflowing width and a bound with no binary64 value by name (not OverflowError)."""
    from dpfair._errors import InvalidParameterError
    from dpfair._validation import check_interval_bounds

    with pytest.raises(InvalidParameterError, match="bounds"):
        check_interval_bounds("bounds", bounds)


@pytest.mark.parametrize("features", ["x1,x2", "x1,x2,x3,x1"])
def test_today2_cli_feature_count_mismatch_charges_nothing(tmp_path, features):
    """A --features list that does not match the setup (count, duplicates) is a free
    parameter error (fixed: check_site_columns before the ledger pre-check)."""
    from tests.fairclass.federated.test_linear import _cli

    _round1, spent = _cli_site(tmp_path, None)
    _cli("site", "round1", "h1/data.csv", "--setup", "setup.json", "--site-id", "h1",
         "--key", "keys/h1.key", "--centre-key", "keys/centre.pub", "--ledger",
         "h1/h1.fdp-ledger", "--features", features, "--target", "y", "--sensitive", "a",
         "--state", "h1/state.json", "--out", "h1.r1.json", cwd=tmp_path, code=2)
    assert spent() == 0.0


@pytest.mark.parametrize("features", ["x1,x2", "x1,x1,x2", "x1,x2,a", "x1,x2,y"])
@pytest.mark.parametrize("rnd", ["round1", "round2"])
def test_today2_cli_feature_list_is_checked_before_the_data_are_touched(tmp_path, features,
                                                                        rnd):
    """The column check reads nothing: with a DATA path that does not exist the wrong
    --features (count, a duplicate, target or sensitive among them) is still the named
    parameter error, in round 1 and round 2, and the ledger is untouched."""
    from tests.fairclass.federated.test_linear import _cli

    _round1, spent = _cli_site(tmp_path, None)
    extra = ["--model", "no-model.json"] if rnd == "round2" else []
    got = _cli("site", rnd, "h1/missing.csv", "--setup", "setup.json", "--site-id", "h1",
               "--key", "keys/h1.key", "--centre-key", "keys/centre.pub", "--ledger",
               "h1/h1.fdp-ledger", "--features", features, "--target", "y", "--sensitive",
               "a", "--state", "h1/state.json", "--out", "h1.out.json", *extra,
               cwd=tmp_path, code=2)
    assert "features" in got["error"] or "columns" in got["error"], got["error"]
    assert "missing.csv" not in got["error"]
    assert spent() == 0.0


def test_today2_histogram_sampler_variance_covers_the_charged_sigma_exactly(monkeypatch):
    """The variance the site's histogram sampler actually draws with, minus the smoothing
    the δ-slack argument sets aside, is ≥ σ_r²·4^6 in exact rationals — for 4,000 random
    σ over 16 decades and for the σ_r a real site passes (captured from round 1), so
    μ_r = √2/σ_r charged to the ledger bounds the executed mechanism."""
    from fractions import Fraction

    from dpfair.mechanisms import SMOOTHING_VARIANCE

    rng = np.random.default_rng(0)
    sigmas = [float(s) for s in 10 ** rng.uniform(-3, 13, 4000)] + [1.0, math.sqrt(2.0)]
    seen: list[tuple[float, int]] = []
    real = fed_linear.sample_discrete_gaussian

    def spy(var, shape, gen):
        seen.append((var, int(np.prod(shape))))
        return real(var, shape, gen)

    monkeypatch.setattr(fed_linear, "sample_discrete_gaussian", spy)
    cfg = _cfg(n=400)
    site = Site("h0", *_design(np.random.default_rng(11), 400), config=cfg, random_state=0)
    site.round1()
    sig = cfg.linear_sigmas("h0")
    hist_draws = [v for v, size in seen if size == 65]
    assert hist_draws == [fed_linear.radius_noise_variance(sig.radius)]
    rec = next(r for r in site.ledger.to_dict()["records"] if "clip radius" in r["label"])
    assert math.sqrt(2 * rec["rho"]) == pytest.approx(math.sqrt(2) / sig.radius, rel=1e-12)
    for s in [*sigmas, sig.radius]:
        S = fed_linear.radius_noise_variance(s)
        assert Fraction(S - SMOOTHING_VARIANCE) >= Fraction(s) ** 2 * 4**fed_linear.CELL_BITS
