"""The certified rank searches release exactly what the former full-window code did.

``tests/quantiles/speed_reference.json`` was recorded with the code BEFORE the certified
searches (commit af567dd): the localised ExpMech's width-model choice K_E, the exact-law
ExpMech target ranks, the NoisyBinSearch target ranks and seeded intervals of all four
methods over a grid of (n, q, ρ, bounds, α). Every value must be reproduced bit for bit.
Random cases compare the searches with the reference functions kept in the module.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from dpfair.quantiles import _api, _methods, confidence_interval

REF = json.loads((Path(__file__).with_name("speed_reference.json")).read_text())


def _clear() -> None:
    for f in (_methods.expmech_lower_target_exact, _methods.expmech_targets,
              _methods._binsearch_lower_target, _api.localized_expmech_steps,
              _methods._window_sums, _methods._window_pmf_core):
        f.cache_clear()


def _rows(key: str, min_n: int) -> list[list]:
    return [r for r in REF[key] if r[0] >= min_n]


@pytest.mark.parametrize("min_n", [100_000, pytest.param(0, marks=pytest.mark.slow)])
def test_expmech_targets_recorded(min_n: int) -> None:
    _clear()
    rows = _rows("targets", min_n)
    got = [_methods.expmech_lower_target_exact(n, eps, c, a, p) for n, eps, c, a, p, _ in rows]
    assert got == [row[-1] for row in rows]


@pytest.mark.parametrize("min_n", [100_000, pytest.param(0, marks=pytest.mark.slow)])
def test_width_model_steps_recorded(min_n: int) -> None:
    _clear()
    rows = _rows("steps", min_n)
    got = [_api.localized_expmech_steps(n, p, eps, a, w) for n, p, eps, a, w, _ in rows]
    assert got == [row[-1] for row in rows]


@pytest.mark.parametrize("min_n", [1_000_000, pytest.param(0, marks=pytest.mark.slow)])
def test_binsearch_targets_recorded(min_n: int) -> None:
    _clear()
    rows = _rows("binsearch", min_n)
    got = [_methods._binsearch_lower_target(n, s, d, p, a) for n, s, d, p, a, _ in rows]
    assert got == [row[-1] for row in rows]


def _interval_rows(max_n: int) -> list[list]:
    return [r for r in REF["intervals"] if r[0] <= max_n]


def _check_intervals(rows: list[list]) -> None:
    data: dict[int, np.ndarray] = {}
    for n, q, rho, bounds, alpha, method, low, high, steps in rows:
        x = data.setdefault(n, np.random.default_rng(n).lognormal(np.log(1.5), 1.0, n))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = confidence_interval(x, q, rho=rho, bounds=tuple(bounds), alpha=alpha,
                                    method=method, rng=7)
        assert (float(r.low).hex(), float(r.high).hex(), r.diagnostics.get("steps")) == \
            (low, high, steps), (n, q, rho, bounds, alpha, method)


def test_seeded_intervals_recorded_small() -> None:
    _clear()
    _check_intervals(_interval_rows(1000))


@pytest.mark.slow
def test_seeded_intervals_recorded_all() -> None:
    _clear()
    _check_intervals(_interval_rows(10**9))


@pytest.mark.parametrize("seed", range(6))
def test_random_cases_match_reference(seed: int) -> None:
    rng = np.random.default_rng(1000 + seed)
    cs = tuple(s / 2.0 for s in _api.EXPMECH_STEPS)
    for _ in range(8):
        n = int(np.exp(rng.uniform(np.log(20), np.log(3e6))))
        p = float(rng.choice([0.01, 0.05, 0.1, 0.3, 0.5, 0.75, 0.9, 0.99, rng.uniform()]))
        eps = float(np.exp(rng.uniform(np.log(0.05), np.log(8.0))))
        a = float(np.exp(rng.uniform(np.log(1e-6), np.log(0.2))))
        got = _methods.expmech_lower_targets_exact(n, eps, cs, a, p)
        want = tuple(_methods._expmech_lower_target_reference(n, eps, c, a, p) for c in cs)
        assert got == want, (n, p, eps, a)
        sigma = float(np.exp(rng.uniform(np.log(0.3), np.log(300.0))))
        depth = int(rng.integers(3, 40))
        k = _methods._binsearch_lower_target.__wrapped__(n, sigma, depth, p, a)
        noise = _methods._query_noise(n, sigma)
        base = _methods.gaussian_union_tail(noise.scale, depth)

        def tail(t: np.ndarray, base=base, noise=noise) -> np.ndarray:
            return base(np.asarray(t, dtype=np.float64) - noise.step)

        t_max = n + 1 if not sigma * 40.0 < n else int(np.ceil(sigma * 40.0)) + 1
        ref = _methods.lower_target_rank(
            lambda kk, tail=tail, t_max=t_max, n=n, p=p: _methods.generic_lower_failure(
                n, tail, kk, t_max=t_max, p=p), n, a)
        assert k == ref, (n, sigma, depth, p, a)


def test_fast_path_taken_at_large_n(monkeypatch: pytest.MonkeyPatch) -> None:
    """At the paper setting's n = 10^6 no candidate needs the full-window reference."""
    _clear()
    calls: list[tuple] = []
    ref = _methods._expmech_lower_target_reference
    monkeypatch.setattr(_methods, "_expmech_lower_target_reference",
                        lambda *a: (calls.append(a), ref(*a))[1])
    bis: list[int] = []
    rank = _methods.lower_target_rank
    monkeypatch.setattr(_methods, "lower_target_rank", lambda *a: (bis.append(1), rank(*a))[1])
    for q in (0.1, 0.5, 0.9):
        _api.localized_expmech_steps(10**6 + 1, q, 1.3038, 0.024, 3.0e4)
        _methods._binsearch_lower_target(10**6 + 1, 23.7, 28, q, 0.000125)
    assert calls == [] and bis == []


def test_uncertified_crossing_falls_back() -> None:
    """A level exactly at a computed F value is ambiguous: the reference answers."""
    n, eps, c, p = 5000, 1.3, 64.0, 0.5
    k = _methods._expmech_lower_target_reference(n, eps, c, 0.025, p)
    f = float(_methods.expmech_lower_failure_exact(n, eps, c, [k], p)[0])
    level = f / (1.0 - 1e-9)  # limit = F(k) itself, within the certificate's margin
    assert _methods.expmech_lower_targets_exact(n, eps, (c,), level, p) == \
        (_methods._expmech_lower_target_reference(n, eps, c, level, p),)
    vals = np.array([0.5 * level, level * (1 - 1e-9), 2.0 * level])
    assert _methods._certified_crossing(vals, level * (1 - 1e-9), 0.0, 1e-8) is None
