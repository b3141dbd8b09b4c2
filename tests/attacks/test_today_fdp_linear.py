"""Attacks on FDP-Fair's linear sufficient statistics (claimed L2 sensitivities 2√2, √2, √2
in units of the lattice 2^-q, 4^-q; THREATS.md rules 3, 6).

An attacker who controls one record of a site picks it to maximise the computed row w(x)/r:
every numeric value at its public maximum (or minimum, or one ulp inside) *together with*
one-hot entries of every categorical column, at radii where the clipping's division rounds
either way (radius on, an ulp above and below the row's computed norm; the "box" radius
√(k + c) where no row is clipped). Through the site's own round-1 code path the exact
integer gaps of every block must stay within 8·4^q (sums), 2 (cells) and 2·16^q (moments,
Frobenius), for neighbours that keep the record's cell and ones that move it. Then: a
non-finite record is refused before anything is released, and a centre that asks the
same site for round 1 again gets no second release of the same data.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpfair.fairclass.federated import Site, make_protocol
from dpfair.fairclass.federated._linear import LINEAR_LATTICE_BITS

Q = LINEAR_LATTICE_BITS
K = 4
CATS = {K: ["a", "b", "c"], K + 1: [0, 1]}
BOUNDS = [(-1.0, 3.0)] * K + [None, None]
N = 48


def _cfg(radius):
    return make_protocol([("h0", N, 1.0, 1e-6)], feature_bounds=BOUNDS, categories=CATS,
                         alpha=0.1, estimator="linear", radius=radius,
                         protocol_id="attack-today-fdp-linear")  # fixed: same split each run


def _design(rng):
    X = np.empty((N, K + 2), dtype=object)
    X[:, :K] = rng.uniform(-1.0, 3.0, size=(N, K))
    X[:, K] = rng.choice(CATS[K], size=N)
    X[:, K + 1] = rng.integers(0, 2, size=N)
    return X, rng.integers(0, 2, N), np.tile([0, 1], N // 2)


def _stats(cfg, X, y, A):
    site = Site("h0", X, y, A, config=cfg, random_state=0)
    _n1, (sums, cells, moments), _n = site._linear_training_stats(0)
    return site._halves[0], [x.astype(object) for x in (sums, cells, moments)]


def _gap2(a, b, p):
    s = sum(int(v) ** 2 for v in (a[0] - b[0]).ravel())
    c = sum(int(v) ** 2 for v in (a[1] - b[1]).ravel())
    j = np.arange(p)
    diag = np.zeros(p * (p + 1) // 2, dtype=bool)
    diag[j * p - j * (j - 1) // 2] = True
    dm = a[2] - b[2]
    m = sum(int(v) ** 2 for v in dm[diag]) + 2 * sum(int(v) ** 2 for v in dm[~diag])
    return s, c, m


def _extreme_records():
    out = []
    for num in ((3.0,) * K, (-1.0,) * K, (3.0, -1.0) * (K // 2),
                tuple(np.nextafter(3.0, 0.0) for _ in range(K))):
        for c1 in CATS[K]:
            for c2 in CATS[K + 1]:
                out.append([*num, c1, c2])
    return out


_FULL = math.sqrt(K + 2)  # the norm of an all-extreme record: every numeric at ±1, two one-hots


@pytest.mark.parametrize("radius", ["box", _FULL, float(np.nextafter(_FULL, 0.0)),
                                    float(np.nextafter(_FULL, 9.0)), 1.0, 0.25])
def test_today_one_hot_plus_numeric_max_stays_within_the_sensitivity(radius):
    rng = np.random.default_rng(5)
    cfg = _cfg(radius)
    p = cfg.linear_width
    X, y, A = _design(rng)
    rows, base = _stats(cfg, X, y, A)
    victims = [int(i) for i in rows[:4]]
    worst = [0, 0, 0]
    for k, rec in enumerate(_extreme_records()):
        i = victims[k % len(victims)]
        X2 = X.copy()
        X2[i] = np.array(rec, dtype=object)
        y2 = y.copy()
        if k % 3 == 0:
            y2[i] = 1 - y[i]  # change cell as well
        _r, s2 = _stats(cfg, X2, y2, A)
        gs, gc, gm = _gap2(base, s2, p)
        assert gs <= 8 * 4**Q and gc <= 2 and gm <= 2 * 16**Q, (radius, rec)
        worst = [max(w, g) for w, g in zip(worst, (gs, gc, gm), strict=True)]
    # power: the extreme rows do come close to the bounds
    assert worst[0] > 0.25 * 8 * 4**Q and worst[2] > 0.25 * 2 * 16**Q and worst[1] == 2


@pytest.mark.parametrize("bad", [math.nan, math.inf, 1e308])
def test_today_fdp_site_refuses_a_non_finite_record(bad):
    rng = np.random.default_rng(6)
    cfg = _cfg(1.0)
    X, y, A = _design(rng)
    X[3, 1] = bad
    with pytest.raises(Exception) as info:
        site = Site("h0", X, y, A, config=cfg, random_state=0)
        site.round1()
    msg = str(info.value)
    assert "column 1" in msg  # names the column and the kind of problem ...
    assert "1e+308" not in msg and "row" not in msg  # ... never the value or the row


def test_today_centre_cannot_obtain_a_second_round1_release():
    from dpfair.fairclass.federated._messages import ProtocolError

    rng = np.random.default_rng(7)
    cfg = _cfg(1.0)
    X, y, A = _design(rng)
    site = Site("h0", X, y, A, config=cfg, random_state=0)
    site.round1()
    spent = site.ledger.spent
    with pytest.raises(ProtocolError, match="already run"):
        site.round1()
    assert site.ledger.spent == spent  # refused, nothing more spent


def test_today_new_linear_blocks_are_covered_by_the_signature():
    """Splicing another site's (or another run's) cells/moments block into a message, or
    changing the new sigma fields, breaks the sender's signature; a second round 2 on
    the same site is refused."""
    import json
    from dataclasses import replace

    from dpfair.fairclass.federated import Centre, Signer
    from dpfair.fairclass.federated._messages import ProtocolError, canonical, decode, encode

    signers = {p: Signer.generate(p) for p in ("centre", "h0", "h1")}
    cfg = make_protocol([("h0", N, 1.0, 1e-6), ("h1", N, 1.0, 1e-6)], feature_bounds=BOUNDS,
                        categories=CATS, alpha=0.1, estimator="linear", radius=1.0)
    cfg = replace(cfg, keys=tuple(sorted((p, s.public) for p, s in signers.items())))
    ring = cfg.keyring()
    rng = np.random.default_rng(8)
    sites = [Site(s, *_design(rng), config=cfg, random_state=i)
             for i, s in enumerate(("h0", "h1"))]
    msgs = [s.round1() for s in sites]
    raws = [encode(m, signers[m.sender]) for m in msgs]
    docs = [json.loads(r) for r in raws]
    for block in ("cells", "moments", "sums"):
        doc = json.loads(raws[0])
        doc["body"]["arrays"][block] = docs[1]["body"]["arrays"][block]
        with pytest.raises(ProtocolError, match="signature"):
            decode(canonical(doc), keys=ring)
    for field in ("sigma_moments", "sigma_cells"):
        doc = json.loads(raws[0])
        doc["body"]["fields"][field] = doc["body"]["fields"][field] * 2.0
        with pytest.raises(ProtocolError, match="signature"):
            decode(canonical(doc), keys=ring)
    model = Centre(cfg).aggregate(msgs)
    sites[0].round2(model)
    spent = sites[0].ledger.spent
    with pytest.raises(ProtocolError, match="once"):
        sites[0].round2(model)
    assert sites[0].ledger.spent == spent
