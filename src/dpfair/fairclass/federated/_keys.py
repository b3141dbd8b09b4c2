"""Ed25519 keys of the FDP-Fair parties: generation, files, signing and verification.

Every party (the centre and each site) has one Ed25519 key pair (RFC 8032, via the
``cryptography`` package). The public key travels as text ``"ed25519:<base64 of the 32 raw
bytes>"``; the setup message pins every party's public key and is signed by the centre, and
every message is signed by its sender (:mod:`~dpfair.fairclass.federated._messages`).

Files written by :func:`generate_keypair` (``dpfair fdp keygen --out DIR/NAME``):

* ``DIR/NAME.key`` — the private key, PKCS#8 PEM, mode 0600. Secret: whoever holds it can
  speak for the party. :func:`load_signer` refuses a private key file that other users can
  read or write.
* ``DIR/NAME.pub`` — the public key, one line ``ed25519:…``. Public: hand it to the other
  parties over a channel where they can check it (e.g. compare :func:`key_fingerprint`
  on the phone).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from dpfair._atomic import write_bytes_atomic, write_text_atomic
from dpfair._errors import InvalidParameterError

__all__ = [
    "PUBLIC_KEY_PREFIX",
    "Signer",
    "generate_keypair",
    "key_fingerprint",
    "load_public_key",
    "load_signer",
    "parse_public_key",
    "verify_signature",
]

PUBLIC_KEY_PREFIX = "ed25519:"
_MAX_KEY_FILE_BYTES = 4096


def _public_text(key: Ed25519PublicKey) -> str:
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return PUBLIC_KEY_PREFIX + base64.b64encode(raw).decode("ascii")


def parse_public_key(text: object, *, where: str = "public key") -> Ed25519PublicKey:
    """Parse ``"ed25519:<base64>"`` (raises InvalidParameterError naming ``where``)."""
    if not isinstance(text, str) or not text.startswith(PUBLIC_KEY_PREFIX):
        raise InvalidParameterError(
            f"{where}: expected an Ed25519 public key 'ed25519:<base64>' "
            "(a NAME.pub file written by `dpfair fdp keygen`)."
        )
    try:
        raw = base64.b64decode(text[len(PUBLIC_KEY_PREFIX) :], validate=True)
    except (binascii.Error, ValueError):
        raise InvalidParameterError(f"{where}: the key is not valid base64.") from None
    if len(raw) != 32:
        raise InvalidParameterError(f"{where}: an Ed25519 public key has 32 bytes, not {len(raw)}.")
    return Ed25519PublicKey.from_public_bytes(raw)


def key_fingerprint(public: str) -> str:
    """Short SHA-256 fingerprint of a public key text (for humans comparing keys)."""
    return "SHA256:" + hashlib.sha256(public.encode("ascii")).hexdigest()[:32]


def verify_signature(public: str, signature: str, data: bytes) -> bool:
    """True when ``signature`` (base64) is a valid Ed25519 signature of ``data``."""
    try:
        sig = base64.b64decode(signature, validate=True)
    except (binascii.Error, ValueError, TypeError):
        return False
    if len(sig) != 64:
        return False
    try:
        parse_public_key(public).verify(sig, data)
    except (InvalidSignature, InvalidParameterError):
        return False
    return True


@dataclass(frozen=True, eq=False)
class Signer:
    """A party's identity: its id and its private key.

    Attributes
    ----------
    party : str
        ``"centre"`` or a site id.
    private_key : Ed25519PrivateKey
    """

    party: str
    private_key: Ed25519PrivateKey

    @classmethod
    def generate(cls, party: str) -> Signer:
        """A fresh key pair (in memory; e.g. the in-process classifier's ephemeral keys)."""
        return cls(party, Ed25519PrivateKey.generate())

    @property
    def public(self) -> str:
        """The public key as ``"ed25519:<base64>"``."""
        return _public_text(self.private_key.public_key())

    def sign(self, data: bytes) -> str:
        """Base64 Ed25519 signature of ``data``."""
        return base64.b64encode(self.private_key.sign(data)).decode("ascii")

    def __repr__(self) -> str:  # never print key material
        return f"Signer(party={self.party!r}, public={self.public!r})"


def generate_keypair(out: str | os.PathLike[str]) -> tuple[Path, Path, str]:
    """Write ``OUT.key`` (private, mode 0600) and ``OUT.pub``; never overwrite.

    Returns
    -------
    (private key path, public key path, public key text)
    """
    base = Path(out)
    if base.name in ("", ".", ".."):
        raise InvalidParameterError(f"--out {str(out)!r}: give DIR/NAME, e.g. keys/h1.")
    if not base.parent.is_dir():
        raise InvalidParameterError(f"--out {str(out)!r}: directory {str(base.parent)!r} "
                                    "does not exist.")
    key_path = base.with_name(base.name + ".key")
    pub_path = base.with_name(base.name + ".pub")
    for p in (key_path, pub_path):
        if p.exists():
            raise InvalidParameterError(
                f"--out {str(out)!r}: {str(p)!r} already exists; a key is never overwritten "
                "(the other parties pin it). Choose another name or remove it yourself."
            )
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    public = _public_text(key.public_key())
    write_bytes_atomic(key_path, pem, mode=0o600)
    write_text_atomic(pub_path, public + "\n", mode=0o644)
    return key_path, pub_path, public


def _read_small(path: Path, what: str) -> bytes:
    if not path.is_file():
        raise InvalidParameterError(f"{what} {str(path)!r}: no such file.")
    if path.stat().st_size > _MAX_KEY_FILE_BYTES:
        raise InvalidParameterError(f"{what} {str(path)!r}: too large to be a key file.")
    return path.read_bytes()


def load_signer(path: str | os.PathLike[str], party: str, *, option: str = "--key") -> Signer:
    """Load a private key file written by :func:`generate_keypair` for ``party``.

    Refuses a file that users other than its owner can read or write (like ssh does).
    """
    p = Path(path)
    raw = _read_small(p, option)
    perms = stat.S_IMODE(p.stat().st_mode)
    if perms & 0o077:
        raise InvalidParameterError(
            f"{option} {str(p)!r}: the private key file has mode {perms:04o}; other users "
            f"can read or change it. Run `chmod 600 {p}` (and consider the key exposed)."
        )
    try:
        key = serialization.load_pem_private_key(raw, password=None)
    except (ValueError, TypeError):
        raise InvalidParameterError(
            f"{option} {str(p)!r}: not a private key written by `dpfair fdp keygen` "
            "(the .key file, not the .pub)."
        ) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise InvalidParameterError(f"{option} {str(p)!r}: not an Ed25519 private key.")
    return Signer(party, key)


def load_public_key(path: str | os.PathLike[str], *, option: str) -> str:
    """Read a ``NAME.pub`` file; return its ``"ed25519:…"`` text (validated)."""
    p = Path(path)
    try:
        text = _read_small(p, option).decode("ascii").strip()
    except UnicodeDecodeError:
        raise InvalidParameterError(f"{option} {str(p)!r}: not a public key file.") from None
    parse_public_key(text, where=f"{option} {str(p)!r}")
    return text
