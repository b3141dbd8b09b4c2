"""scikit-learn metadata routing for the group-aware classifiers.

Every classifier of :mod:`dpfair.fairclass` needs the group labels ``sensitive_features``
in ``fit``, ``predict``, ``predict_proba`` and ``score``. Under scikit-learn's metadata
routing (``sklearn.set_config(enable_metadata_routing=True)``) the classes *request* that
argument by default (:data:`SENSITIVE_REQUEST`), so a meta-estimator such as
``cross_val_score`` or ``GridSearchCV`` forwards ``sensitive_features`` to each of those
methods, split with the rows. Without routing scikit-learn forwards extra arguments to
``fit`` only, and :func:`require_sensitive` turns the missing groups of a later
``predict``/``score`` call into a :class:`MissingSensitiveFeaturesError` (an
:class:`~dpfair.InvalidParameterError`) (never a guess,
never a NaN computed from the data).

No data are read here: the request is a class attribute, the check looks only at whether
the argument was given.
"""

from __future__ import annotations

from typing import Any

from dpfair._errors import InvalidDataError, InvalidParameterError


class MissingSensitiveFeaturesError(InvalidParameterError, InvalidDataError):
    """``sensitive_features`` was not passed (or passed as None) to a method that needs it.

    Both an :class:`~dpfair.InvalidParameterError` (a required argument is missing) and an
    :class:`~dpfair.InvalidDataError` (the groups are part of the data; an explicit
    ``sensitive_features=None`` has always raised the latter), hence a ``ValueError``.
    """


#: The default request of every method that takes the groups (scikit-learn's
#: ``__metadata_request__<method>`` convention for consumers).
SENSITIVE_REQUEST: dict[str, bool] = {"sensitive_features": True}

_HOW = (
    "Pass it as a keyword, e.g. clf.{method}(X{y}, sensitive_features=A). Inside scikit-learn "
    "model selection enable metadata routing, sklearn.set_config(enable_metadata_routing=True), "
    "and pass the groups as metadata: cross_val_score(clf, X, y, "
    "params={{'sensitive_features': A}}) or GridSearchCV(clf, grid).fit(X, y, "
    "sensitive_features=A). The estimator requests sensitive_features for fit, predict, "
    "predict_proba and score by default; with a string scorer such as scoring='accuracy' "
    "scikit-learn calls predict without metadata, so keep the default scoring (clf.score)."
)


def require_sensitive(value: Any, estimator: object, method: str) -> Any:
    """Return ``value``, or raise if the group labels were not passed.

    Parameters
    ----------
    value : array-like or None
        The ``sensitive_features`` argument as received.
    estimator : object
        The estimator (its class name goes into the message).
    method : str
        ``"fit"``, ``"predict"``, ``"predict_proba"`` or ``"score"``.

    Raises
    ------
    MissingSensitiveFeaturesError
        If ``value`` is None (an :class:`~dpfair.InvalidParameterError` and an
        :class:`~dpfair.InvalidDataError`): the message names ``sensitive_features`` and
        how to pass it, directly and through scikit-learn's metadata routing.
    """
    if value is not None:
        return value
    y = ", y" if method in ("fit", "score") else ""
    raise MissingSensitiveFeaturesError(
        f"{type(estimator).__name__}.{method}: sensitive_features is required (the group "
        "label of every row; the classifier's decision depends on it) but was not passed "
        "(sensitive_features=None). " + _HOW.format(method=method, y=y)
    )
