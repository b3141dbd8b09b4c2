"""What a site process needs to read before a round: the pinned setup and its own data.

Shared by the file-exchange command line (:mod:`dpfair.cli.fdp`) and the Flower client
(:mod:`dpfair.fairclass.federated.flower`), so both check a setup and open a site the same
way. No command-line code lives here.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dpfair._errors import InvalidParameterError
from dpfair.fairclass._io import read_columns
from dpfair.fairclass.federated._filesite import FileSite
from dpfair.fairclass.federated._keys import Signer, key_fingerprint, load_public_key, load_signer
from dpfair.fairclass.federated._messages import (
    CENTRE,
    Envelope,
    ProtocolError,
    decode,
    read_message,
)
from dpfair.fairclass.federated._protocol import ProtocolConfig
from dpfair.fairclass.federated._site import Site

__all__ = [
    "SETUP_MAX_BYTES",
    "categorical_positions",
    "check_site_columns",
    "check_site_pinned",
    "feature_names",
    "make_site",
    "read_setup",
    "read_site_data",
    "setup_from_bytes",
    "site_setup",
]

#: A setup has no arrays: sites, keys and scalars (≤ 1000 sites of ~200 bytes each).
SETUP_MAX_BYTES = 2 * 2**20


def read_setup(path: Path, centre_public: str) -> ProtocolConfig:
    """The setup, verified with the centre key the reader pins itself."""
    env = read_message(
        path, keys={CENTRE: centre_public}, kind="setup", max_bytes=SETUP_MAX_BYTES
    )
    return _pinned_setup(env, centre_public)


def setup_from_bytes(raw: bytes, centre_public: str, *, source: str = "setup") -> ProtocolConfig:
    """:func:`read_setup` for a setup received as bytes (e.g. over Flower)."""
    env = decode(
        raw, keys={CENTRE: centre_public}, kind="setup", max_bytes=SETUP_MAX_BYTES, source=source
    )
    return _pinned_setup(env, centre_public)


def _pinned_setup(env: Envelope, centre_public: str) -> ProtocolConfig:
    cfg = ProtocolConfig.from_envelope(env)
    if cfg.keyring().get(CENTRE) != centre_public:
        raise ProtocolError(
            CENTRE,
            "fields.keys",
            "the setup pins another centre key than the one that signed it; refused.",
        )
    return cfg


def site_setup(path: Path, site_id: str, key: Path, centre_key: Path) -> tuple[
    ProtocolConfig, Signer
]:
    """The setup as a site sees it: signed by the pinned centre key, pinning our key."""
    signer = load_signer(key, site_id, option="--key")
    centre_public = load_public_key(centre_key, option="--centre-key")
    cfg = read_setup(path, centre_public)
    check_site_pinned(cfg, site_id, signer)
    return cfg, signer


def check_site_pinned(cfg: ProtocolConfig, site_id: str, signer: Signer) -> None:
    """Refuse a setup without this site, or pinning another key for it."""
    cfg.site(site_id)  # an unknown site id → ProtocolError
    if cfg.keyring().get(site_id) != signer.public:
        raise ProtocolError(
            CENTRE,
            f"fields.keys.{site_id}",
            f"the setup pins another public key for site {site_id!r} than this site's own "
            f"({key_fingerprint(signer.public)}); the centre did not pin your key. Refused.",
        )


def feature_names(features: str) -> list[str]:
    """``"x1,x2"`` → ``["x1", "x2"]`` (refused when empty)."""
    names = [f.strip() for f in features.split(",") if f.strip()]
    if not names:
        raise InvalidParameterError("--features: give the feature columns, e.g. x1,x2.")
    return names


def check_site_columns(
    cfg: ProtocolConfig, site_id: str, features: str, target: str | None, sensitive: str
) -> list[str]:
    """The ``--features`` names checked against the setup, reading no data: exactly one
    distinct column per public feature of the setup, and target/sensitive two further
    distinct columns. A driver calls this before its budget pre-check, so a wrong list is
    a free parameter error (THREATS rule 9), never a charged data failure.

    Raises
    ------
    ProtocolError
        Naming the site and ``features`` (or ``columns``).
    """
    names = feature_names(features)
    d = len(cfg.feature_bounds)
    if len(names) != d or len(set(names)) != d:
        raise ProtocolError(
            site_id, "features", f"expected {d} distinct feature columns (one per public "
            f"feature of the setup, in its order), got {names!r}; fix --features."
        )
    others = [c for c in (target, sensitive) if c]
    if len({*names, *others}) != d + len(others):
        raise ProtocolError(
            site_id, "columns", "target and sensitive must be two distinct non-feature "
            "columns."
        )
    return names


def read_site_data(
    path: Path, features: str, target: str | None, sensitive: str,
    categorical: frozenset[int] = frozenset(),
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """Features, label (or None) and group of a site's file (loaded in memory).

    ``categorical``: positions (in ``features``) of the columns one-hot encoded over public
    category lists; they are read as text (matched to the setup's categories as strings)
    and X is then an object array.
    """
    names = feature_names(features)
    numeric = [n for j, n in enumerate(names) if j not in categorical]
    cols = numeric + [sensitive] + ([target] if target else [])
    data = read_columns(path, cols)
    if not categorical:
        X = np.column_stack([data[n] for n in names])
    else:
        from dpfair.data.sql import read_text_column

        X = np.empty((data[sensitive].size, len(names)), dtype=object)
        for j, n in enumerate(names):
            X[:, j] = read_text_column(path, n) if j in categorical else data[n]
    return X, (data[target] if target else None), data[sensitive]


def categorical_positions(cfg: ProtocolConfig) -> frozenset[int]:
    """Feature positions the setup one-hot encodes (rff and linear estimators)."""
    return frozenset(int(j) for j, _ in cfg.categories)


def make_site(
    data: Path,
    cfg: ProtocolConfig,
    site_id: str,
    features: str,
    target: str,
    sensitive: str,
    seed: int | None,
    split_entropy: int | None,
    out_of_core: bool,
) -> Site:
    """Open the site on its file: streamed (``out_of_core``) or loaded in memory.

    The rff and linear estimators need the rows in memory (their round 1 maps every row):
    for them the site is always loaded (same position split, so the same halves). Under
    equal opportunity the streamed site counts the positive-label rows in round 2, as the
    loaded one does."""
    check_site_columns(cfg, site_id, features, target, sensitive)
    if out_of_core and not cfg.is_mapped:
        return FileSite(
            site_id,
            data,
            features=feature_names(features),
            target=target,
            sensitive=sensitive,
            config=cfg,
            random_state=seed,
            split_entropy=split_entropy,
        )
    X, y, A = read_site_data(data, features, target, sensitive, categorical_positions(cfg))
    assert y is not None
    return Site(
        site_id, X, y, A, config=cfg, random_state=seed, split_entropy=split_entropy
    )
