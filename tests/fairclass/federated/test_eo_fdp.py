"""FDP-Fair under equal opportunity (``constraints="equal_opportunity"``).

* the broadcast p̃_{a,1} is a function of the round-1 messages only (post-processing), for
  every estimator, and close to P(A = a, Y = 1) on a large run;
* round 2 counts the positive-label calibration rows only: one record touches at most one
  node per level of one tree (none if Y = 0), so the pair's sensitivity is still
  sqrt(2(M + 1)) — checked on the attacker's neighbours (group change, label change);
* each site's ledger spends exactly (ε_s, δ_s), with the demographic-parity μ's;
* the protocol: the setup's ``constraints`` and the model's ``p_a1`` are signed; a model
  without p_a1 in an EO run, with p_a1 in a DP run, with p_a1 out of range, re-signed by a
  site or tampered with, a replayed round 2 — all refused; the released model likewise;
* certified fits keep the population |EOD| ≤ α with probability ≥ 1 − β (fresh draws,
  exact binomial bound; full size ``-m slow``);
* the CLI: setup --constraints equal_opportunity → … → predict reports |EOD|.
"""

from __future__ import annotations

import base64
import json
import math
import warnings
from dataclasses import replace

import numpy as np
import pytest

from dpfair._errors import InvalidParameterError
from dpfair._warnings import UncertifiedFairnessWarning
from dpfair.fairclass.datasets import simulate, simulation_eta
from dpfair.fairclass.federated import (
    Centre,
    FDPFairClassifier,
    FederatedModel,
    ProtocolError,
    Site,
    decode,
    encode,
    make_protocol,
)
from dpfair.fairclass.federated._keys import Signer
from dpfair.fairclass.federated._messages import Envelope, canonical
from dpfair.fairclass.federated._protocol import ProtocolConfig
from dpfair.fairclass.federated._site import score_leaf_counts
from dpfair.mechanisms.tree import node_counts
from tests._stats import min_successes

EO = "equal_opportunity"
BOUNDS = [(0.0, 1.0), (0.0, 1.0)]


def _setup(S: int = 2, n: int = 2000, eps: float = 2.0, delta: float = 1e-6, **kw):
    specs = [(f"site-{i + 1}", n, eps, delta) for i in range(S)]
    kw.setdefault("constraints", EO)
    return make_protocol(specs, feature_bounds=BOUNDS, alpha=0.1, **kw)


def _run(cfg, seed: int = 0):
    data = [simulate(cfg.sites[i].n, rng=seed * 10 + i) for i in range(len(cfg.sites))]
    sites = [Site(sid, d.X, d.y, d.A, config=cfg, random_state=seed * 10 + i)
             for i, (sid, d) in enumerate(zip(cfg.site_ids, data, strict=True))]
    centre = Centre(cfg, random_state=seed)
    r1 = [s.round1() for s in sites]
    model = centre.aggregate(r1)
    return data, sites, centre, r1, model


# ---------------------------------------------------------------------------- config
def test_config_and_setup_carry_the_constraint_signed():
    keys = {p: Signer.generate(p).public for p in ("centre", "site-1", "site-2")}
    cfg = _setup(keys=keys)
    assert cfg.is_opportunity and cfg.to_envelope().fields["constraints"] == EO
    again = ProtocolConfig.from_envelope(cfg.to_envelope())
    assert again.constraints == EO
    assert cfg.message_shapes("model")["p_a1"] == (1, 2)
    dp = make_protocol([("site-1", 500, 1.0, 1e-6)], feature_bounds=BOUNDS)
    assert "constraints" not in dp.to_envelope().fields  # DP messages unchanged
    assert "p_a1" not in dp.message_shapes("model")
    with pytest.raises(InvalidParameterError, match="threshold_rule='confidence'"):
        _setup(threshold_rule="paper")
    with pytest.raises(InvalidParameterError, match="constraints"):
        _setup(constraints="parity")


