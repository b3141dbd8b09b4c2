"""Sweeps for studies: one S1 release shared by several fairness levels α.

A study that plots error against α (paper 003, Figures 3, 6 and 7) fits S1 once per
repetition and runs S2 once per α with fresh noise. :func:`fit_alpha_path` exposes that to
code outside :mod:`dpfair.fairclass` (the experiments registry, the report) through the
public API.

Privacy. Every returned model is, on its own, exactly the (ε, δ)-DP release that ``fit``
would produce with that α (same S1 law, its own S2 noise; its ``privacy_spent_`` says
so). The models share the S1 release, so *publishing several of them* composes: the S1
part is paid once and each S2 is paid again. Every model's ``path_privacy_spent_`` states
that cost of publishing the whole path (with its ledger in ``path_privacy_ledger_``). That
is why ``fit`` releases one model and why this helper is meant for simulation studies,
where nothing is released.

Certificates. Each model's certificate is its own: P(|DD| > α and certified) ≤ β holds for
each model separately (each S2 has its own side share and full β). Selecting among K
certified models after seeing their certificates (say the smallest certified α) is
covered only at K·β (a union bound), not β.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from numpy.typing import ArrayLike
from sklearn.base import clone

from dpfair._errors import InvalidParameterError
from dpfair.fairclass._certify import UncertifiedFairnessError, check_on_uncertified
from dpfair.fairclass._estimators import _PlugInBase, _uncertified_text, _warn_if_uncertified
from dpfair.fairclass._validation import check_alpha

__all__ = ["fit_alpha_path"]

_Est = TypeVar("_Est", bound=_PlugInBase)


def fit_alpha_path(
    estimator: _Est,
    X: ArrayLike,
    y: ArrayLike,
    *,
    sensitive_features: ArrayLike,
    alphas: Sequence[float] | None,
    alpha_margin: float = 0.0,
) -> list[_Est]:
    """Fit S1 once and S2 once per α: one fitted copy of ``estimator`` per α.

    Parameters
    ----------
    estimator : CDPFairClassifier, FairPlugInClassifier, PrivatePlugInClassifier or PlugInClassifier
        An (unfitted) estimator; its own ``alpha`` is ignored. Its ``random_state`` seeds
        the split, the S1 noise and then the S2 noise of every α in order, so the result
        depends on the seed and on the list of α.
    X, y, sensitive_features
        As in ``fit``.
    alphas : sequence of float, or None
        Disparity levels, each in (``alpha_margin``, 1). ``None`` for the unconstrained
        estimators (:class:`PrivatePlugInClassifier`, :class:`PlugInClassifier`): one model.
    alpha_margin : float, default=0.0
        As the estimators' ``alpha_margin`` (target α − margin on the calibration half).

    Returns
    -------
    list of fitted estimators
        Same class and parameters as ``estimator`` (``alpha`` set to each α), in the order
        of ``alphas``. Each equals in law a fresh ``fit`` at that α; with one α and the same
        ``random_state`` it equals ``estimator.set_params(alpha=α).fit(...)`` exactly.
        ``privacy_spent_`` is one model's guarantee; ``path_privacy_spent_`` (the same on
        every model) is what publishing all of them costs: S1 once, each S2 added, e.g.
        (ε₁ + K·ε₂, δ) for K values of α with cross-fitting.

    Raises
    ------
    InvalidParameterError
        ``alphas`` given for an estimator without a fairness step, or missing for one
        with it; an α outside (margin, 1); an invalid ``on_uncertified``.
    UncertifiedFairnessError
        With the estimator's ``on_uncertified="raise"``, if the certificate of any α
        failed: no model of the path is returned, and the error's ``privacy_spent`` /
        ``privacy_ledger`` are the whole path's (S1 once, every α's S2), which was run.

    Notes
    -----
    ``on_uncertified`` is honoured per α as ``fit`` does: ``"warn"`` (default) returns
    every model and issues one :class:`~dpfair.UncertifiedFairnessWarning` per
    uncertified α; ``"raise"`` returns nothing unless every α certified (above).
    """
    fair = bool(type(estimator)._fair)
    if fair and alphas is None:
        raise InvalidParameterError(
            f"alphas=None: {type(estimator).__name__} has a fairness step; pass the α grid."
        )
    if not fair and alphas is not None:
        raise InvalidParameterError(
            f"alphas={list(alphas)!r}: {type(estimator).__name__} has no fairness step; "
            "pass alphas=None."
        )
    if alphas is not None and len(alphas) == 0:
        raise InvalidParameterError("alphas=[]: pass at least one α.")
    entries: list[tuple[float, float] | None] = (
        [None] if alphas is None else [(float(a), float(alpha_margin)) for a in alphas]
    )
    for a in alphas or ():
        check_alpha(a, alpha_margin)  # before anything is drawn
    on_uncertified = check_on_uncertified(getattr(estimator, "on_uncertified", "warn"))
    base = clone(estimator)  # the caller's estimator stays unfitted
    states = base._fit_path(X, y, sensitive_features, entries)
    if on_uncertified == "raise":
        for entry, state in zip(entries, states, strict=True):
            if state.get("certified_") is False and entry is not None:
                probe = clone(base).set_params(alpha=entry[0], alpha_margin=entry[1])
                raise UncertifiedFairnessError(
                    _uncertified_text(probe, state) + f" (alpha={entry[0]:g} of the path) "
                    "on_uncertified='raise': no model of the path is returned; the privacy "
                    "budget of the whole path is spent (see the error's privacy_ledger).",
                    privacy_spent=(state.get("path_privacy_spent_")
                                   or state.get("privacy_spent_")),
                    privacy_ledger=(state.get("path_privacy_ledger_")
                                    or state.get("privacy_ledger_")),
                    certificates=tuple(state.get("certificates_") or ()),
                )
    models: list[_Est] = []
    for entry, state in zip(entries, states, strict=True):
        params = base.get_params()
        if entry is not None:
            params["alpha"] = entry[0]
            params["alpha_margin"] = entry[1]
        model = type(estimator)(**params)
        model.n_features_in_ = base.n_features_in_
        if hasattr(base, "feature_names_in_"):
            model.feature_names_in_ = base.feature_names_in_
        model._adopt(state)
        _warn_if_uncertified(model)
        models.append(model)
    return models
