"""``dpfair fdp …``: the FDP-Fair protocol as separate processes exchanging signed messages.

Register on the main app with ``register(app)``; also runnable standalone as
``python -m dpfair.cli.fdp fdp …``.

    dpfair fdp keygen          --out keys/NAME            (each party, once: NAME.key + NAME.pub)
    dpfair fdp centre setup    --key centre.key --site ID:N:EPS:DELTA --site-key ID=ID.pub … \\
                               --bounds LO --bounds HI … --alpha A --out setup.json
    dpfair fdp site round1     DATA --setup setup.json --site-id ID --key ID.key \\
                               --centre-key centre.pub --max-epsilon E --max-delta D \\
                               --features F1,F2 --target Y --sensitive A \\
                               --state ID.state.json --out ID.r1.json
    dpfair fdp centre aggregate R1 … --setup setup.json --key centre.key --out model.json
    dpfair fdp site round2     DATA (same site options) --model model.json --out ID.r2.json
    dpfair fdp centre finalize R2 … --setup setup.json --key centre.key --model model.json \\
                               --out released.json
    dpfair fdp predict         released.json DATA --centre-key centre.pub --features … \\
                               --sensitive A [--target Y]

A site trusts only what it pins itself: the centre's public key (``--centre-key``) and its
own key pair (``--key``); a setup signed by another key, or pinning another key for the
site, is refused. The site's budget is its own (``--ledger`` and/or ``--max-epsilon``/
``--max-delta``), checked before its data are read; each round of a run is recorded once in
the site's ledger (see ``_site_budget.py``). The ``--state`` file stays at the site (mode
0600): the entropy of the data-independent split and a fingerprint of the data, never
anything that determines a release's noise.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from dpfair._atomic import write_text_atomic
from dpfair._errors import InvalidParameterError
from dpfair.cli._support import user_errors

if TYPE_CHECKING:
    from dpfair.fairclass.federated import Envelope, ProtocolConfig, SiteSpec

# Each command imports what it uses, inside its body: `dpfair fdp keygen` loads the key
# module only, never DuckDB, scikit-learn or pandas (tests/cli/test_startup_modules.py).

__all__ = ["register"]

#: Site files above this size are read out of core by default (``--aggregate auto``).
#: The two ways a site splits its rows; round 2 must use round 1's (same halves).
_SPLITS = {False: "permutation", True: "position"}
#: A site's state file is a few hundred bytes.
_STATE_MAX_BYTES = 64 * 2**10
_STATE_FORMAT = "dpfair-fdp-site-state"
_STATE_KEYS = frozenset(
    {"format", "version", "site_id", "protocol_id", "split", "split_entropy", "fingerprint"}
)
_SEED_WARNING = (
    "dpfair: warning: --seed makes this release's noise reproducible by anyone who knows "
    "the seed (it is mixed with the site id and the run id, and never stored). Use it for "
    "tests and studies only, never on real data."
)


def _print(payload: dict[str, Any]) -> None:
    typer.echo(json.dumps(payload, indent=2, sort_keys=True))


DataArg = Annotated[Path, typer.Argument(help="The site's own CSV/Parquet file.")]
SetupOpt = Annotated[Path, typer.Option("--setup", help="The centre's signed setup message.")]
SiteOpt = Annotated[str, typer.Option("--site-id", help="This site's id (as in the setup).")]
FeatOpt = Annotated[str, typer.Option("--features", help="Comma-separated feature columns.")]
TargetOpt = Annotated[str, typer.Option("--target", help="Label column (0/1).")]
SensOpt = Annotated[str, typer.Option("--sensitive", help="Group column (0/1).")]
StateOpt = Annotated[
    Path, typer.Option("--state", help="Local state file (mode 0600, never sent).")
]
OutOpt = Annotated[Path, typer.Option("--out", "-o", help="Message file to write.")]
KeyOpt = Annotated[
    Path, typer.Option("--key", help="This party's private key (NAME.key from keygen).")
]
CentreKeyOpt = Annotated[
    Path,
    typer.Option(
        "--centre-key",
        help="The centre's public key (centre.pub), obtained and checked by this party.",
    ),
]
LedgerOpt = Annotated[
    Path | None,
    typer.Option("--ledger", help="The site's privacy ledger file (its own cap)."),
]
MaxEpsOpt = Annotated[
    float | None,
    typer.Option("--max-epsilon", help="The site's own ε cap (site-local journal)."),
]
MaxDeltaOpt = Annotated[
    float | None, typer.Option("--max-delta", help="The site's own δ cap (with --max-epsilon).")
]
SeedOpt = Annotated[
    int | None,
    typer.Option(
        "--seed",
        help="Tests/studies only: reproducible noise, mixed with site and run ids "
        "(default and for real data: fresh OS entropy).",
    ),
]
AggOpt = Annotated[
    str,
    typer.Option(
        "--aggregate",
        help=(
            "auto | always | never. Read DATA out of core (DuckDB aggregates, streamed "
            "batches; position-hash split). 'auto': in round 1 for files over "
            "2^24 rows (a public count), in round 2 as in round 1. Same privacy."
        ),
    ),
]


def _once(action: Callable[[], object]) -> Callable[[], None]:
    """``action`` run at most once (a round is charged once, on success or failure)."""
    done: list[bool] = []

    def run() -> None:
        if not done:
            action()
            done.append(True)

    return run


def _columns(features: str, target: str | None, sensitive: str) -> list[str]:
    names = [f.strip() for f in features.split(",") if f.strip()]
    return [*names, *([target] if target else []), sensitive]


def _check_aggregate(aggregate: str) -> None:
    if aggregate not in ("auto", "always", "never"):
        raise InvalidParameterError(
            f"--aggregate={aggregate!r}: expected 'auto', 'always' or 'never'."
        )


def _check_seed(seed: int | None) -> None:
    if seed is not None:
        from dpfair.fairclass.federated import seed_of

        seed_of(seed, name="--seed")  # refuses a negative seed
        typer.echo(_SEED_WARNING, err=True)


def _read_state(path: Path, site_id: str, protocol_id: str) -> dict[str, Any]:
    """Parse the site's state file strictly (one-line errors for truncated or odd files)."""
    where = f"--state {str(path)!r}"
    if not path.is_file():
        raise InvalidParameterError(f"{where}: no such file (run round 1 first).")
    if path.stat().st_size > _STATE_MAX_BYTES:
        raise InvalidParameterError(f"{where}: too large to be a dpfair FDP state file.")
    try:
        st = json.loads(path.read_bytes())
    except (ValueError, UnicodeDecodeError):
        raise InvalidParameterError(
            f"{where}: truncated or not JSON; it is not a usable FDP state file."
        ) from None
    if (
        not isinstance(st, dict)
        or set(st) != _STATE_KEYS
        or st["format"] != _STATE_FORMAT
        or st["version"] != 1
        or st["split"] not in _SPLITS.values()
        or not isinstance(st["split_entropy"], str)
        or not re.fullmatch(r"[0-9]{1,40}", st["split_entropy"])
        or not isinstance(st["fingerprint"], str)
    ):
        raise InvalidParameterError(
            f"{where}: malformed FDP state file (written by another dpfair version, edited "
            "or corrupted)."
        )
    if st["site_id"] != site_id or st["protocol_id"] != protocol_id:
        raise InvalidParameterError(f"{where}: belongs to another site or run.")
    if int(st["split_entropy"]) >= 2**128:
        raise InvalidParameterError(f"{where}: malformed split entropy.")
    return st