def test_file_site_runs_equal_opportunity_as_the_in_memory_site(tmp_path):
    """The out-of-core FileSite no longer refuses equal opportunity: its round 2 counts
    the positive-label rows (message equality: tests/fairclass/federated/test_filesite.py)."""
    from dpfair.fairclass.federated._filesite import FileSite

    cfg = _setup(S=1, n=600)
    d = simulate(600, rng=8)
    np.savetxt(tmp_path / "x.csv", np.column_stack([d.X, d.A, d.y]), delimiter=",",
               header="x1,x2,a,y", comments="", fmt="%.17g")
    with FileSite("site-1", tmp_path / "x.csv", features=["x1", "x2"], target="y",
                  sensitive="a", config=cfg, random_state=1) as fs:
        model = Centre(cfg, random_state=0).aggregate([fs.round1()])
        r2 = fs.round2(model)
    mem = Site("site-1", d.X, d.y, d.A, config=cfg, random_state=1)
    mem.round1()
    np.testing.assert_array_equal(r2.array("trees"), mem.round2(model).array("trees"))


# ---------------------------------------------------------------------------- p̃
@pytest.mark.parametrize("estimator", ["kernel", "linear"])
def test_positive_shares_are_post_processing_of_round1(estimator):
    cfg = _setup(S=3, n=6000, eps=4.0, estimator=estimator)
    data, _, _, r1, model = _run(cfg, seed=1)
    p = model.arrays["p_a1"]
    assert p.shape == (1, 2)
    # a second centre, given only the round-1 messages, broadcasts the same p̃
    again = Centre(cfg, random_state=99).aggregate(r1)
    np.testing.assert_array_equal(again.arrays["p_a1"], p)
    X = np.vstack([d.X for d in data])
    A = np.concatenate([d.A for d in data])
    y = np.concatenate([d.y for d in data])
    truth = np.array([np.mean((A == a) & (y == 1)) for a in (0, 1)])
    assert np.all(np.abs(p[0] - truth) < 0.05), (p, truth)
    assert X.shape[0] == 18000


def test_rff_positive_shares_are_in_range():
    cfg = _setup(S=2, n=1500, eps=2.0, estimator="rff", features_dim=64)
    _, sites, centre, _, model = _run(cfg, seed=2)
    p = model.arrays["p_a1"]
    assert p.shape == (1, 2) and np.all((p > 0) & (p < 1))
    final = centre.finalize([s.round2(model) for s in sites], model)
    np.testing.assert_array_equal(final.arrays["p_a1"], p)


# ---------------------------------------------------------------------------- round 2
def test_round2_counts_positive_rows_only_with_the_same_sensitivity():
    cfg = _setup(S=1, n=1000)
    _, sites, _, _, model = _run(cfg, seed=3)
    site = sites[0]
    from dpfair.fairclass.federated._site import model_folds

    fold = model_folds(model, cfg)[0]
    half = 1  # calibration half of the single fold
    rows = site._halves[half]
    (c0, c1), n_rows = site._calibration_leaves([(half, fold)], cfg.grid())[0]
    y, A = site._y[rows], site._A[rows]
    assert n_rows == rows.size
    assert c0.sum() == np.sum((A == 0) & (y == 1)) and c1.sum() == np.sum((A == 1) & (y == 1))
    # attacker's neighbours: replace one positive record by (group flipped), by a negative
    # record, or a negative by a positive — the pair's squared change ≤ 2(M + 1)
    grid, M = cfg.grid(), cfg.depth
    U, Aa = site._U[rows], site._A[rows]

    def pair(U_, A_, y_):
        keep = y_ == 1
        l0, l1 = score_leaf_counts(fold, grid, U_[keep], A_[keep], M)
        return np.concatenate([np.concatenate(node_counts(l0)),
                               np.concatenate(node_counts(l1))]).astype(float)

    base = pair(U, Aa, y)
    i = int(np.flatnonzero(y == 1)[0])
    j = int(np.flatnonzero(y == 0)[0])
    worst = 0.0
    for change in ("group", "label", "both", "row"):
        U2, A2, y2 = U.copy(), Aa.copy(), y.copy()
        if change in ("group", "both"):
            A2[i] = 1 - A2[i]
        if change in ("label", "both"):
            y2[i] = 0
        if change == "row":
            U2[j], A2[j], y2[j] = U[i], 1 - Aa[i], 1  # a negative replaced by a positive
        worst = max(worst, float(np.sum((pair(U2, A2, y2) - base) ** 2)))
    assert 0 < worst <= 2 * (M + 1)


