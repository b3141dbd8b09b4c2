"""The centre role of FDP-Fair: validate, aggregate, broadcast, search the threshold.

The centre holds no data. Everything it computes is a post-processing of the sites' noisy
releases and public parameters, so it costs no privacy (and needs no randomness except the
public tie-breaking salt of the cross-fitted classifier).

Aggregation (paper 003, Algorithm 1 S1; weights ν_s = μ_s ∝ min(N_s, N_s² ε_s²), the
effective sample sizes of Theorem 2, normalised to sum to 1):

    p̃_a = Σ_s ν_s (F̃^s_{a,0} + F̃^s_{a,1}) / ñ^s_a,    g̃_a = Σ_s ν_s F̃^s_{a,1} / ñ^s_a,
    η̃_a = (g̃_a⁺ + λ_a/2) / (p̃_a⁺ + λ_a)  (the ratio regulariser of CDP-Fair, λ_a = the
    aggregate noise sd),      π̃_1 = Σ_s ν_s ñ^s_1 / n^s_train,  π̃_0 = 1 − π̃_1,

where ñ^s_1 is site s's noisy group-1 count and ñ^s_0 = n^s_train − ñ^s_1 (both clipped to
[1, n^s_train − 1]). The common kernel normalisation 1/h^d cancels in η̃.

Threshold (Algorithms 2–4, 6): per site the tail counts #{Z ≥ τ_j | A=1} and
#{Z ≤ τ_j | A=0} at every grid point τ_j = −1 + 2j/2^M come from the O(M) dyadic nodes of
the site's trees (or Honaker's consistent estimate); DD_s(τ_j) divides them by the tree
roots (noisy group sizes); DD = Σ_s μ_s DD_s; monotone correction; τ̂ by
:func:`~dpfair.fairclass.federated._monotone.grid_threshold`.

Plausibility (THREATS.md rule 7; a poisoned message must be refused, not averaged in).
Every released statistic is its true value plus Gaussian noise of a public scale, and every
true value lies in a public range:

* round 1, per fold: the group-1 count n_1(T) ∈ [0, n_train] plus N(0, σ_c²); each of the
  four binned kernel sums F_{a,y}(g) = Σ_i Σ_g' w_i(g') k_h(g, g') ∈ [0, n_train] (linear
  binning weights sum to 1 per row and 0 ≤ k_h ≤ 1) plus σ_f·W(g) with Var W(g) =
  Π_j (k(g_j, g_j) + jitter) = (1 + 10⁻⁸)^d (the GP's marginal variance);
* round 1 with random Fourier features (``estimator="rff"``): each coordinate of the four
  sums Σ_i Q_j(u_i)·2^-q lies in [−n_train/√m, n_train/√m] (|φ_j| ≤ m^{-1/2}, D = 2m,
  quantized toward zero) plus N(0, σ_f²) rounded to the lattice 2^-q;
* round 1 with the linear estimator (``estimator="linear"``, ``federated/_linear.py``):
  each coordinate of the two group sums and of the label contrast, and each off-diagonal
  moment lies in [−n_train, n_train], each cell count and diagonal moment in [0, n_train]
  (‖w‖ ≤ 1), plus the block's public noise;
* round 2, per fold and group: every tree node, a count of calibration rows in a dyadic
  bin, lies in [0, n_cal] plus N(0, σ_t²).

A value outside [lo − k·sd, hi + k·sd] is refused with an error naming the site. With m
Gaussian values in a message, k = Φ⁻¹(1 − 10⁻⁹/(2m)) (:func:`plausibility_k`; union bound
over the m two-sided tails), so an honest site's message is refused with probability
< 10⁻⁹ (k ≈ 6.5 for m = 10, ≈ 8.1 for m = 2·10⁶). The check bounds poisoning, it cannot
remove it: a malicious site can still place each value anywhere in its band, i.e. at most
k noise sds outside the range a true value can take (its weight ν_s in the aggregate is
public and fixed by the setup).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.special import ndtri

from dpfair._errors import InvalidParameterError
from dpfair._rng import as_generator
from dpfair.fairclass._model import RIDGE, eta_from_sums
from dpfair.fairclass._rff import RFF_LATTICE_BITS
from dpfair.fairclass.federated._messages import Envelope, ProtocolError, wire_float
from dpfair.fairclass.federated._monotone import (
    confidence_threshold,
    confidence_z,
    correct,
    grid_threshold,
    omega,
)
from dpfair.fairclass.federated._opportunity import (
    check_positive_shares,
    kernel_positive_shares,
    linear_positive_shares,
    rff_positive_shares,
)
from dpfair.fairclass.federated._protocol import ProtocolConfig
from dpfair.fairclass.federated._site import unflatten_levels
from dpfair.mechanisms import NoisyTree

__all__ = ["Centre", "plausibility_k", "site_dd_curve", "site_dd_terms"]

_REL = 1e-9  # relative tolerance when comparing announced noise scales with the plan
#: An honest site's message fails the plausibility check with probability below this.
PLAUSIBILITY_FAIL_PROB = 1e-9
#: Upper bound on the GP's marginal sd per node, per unit σ_f: (1 + jitter)^(d/2) ≤ this
#: for d ≤ 18 and jitter 1e-8 (with room for rounding in the root).
_GP_MARGINAL_SD = 1.0 + 1e-6


def plausibility_k(m: int, fail_prob: float = PLAUSIBILITY_FAIL_PROB) -> float:
    """k with P(some |N(0,1)| of m exceeds k) ≤ ``fail_prob``: Φ⁻¹(1 − fail_prob/(2m))."""
    return float(-ndtri(fail_prob / (2.0 * max(int(m), 1))))


def _check_plausible(
    sid: str,
    name: str,
    values: NDArray[np.float64],
    lo: float,
    hi: float,
    sd: float,
    k: float,
    what: str,
) -> None:
    """Refuse ``values`` outside [lo − k·sd, hi + k·sd] (the honest range of a noisy value)."""
    low, high = lo - k * sd, hi + k * sd
    bad = (values < low) | (values > high)
    if np.any(bad):
        idx = np.unravel_index(int(np.argmax(bad)), values.shape)
        v = float(values[idx])
        raise ProtocolError(
            sid,
            f"arrays.{name}",
            f"value {v:.6g} at index {tuple(int(i) for i in idx)} is implausible: {what} "
            f"lies in [{lo:g}, {hi:g}] and its noise has sd {sd:.6g}, so an honest value "
            f"lies in [{low:.6g}, {high:.6g}] except with probability < "
            f"{PLAUSIBILITY_FAIL_PROB:g}. The message looks poisoned or corrupted; it is "
            "refused and nothing is aggregated.",
        )


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= _REL * max(abs(a), abs(b), 1e-300)


def site_dd_curve(
    trees: NDArray[np.float64], depth: int, sigma: float, tail: str
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """DD_s(τ_j), j = 0..2^M, from one site's pair of trees, and the two group-size estimates.

    ``trees[0]`` is the tree of Z over group 0 and ``trees[1]`` the tree of −Z over group 1
    (flattened levels). With prefix counts P⁰_j = #{Z ≤ τ_j | A=0} and
    P¹_k = #{−Z ≤ τ_k | A=1}, and τ_{2^M − j} = −τ_j,

        #{Z ≥ τ_j | A = 1} = #{−Z ≤ −τ_j | A = 1} = P¹_{2^M − j}.

    ``tail="dyadic"``: each P is the sum of popcount(j) ≤ M noisy nodes (paper);
    ``tail="consistent"``: Honaker's BLUE prefix (same cost class, lower variance).
    Denominators are the estimated roots, clipped below at 1.
    """
    dd, totals, _ = site_dd_terms(trees, depth, sigma, tail)
    return dd, totals


def site_dd_terms(
    trees: NDArray[np.float64], depth: int, sigma: float, tail: str
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """:func:`site_dd_curve` plus the variance v_s(τ_j) of DD_s(τ_j) around the truth.

    ``v_s = dp + sampling`` from :func:`site_dd_variance_parts` (see there and
    ``docs/proofs/fairclass_fdp_fair.md`` §Threshold). Everything is a function of released
    values and public (M, σ_t): post-processing.
    """
    dd, totals, dp, samp = site_dd_variance_parts(trees, depth, sigma, tail)
    return dd, totals, dp + samp


def _dp_count_ratio_var(
    v_count: NDArray[np.float64],
    v_total: float,
    cov_total: NDArray[np.float64],
    p: NDArray[np.float64],
) -> NDArray[np.float64]:
    """Var(e_T − p·e_n) for a count T, its complement n − T and the total n (all estimates).

    With Cov(e_T, e_n) = cov_total: Var = v_count − 2p·cov_total + p²·v_total. For the
    consistent (Honaker) tree the estimates are additive, e_n = e_T + e_comp, hence
    cov_total = (v_total + v_count − v_comp)/2 — exact, from the exact marginal variances.
    """
    return np.maximum(v_count - 2.0 * p * cov_total + p * p * v_total, 0.0)


def site_dd_variance_parts(
    trees: NDArray[np.float64], depth: int, sigma: float, tail: str
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """DD_s(τ_j), the group sizes, and the DP and sampling variances of DD_s(τ_j).

    Per group a with noisy count T̂ = T + e_T (group 1: #{Z ≥ τ_j}, group 0: #{Z ≤ τ_j})
    and noisy size n̂ = n + e_n (the tree's root estimate, clipped below at 1):
    T̂/n̂ − T/n = (e_T − p·e_n)/n̂ exactly, p = T/n ∈ [0, 1]. The tree estimates are fixed
    linear maps of independent N(0, σ_t²) node noises, so

        Var(e_T − p·e_n) = V_T − 2p·C_T + p²·V_n

    with exact V_T, V_n (``prefix_std``/``DyadicEstimate.std``) and the exact covariance
    C_T = Cov(e_T, e_n): dyadic tails use nodes disjoint from the root (C_T = 0, except
    C_T = V_n at the root itself); the consistent estimate is additive (prefix + suffix =
    total), so C_T = (V_n + V_T − V_comp)/2 with V_comp the variance of the complementary
    count (the mirror-image prefix). Given the released model the calibration group counts
    are binomial: the proportion T/n has variance p(1 − p)/n.

    p is unknown; it is replaced by the released p̂ = clip(T̂/n̂, 0, 1) widened by one
    standard deviation of p̂ on each side (both variance terms are evaluated at the point
    of the interval [p̂ − sd, p̂ + sd] ∩ [0, 1] that maximises them: the DP term is convex in
    p, the sampling term concave with its maximum at 1/2). Returns (dd, totals, dp, samp)
    with dp = Σ_a Var_a/n̂_a² and samp = Σ_a p_a(1 − p_a)/n̂_a.
    """
    n_leaves = 1 << depth
    prefixes, pvars, totals = [], [], []
    dyadic_root_used = []
    for g in (0, 1):
        tree = NoisyTree(
            levels=unflatten_levels(trees[g], depth), sigma=sigma, depth=depth, root="noisy"
        )
        if tail == "consistent":
            est = tree.consistent()
            pref, psd = est.prefix, est.prefix_std
        else:
            dy = tree.dyadic_prefix()
            pref, psd = dy.estimate, dy.std
        prefixes.append(np.asarray(pref, dtype=np.float64))
        pvars.append(np.asarray(psd, dtype=np.float64) ** 2)
        totals.append(max(float(pref[-1]), 1.0))
        dyadic_root_used.append(np.arange(n_leaves + 1) == n_leaves)
    p0, p1 = prefixes
    dd = p1[::-1] / totals[1] - p0 / totals[0]
    dp = np.zeros_like(dd)
    samp = np.zeros_like(dd)
    for g in (0, 1):
        # Index j of the grid ↔ index k of the group's prefix: k = j (group 0), 2^M − j (1).
        order = slice(None) if g == 0 else slice(None, None, -1)
        count = prefixes[g][order]
        v_t = pvars[g][order]
        v_n = float(pvars[g][-1])
        if tail == "consistent":
            v_comp = pvars[g][::-1][order]
            cov = 0.5 * (v_n + v_t - v_comp)
        else:
            cov = np.where(dyadic_root_used[g][order], v_n, 0.0)
        n_hat = totals[g]
        p_hat = np.clip(count / n_hat, 0.0, 1.0)
        # sd of p̂ (DP at the worst p plus the sampling worst case 1/4).
        dp_worst = np.maximum(
            _dp_count_ratio_var(v_t, v_n, cov, np.zeros_like(p_hat)),
            _dp_count_ratio_var(v_t, v_n, cov, np.ones_like(p_hat)),
        )
        sd_p = np.sqrt(dp_worst / n_hat**2 + 0.25 / n_hat)
        lo, hi = np.clip(p_hat - sd_p, 0.0, 1.0), np.clip(p_hat + sd_p, 0.0, 1.0)
        dp_var = np.maximum(
            _dp_count_ratio_var(v_t, v_n, cov, lo),
            _dp_count_ratio_var(v_t, v_n, cov, hi),
        )
        p_mid = np.clip(0.5, lo, hi)
        dp += dp_var / n_hat**2
        samp += p_mid * (1.0 - p_mid) / n_hat
    return dd, np.array(totals), dp, samp


def _half_sizes_ok(sizes: list[Any], n_folds: int, n: int) -> bool:
    """Plausible half sizes of a site with N_s = n: one per fold, each in [2, n − 2].

    An in-memory site splits n into ⌊n/2⌋ and ⌈n/2⌉; an out-of-core site (``FileSite``)
    splits by a seeded position hash, so its halves are data-independent and public but
    only about n/2. With cross-fitting the two folds' halves are complementary.
    """
    try:
        vals = [int(v) for v in sizes]
    except (TypeError, ValueError):
        return False
    if len(vals) != n_folds or any(not 2 <= v <= n - 2 for v in vals):
        return False
    return n_folds != 2 or vals[0] + vals[1] == n


class Centre:
    """The aggregator of FDP-Fair.

    Parameters
    ----------
    config : ProtocolConfig
        The public ``setup`` (the centre usually created it with
        :func:`~dpfair.fairclass.federated.make_protocol`).
    random_state : None, int, SeedSequence or Generator
        Only for the public tie-breaking salt of the cross-fitted classifier.
    """

    def __init__(self, config: ProtocolConfig, *, random_state: Any = None) -> None:
        self.config = config
        self._rng = as_generator(random_state, name="random_state")
        self.model_: Envelope | None = None

    # ------------------------------------------------------------------ validation
    def _collect(self, messages: list[Envelope], kind: str) -> dict[str, Envelope]:
        cfg = self.config
        by_site: dict[str, Envelope] = {}
        for msg in messages:
            if msg.kind != kind:
                raise ProtocolError(msg.sender, "kind", f"expected {kind!r}, got {msg.kind!r}.")
            if msg.protocol_id != cfg.protocol_id:
                raise ProtocolError(
                    msg.sender,
                    "protocol_id",
                    f"{msg.protocol_id!r} is not this run ({cfg.protocol_id!r}).",
                )
            cfg.site(msg.sender)  # unknown site → ProtocolError
            if msg.sender in by_site:
                raise ProtocolError(msg.sender, "sender", f"sent two {kind!r} messages.")
            by_site[msg.sender] = msg
        missing = [s for s in cfg.site_ids if s not in by_site]
        if missing:
            raise ProtocolError(
                missing[0],
                "(message)",
                f"no {kind!r} message from site(s) {missing}: "
                "nothing is aggregated until every site of the setup has sent one.",
            )
        return by_site

    # ------------------------------------------------------------------ round 1
    def aggregate(self, messages: list[Envelope]) -> Envelope:
        """Validate every ``round1`` message and broadcast the aggregated model.

        Returns
        -------
        Envelope
            The ``model`` message: η̃_a on the grid and π̃ per fold, and the weights ν_s.
        """
        cfg = self.config
        by_site = self._collect(messages, "round1")
        if cfg.is_linear:
            return self._aggregate_linear(by_site)
        nf = cfg.n_folds
        nu = cfg.weights()
        rff = cfg.is_rff
        cell_shape = (cfg.features_dim,) if rff else tuple(cfg.grid_shape)
        agg = np.zeros((nf, *cell_shape, 2, 2))
        noise_var = np.zeros((nf, 2))
        pi1 = np.zeros(nf)
        n_total = 0
        for w, sid in zip(nu, cfg.site_ids, strict=True):
            count, sums, n_train = self._check_round1(sid, by_site[sid])
            plan = cfg.plan(sid)
            for k in range(nf):
                nt = float(n_train[k])
                n1 = min(max(float(count[k]), 1.0), nt - 1.0)
                sizes = np.array([nt - n1, n1])
                agg[k] += w * sums[k] / sizes[:, None]
                noise_var[k] += (w * plan.sigma_function / sizes) ** 2
                pi1[k] += w * n1 / nt
            n_total += int(n_train[0])
        lo = 1.0 / n_total
        p1 = np.clip(pi1, lo, 1.0 - lo)
        pi = np.column_stack((1.0 - p1, p1))
        weights = {"weights": {s: float(w) for s, w in zip(cfg.site_ids, nu, strict=True)}}
        if rff:
            # η̃_a(x) = ratio of φ(x)·agg[k, :, a, y]: evaluated by whoever holds x
            # (post-processing); the noise sd of φ(x)·(aggregated noise) is ≤ the same
            # sqrt(noise_var) as the kernel sums' (‖φ(x)‖ ≤ 1), hence the same ridge.
            ridges = RIDGE * np.sqrt(noise_var)
            self.model_ = Envelope(
                "model", cfg.protocol_id, "centre", fields=weights,
                arrays={"coef": agg, "ridge": ridges, "pi": pi,
                        **self._shares(rff_positive_shares, agg, pi, n_total)},
            )
            return self.model_
        eta = np.empty((nf, *cfg.grid_shape, 2))
        for k in range(nf):
            for a in (0, 1):
                ridge = RIDGE * math.sqrt(noise_var[k, a])
                eta[k, ..., a] = eta_from_sums(agg[k, ..., a, :], ridge)
        self.model_ = Envelope(
            "model",
            cfg.protocol_id,
            "centre",
            fields=weights,
            arrays={"eta": eta, "pi": pi,
                    **self._shares(kernel_positive_shares, agg, pi, n_total)},
        )
        return self.model_

    def _shares(self, rule: Any, stats: Any, pi: Any, n_total: int) -> dict[str, Any]:
        """``{"p_a1": p̃_{a,1}}`` under equal opportunity (post-processing of the round-1
        statistics, ``_opportunity.py``), else nothing."""
        return {"p_a1": rule(stats, pi, n_total)} if self.config.is_opportunity else {}

    def _aggregate_linear(self, by_site: dict[str, Envelope]) -> Envelope:
        """The linear estimator's model: θ̃ per fold from the pooled noisy statistics and
        π̃ as for the other estimators (post-processing; ``federated/_linear.py``)."""
        from dpfair.fairclass.federated._linear import (
            fit_theta,
            reference_radius,
            structural_zeros,
        )

        cfg = self.config
        nf, nu = cfg.n_folds, cfg.weights()
        p = cfg.linear_width
        sums = np.zeros((nf, p, 3))
        cells = np.zeros((nf, 2, 2))
        moments = np.zeros((nf, p * (p + 1) // 2))
        n_rows, n1_tot, pi1 = np.zeros(nf), np.zeros(nf), np.zeros(nf)
        mom_var = np.zeros(nf)
        n_total = 0
        checked = {sid: self._check_round1_linear(sid, by_site[sid]) for sid in cfg.site_ids}
        # per-site radii (radius="auto"): site s's statistics are in units of its r_s; in
        # units of the common r̄ they are (r_s/r̄)·sums and (r_s/r̄)²·moments, with noise
        # variance (r_s/r̄)⁴·σ_M,s² per moment (post-processing of released numbers)
        radii = np.array([checked[sid][5] for sid in cfg.site_ids])  # (S, nf)
        rows = np.array([checked[sid][4] for sid in cfg.site_ids], dtype=np.float64)
        r_bar = np.array([reference_radius(radii[:, k], rows[:, k]) for k in range(nf)])
        for w, sid in zip(nu, cfg.site_ids, strict=True):
            count, s, c, m, n_train, r_s = checked[sid]
            scale = np.asarray(r_s, dtype=np.float64) / r_bar
            mom_var += scale**4 * cfg.linear_sigmas(sid).moments ** 2
            for k in range(nf):
                nt = float(n_train[k])
                n1 = min(max(float(count[k]), 1.0), nt - 1.0)
                sums[k] += scale[k] * s[k]
                cells[k] += c[k]
                moments[k] += scale[k] ** 2 * m[k]
                n_rows[k] += nt
                n1_tot[k] += n1
                pi1[k] += w * n1 / nt
            n_total += int(n_train[0])
        lo = 1.0 / n_total
        p1 = np.clip(pi1, lo, 1.0 - lo)
        pi = np.column_stack((1.0 - p1, p1))
        zeros = structural_zeros(cfg.feature_map())
        theta = np.stack([
            fit_theta(sums[k], cells[k], moments[k], n_rows[k], n1_tot[k],
                      math.sqrt(mom_var[k]), zeros)
            for k in range(nf)
        ])
        weights = {"weights": {s: float(w) for s, w in zip(cfg.site_ids, nu, strict=True)}}
        self.model_ = Envelope(
            "model", cfg.protocol_id, "centre", fields=weights,
            arrays={"theta": theta, "pi": pi,
                    **({"radius": r_bar} if cfg.private_radius else {}),
                    **self._shares(linear_positive_shares, cells, pi, n_total)},
        )
        return self.model_

    def _check_round1_linear(
        self, sid: str, msg: Envelope
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64],
               NDArray[np.float64], list[Any], list[float]]:
        """A site's linear round-1 release, checked against the setup (every σ, N_s, the
        shapes, the site's radius per fold) and for plausibility: every true value lies in
        a public range (|w_j| ≤ 1, ‖w‖ ≤ 1 in units of the site's radius), so a value
        beyond k noise sds of it is refused (module docstring)."""
        from dpfair.fairclass.federated._linear import (
            CELL_BITS,
            LINEAR_LATTICE_BITS,
            noise_sd,
        )

        cfg = self.config
        nf, plan = cfg.n_folds, cfg.plan(sid)
        sig = cfg.linear_sigmas(sid)
        radii = self._check_site_radius(sid, msg)
        if set(msg.arrays) != {"count", "sums", "cells", "moments"}:
            raise ProtocolError(
                sid, "arrays", "the setup uses estimator='linear': expected count, sums, "
                "cells and moments."
            )
        for name, expected in (
            ("sigma_count", plan.sigma_count),
            ("sigma_function", plan.sigma_function),
            ("sigma_cells", sig.cells),
            ("sigma_moments", sig.moments),
            *((("sigma_radius", sig.radius),) if cfg.private_radius else ()),
        ):
            got = msg.number(name, positive=True)
            if not _close(got, expected):
                raise ProtocolError(
                    sid, f"fields.{name}",
                    f"{got!r} differs from {expected!r} derived from the setup (different "
                    "budget, shares or depth at this site?).",
                )
        n_train = msg.get("n_train", list)
        if not _half_sizes_ok(n_train, nf, cfg.site(sid).n):
            raise ProtocolError(sid, "fields.n_train", f"{n_train!r} does not match N_s.")
        p = cfg.linear_width
        count = msg.array("count", (nf,))
        sums = msg.array("sums", (nf, p, 3))
        cells = msg.array("cells", (nf, 2, 2))
        moments = msg.array("moments", (nf, p * (p + 1) // 2))
        kk = plausibility_k(count.size + sums.size + cells.size + moments.size)
        diag = np.zeros(p * (p + 1) // 2, dtype=bool)
        j = np.arange(p)
        diag[j * p - j * (j - 1) // 2] = True
        q = LINEAR_LATTICE_BITS
        sd_s, sd_c = noise_sd(sig.sums, q), noise_sd(sig.cells, CELL_BITS)
        sd_d, sd_o = noise_sd(sig.moments, 2 * q), noise_sd(sig.moments, 2 * q, halve=True)
        lat = 2.0**-q  # truncation of the rows: well inside one noise sd
        for k in range(nf):
            nt = float(n_train[k])
            _check_plausible(sid, "count", count[k : k + 1], 0.0, nt, plan.sigma_count, kk,
                             f"fold {k + 1}'s group-1 count of {int(nt)} training rows")
            _check_plausible(sid, "sums", sums[k], -nt, nt, sd_s + lat, kk,
                             f"each coordinate of the group sums and label contrast of "
                             f"fold {k + 1}")
            _check_plausible(sid, "cells", cells[k], 0.0, nt, sd_c, kk,
                             f"each cell count of fold {k + 1}")
            _check_plausible(sid, "moments", moments[k][diag], 0.0, nt, sd_d + lat, kk,
                             f"each diagonal moment of fold {k + 1}")
            _check_plausible(sid, "moments", moments[k][~diag], -nt, nt, sd_o + lat, kk,
                             f"each off-diagonal moment of fold {k + 1}")
        return count, sums, cells, moments, n_train, radii

    def _check_site_radius(self, sid: str, msg: Envelope) -> list[float]:
        """The site's clip radius per fold: with ``radius="auto"`` the signed ``radius``
        field, each value a rung of the public ladder (else refused); otherwise the
        setup's public radius, and a ``radius`` field is refused."""
        from dpfair.fairclass.federated._linear import default_radius, ladder_rung

        cfg = self.config
        if not cfg.private_radius:
            extra = sorted({"radius", "sigma_radius"} & set(msg.fields))
            if extra:
                raise ProtocolError(sid, f"fields.{extra[0]}", "the setup's radius is the "
                                    f"public {cfg.radius!r}; a site radius is refused.")
            return [float(cfg.radius)] * cfg.n_folds
        raw = msg.get("radius", list)
        box = default_radius(cfg.feature_map())
        ok = len(raw) == cfg.n_folds and all(
            isinstance(r, (int, float)) and not isinstance(r, bool)
            and math.isfinite(wire_float(r)) and ladder_rung(wire_float(r), box) is not None
            for r in raw
        )
        if not ok:
            shown = [wire_float(r) if isinstance(r, (int, float)) else type(r).__name__
                     for r in raw[: cfg.n_folds + 1]]
            raise ProtocolError(sid, "fields.radius", f"{shown!r}: expected {cfg.n_folds} "
                                "rung(s) of the public radius ladder r_box·2^(-j/8).")
        return [float(r) for r in raw]

    def _check_round1(
        self, sid: str, msg: Envelope
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], list[Any]]:
        """A site's round-1 counts, sums and half sizes, checked against the setup (σ_c,
        σ_f, N_s) and for plausibility; a bad message names the site and the field."""
        cfg = self.config
        nf, plan = cfg.n_folds, cfg.plan(sid)
        rff = cfg.is_rff
        cell_shape = (cfg.features_dim,) if rff else tuple(cfg.grid_shape)
        if set(msg.arrays) != {"count", "sums"}:
            raise ProtocolError(
                sid, "arrays", f"estimator {cfg.estimator!r} of the setup: expected count "
                "and sums."
            )
        extra = sorted({"sigma_cells", "sigma_moments", "radius", "sigma_radius"}
                       & set(msg.fields))
        if extra:
            raise ProtocolError(
                sid, f"fields.{extra[0]}", f"not a field of estimator {cfg.estimator!r}."
            )
        for name, expected in (
            ("sigma_count", plan.sigma_count),
            ("sigma_function", plan.sigma_function),
        ):
            got = msg.number(name, positive=True)
            if not _close(got, expected):
                raise ProtocolError(
                    sid,
                    f"fields.{name}",
                    f"{got!r} differs from {expected!r} derived from the setup (different "
                    "budget, shares or depth at this site?).",
                )
        n_train = msg.get("n_train", list)
        if not _half_sizes_ok(n_train, nf, cfg.site(sid).n):
            raise ProtocolError(sid, "fields.n_train", f"{n_train!r} does not match N_s.")
        count = msg.array("count", (nf,))
        sums = msg.array("sums", (nf, *cell_shape, 2, 2))
        kk = plausibility_k(count.size + sums.size)
        for k in range(nf):
            nt_k = float(n_train[k])
            _check_plausible(
                sid, "count", count[k : k + 1], 0.0, nt_k, plan.sigma_count, kk,
                f"fold {k + 1}'s group-1 count of {int(nt_k)} training rows",
            )
            if rff:
                bound = nt_k / math.sqrt(cfg.features_dim // 2)
                _check_plausible(
                    sid, "sums", sums[k], -bound, bound,
                    plan.sigma_function + 2.0**-RFF_LATTICE_BITS, kk,
                    f"each coordinate of the feature sums of fold {k + 1} "
                    f"({int(nt_k)} training rows)",
                )
                continue
            _check_plausible(
                sid, "sums", sums[k], 0.0, nt_k, plan.sigma_function * _GP_MARGINAL_SD,
                kk, f"each kernel sum of fold {k + 1} ({int(nt_k)} training rows)",
            )
        return count, sums, n_train

    # ------------------------------------------------------------------ round 2
    def _check_round2(
        self, sid: str, msg: Envelope
    ) -> tuple[NDArray[np.float64], list[Any], float]:
        """A site's round-2 trees, half sizes and σ_t, checked against the setup (depth,
        σ_t, N_s) and for plausibility; a bad message names the site and the field."""
        cfg = self.config
        nf, depth = cfg.n_folds, cfg.depth
        plan = cfg.plan(sid)
        got_depth = msg.get("depth", int)
        if got_depth != depth:
            raise ProtocolError(
                sid,
                "fields.depth",
                f"tree depth M = {got_depth} but the setup fixes M = {depth}: trees over "
                "different grids cannot be combined.",
            )
        sig = msg.number("sigma_tree", positive=True)
        if not _close(sig, plan.sigma_tree):
            raise ProtocolError(
                sid,
                "fields.sigma_tree",
                f"{sig!r} differs from {plan.sigma_tree!r} derived from the setup.",
            )
        n_cal = msg.get("n_cal", list)
        if not _half_sizes_ok(n_cal, nf, cfg.site(sid).n):
            raise ProtocolError(sid, "fields.n_cal", f"{n_cal!r} does not match N_s.")
        trees = msg.array("trees", (nf, 2, (1 << (depth + 1)) - 1))
        kk = plausibility_k(trees.size)
        for k in range(nf):
            _check_plausible(
                sid, "trees", trees[k], 0.0, float(n_cal[k]), sig, kk,
                f"each tree node of fold {k + 1} (a count of {int(n_cal[k])} "
                "calibration rows)",
            )
        return trees, n_cal, sig

    def _fold_threshold(
        self,
        k: int,
        taus: NDArray[np.float64],
        curve: NDArray[np.float64],
        sd: NDArray[np.float64],
        om: float,
    ) -> tuple[float, dict[str, Any]]:
        """τ̂ of fold ``k`` from its combined DD curve (post-processing) and its diagnostics."""
        cfg = self.config
        target = cfg.alpha - cfg.alpha_margin
        zero = taus.size // 2
        if cfg.threshold_rule == "confidence":
            # The raw combined curve (exact sd known pointwise); its monotone envelopes
            # are the correction (see confidence_threshold). ω is not used.
            z = confidence_z(cfg.fail_prob, cfg.n_folds)
            cs = confidence_threshold(taus, curve, sd, target, z)
            return cs.tau, {
                "fold": k + 1,
                "tau": cs.tau,
                "rule": "confidence",
                "outcome": cs.outcome,
                "dd_at_tau": cs.dd_at_tau,
                "sd_at_tau": cs.sd_at_tau,
                "upper_at_tau": cs.upper,
                "lower_at_tau": cs.lower,
                "z": z,
                "dd_at_zero": float(curve[zero]),
                "sd_at_zero": float(sd[zero]),
            }
        res = correct(curve, cfg.correction, om)
        if not res.feasible or res.values is None:
            raise ProtocolError(
                "centre",
                "correction",
                f"Algorithm 4 is infeasible for fold {k + 1} (first violation at grid "
                f"index {res.first_violation}, omega = {om:.4g}): no non-increasing "
                "sequence within the band exists. Use correction='alg6' (the paper's "
                "practical variant), a larger c_omega, or more data.",
            )
        search = grid_threshold(taus, res.values, target, cfg.tolerance)
        return search.tau, {
            "fold": k + 1,
            "tau": search.tau,
            "rule": "paper",
            "outcome": search.outcome,
            "dd_at_tau": search.dd_at_tau,
            "dd_at_zero": float(res.values[zero]),
            "correction": res.method,
            "monotone": res.monotone,
        }

    def finalize(self, messages: list[Envelope], model: Envelope | None = None) -> Envelope:
        """Validate every ``round2`` message, search τ̂ and return the ``released_model``.

        Parameters
        ----------
        messages : list of Envelope
            One ``round2`` message per site.
        model : Envelope, optional
            The broadcast model (default: the one this centre produced).

        Raises
        ------
        ProtocolError
            A bad message (names the site and field), or Algorithm 4 infeasible when
            ``correction="alg4"`` (the outcome is reported, not hidden: use "alg6", a
            larger C_ω, or more data).
        """
        cfg = self.config
        model = model if model is not None else self.model_
        if model is None:
            raise InvalidParameterError("finalize: the broadcast model is needed (run aggregate).")
        from dpfair.fairclass.federated._site import (
            check_linear_model,
            check_model,
            check_rff_model,
            linear_model_radius,
        )

        if cfg.is_linear:
            theta, pi = check_linear_model(model, cfg)
            score_arrays = {"theta": theta, "pi": pi}
            if cfg.private_radius:
                score_arrays["radius"] = linear_model_radius(model, cfg)
        elif cfg.is_rff:
            coef, ridge, pi = check_rff_model(model, cfg)
            score_arrays = {"coef": coef, "ridge": ridge, "pi": pi}
        else:
            eta, pi = check_model(model, cfg)
            score_arrays = {"eta": eta, "pi": pi}
        positive = check_positive_shares(model, cfg)
        if positive is not None:  # equal opportunity: the broadcast p̃_{a,1} is released
            score_arrays["p_a1"] = positive
        by_site = self._collect(messages, "round2")
        nf, depth = cfg.n_folds, cfg.depth
        mu = cfg.weights()
        taus = cfg.tau_grid()
        curves = np.zeros((nf, taus.size))
        variances = np.zeros((nf, taus.size))
        n_cal_all, eps2, deltas, privacy = [], [], [], {}
        for w, sid in zip(mu, cfg.site_ids, strict=True):
            msg = by_site[sid]
            trees, n_cal, sig = self._check_round2(sid, msg)
            for k in range(nf):
                dd_s, _, var_s = site_dd_terms(trees[k], depth, sig, cfg.tail)
                curves[k] += w * dd_s
                variances[k] += w * w * var_s
            spec = cfg.site(sid)
            n_cal_all.append(float(np.mean(n_cal)))
            eps2.append(cfg.plan(sid).round2_epsilon(spec.delta))
            deltas.append(spec.delta)
            priv = msg.fields.get("privacy")
            privacy[sid] = priv if isinstance(priv, dict) else {}
        om = omega(cfg.c_omega, mu, n_cal_all, eps2, deltas, depth, cfg.eta_fail)
        sds = np.sqrt(variances)
        folds = [self._fold_threshold(k, taus, curves[k], sds[k], om) for k in range(nf)]
        taus_out = [tau for tau, _ in folds]
        diags = [diag for _, diag in folds]
        return Envelope(
            "released_model",
            cfg.protocol_id,
            "centre",
            fields={
                "feature_bounds": [None if b is None else list(b) for b in cfg.feature_bounds],
                "bandwidth": cfg.bandwidth,
                "grid_shape": list(cfg.grid_shape),
                "alpha": cfg.alpha,
                "threshold_rule": cfg.threshold_rule,
                "fail_prob": cfg.fail_prob,
                "omega": om,
                "depth": depth,
                "thresholds": diags,
                "tie_seed": int(self._rng.integers(0, 2**62)),
                "site_privacy": privacy,
                "weights": {s: float(w) for s, w in zip(cfg.site_ids, mu, strict=True)},
                **cfg.estimator_fields(),
                **cfg.constraint_fields(),
            },
            arrays={
                **score_arrays,
                "tau": np.array(taus_out),
                "dd_curve": curves,
                "dd_sd": sds,
            },
        )