def _parse_radius(text: str) -> float | str:
    """``--radius``: "auto", "box" or a positive number (validated by the setup)."""
    if text in ("auto", "box"):
        return text
    try:
        value = float(text)
    except ValueError:
        raise InvalidParameterError(
            f"--radius={text!r}: expected 'auto', 'box' or a positive number."
        ) from None
    if not (math.isfinite(value) and value > 0):
        raise InvalidParameterError(
            f"--radius={text!r}: expected 'auto', 'box' or a positive number."
        )
    return value


def _parse_categories(items: list[str]) -> dict[int, list[str]]:
    """``["3=a,b,c", …]`` → ``{3: ["a", "b", "c"], …}`` (refused when malformed)."""
    out: dict[int, list[str]] = {}
    for item in items:
        head, sep, tail = item.partition("=")
        vals = [v.strip() for v in tail.split(",")]
        if not sep or not head.strip().isdigit() or not all(vals) or len(set(vals)) != len(vals):
            raise InvalidParameterError(
                f"--categories {item!r}: expected J=CAT1,CAT2,... with J the 0-based feature "
                "position and distinct, non-empty public categories."
            )
        j = int(head)
        if j in out:
            raise InvalidParameterError(f"--categories: feature {j} is given twice.")
        out[j] = vals
    return out