@pytest.mark.parametrize("cross_fit", [False, True])
def test_eo_site_ledger_spends_exactly_the_budget(cross_fit):
    cfg = _setup(S=2, eps=1.5, cross_fit=cross_fit)
    dp = replace(cfg, constraints="demographic_parity")
    _, sites, centre, _, model = _run(cfg, seed=4)
    centre.finalize([s.round2(model) for s in sites], model)
    for s in sites:
        spent = s.ledger.spent
        assert spent.epsilon == pytest.approx(1.5, rel=1e-6) and spent.delta == 1e-6
        plan_dp = dp.plan(s.site_id)
        assert s.plan == plan_dp  # the same μ₁, μ₂ and σ's as demographic parity
        labels = [r["label"] for r in s.ledger.to_dict()["records"]]
        assert sum("positive-label rows" in lab for lab in labels) == cfg.n_folds
        mus = s.ledger.mu_by_rows()
        expected = s.plan.mu_total if cross_fit else s.plan.mu_round1
        assert all(m == pytest.approx(expected, rel=1e-9) for m in mus.values())


# ---------------------------------------------------------------------------- protocol
def test_protocol_attacks_on_the_new_fields_are_refused():
    cfg0 = _setup(S=2, n=1500)
    signers = {p: Signer.generate(p) for p in ("centre", *cfg0.site_ids)}
    cfg = replace(cfg0, keys=tuple(sorted((p, s.public) for p, s in signers.items())))
    keys = cfg.keyring()
    data, sites, centre, _, model = _run(cfg, seed=5)

    def wire(msg: Envelope, signer: Signer, kind: str = "model") -> Envelope:
        return decode(encode(msg, signer), keys=keys, kind=kind,
                      protocol_id=cfg.protocol_id, shapes=cfg.message_shapes(kind))

    honest = wire(model, signers["centre"])
    # the setup's constraint is signed: flipping it breaks the signature
    raw_setup = encode(cfg.to_envelope(), signers["centre"])
    flipped = raw_setup.replace(b'"constraints":"equal_opportunity"',
                                b'"constraints":"demographic_parity"')
    assert flipped != raw_setup
    with pytest.raises(ProtocolError, match="does not verify"):
        decode(flipped, keys={"centre": signers["centre"].public}, kind="setup")
    # p_a1 is signed: any altered byte is refused
    raw = encode(model, signers["centre"])
    doc = json.loads(raw)
    b = doc["body"]["arrays"]["p_a1"]["b64"]
    doc["body"]["arrays"]["p_a1"]["b64"] = ("A" if b[0] != "A" else "B") + b[1:]
    with pytest.raises(ProtocolError, match="does not verify"):
        decode(json.dumps(doc).encode(), keys=keys, kind="model")
    # a site re-signing a model as the centre (relabel) is refused
    with pytest.raises(ProtocolError, match="cannot sign"):
        encode(model, signers["site-1"])  # the library refuses to sign as another party
    doc = json.loads(raw)
    doc["body"]["arrays"]["p_a1"]["b64"] = base64.b64encode(
        np.array([[0.01, 0.99]], dtype="<f8").tobytes()).decode()
    doc["signature"]["value"] = signers["site-1"].sign(canonical(doc["body"]))
    with pytest.raises(ProtocolError, match="does not verify") as ei:
        decode(canonical(doc), keys=keys, kind="model")
    assert ei.value.site == "centre"
    # a centre-signed model without p_a1, or with values outside (0, 1), is refused by the
    # site before anything is charged
    fresh = Site("site-1", data[0].X, data[0].y, data[0].A, config=cfg, random_state=50)
    fresh.round1()
    spent = fresh.ledger.spent
    no_p = Envelope("model", cfg.protocol_id, "centre", fields=dict(model.fields),
                    arrays={k: v for k, v in model.arrays.items() if k != "p_a1"})
    with pytest.raises(ProtocolError, match="p_a1") as ei:
        fresh.round2(wire(no_p, signers["centre"]))
    assert ei.value.field == "arrays.p_a1"
    bad = Envelope("model", cfg.protocol_id, "centre", fields=dict(model.fields),
                   arrays={**model.arrays, "p_a1": np.array([[0.0, 1.2]])})
    with pytest.raises(ProtocolError, match="outside"):
        fresh.round2(wire(bad, signers["centre"]))
    assert fresh.ledger.spent == spent  # nothing charged by a refused model
    # a DP run refuses an EO model (p_a1) even when validly signed for it
    dp = replace(cfg, constraints="demographic_parity")
    dps = Site("site-1", data[0].X, data[0].y, data[0].A, config=dp, random_state=51)
    dps.round1()
    with pytest.raises(ProtocolError, match="demographic parity"):
        dps.round2(honest)
    # round 2 is single-use at a site (no second release on the same rows)
    r2 = [s.round2(honest) for s in sites]
    with pytest.raises(ProtocolError, match="once"):
        sites[0].round2(honest)
    final = wire(centre.finalize(r2, honest), signers["centre"], "released_model")
    assert final.fields["constraints"] == EO
    FederatedModel.from_envelope(final)  # the honest release is accepted
    # the released model: p_a1 missing, or present without the EO field → refused
    stripped = Envelope("released_model", cfg.protocol_id, "centre", fields=dict(final.fields),
                        arrays={k: v for k, v in final.arrays.items() if k != "p_a1"})
    with pytest.raises(ProtocolError, match="p_a1"):
        FederatedModel.from_envelope(stripped)
    relabelled = Envelope("released_model", cfg.protocol_id, "centre",
                          fields={k: v for k, v in final.fields.items() if k != "constraints"},
                          arrays=dict(final.arrays))
    with pytest.raises(ProtocolError, match="p_a1"):
        FederatedModel.from_envelope(relabelled)


