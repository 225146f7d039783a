"""Credentials: creds files, nkey seeds, and the CONNECT options that carry them."""

from __future__ import annotations

import base64
from typing import Any

from jsclient import errors
from jsclient._io.options import Options
from jsclient._io.servers import ServerAddr
from jsclient._version import __version__


def read_creds(path: str) -> tuple[bytes, bytes]:
    """(jwt, seed) from a NATS creds file."""
    try:
        with open(path, "rb") as f:
            text = f.read()
    except OSError as exc:
        raise errors.InvalidUserCredentialsError(f"nats: cannot read creds file: {exc}") from exc
    jwt = seed = None
    lines = [ln.strip() for ln in text.splitlines()]
    for i, line in enumerate(lines):
        if line.startswith(b"-----BEGIN NATS USER JWT") and i + 1 < len(lines):
            jwt = lines[i + 1]
        elif line.startswith(b"-----BEGIN USER NKEY SEED") and i + 1 < len(lines):
            seed = lines[i + 1]
    if not jwt or not seed:
        raise errors.InvalidUserCredentialsError("nats: creds file has no JWT or no seed")
    return jwt, seed


def require_nkeys() -> None:
    """nkey and creds authentication sign the server's nonce with the ``nkeys``
    package, an optional extra (it pulls pynacl and cffi): raise
    :class:`~jsclient.errors.MissingExtraError` naming the extra when it is not
    installed, before anything is dialled."""
    try:
        import nkeys  # noqa: F401
    except ImportError as exc:
        raise errors.MissingExtraError(
            "nats: nkey and creds authentication need the nkeys package: "
            "pip install 'jsclient[nkeys]'"
        ) from exc


def sign_nonce(seed: bytes, nonce: str) -> tuple[str, str]:
    """(public nkey, base64url signature of the nonce) for an nkey seed."""
    require_nkeys()
    import nkeys

    try:
        kp = nkeys.from_seed(bytearray(seed))
        sig = kp.sign(nonce.encode())
        public = kp.public_key.decode()
    except Exception as exc:
        raise errors.InvalidUserCredentialsError(f"nats: invalid nkey seed: {exc}") from exc
    return public, base64.urlsafe_b64encode(sig).rstrip(b"=").decode()


def seed_bytes(seed: str) -> bytes:
    """An nkey seed given inline or as a path to a file holding it."""
    text = seed.strip()
    if text.startswith("S") and len(text) > 50 and "/" not in text:
        return text.encode()
    try:
        with open(text, "rb") as f:
            lines = f.read().splitlines()
    except OSError as exc:
        raise errors.InvalidUserCredentialsError(f"nats: cannot read nkey seed: {exc}") from exc
    for line in lines:
        line = line.strip()
        if line.startswith(b"S") and len(line) > 50:
            return line
    raise errors.InvalidUserCredentialsError("nats: no nkey seed found")


def connect_options(
    opts: Options, srv: ServerAddr, info: dict[str, Any], tls: bool
) -> dict[str, Any]:
    """The CONNECT object for ``srv``, whose INFO was ``info``."""
    out: dict[str, Any] = {
        "verbose": False,
        "pedantic": False,
        "lang": "python3-jsclient",
        "version": __version__,
        "protocol": 1,
        "headers": True,
        "no_responders": True,
        "echo": not opts.no_echo,
        "tls_required": tls,
    }
    if opts.name:
        out["name"] = opts.name
    user = srv.user or opts.user
    password = srv.password or opts.password
    if opts.creds:
        jwt, seed = read_creds(opts.creds)
        out["jwt"] = jwt.decode()
        out["sig"] = sign_nonce(seed, info.get("nonce", ""))[1]
    elif opts.user_jwt:
        # A JWT given apart from its seed (nats.go's UserJWTAndSeed); with no
        # seed it goes alone, for bearer JWTs and auth callout.
        out["jwt"] = opts.user_jwt
        if opts.nkey_seed:
            out["sig"] = sign_nonce(seed_bytes(opts.nkey_seed), info.get("nonce", ""))[1]
    elif opts.nkey_seed:
        public, sig = sign_nonce(seed_bytes(opts.nkey_seed), info.get("nonce", ""))
        out["nkey"] = public
        out["sig"] = sig
    if opts.token:
        out["auth_token"] = opts.token
    elif user and password is None and not (opts.creds or opts.nkey_seed or opts.user_jwt):
        out["auth_token"] = user  # nats://token@host form
    elif user:
        out["user"] = user
        out["pass"] = password or ""
    return out
