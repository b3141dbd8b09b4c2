"""``dpfair fdp …``: the FDP-Fair protocol as separate processes exchanging message files.

Register on the main app with ``register(app)``; also runnable standalone as
``python -m dpfair.fairclass.federated.cli fdp …``.

    dpfair fdp centre setup    --site ID:N:EPS:DELTA … --bounds LO HI … --alpha A --out setup.json
    dpfair fdp site round1     DATA --setup setup.json --site-id ID --features F1,F2 \\
                               --target Y --sensitive A --state ID.state.json --out ID.r1.json
    dpfair fdp centre aggregate --setup setup.json R1 … --out model.json
    dpfair fdp site round2     DATA --setup setup.json --site-id ID --features … \\
                               --target … --sensitive … --state ID.state.json \\
                               --model model.json --out ID.r2.json
    dpfair fdp centre finalize --setup setup.json --model model.json R2 … --out released.json
    dpfair fdp predict         released.json DATA --features … --sensitive A [--target Y]

The ``state`` file stays at the site (seed entropy and a fingerprint of the site's data, so
that round 2 re-creates the same split with fresh, independent noise); it is never sent.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from dpfair._cli_support import user_errors
from dpfair._errors import InvalidParameterError
from dpfair.fairclass._estimators import uncertified_message
from dpfair.fairclass._io import read_columns
from dpfair.fairclass.federated._centre import Centre
from dpfair.fairclass.federated._classifier import (
    FederatedModel,
    _uncertified_detail,
    certified_from_thresholds,
)
from dpfair.fairclass.federated._filesite import FileSite
from dpfair.fairclass.federated._messages import read_message, write_message
from dpfair.fairclass.federated._protocol import ProtocolConfig, SiteSpec, make_protocol
from dpfair.fairclass.federated._site import Site

__all__ = ["register"]

#: Site files above this size are read out of core by default (``--aggregate auto``).
_AGGREGATE_BYTES = 256 * 2**20
#: The two ways a site splits its rows; round 2 must use round 1's (same halves).
_SPLITS = {False: "permutation", True: "position"}


def _load_setup(path: Path) -> ProtocolConfig:
    return ProtocolConfig.from_envelope(read_message(path, kind="setup"))


def _read_site_data(
    path: Path, features: str, target: str | None, sensitive: str
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    names = _features(features)
    cols = names + [sensitive] + ([target] if target else [])
    data = read_columns(path, cols)
    X = np.column_stack([data[n] for n in names])
    return X, (data[target] if target else None), data[sensitive]


def _print(payload: dict[str, Any]) -> None:
    typer.echo(json.dumps(payload, indent=2, sort_keys=True))


DataArg = Annotated[Path, typer.Argument(help="The site's own CSV/Parquet file.")]
SetupOpt = Annotated[Path, typer.Option("--setup", help="The centre's setup message.")]
SiteOpt = Annotated[str, typer.Option("--site-id", help="This site's id (as in the setup).")]
FeatOpt = Annotated[str, typer.Option("--features", help="Comma-separated feature columns.")]
TargetOpt = Annotated[str, typer.Option("--target", help="Label column (0/1).")]
SensOpt = Annotated[str, typer.Option("--sensitive", help="Group column (0/1).")]
StateOpt = Annotated[Path, typer.Option("--state", help="Local state file (never sent).")]
OutOpt = Annotated[Path, typer.Option("--out", "-o", help="Message file to write.")]
AggOpt = Annotated[
    str,
    typer.Option(
        "--aggregate",
        help=(
            "auto | always | never. Read DATA out of core (DuckDB aggregates, streamed "
            "batches; position-hash split). 'auto': in round 1 for files over "
            f"{_AGGREGATE_BYTES // 2**20} MiB, in round 2 as in round 1. Same privacy."
        ),
    ),
]


def _features(features: str) -> list[str]:
    names = [f.strip() for f in features.split(",") if f.strip()]
    if not names:
        raise InvalidParameterError("--features: give the feature columns, e.g. x1,x2.")
    return names


def _check_aggregate(aggregate: str) -> None:
    if aggregate not in ("auto", "always", "never"):
        raise InvalidParameterError(
            f"--aggregate={aggregate!r}: expected 'auto', 'always' or 'never'."
        )


def _make_site(
    data: Path,
    cfg: ProtocolConfig,
    site_id: str,
    features: str,
    target: str,
    sensitive: str,
    entropy: int,
    out_of_core: bool,
) -> Site:
    seed = np.random.SeedSequence(entropy)
    if out_of_core:
        return FileSite(
            site_id,
            data,
            features=_features(features),
            target=target,
            sensitive=sensitive,
            config=cfg,
            random_state=seed,
        )
    X, y, A = _read_site_data(data, features, target, sensitive)
    assert y is not None
    return Site(site_id, X, y, A, config=cfg, random_state=seed)


def register(app: typer.Typer) -> None:
    """Add the ``fdp`` sub-app (``site`` and ``centre`` groups, ``predict``) to ``app``."""
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

    # ------------------------------------------------------------------ centre setup
    @centre_app.command("setup")
    def centre_setup(
        site: Annotated[
            list[str], typer.Option("--site", help="ID:N:EPSILON:DELTA, repeat per site.")
        ],
        bounds: Annotated[
            list[float],
            typer.Option("--bounds", help="LO HI per feature, repeat: --bounds 0 --bounds 1 …"),
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
    ) -> None:
        """Write the public ``setup`` message (sites, grid, M, α, ρ, C_ω)."""
        with user_errors():
            specs = []
            for s in site:
                parts = s.split(":")
                if len(parts) != 4:
                    raise InvalidParameterError(f"--site {s!r}: expected ID:N:EPSILON:DELTA.")
                specs.append(SiteSpec(parts[0], int(parts[1]), float(parts[2]), float(parts[3])))
            if len(bounds) % 2:
                raise InvalidParameterError("--bounds: give LO HI pairs, one per feature.")
            fb = [(bounds[i], bounds[i + 1]) for i in range(0, len(bounds), 2)]
            cfg = make_protocol(
                specs,
                feature_bounds=fb,
                alpha=alpha,
                alpha_margin=margin,
                rho=rho,
                c_omega=c_omega,
                correction=correction,
                tail=tail,
                threshold_rule=rule,
                fail_prob=fail_prob,
                depth=depth,
                bandwidth=bandwidth,
                cross_fit=cross_fit,
            )
            write_message(out, cfg.to_envelope())
            _print(
                {
                    "setup": str(out),
                    "protocol_id": cfg.protocol_id,
                    "depth": cfg.depth,
                    "bandwidth": cfg.bandwidth,
                    "grid_shape": list(cfg.grid_shape),
                }
            )

    # ------------------------------------------------------------------ site round 1
    @site_app.command("round1")
    def site_round1(
        data: DataArg,
        setup: SetupOpt,
        site_id: SiteOpt,
        features: FeatOpt,
        target: TargetOpt,
        sensitive: SensOpt,
        state: StateOpt,
        out: OutOpt,
        seed: Annotated[
            int | None, typer.Option("--seed", help="Seed (default: OS entropy).")
        ] = None,
        aggregate: AggOpt = "auto",
    ) -> None:
        """Round 1 on this site's training half: write the ``round1`` message."""
        with user_errors():
            _check_aggregate(aggregate)
            cfg = _load_setup(setup)
            ooc = aggregate == "always" or (
                aggregate == "auto" and data.is_file() and data.stat().st_size > _AGGREGATE_BYTES
            )
            entropy = int(seed) if seed is not None else secrets.randbits(128)
            site = _make_site(data, cfg, site_id, features, target, sensitive, entropy, ooc)
            msg = site.round1()
            state.write_text(
                json.dumps(
                    {
                        "site_id": site_id,
                        "protocol_id": cfg.protocol_id,
                        "entropy": str(entropy),
                        "split": _SPLITS[ooc],
                        "fingerprint": site.data_fingerprint(),
                    }
                )
            )
            write_message(out, msg)
            _print(
                {
                    "site": site_id,
                    "round1": str(out),
                    "aggregated": ooc,
                    "privacy_spent": site.ledger.spent.to_dict(),
                }
            )

    # ------------------------------------------------------------------ centre aggregate
    @centre_app.command("aggregate")
    def centre_aggregate(
        messages: Annotated[list[Path], typer.Argument(help="One round1 file per site.")],
        setup: SetupOpt,
        out: OutOpt,
    ) -> None:
        """Validate the sites' round-1 messages and write the broadcast ``model``."""
        with user_errors():
            cfg = _load_setup(setup)
            env = [read_message(m, kind="round1", protocol_id=cfg.protocol_id) for m in messages]
            write_message(out, Centre(cfg).aggregate(env))
            _print({"model": str(out), "sites": list(cfg.site_ids)})

    # ------------------------------------------------------------------ site round 2
    @site_app.command("round2")
    def site_round2(
        data: DataArg,
        setup: SetupOpt,
        site_id: SiteOpt,
        features: FeatOpt,
        target: TargetOpt,
        sensitive: SensOpt,
        state: StateOpt,
        out: OutOpt,
        model: Annotated[Path, typer.Option("--model", help="The centre's broadcast model.")],
        aggregate: AggOpt = "auto",
    ) -> None:
        """Round 2 on this site's calibration half: write the ``round2`` message."""
        with user_errors():
            _check_aggregate(aggregate)
            cfg = _load_setup(setup)
            st = json.loads(state.read_text())
            if st.get("site_id") != site_id or st.get("protocol_id") != cfg.protocol_id:
                raise InvalidParameterError(
                    f"--state {str(state)!r} belongs to another site or run."
                )
            # Round 2 must re-create round 1's halves: same split, so the same reader.
            ooc = st.get("split", _SPLITS[False]) == _SPLITS[True]
            if aggregate != "auto" and (aggregate == "always") != ooc:
                raise InvalidParameterError(
                    f"--aggregate={aggregate}: round 1 used the {_SPLITS[ooc]} split "
                    f"({'out of core' if ooc else 'in memory'}); round 2 must use the same "
                    "(use --aggregate auto)."
                )
            site = _make_site(
                data, cfg, site_id, features, target, sensitive, int(st["entropy"]), ooc
            )
            if site.data_fingerprint() != st.get("fingerprint"):
                raise InvalidParameterError(
                    f"site {site_id!r}: DATA differs from the data used in round 1."
                )
            site.resume_after_round1()
            broadcast = read_message(model, kind="model", protocol_id=cfg.protocol_id)
            write_message(out, site.round2(broadcast))
            _print(
                {
                    "site": site_id,
                    "round2": str(out),
                    "aggregated": ooc,
                    "privacy_spent": site.ledger.spent.to_dict(),
                }
            )

    # ------------------------------------------------------------------ centre finalize
    @centre_app.command("finalize")
    def centre_finalize(
        messages: Annotated[list[Path], typer.Argument(help="One round2 file per site.")],
        setup: SetupOpt,
        out: OutOpt,
        model: Annotated[Path, typer.Option("--model", help="The broadcast model.")],
        seed: Annotated[
            int | None, typer.Option("--seed", help="Seed of the tie-break salt.")
        ] = None,
    ) -> None:
        """Search τ̂ from the sites' trees and write the ``released_model``."""
        with user_errors():
            cfg = _load_setup(setup)
            broadcast = read_message(model, kind="model", protocol_id=cfg.protocol_id)
            env = [read_message(m, kind="round2", protocol_id=cfg.protocol_id) for m in messages]
            final = Centre(cfg, random_state=seed).finalize(env, broadcast)
            write_message(out, final)
            certified = certified_from_thresholds(final.fields["thresholds"])
            if certified is False:
                typer.echo(
                    "warning: "
                    + uncertified_message(
                        float(cfg.alpha),
                        float(cfg.fail_prob),
                        _uncertified_detail(final.fields["thresholds"]),
                    ),
                    err=True,
                )
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
        features: FeatOpt,
        sensitive: SensOpt,
        target: Annotated[
            str | None, typer.Option("--target", help="Label column: report error and |DD|.")
        ] = None,
        out: Annotated[
            Path | None, typer.Option("--out", "-o", help="Write predictions (one per line).")
        ] = None,
    ) -> None:
        """Predict with the released model (post-processing: no data of the sites, no noise)."""
        from dpfair.fairclass.metrics import demographic_disparity, misclassification_error

        with user_errors():
            model = FederatedModel.from_envelope(read_message(released, kind="released_model"))
            X, y, A = _read_site_data(data, features, target, sensitive)
            pred = model.predict(X, A)
            payload: dict[str, Any] = {"n": int(pred.size), "positive_rate": float(pred.mean())}
            if y is not None:
                payload["error"] = misclassification_error(y, pred)
                payload["abs_dd"] = abs(demographic_disparity(pred, A))
            if out is not None:
                out.write_text("\n".join(str(int(v)) for v in pred) + "\n")
                payload["predictions"] = str(out)
            _print(payload)


def _standalone() -> typer.Typer:
    app = typer.Typer(
        no_args_is_help=True, add_completion=False, pretty_exceptions_show_locals=False
    )
    register(app)
    return app


if __name__ == "__main__":
    _standalone()()