# ---------------------------------------------------------------------------- classifier
def test_classifier_predicts_with_the_eo_score_and_warns_as_eod():
    data = [simulate(1500, rng=70 + s) for s in range(2)]
    clf = FDPFairClassifier(epsilon=0.5, delta=1e-6, alpha=0.02, feature_bounds=BOUNDS,
                            random_state=0, constraints=EO)
    with pytest.warns(UncertifiedFairnessWarning, match=r"\|EOD\|"):
        clf.fit([d.X for d in data], [d.y for d in data],
                sensitive_features=[d.A for d in data])
    assert clf.certified_ is False
    fold = clf.model_.folds[0]
    np.testing.assert_array_equal(fold.positive, clf.released_model_.arrays["p_a1"][0])
    test = simulate(500, rng=9)
    p1 = clf.predict(test.X, sensitive_features=test.A)
    assert np.array_equal(p1, clf.predict(test.X, sensitive_features=test.A))


_BIG = simulate(200_000, rng=654_321)
_BIG_ETA = simulation_eta(_BIG.X, _BIG.A)


def _population_eod(clf) -> float:
    """Population EOD of the released classifier: TPR_a = E[p·η | a]/E[η | a] with the
    design's true η (Monte Carlo sd < 0.003 on 200k rows)."""
    p = clf.predict_proba(_BIG.X, sensitive_features=_BIG.A)[:, 1]
    tpr = [float(np.sum((p * _BIG_ETA)[_BIG.A == a]) / np.sum(_BIG_ETA[_BIG.A == a]))
           for a in (0, 1)]
    return tpr[1] - tpr[0]


def _eo_run(eps: float, alpha: float, rep: int) -> tuple[float, bool]:
    ss = np.random.SeedSequence([round(eps * 1000), rep, 7]).spawn(4)
    data = [simulate(2000, rng=np.random.default_rng(s)) for s in ss]
    clf = FDPFairClassifier(epsilon=eps, delta=1000.0**-2, alpha=alpha, feature_bounds=BOUNDS,
                            random_state=rep, clip=True, constraints=EO)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UncertifiedFairnessWarning)
        clf.fit([d.X for d in data], [d.y for d in data], sensitive_features=[d.A for d in data])
    return _population_eod(clf), bool(clf.certified_)


