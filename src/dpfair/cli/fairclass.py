"""``dpfair fair-classify``: a :class:`~dpfair.Session` release of a CDP-Fair model.

The command parses flags, opens a session on TRAIN (its ``--ledger``, or a one-release cap
of (ε, δ)) and calls :meth:`dpfair.Session.fit_fair_classifier`: the same validation,
pre-check, charge and withheld error text as the Python API. TEST is public by assumption
(its metrics are computed in the clear) and read outside the session. The studies run
through ``dpfair reproduce fairclass-…``.
"""

from __future__ import annotations

import json
import math
import pickle
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from typer.core import TyperCommand

from dpfair._advice import warn_free
from dpfair._atomic import atomic_open, write_text_atomic
from dpfair._errors import InvalidParameterError
from dpfair.cli._ledger import (
    LedgerOption,
    SeedOption,
    ledger_row,
    ledger_summary,
    open_session,
    release_context,
)
from dpfair.cli._support import user_errors

__all__ = ["register"]



# --------------------------------------------------------------------------- parsing
def _is_number(tok: str) -> bool:
    try:
        float(tok)
    except ValueError:
        return False
    return True


def _is_option(tok: str) -> bool:
    return tok.startswith("--") or (tok.startswith("-") and len(tok) > 1 and not _is_number(tok))


def expand_multi_value_options(args: Sequence[str]) -> list[str]:
    """Rewrite ``--features F1 F2 …`` and ``--bounds LO HI LO HI …`` into repeated options.

    Click options take a fixed number of values; this lets users write the natural form
    ``--features Age Workclass --bounds 17 90 0 8`` (as well as ``--features Age,Workclass``
    or repeated flags). Values are taken up to the next option (negative numbers are values).
    """
    out: list[str] = []
    i = 0
    toks = list(args)
    while i < len(toks):
        tok = toks[i]
        if tok in ("--features", "--bounds"):
            j = i + 1
            vals: list[str] = []
            while j < len(toks) and not _is_option(toks[j]):
                vals.append(toks[j])
                j += 1
            if tok == "--features":
                names = [v for part in vals for v in part.split(",") if v]
                if not names:
                    out.append(tok)
                    i += 1
                    continue
                for v in names:
                    out += [tok, v]
            else:
                if not vals:
                    out.append(tok)
                    i += 1
                    continue
                if len(vals) % 2:
                    raise typer.BadParameter(
                        f"--bounds takes pairs LO HI, one per feature; got {len(vals)} "
                        f"value(s): {' '.join(vals)}.",
                        param_hint="'--bounds'",
                    )
                for v in vals:
                    out += [tok, v]
            i = j
        else:
            out.append(tok)
            i += 1
    return out


