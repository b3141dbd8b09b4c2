"""The registered study ``fairclass-full-adult`` (issue 12: many features on the full Adult).

One repetition on the full data takes a few seconds; the direct recomputations use the
public API (``CDPFairClassifier`` with ``fit``) on the same split the trial draws.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from dpfair import InvalidParameterError
from dpfair.experiments import Experiment, get_experiment, rep_seed, run_experiment
from dpfair.experiments.fairclass import alpha_column, data_seed
from dpfair.experiments.fairclass_full_adult import (
    FULL_ADULT_ALPHAS,
    full_adult_grid,
    full_adult_trial,
    nonprivate_lr_predict,
    public_design,
    three_features,
)
from dpfair.fairclass import CDPFairClassifier, demographic_disparity, misclassification_error
from dpfair.fairclass.adult_full import load_full_adult
from dpfair.fairclass.datasets import ADULT_BOUNDS


def _split(seed: np.random.SeedSequence, n: int) -> tuple[Any, Any]:
    """The split the trial draws (all rows, test fraction 0.3), recomputed."""
    perm = np.random.default_rng(data_seed(seed, 3)).permutation(n)
    n_test = round(n * 0.3)
    return np.sort(perm[n_test:]), np.sort(perm[:n_test])


@pytest.fixture(scope="module")
def adult() -> Any:
    return load_full_adult()


def test_registered_with_the_issue_grid() -> None:
    exp = get_experiment("fairclass-full-adult")
    assert exp.reps == 10
    cells = {(c["method"], c["epsilon"]) for c in exp.grid}
    assert cells == {("linear_all", 1.0), ("linear_all", 4.0), ("kernel_3", 1.0),
                     ("kernel_3", 4.0), ("nonprivate_lr", math.inf)}
    assert all(c["alphas"] == "0.05,0.1" and c["n_rows"] == 0 for c in exp.grid)
    assert exp.run_one is full_adult_trial


@pytest.mark.filterwarnings("ignore::dpfair.UncertifiedFairnessWarning")
@pytest.mark.parametrize("method", ["linear_all", "kernel_3"])
def test_private_rows_equal_a_direct_fit_on_the_same_split(adult: Any, method: str) -> None:
    eps = 1.0
    seed = rep_seed(5, 0, 0)
    cell = full_adult_grid(methods=(method,), epsilons=(eps,), alphas=(0.1,))[0]
    row = full_adult_trial(cell, seed)
    tr, te = _split(seed, adult.n)
    assert (row["train_rows"], row["test_rows"]) == (tr.size, te.size)
    delta = (tr.size / 2) ** -2.0
    if method == "linear_all":
        X, kw = adult.X, {"feature_bounds": adult.bounds, "categories": adult.categories,
                          "estimator": "linear"}
    else:
        X, kw = three_features(adult.X), {"feature_bounds": ADULT_BOUNDS}
    est = CDPFairClassifier(epsilon=eps, delta=delta, alpha=0.1, random_state=seed, **kw)
    est.fit(X[tr], adult.y[tr], sensitive_features=adult.A[tr])
    p = est.predict_proba(X[te], sensitive_features=adult.A[te])[:, 1]
    dd = abs(demographic_disparity(p, adult.A[te]))
    assert row[alpha_column("error", 0.1)] == pytest.approx(
        misclassification_error(adult.y[te], p), abs=1e-12)
    assert row[alpha_column("abs_dd", 0.1)] == pytest.approx(dd, abs=1e-12)
    assert row[alpha_column("above", 0.1)] == float(dd > 0.1)
    assert row[alpha_column("certified", 0.1)] == float(est.certified_)
    # privacy as executed: the fit's own ledger, never more than the cell's budget
    assert row["epsilon_spent"] == pytest.approx(eps, rel=1e-12)
    assert row["delta_spent"] <= delta * (1 + 1e-12)
    assert row["delta"] == delta
    assert row["fit_seconds"] > 0


def test_nonprivate_rows_use_the_shared_code_and_common_splits(adult: Any) -> None:
    cell = full_adult_grid(methods=("nonprivate_lr",))[0]
    assert cell["epsilon"] == math.inf
    a = full_adult_trial(cell, rep_seed(0, 0, 0))
    b = full_adult_trial(cell, rep_seed(0, 4, 0))  # another cell, same repetition
    c = full_adult_trial(cell, rep_seed(0, 0, 1))  # next repetition: a fresh split
    keys = [alpha_column(k, x) for x in FULL_ADULT_ALPHAS for k in ("error", "abs_dd")]
    assert [a[k] for k in keys] == [b[k] for k in keys]  # same rows in every cell
    assert [a[k] for k in keys] != [c[k] for k in keys]
    assert all(math.isnan(a[alpha_column("certified", x)]) for x in FULL_ADULT_ALPHAS)
    assert math.isnan(a["epsilon_spent"]) and math.isnan(a["delta"])
    # the row is the shared helper's prediction on the recomputed split
    tr, te = _split(rep_seed(0, 0, 0), adult.n)
    U = public_design(adult.X, adult.bounds, adult.categories)
    preds = nonprivate_lr_predict(U[tr], adult.A[tr], adult.y[tr], U[te], adult.A[te],
                                  FULL_ADULT_ALPHAS)
    for x, pred in zip(FULL_ADULT_ALPHAS, preds, strict=True):
        assert set(np.unique(pred)) <= {0, 1}
        assert a[alpha_column("error", x)] == pytest.approx(float(np.mean(pred != adult.y[te])))
        dd = abs(float(pred[adult.A[te] == 1].mean() - pred[adult.A[te] == 0].mean()))
        assert a[alpha_column("abs_dd", x)] == pytest.approx(dd)
        assert a[alpha_column("above", x)] == float(dd > x)


def test_one_rep_on_a_subsample_through_the_runner(tmp_path: Any) -> None:
    grid = full_adult_grid(n_rows=3000)
    exp = Experiment(name="fairclass-full-adult-tiny", description="test", grid=grid,
                     run_one=full_adult_trial, reps=1)
    res = run_experiment(exp, jobs=1, store_dir=tmp_path, progress=False)
    rows = res.table.to_pylist()
    assert len(rows) == 5
    assert {r["train_rows"] for r in rows} == {2100}
    assert {r["test_rows"] for r in rows} == {900}
    for r in rows:
        for x in FULL_ADULT_ALPHAS:
            assert 0.0 <= r[alpha_column("error", x)] <= 1.0
            assert r[alpha_column("above", x)] == float(r[alpha_column("abs_dd", x)] > x)


def test_public_design_is_scaled_and_one_hot(adult: Any) -> None:
    U = public_design(adult.X[:500], adult.bounds, adult.categories)
    n_num = sum(b is not None for b in adult.bounds)
    assert U.shape == (500, n_num + sum(len(c) for c in adult.categories.values()))
    assert U.min() >= 0.0 and U.max() <= 1.0
    # every categorical block has exactly one 1 per row, in the value's public position
    pos = 0
    for j, b in enumerate(adult.bounds):
        width = 1 if b is not None else len(adult.categories[j])
        if b is None:
            block = U[:, pos:pos + width]
            assert np.all(block.sum(axis=1) == 1.0)
            expect = [adult.categories[j].index(v) for v in adult.X[:500, j]]
            assert np.array_equal(block.argmax(axis=1), expect)
        pos += width
    age = U[:, 0]
    assert np.allclose(age, (adult.X[:500, 0].astype(float) - 17.0) / (90.0 - 17.0))
    with pytest.raises(InvalidParameterError, match="workclass"):
        three_features(np.array([[30.0, "Pirate", 1.0, "x", 10.0]], dtype=object))


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"method": "svm", "epsilon": 1.0}, "method='svm'"),
        ({"method": "linear_all", "epsilon": math.inf}, "finite"),
        ({"method": "nonprivate_lr", "epsilon": 1.0}, "not private"),
        ({"method": "kernel_3", "epsilon": 1.0, "alphas": "0.05,1.5"}, "alphas"),
    ],
)
def test_bad_cells_name_the_parameter(params: dict[str, Any], match: str) -> None:
    cell = {**full_adult_grid()[0], **params}
    with pytest.raises(InvalidParameterError, match=match):
        full_adult_trial(cell, rep_seed(0, 0, 0))