def _cap_check(reps: int, cells: list[tuple[float, float]]) -> tuple[int, int, int]:
    """P(|EOD| > α and certified) ≤ β = 0.05 per fit: the count of fits with
    |EOD| ≤ α or uncertified is ≥ the exact binomial 1e-6 bound at 0.95."""
    ok = certified = total = 0
    for eps, alpha in cells:
        for r in range(reps):
            eod, cert = _eo_run(eps, alpha, r)
            total += 1
            certified += cert
            ok += (abs(eod) <= alpha) or not cert
    assert ok >= min_successes(total, 0.95), (ok, total)
    return ok, certified, total


def test_certified_eod_cap_holds_in_population():
    """CI size: 8 fits per cell over ε ∈ {1, 4}, α ∈ {0.1, 0.2}."""
    _, certified, _ = _cap_check(8, [(1.0, 0.1), (1.0, 0.2), (4.0, 0.1), (4.0, 0.2)])
    # the cap is not vacuous: at ε = 4 the design certifies (measured 200/200 over both α;
    # at ε = 1: 0/100 at α = 0.1, 22/100 at α = 0.2 — equal opportunity's denominators are
    # the positive-label rows, ~61% and ~12% of the rows here)
    assert certified >= 8


@pytest.mark.slow
@pytest.mark.parametrize(("eps", "alpha"), [(1.0, 0.1), (1.0, 0.2), (4.0, 0.1), (4.0, 0.2)])
def test_certified_eod_cap_sweep(eps, alpha):
    """Slow: 100 fits per cell."""
    _cap_check(100, [(eps, alpha)])


# ---------------------------------------------------------------------------- CLI
def _cli(*args: str, cwd, code: int = 0) -> dict:
    import os

    from typer.testing import CliRunner

    from dpfair.fairclass.federated.cli import _standalone

    old = os.getcwd()
    os.chdir(cwd)
    try:
        res = CliRunner().invoke(_standalone(), ["fdp", *args], catch_exceptions=False)
    finally:
        os.chdir(old)
    assert res.exit_code == code, res.output
    return json.loads(res.stdout) if code == 0 else {"error": res.output}


@pytest.mark.filterwarnings("ignore:rho= is deprecated:DeprecationWarning")
def test_cli_equal_opportunity_end_to_end(tmp_path):
    """keygen → setup --constraints equal_opportunity → round 1 → aggregate → round 2 →
    finalize → predict (reports |EOD|); each site's ledger holds exactly ε_s."""
    from dpfair.privacy import Budget, LedgerFile

    t = tmp_path
    sites, n, eps, delta = ("h1", "h2"), 1500, 2.0, 1e-6
    for k, sid in enumerate(sites):
        (t / sid).mkdir()
        d = simulate(n, rng=300 + k)
        np.savetxt(t / sid / "data.csv", np.column_stack([d.X, d.A, d.y]), delimiter=",",
                   header="x1,x2,a,y", comments="", fmt="%.17g")
        LedgerFile.create(t / sid / f"{sid}.fdp-ledger", Budget.approx(3 * eps, 3 * delta),
                          data=t / sid / "data.csv")
    d = simulate(4000, rng=399)
    np.savetxt(t / "test.csv", np.column_stack([d.X, d.A, d.y]), delimiter=",",
               header="x1,x2,a,y", comments="", fmt="%.17g")
    (t / "keys").mkdir()
    for party in ("centre", *sites):
        _cli("keygen", "--out", f"keys/{party}", cwd=t)
    setup = ["centre", "setup", "--key", "keys/centre.key",
             *[a for s in sites for a in ("--site", f"{s}:{n}:{eps}:{delta}")],
             *[a for s in sites for a in ("--site-key", f"{s}=keys/{s}.pub")],
             "--bounds", "0", "--bounds", "1", "--bounds", "0", "--bounds", "1",
             "--alpha", "0.2"]
    _cli(*setup, "--constraints", "parity", "--out", "bad.json", cwd=t, code=2)
    info = _cli(*setup, "--constraints", EO, "--out", "setup.json", cwd=t)
    assert info["constraints"] == EO

    def site_args(sid, k):
        return ["site", f"round{k}", f"{sid}/data.csv", "--setup", "setup.json", "--site-id",
                sid, "--key", f"keys/{sid}.key", "--centre-key", "keys/centre.pub",
                "--ledger", f"{sid}/{sid}.fdp-ledger", "--features", "x1,x2", "--target", "y",
                "--sensitive", "a", "--state", f"{sid}/state.json", "--out",
                f"{sid}.r{k}.json"]

    # h1 streams its file out of core (FileSite: round 2 counts the positive-label rows
    # from the streamed batches), h2 loads it; round 2 follows round 1's choice
    for sid in sites:
        extra = ("--aggregate", "always") if sid == "h1" else ()
        out = _cli(*site_args(sid, 1), *extra, cwd=t)
        assert out["aggregated"] is (sid == "h1")
    _cli("centre", "aggregate", "h1.r1.json", "h2.r1.json", "--setup", "setup.json", "--key",
         "keys/centre.key", "--out", "model.json", cwd=t)
    for sid in sites:
        out = _cli(*site_args(sid, 2), "--model", "model.json", cwd=t)
        assert out["aggregated"] is (sid == "h1")
    fin = _cli("centre", "finalize", "h1.r2.json", "h2.r2.json", "--setup", "setup.json",
               "--key", "keys/centre.key", "--model", "model.json", "--out", "released.json",
               "--seed", "0", cwd=t)
    assert isinstance(fin["certified"], bool)
    res = _cli("predict", "released.json", "test.csv", "--centre-key", "keys/centre.pub",
               "--features", "x1,x2", "--sensitive", "a", "--target", "y", cwd=t)
    assert res["error"] <= 0.4 and 0.0 <= res["abs_eod"] <= 1.0
    if fin["certified"]:
        assert res["abs_eod"] <= 0.2 + 4 * math.sqrt(0.25 / 400)  # sample of 4000 rows
    for sid in sites:
        led = LedgerFile.open(t / sid / f"{sid}.fdp-ledger")
        assert led.spent.epsilon == eps and led.spent.delta == delta