class _MultiValueCommand(TyperCommand):
    """A Typer command whose ``--features``/``--bounds`` accept several values each."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        return super().parse_args(ctx, expand_multi_value_options(args))


# --------------------------------------------------------------------------- output
def _jsonable(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def _emit(payload: dict[str, Any], rows: list[tuple[str, str]], title: str, as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(payload, indent=2, default=_jsonable))
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column("field", style="bold")
    table.add_column("value")
    for label, text in rows:
        table.add_row(Text(label), Text(text))
    Console(soft_wrap=False).print(table)


def _fmt(v: float) -> str:
    return f"{v:.4g}"


#: ``--constraints`` spellings and the estimators' names for them.
_CONSTRAINTS = {"parity": "demographic_parity", "demographic_parity": "demographic_parity",
                "opportunity": "equal_opportunity", "equal_opportunity": "equal_opportunity"}


def _score_options(estimator: str, radius: str, constraints: str,
                   on_uncertified: str) -> dict[str, Any]:
    """The Session options of --estimator, --radius, --constraints and --uncertified.

    Only non-default choices are passed on, so a default command's ledger record is the one
    it always was. Values are checked by the estimator (one error naming the option).
    """
    if estimator not in ("auto", "kernel", "linear"):
        raise InvalidParameterError(
            f"--estimator={estimator!r}: expected 'auto', 'kernel' or 'linear'."
        )
    if on_uncertified not in ("warn", "raise"):
        raise InvalidParameterError(
            f"--uncertified={on_uncertified!r}: expected 'warn' or 'raise'."
        )
    out: dict[str, Any] = {}
    if estimator != "auto":
        out["estimator"] = estimator
    if radius != "auto":
        if radius == "box":
            out["radius"] = "box"
        else:
            try:
                value = float(radius)
            except ValueError:
                raise InvalidParameterError(
                    f"--radius={radius!r}: expected 'auto', 'box' or a positive number."
                ) from None
            if not (value > 0 and np.isfinite(value)):
                raise InvalidParameterError(
                    f"--radius={radius!r}: expected 'auto', 'box' or a positive number."
                )
            out["radius"] = value
    if constraints not in _CONSTRAINTS:
        raise InvalidParameterError(
            f"--constraints={constraints!r}: expected 'parity' or 'opportunity' (Fairlearn's "
            "names demographic_parity and equal_opportunity work too)."
        )
    if _CONSTRAINTS[constraints] != "demographic_parity":
        out["constraints"] = _CONSTRAINTS[constraints]
    if on_uncertified != "warn":
        out["on_uncertified"] = on_uncertified
    return out


# --------------------------------------------------------------------------- commands
def fair_classify(
    train: Annotated[
        Path, typer.Argument(metavar="TRAIN", help="Training data (CSV, .csv.gz or Parquet).")
    ],
    test: Annotated[Path, typer.Argument(metavar="TEST", help="Test data with the same columns.")],
    target: Annotated[str, typer.Option("--target", help="0/1 label column (1 = positive).")],
    sensitive: Annotated[str, typer.Option("--sensitive", help="0/1 sensitive-group column.")],
    features: Annotated[
        list[str],
        typer.Option(
            "--features",
            metavar="F1 F2 ...",
            help="Feature columns (several names after one flag, or comma-separated).",
        ),
    ],
    bounds: Annotated[
        list[float],
        typer.Option(
            "--bounds",
            metavar="LO HI [LO HI ...]",
            help=(
                "Public range of each feature, in --features order. Must come from outside "
                "knowledge (a measurement scale), never from the data's min/max."
            ),
        ),
    ],
    epsilon: Annotated[float, typer.Option("--epsilon", help="Total ε > 0.")],
    delta: Annotated[float, typer.Option("--delta", help="Total δ in (0, 1).")],
    alpha: Annotated[float, typer.Option("--alpha", help="Disparity cap α in (0, 1).")],
    seed: SeedOption = None,
    cross_fit: Annotated[
        bool | None,
        typer.Option(
            "--cross-fit/--no-cross-fit",
            help="Two fits with swapped halves (default: no for 'certified', yes for 'target').",
            show_default=False,
        ),
    ] = None,
    threshold_rule: Annotated[
        str,
        typer.Option(
            "--threshold-rule",
            help=(
                "certified | target. 'certified': P(|DD| > alpha in the population and "
                "the fit reports certified) <= --fail-prob (a warning says when it is not "
                "certified). 'target': aim at alpha on the calibration half (no "
                "certificate; about half of the fits exceed alpha)."
            ),
        ),
    ] = "certified",
    fail_prob: Annotated[
        float, typer.Option("--fail-prob", help="beta of the certified rule.")
    ] = 0.05,
    clip: Annotated[
        bool, typer.Option("--clip", help="Clip features into --bounds instead of failing.")
    ] = False,
    bandwidth: Annotated[
        float | None,
        typer.Option(
            "--bandwidth",
            help="Kernel bandwidth in unit-box units (default: rule).",
            show_default=False,
        ),
    ] = None,
    save_model: Annotated[
        Path | None,
        typer.Option(
            "--save-model",
            help=(
                "Write the released model: .json for plain numbers, anything else for a "
                "pickle of the fitted estimator. Neither contains training rows."
            ),
            show_default=False,
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = (
        False
    ),
    aggregate: Annotated[
        str,
        typer.Option(
            "--aggregate",
            help=(
                "auto | always | never. Fit from DuckDB aggregates of TRAIN (out of core: "
                "O(grid + score bins + batch) memory) instead of loading it; 'auto' does so "
                "for training files over 2^24 rows (a public count). Same privacy; the "
                "halves come from a seeded hash of the row position and the calibration "
                "scores are rounded to a 2^-15 lattice (see the Python API: "
                "dpfair.fairclass, fit from file). TEST is always loaded."
            ),
        ),
    ] = "auto",
    estimator: Annotated[
        str,
        typer.Option(
            "--estimator",
            help=(
                "auto | kernel | linear. The group score: 'kernel' (private kernel "
                "estimate on a grid, for up to 3 features), 'linear' (private logistic "
                "regression, for many features); 'auto' picks kernel for up to 3 features."
            ),
        ),
    ] = "auto",
    radius: Annotated[
        str,
        typer.Option(
            "--radius",
            help=(
                "With the linear score: auto | box | a number. The L2 radius rows are "
                "clipped to after centring: 'auto' releases it privately (4% of the "
                "score's epsilon, in the ledger), 'box' is the public worst case (nothing "
                "clipped), a number is a public radius known from outside the data."
            ),
        ),
    ] = "auto",
    constraints: Annotated[
        str,
        typer.Option(
            "--constraints",
            help=(
                "parity | opportunity: the gap --alpha caps, in positive-decision rates "
                "(demographic parity, the default) or in true-positive rates (equal "
                "opportunity). Fairlearn's constraint names are accepted too."
            ),
            show_default=False,
        ),
    ] = "parity",
    on_uncertified: Annotated[
        str,
        typer.Option(
            "--uncertified",
            help=(
                "warn | raise. What an uncertified fit does: 'warn' reports the model "
                "(certified false); 'raise' exits 2 with no model. Either way the budget "
                "is spent."
            ),
        ),
    ] = "warn",
    ledger: LedgerOption = None,
    plan: Annotated[
        bool,
        typer.Option(
            "--plan",
            help=(
                "Print what a certified fit can promise (margin, aim, smallest alpha, "
                "P(certified) at --alpha) from public numbers only — TRAIN's row count, "
                "(epsilon, delta), --fail-prob, --min-share — and exit: no data are "
                "read, nothing is fitted or charged."
            ),
        ),
    ] = False,
    calibration_share: Annotated[
        str,
        typer.Option(
            "--cal-share",
            help=(
                "A number in [0.1, 0.9] or 'auto': the calibration half's share of TRAIN's "
                "rows (in memory, no cross-fitting). 'auto' needs --min-share and picks "
                "the smallest share in 0.5 to 0.7 that the plan expects to certify --alpha."
            ),
        ),
    ] = "0.5",
    min_group_share: Annotated[
        float | None,
        typer.Option(
            "--min-share",
            help=(
                "With --plan or --cal-share auto: a public lower bound on the "
                "smaller group's share P(A = a) "
                "(with --constraints opportunity: P(A = a, Y = 1)), from outside "
                "knowledge, never measured on TRAIN."
            ),
            show_default=False,
        ),
    ] = None,
) -> None:
    """Fit CDP-Fair on TRAIN ((ε, δ)-DP) and report test error, |DD| and the privacy spent.

    The test metrics are computed on TEST in the clear: they are not private with respect to
    TEST (keep TEST out of any release that must be private). A TEST with TRAIN's content,
    or with a registered ledger of its own, is refused. With ``--plan`` nothing is fitted:
    the certificate's plan (:func:`dpfair.fairclass.plan_certification`) is printed.
    """
    from dpfair._validation import check_in_open_interval, check_positive
    from dpfair.data.fairclass_sql import read_columns
    from dpfair.fairclass.metrics import (
        demographic_disparity,
        equal_opportunity_difference,
        misclassification_error,
    )
    from dpfair.privacy import Budget

    if plan:
        with user_errors():
            _print_plan(train, epsilon, delta, alpha, fail_prob, min_group_share, cross_fit,
                        as_json, constraints, calibration_share)
        return
    with user_errors():
        share_option = _calibration_share_option(
            calibration_share, train, epsilon, delta, alpha, fail_prob, min_group_share,
            cross_fit, constraints)
        if aggregate not in ("auto", "always", "never"):
            raise InvalidParameterError(
                f"--aggregate={aggregate!r}: expected 'auto', 'always' or 'never'."
            )
        if len(bounds) != 2 * len(features):
            raise InvalidParameterError(
                f"--bounds: {len(bounds)} value(s) for {len(features)} feature(s); give one "
                "public LO HI pair per feature, in --features order."
            )
        pairs = [(float(bounds[2 * k]), float(bounds[2 * k + 1])) for k in range(len(features))]
        cols = [*features, target, sensitive]
        request = Budget.approx(check_positive("epsilon", epsilon),
                                check_in_open_interval("delta", delta, 0.0, 1.0))
        _check_test_is_public(train, test)
        te = read_columns(test, cols)  # public TEST: read (and failing) before any charge
        # the ledger of the TRAIN file (TEST is not private)
        session = open_session(train, ledger=ledger, request=request, seed=seed)
        with release_context(ledger):
            clf = session.fit_fair_classifier(
                features=list(features), target=target, sensitive=sensitive,
                epsilon=epsilon, delta=delta, alpha=alpha, feature_bounds=pairs,
                cross_fit=cross_fit, aggregate=aggregate, bandwidth=bandwidth, clip=clip,
                threshold_rule=threshold_rule, fail_prob=fail_prob,
                **_score_options(estimator, radius, constraints, on_uncertified),
                **share_option,
            )
            warn_free(request)  # free: a large epsilon leaves little privacy
        rec = session.last_record
        assert rec is not None
        use_aggregates = bool(rec.params.get("aggregated"))
        if use_aggregates:
            n_train = int(clf.outofcore_.n)
        else:
            from dpfair.data import row_count

            n_train = row_count(train)  # public (replace-one neighbours)
        certified = getattr(clf, "certified_", None)
        spent = clf.privacy_spent_
        assert spent is not None
        charged = ledger_summary(session, ledger)
        Xte = np.column_stack([te[f] for f in features])
        pred = clf.predict(Xte, sensitive_features=te[sensitive])
        proba = clf.predict_proba(Xte, sensitive_features=te[sensitive])[:, 1]
        err = misclassification_error(te[target], pred)
        dd = demographic_disparity(pred, te[sensitive])
        exp_err = misclassification_error(te[target], proba)
        exp_dd = demographic_disparity(proba, te[sensitive])
        opportunity = _CONSTRAINTS.get(constraints) == "equal_opportunity"
        eod = equal_opportunity_difference(te[target], pred, te[sensitive]) if opportunity else None
        capped = "|EOD|" if opportunity else "|DD|"
        saved = None
        if save_model is not None:
            saved = _save_model(clf, save_model)
        payload: dict[str, Any] = {
            "train": str(train),
            "test": str(test),
            "n_train": n_train,
            "n_test": int(Xte.shape[0]),
            "features": list(features),
            "feature_bounds": [list(b) for b in pairs],
            "alpha": alpha,
            "test_error": err,
            "test_dd": dd,
            "test_abs_dd": abs(dd),
            "expected_test_error": exp_err,
            "expected_test_abs_dd": abs(exp_dd),
            "constraints": _CONSTRAINTS[constraints],
            "estimator": clf.estimator_ if hasattr(clf, "estimator_") else estimator,
            "test_abs_eod": None if eod is None else abs(eod),
            "privacy_spent": spent.to_dict(),
            "privacy_ledger": clf.privacy_ledger_.to_dict() if clf.privacy_ledger_ else None,
            "bandwidth": clf.bandwidth_,
            "tau": clf.tau_.tolist(),
            "pi": clf.pi_.tolist(),
            "cross_fit": len(clf.folds_) == 2,
            "threshold_rule": threshold_rule,
            "certified": certified,
            "certificates": [c.to_dict() for c in (clf.certificates_ or ())],
            "seed": seed,
            "saved_model": str(saved) if saved else None,
            "aggregated": use_aggregates,
            "score_resolution": clf.outofcore_.score_resolution if use_aggregates else None,
        }
        rows = [
            ("data", f"train {train} (n = {n_train}), test {test} (n = {Xte.shape[0]})"),
            (
                "features",
                ", ".join(
                    f"{f} [{lo:g}, {hi:g}]" for f, (lo, hi) in zip(features, pairs, strict=True)
                ),
            ),
            ("alpha", _fmt(alpha)),
            (
                "certified",
                "n/a (threshold rule 'target': no certificate)"
                if certified is None
                else (
                    f"yes: P({capped} > {alpha:g} in the population and certified) <= "
                    f"{fail_prob:g}"
                    if certified
                    else "NO: alpha is not a certified cap for this model (see warning)"
                ),
            ),
            ("test error", _fmt(err) + f"  (expected over the coin: {_fmt(exp_err)})"),
            ("test |DD|", _fmt(abs(dd)) + f"  (expected: {_fmt(abs(exp_dd))}; signed {dd:+.4g})"),
            *([("test |EOD|", _fmt(abs(eod)))] if eod is not None else []),
            ("privacy spent", f"({spent.epsilon:.6g}, {spent.delta:.3g})-DP, replace-one"),
            ("score", payload["estimator"]),
            ("bandwidth", "n/a (linear score)" if clf.bandwidth_ is None
             else _fmt(clf.bandwidth_)),
            ("tau", ", ".join(_fmt(t) for t in clf.tau_)),
            ("seed", f"{seed} (reproduction mode)" if seed is not None else "none (OS entropy)"),
            (
                "training input",
                "DuckDB aggregates (out of core; position-hash split, scores on a "
                f"{clf.outofcore_.score_resolution:.3g} lattice)"
                if use_aggregates
                else "loaded in memory",
            ),
        ]
        if saved is not None:
            rows.append(("saved model", str(saved)))
        if charged:
            payload["ledger"] = charged
            rows += ledger_row(charged)
    _emit(payload, rows, "CDP-Fair (single server)", as_json)


def _parse_share(calibration_share: str) -> float | str:
    """``--cal-share``: ``"auto"`` or a number (range checked by the planner/estimator)."""
    if calibration_share == "auto":
        return "auto"
    try:
        return float(calibration_share)
    except ValueError:
        raise InvalidParameterError(
            f"--cal-share={calibration_share!r}: expected a number in [0.1, 0.9] or "
            "'auto'."
        ) from None


def _calibration_share_option(calibration_share: str, train: Path, epsilon: float,
                              delta: float, alpha: float, fail_prob: float,
                              min_group_share: float | None, cross_fit: bool | None,
                              constraints: str) -> dict[str, Any]:
    """The Session option of ``--cal-share`` (nothing for the default ½).

    ``auto`` is the plan's choice (:func:`dpfair.fairclass.plan_certification` with
    ``calibration_share="auto"``): a function of TRAIN's row count (public under
    replace-one neighbours) and the flags only, made before any row is read.
    """
    share = _parse_share(calibration_share)
    if share == "auto":
        from dpfair.data import row_count
        from dpfair.fairclass import plan_certification

        if min_group_share is None:
            raise InvalidParameterError(
                "--cal-share auto needs --min-share: a public lower bound on the "
                "smaller group's share, from outside knowledge, not from TRAIN."
            )
        if constraints not in _CONSTRAINTS:
            return {}  # _score_options names the bad --constraints
        share = plan_certification(
            row_count(train), epsilon, delta, min_group_share, fail_prob,
            constraints=_CONSTRAINTS[constraints], cross_fit=bool(cross_fit),
            calibration_share="auto", alpha=alpha,
        ).calibration_share
    return {} if share == 0.5 else {"calibration_share": float(share)}


def _print_plan(train: Path, epsilon: float, delta: float, alpha: float, fail_prob: float,
                min_group_share: float | None, cross_fit: bool | None, as_json: bool,
                constraints: str = "parity", calibration_share: str = "0.5") -> None:
    """``--plan``: the certification plan from TRAIN's row count (public) and the flags."""
    from dpfair.data import row_count
    from dpfair.fairclass import plan_certification

    share = _parse_share(calibration_share)
    if constraints not in _CONSTRAINTS:
        raise InvalidParameterError(
            f"--constraints={constraints!r}: expected 'parity' or 'opportunity' (Fairlearn's "
            "names demographic_parity and equal_opportunity work too)."
        )
    eo = _CONSTRAINTS[constraints] == "equal_opportunity"
    if min_group_share is None:
        share = "P(A = a, Y = 1) (e.g. 0.1)" if eo else "P(A = a) (e.g. 0.3)"
        raise InvalidParameterError(
            f"--plan needs --min-share: a public lower bound on the smaller group's "
            f"share {share}, from outside knowledge, not from TRAIN."
        )
    n = row_count(train)  # public under replace-one neighbours
    result = plan_certification(n, epsilon, delta, min_group_share, fail_prob,
                                constraints=_CONSTRAINTS[constraints],
                                cross_fit=bool(cross_fit), calibration_share=share,
                                alpha=alpha)
    p_alpha = result.certification_probability(alpha)
    payload = {**result.to_dict(), "alpha": alpha, "certification_probability": p_alpha}
    rows = [("train", f"{train} (n = {n}, a public count; no other data read)"),
            *result.summary_rows(),
            (f"P(certified) at --alpha={alpha:g}", f"{p_alpha:.3f}")]
    _emit(payload, rows, "CDP-Fair certification plan (public numbers only)", as_json)