def _merge_bounds(
    numeric: list[tuple[float, float]], cats: dict[int, list[str]]
) -> list[tuple[float, float] | None]:
    """Feature bounds in feature order: the --bounds pairs for the numeric features, None
    at the --categories positions."""
    d = len(numeric) + len(cats)
    if cats and max(cats) >= d:
        raise InvalidParameterError(
            f"--categories: feature position {max(cats)} but only {d} features "
            f"({len(numeric)} --bounds pairs + {len(cats)} categorical)."
        )
    it = iter(numeric)
    return [None if j in cats else next(it) for j in range(d)]


def _parse_site(text: str) -> SiteSpec:
    from dpfair.fairclass.federated import SiteSpec

    parts = text.split(":")
    if len(parts) != 4:
        raise InvalidParameterError(f"--site {text!r}: expected ID:N:EPSILON:DELTA.")
    sid, n, eps, dl = parts
    if not re.fullmatch(r"[0-9]+", n.strip()):
        raise InvalidParameterError(
            f"--site {text!r}: N={n!r} must be the site's number of rows (an integer)."
        )
    try:
        epsilon, delta = float(eps), float(dl)
    except ValueError:
        raise InvalidParameterError(
            f"--site {text!r}: EPSILON and DELTA must be numbers (e.g. 1 and 1e-6)."
        ) from None
    return SiteSpec(sid, int(n), epsilon, delta)


def _parse_site_keys(items: list[str], site_ids: list[str]) -> dict[str, str]:
    from dpfair.fairclass.federated import load_public_key

    keys: dict[str, str] = {}
    for item in items:
        sid, sep, file = item.partition("=")
        if not sep or not sid or not file:
            raise InvalidParameterError(f"--site-key {item!r}: expected ID=PATH/TO/ID.pub.")
        if sid in keys:
            raise InvalidParameterError(f"--site-key: two keys for site {sid!r}.")
        keys[sid] = load_public_key(Path(file), option=f"--site-key {sid}")
    missing = [s for s in site_ids if s not in keys]
    extra = [s for s in keys if s not in site_ids]
    if missing or extra:
        raise InvalidParameterError(
            f"--site-key: need one public key per --site; missing {missing}, not a site "
            f"{extra}."
        )
    return keys