# ---------------------------------------------------------------------------- Flower
def test_flower_equal_opportunity_run_is_the_core_protocol(tmp_path):
    """The constraint travels in the signed setup: the Flower apps release the in-process
    protocol's EO model (same p_a1, τ̂), and every site's ledger holds its run once."""
    pytest.importorskip("flwr")
    from dpfair.fairclass.federated._messages import read_message
    from dpfair.fairclass.federated._protocol import SiteSpec
    from dpfair.fairclass.federated.flower.client_app import make_client_app
    from dpfair.fairclass.federated.flower.server_app import run

    from ._flower import (
        LocalGrid,
        core_reference,
        make_keys,
        node_config,
        same_message,
        signed_setup,
        task_identity,
        write_site,
    )

    n, eps, delta = 1000, 2.0, 1e-6
    ids = ("site-1", "site-2")
    keys = make_keys(tmp_path, ("centre", *ids))
    sites = []
    for s, sid in enumerate(ids):
        d = simulate(n, rng=800 + s)
        (tmp_path / sid).mkdir()
        sites.append((sid, write_site(tmp_path / sid / "data.csv", d), d))
    setup = signed_setup(tmp_path / "setup.json", keys,
                         sites=[SiteSpec(sid, n, eps, delta) for sid in ids],
                         feature_bounds=BOUNDS, alpha=0.2, constraints=EO)
    out = tmp_path / "released.json"
    seeds = [11, 22]
    configs = {100 + i: node_config(sid, path, keys, eps, delta, seed=seeds[i])
               for i, (sid, path, _d) in enumerate(sites)}
    with task_identity():
        grid = LocalGrid(make_client_app(), configs)
        run(grid, {"setup": str(setup), "key": str(keys["centre"][0]), "out": str(out),
                   "round-timeout": 5.0, "seed": 5})
    flower = read_message(out, keys={"centre": keys["centre"][2]}, kind="released_model")
    final = core_reference(setup, keys, [d for _s, _p, d in sites], seeds, 5)
    same_message(flower, final)
    assert flower.fields["constraints"] == EO
    np.testing.assert_array_equal(flower.arrays["p_a1"], final.arrays["p_a1"])