def _check_test_is_public(train: Path, test: Path) -> None:
    """Refuse a TEST whose metrics would be a clear release of private rows.

    TEST's error and |DD| are printed unnoised, so TEST must be public: not TRAIN's
    content (the rows the private fit protects), and not data that have a registered
    ledger (data someone declared private, THREATS.md rule 11). Checked by content
    (SHA-256), before either file's rows are read.
    """
    from dpfair.privacy import LedgerFile, fingerprint_file

    if not (train.is_file() and test.is_file()):
        return  # the readers name the missing file
    if fingerprint_file(train) == fingerprint_file(test):
        raise InvalidParameterError(
            f"TEST={test}: has the same content as TRAIN; its metrics are printed in the "
            "clear (not private), so they would release the training rows. Use a held-out "
            "public test set."
        )
    registered = LedgerFile.registered(test)
    if registered is not None:
        raise InvalidParameterError(
            f"TEST={test}: these data have the registered ledger {registered.path}, so they "
            "are private; TEST's metrics are printed in the clear (not private). Use a "
            "public test set."
        )


def _save_model(clf: Any, path: Path) -> Path:
    path = path.expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    # Atomically (temporary file + rename): an interrupted save leaves the old model or none.
    if path.suffix.lower() == ".json":
        write_text_atomic(path, json.dumps(clf.export_released_model(), default=_jsonable))
    else:
        with atomic_open(path) as fh:
            pickle.dump(clf, fh, protocol=pickle.HIGHEST_PROTOCOL)
    return path


def register(app: typer.Typer) -> None:
    """Add ``fair-classify`` to the ``dpfair`` Typer app."""
    app.command("fair-classify", cls=_MultiValueCommand)(fair_classify)