def register(app: typer.Typer) -> None:
    """Add the ``fdp`` sub-app (``keygen``, ``site`` and ``centre`` groups, ``predict``)."""
    fdp = typer.Typer(
        help="FDP-Fair: federated DP fair classification (paper 003).", no_args_is_help=True
    )
    site_app = typer.Typer(
        help="Site role: rounds 1 and 2 on the site's own data.", no_args_is_help=True
    )
    centre_app = typer.Typer(help="Centre role: setup, aggregate, finalize.", no_args_is_help=True)
    fdp.add_typer(site_app, name="site")
    fdp.add_typer(centre_app, name="centre")
    app.add_typer(fdp, name="fdp")
    __import__("dpfair.cli.flower_local", fromlist=["register"]).register(fdp)  # flower-local

    # ------------------------------------------------------------------ keygen
    @fdp.command("keygen")
    def keygen(
        out: Annotated[
            Path, typer.Option("--out", "-o", help="DIR/NAME: writes NAME.key and NAME.pub.")
        ],
    ) -> None:
        """Write an Ed25519 key pair: NAME.key (private, mode 0600) and NAME.pub."""
        from dpfair.fairclass.federated import generate_keypair, key_fingerprint

        with user_errors():
            key_path, pub_path, public = generate_keypair(out)
            _print(
                {
                    "private_key": str(key_path),
                    "public_key": str(pub_path),
                    "fingerprint": key_fingerprint(public),
                }
            )

    # ------------------------------------------------------------------ centre setup
    @centre_app.command("setup")
    def centre_setup(
        site: Annotated[
            list[str], typer.Option("--site", help="ID:N:EPSILON:DELTA, repeat per site.")
        ],
        site_key: Annotated[
            list[str],
            typer.Option("--site-key", help="ID=PATH/ID.pub: each site's public key."),
        ],
        key: KeyOpt,
        bounds: Annotated[
            list[float],
            typer.Option("--bounds", help="LO HI per numeric feature, in feature order, "
                         "repeat: --bounds 0 --bounds 1 … (none for --categories columns)."),
        ],
        alpha: Annotated[float, typer.Option("--alpha", help="Disparity tolerance α.")],
        out: OutOpt,
        rho: Annotated[float, typer.Option("--rho", help="Tolerance band ρ.")] = 0.03,
        c_omega: Annotated[float, typer.Option("--c-omega", help="C_ω of the band ω.")] = 0.1,
        margin: Annotated[float, typer.Option("--margin", help="Target α − margin.")] = 0.0,
        correction: Annotated[
            str, typer.Option("--correction", help="alg6, alg4, isotonic or none.")
        ] = "alg6",
        tail: Annotated[str, typer.Option("--tail", help="consistent or dyadic.")] = "consistent",
        rule: Annotated[
            str, typer.Option("--rule", help="Threshold rule: confidence (default) or paper.")
        ] = "confidence",
        fail_prob: Annotated[
            float, typer.Option("--fail-prob", help="β of the confidence rule.")
        ] = 0.05,
        depth: Annotated[
            int | None,
            typer.Option("--depth", help="Tree depth M (default: 8, or the paper's rule)."),
        ] = None,
        bandwidth: Annotated[
            float | None, typer.Option("--bandwidth", help="Common bandwidth (unit box).")
        ] = None,
        cross_fit: Annotated[
            bool | None,
            typer.Option("--cross-fit/--no-cross-fit", help="Default: only with --rule paper."),
        ] = None,
        estimator: Annotated[
            str,
            typer.Option(
                "--estimator",
                help="Group score: kernel (grid, d <= 3 advisable), rff (random Fourier "
                "features) or linear (one round of noisy sufficient statistics; tens to "
                "hundreds of columns).",
            ),
        ] = "kernel",
        features_dim: Annotated[
            int | None,
            typer.Option("--features-dim", help="D of --estimator rff (even, <= 4096)."),
        ] = None,
        categories: Annotated[
            list[str] | None,
            typer.Option(
                "--categories",
                help="J=CAT1,CAT2,...: feature J (0-based, in --features order) is categorical "
                "with these public categories (one-hot; rff or linear); repeat per column. "
                "Values are matched to the files as text.",
            ),
        ] = None,
        radius: Annotated[
            str | None,
            typer.Option("--radius", help="--estimator linear: auto (default: each site "
                         "releases its own clip radius, a noisy median of its row norms "
                         "charged to its ledger), box (no clipping) or a public number "
                         "(half-widths of the box)."),
        ] = None,
        radius_share: Annotated[
            float | None,
            typer.Option("--radius-share", help="With --radius auto: the radius release's "
                         "share of round 1's budget mu_1^2 (default 0.04); public, signed in "
                         "the setup."),
        ] = None,
        constraints: Annotated[
            str,
            typer.Option("--constraints", help="demographic_parity (cap |DD|, default) or "
                         "equal_opportunity (cap the true-positive-rate difference)."),
        ] = "demographic_parity",
    ) -> None:
        """Write the signed ``setup`` (sites, their pinned keys, grid, M, α, ρ, C_ω)."""
        from dpfair.fairclass.federated import (
            CENTRE,
            key_fingerprint,
            load_signer,
            make_protocol,
            write_message,
        )

        with user_errors():
            specs = [_parse_site(s) for s in site]
            if len(bounds) % 2:
                raise InvalidParameterError("--bounds: give LO HI pairs, one per feature.")
            cats = _parse_categories(categories or [])
            fb = _merge_bounds(
                [(bounds[i], bounds[i + 1]) for i in range(0, len(bounds), 2)], cats
            )
            signer = load_signer(key, CENTRE, option="--key")
            keys = {CENTRE: signer.public, **_parse_site_keys(site_key, [s.site_id for s in specs])}
            cfg = make_protocol(
                specs,
                feature_bounds=fb,
                alpha=alpha,
                alpha_margin=margin,
                tolerance=rho,
                c_omega=c_omega,
                correction=correction,
                tail=tail,
                threshold_rule=rule,
                fail_prob=fail_prob,
                depth=depth,
                bandwidth=bandwidth,
                cross_fit=cross_fit,
                keys=keys,
                estimator=estimator,
                features_dim=features_dim if estimator == "rff" else None,
                categories=cats or None,
                radius=None if radius is None else _parse_radius(radius),
                radius_share=radius_share,
                constraints=constraints,
            )
            write_message(out, cfg.to_envelope(), signer)
            _print(
                {
                    "setup": str(out),
                    "protocol_id": cfg.protocol_id,
                    "depth": cfg.depth,
                    "bandwidth": cfg.bandwidth,
                    "grid_shape": list(cfg.grid_shape),
                    **({"estimator": "rff", "features_dim": cfg.features_dim}
                       if cfg.is_rff else {}),
                    **({"estimator": "linear", "radius": cfg.radius, "width":
                        cfg.linear_width} if cfg.is_linear else {}),
                    **({"radius_share": cfg.radius_share} if cfg.private_radius else {}),
                    **cfg.constraint_fields(),
                    "key_fingerprints": {p: key_fingerprint(k) for p, k in cfg.keys},
                }
            )

    # ------------------------------------------------------------------ site round 1
    @site_app.command("round1")
    def site_round1(
        data: DataArg,
        setup: SetupOpt,
        site_id: SiteOpt,
        key: KeyOpt,
        centre_key: CentreKeyOpt,
        features: FeatOpt,
        target: TargetOpt,
        sensitive: SensOpt,
        state: StateOpt,
        out: OutOpt,
        ledger: LedgerOpt = None,
        max_epsilon: MaxEpsOpt = None,
        max_delta: MaxDeltaOpt = None,
        seed: SeedOpt = None,
        aggregate: AggOpt = "auto",
    ) -> None:
        """Round 1 on this site's training half: write the signed ``round1`` message."""
        from dpfair.fairclass.federated import (
            charge_round,
            check_site_columns,
            make_site,
            open_site_ledger,
            preflight,
            site_setup,
            write_message,
        )
        from dpfair.session import charged_on_failure

        with user_errors():
            _check_aggregate(aggregate)
            _check_seed(seed)
            cfg, signer = site_setup(setup, site_id, key, centre_key)
            check_site_columns(cfg, site_id, features, target, sensitive)  # before any charge
            if state.exists():
                raise InvalidParameterError(
                    f"--state {str(state)!r} already exists; a state file is never "
                    "overwritten (use one state file per run)."
                )
            led, per_run = open_site_ledger(
                ledger=ledger, max_epsilon=max_epsilon, max_delta=max_delta, state=state,
                site_id=site_id, data=data, create=True,
            )
            cost = preflight(led, per_run, cfg, site_id, 1, data)  # before any data read
            # by the public row count, never the file's size (dpfair.data._paths): the two
            # paths split differently and n_train shows which one ran
            from dpfair.data import use_out_of_core

            charge = _once(lambda: charge_round(led, cfg, site_id, 1, cost))
            # from here the data are touched: any failure charges the round (the Session's
            # engine, THREATS.md rule 9) and a data error names the column and kind only
            with charged_on_failure(charge, label=f"fdp site round1 ({site_id})",
                                    planned=cost, columns=_columns(features, target,
                                                                   sensitive)):
                ooc = use_out_of_core(data, aggregate)
                site = make_site(data, cfg, site_id, features, target, sensitive, seed, None,
                                 ooc)
                charge()  # recorded (fsync) before the release
                msg = site.round1()
            write_text_atomic(
                state,
                json.dumps(
                    {
                        "format": _STATE_FORMAT,
                        "version": 1,
                        "site_id": site_id,
                        "protocol_id": cfg.protocol_id,
                        "split": _SPLITS[ooc],
                        "split_entropy": str(site.split_entropy),
                        "fingerprint": site.data_fingerprint(),
                    }
                ),
                mode=0o600,
            )
            write_message(out, msg, signer)
            _print(
                {
                    "site": site_id,
                    "round1": str(out),
                    "aggregated": ooc,
                    "ledger": str(led.path),
                    "ledger_spent": led.spent.to_dict(),
                    "privacy_spent": site.ledger.spent.to_dict(),
                }
            )

    # ------------------------------------------------------------------ centre aggregate
    @centre_app.command("aggregate")
    def centre_aggregate(
        messages: Annotated[list[Path], typer.Argument(help="One round1 file per site.")],
        setup: SetupOpt,
        key: KeyOpt,
        out: OutOpt,
    ) -> None:
        """Verify and check the sites' round-1 messages and write the signed ``model``."""
        from dpfair.fairclass.federated import (
            CENTRE,
            Centre,
            load_signer,
            read_setup,
            write_message,
        )

        with user_errors():
            signer = load_signer(key, CENTRE, option="--key")
            cfg = read_setup(setup, signer.public)
            env = _read_all(messages, cfg, "round1")
            write_message(out, Centre(cfg).aggregate(env), signer)
            _print({"model": str(out), "sites": list(cfg.site_ids)})

    # ------------------------------------------------------------------ site round 2
    @site_app.command("round2")
    def site_round2(
        data: DataArg,
        setup: SetupOpt,
        site_id: SiteOpt,
        key: KeyOpt,
        centre_key: CentreKeyOpt,
        features: FeatOpt,
        target: TargetOpt,
        sensitive: SensOpt,
        state: StateOpt,
        out: OutOpt,
        model: Annotated[Path, typer.Option("--model", help="The centre's signed model.")],
        ledger: LedgerOpt = None,
        max_epsilon: MaxEpsOpt = None,
        max_delta: MaxDeltaOpt = None,
        seed: SeedOpt = None,
        aggregate: AggOpt = "auto",
    ) -> None:
        """Round 2 on this site's calibration half: write the signed ``round2`` message."""
        from dpfair.fairclass.federated import (
            charge_round,
            check_site_columns,
            make_site,
            open_site_ledger,
            preflight,
            site_setup,
            write_message,
        )
        from dpfair.session import charged_on_failure

        with user_errors():
            _check_aggregate(aggregate)
            _check_seed(seed)
            cfg, signer = site_setup(setup, site_id, key, centre_key)
            check_site_columns(cfg, site_id, features, target, sensitive)  # before any charge
            st = _read_state(state, site_id, cfg.protocol_id)
            led, per_run = open_site_ledger(
                ledger=ledger, max_epsilon=max_epsilon, max_delta=max_delta, state=state,
                site_id=site_id, data=data, create=False,
            )
            cost = preflight(led, per_run, cfg, site_id, 2, data)  # replay refused here
            broadcast = _read_one(model, cfg, "model")
            # Round 2 must re-create round 1's halves: same split, so the same reader.
            ooc = st["split"] == _SPLITS[True]
            if aggregate != "auto" and (aggregate == "always") != ooc:
                raise InvalidParameterError(
                    f"--aggregate={aggregate}: round 1 used the {_SPLITS[ooc]} split "
                    f"({'out of core' if ooc else 'in memory'}); round 2 must use the same "
                    "(use --aggregate auto)."
                )
            charge = _once(lambda: charge_round(led, cfg, site_id, 2, cost))
            with charged_on_failure(charge, label=f"fdp site round2 ({site_id})",
                                    planned=cost, columns=_columns(features, target,
                                                                   sensitive)):
                site = make_site(
                    data, cfg, site_id, features, target, sensitive, seed,
                    int(st["split_entropy"]), ooc,
                )
                if site.data_fingerprint() != st["fingerprint"]:
                    raise InvalidParameterError(
                        f"site {site_id!r}: DATA differs from the data used in round 1."
                    )
                site.resume_after_round1()
                charge()  # single-use: recorded before the release
                reply = site.round2(broadcast)
            write_message(out, reply, signer)
            _print(
                {
                    "site": site_id,
                    "round2": str(out),
                    "aggregated": ooc,
                    "ledger": str(led.path),
                    "ledger_spent": led.spent.to_dict(),
                    "privacy_spent": site.ledger.spent.to_dict(),
                }
            )

    # ------------------------------------------------------------------ centre finalize
    @centre_app.command("finalize")
    def centre_finalize(
        messages: Annotated[list[Path], typer.Argument(help="One round2 file per site.")],
        setup: SetupOpt,
        key: KeyOpt,
        out: OutOpt,
        model: Annotated[Path, typer.Option("--model", help="The broadcast model.")],
        seed: Annotated[
            int | None, typer.Option("--seed", help="Seed of the public tie-break salt.")
        ] = None,
    ) -> None:
        """Search τ̂ from the sites' trees and write the signed ``released_model``."""
        from dpfair.fairclass import uncertified_message
        from dpfair.fairclass.federated import (
            CENTRE,
            Centre,
            certified_from_thresholds,
            load_signer,
            read_setup,
            seed_of,
            uncertified_detail,
            write_message,
        )

        with user_errors():
            if seed is not None:
                seed_of(seed, name="--seed")
            signer = load_signer(key, CENTRE, option="--key")
            cfg = read_setup(setup, signer.public)
            broadcast = _read_one(model, cfg, "model")
            env = _read_all(messages, cfg, "round2")
            final = Centre(cfg, random_state=seed).finalize(env, broadcast)
            write_message(out, final, signer)
            certified = certified_from_thresholds(final.fields["thresholds"])
            if certified is False:
                text = uncertified_message(
                    float(cfg.alpha),
                    float(cfg.fail_prob),
                    uncertified_detail(final.fields["thresholds"]),
                )
                if cfg.is_opportunity:
                    text = text.replace("|DD|", "|EOD|")
                typer.echo("warning: " + text, err=True)
            _print(
                {
                    "released_model": str(out),
                    "certified": certified,
                    "thresholds": final.fields["thresholds"],
                    "site_privacy": {
                        k: v.get("spent") for k, v in final.fields["site_privacy"].items()
                    },
                }
            )

    # ------------------------------------------------------------------ predict
    @fdp.command("predict")
    def predict(
        released: Annotated[Path, typer.Argument(help="The released_model message.")],
        data: DataArg,
        centre_key: CentreKeyOpt,
        features: FeatOpt,
        sensitive: SensOpt,
        target: Annotated[
            str | None, typer.Option("--target", help="Label column: report error and |DD| "
                                      "(and |EOD| under equal opportunity).")
        ] = None,
        out: Annotated[
            Path | None, typer.Option("--out", "-o", help="Write predictions (one per line).")
        ] = None,
    ) -> None:
        """Predict with the released model (post-processing: no data of the sites, no noise)."""
        from dpfair.fairclass.federated import (
            CENTRE,
            FederatedModel,
            load_public_key,
            read_message,
            read_site_data,
        )
        from dpfair.fairclass.metrics import (
            demographic_disparity,
            equal_opportunity_difference,
            misclassification_error,
        )

        with user_errors():
            centre_public = load_public_key(centre_key, option="--centre-key")
            model = FederatedModel.from_envelope(
                read_message(released, keys={CENTRE: centre_public}, kind="released_model")
            )
            cat_cols = frozenset(
                model.feature_map.categories if model.feature_map is not None else ()
            )
            X, y, A = read_site_data(data, features, target, sensitive, cat_cols)
            pred = model.predict(X, A)
            payload: dict[str, Any] = {"n": int(pred.size), "positive_rate": float(pred.mean())}
            if y is not None:
                payload["error"] = misclassification_error(y, pred)
                payload["abs_dd"] = abs(demographic_disparity(pred, A))
                if model.info.get("constraints") == "equal_opportunity":
                    payload["abs_eod"] = abs(
                        equal_opportunity_difference(y, pred, sensitive_features=A)
                    )
            if out is not None:
                out.write_text("\n".join(str(int(v)) for v in pred) + "\n")
                payload["predictions"] = str(out)
            _print(payload)


def _read_one(path: Path, cfg: ProtocolConfig, kind: str) -> Envelope:
    from dpfair.fairclass.federated import read_message

    return read_message(
        path,
        keys=cfg.keyring(),
        kind=kind,
        protocol_id=cfg.protocol_id,
        max_bytes=cfg.message_limit(kind),
        shapes=cfg.message_shapes(kind),
    )


def _read_all(paths: list[Path], cfg: ProtocolConfig, kind: str) -> list[Envelope]:
    if len(paths) > len(cfg.sites):
        raise InvalidParameterError(
            f"{len(paths)} {kind} files for {len(cfg.sites)} sites: one per site."
        )
    return [_read_one(p, cfg, kind) for p in paths]


def _standalone() -> typer.Typer:
    app = typer.Typer(
        no_args_is_help=True, add_completion=False, pretty_exceptions_show_locals=False
    )
    register(app)
    return app


if __name__ == "__main__":
    _standalone()()
