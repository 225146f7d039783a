"""Build decentralized-auth material (operator, account and user JWTs, creds files) for tests.

NATS JWTs are ordinary JWTs signed with ed25519 nkeys: the header is
``{"typ":"JWT","alg":"ed25519-nkey"}``, the claims carry ``iss`` (the signer's
public nkey), ``sub`` (the subject's public nkey) and a ``nats`` object whose
``type`` is ``operator``, ``account`` or ``user``. The operator signs itself
and the accounts; an account signs its users.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

try:
    import nkeys
except ImportError:  # the nkeys extra is not installed (e.g. free-threaded 3.13): skip
    nkeys = None


def _nkeys() -> Any:
    """The nkeys module, or skip the test that needs it (and say why)."""
    if nkeys is None:
        pytest.skip("nkey, JWT and creds tests need the nkeys package (jsclient[nkeys])")
    return nkeys


@dataclass(frozen=True)
class NKey:
    """A freshly generated nkey: ``seed`` (bytes, ``S...``) and ``public`` (str)."""

    seed: bytes
    public: str

    def sign(self, data: bytes) -> bytes:
        kp = _nkeys().from_seed(bytearray(self.seed))
        sig: bytes = kp.sign(data)
        return sig


def new_nkey(prefix: int) -> NKey:
    """A random nkey of the given role (``nkeys.PREFIX_BYTE_USER``, ``..._ACCOUNT``, ...)."""
    nk = _nkeys()
    seed = nk.encode_seed(os.urandom(32), prefix)
    kp = nk.from_seed(bytearray(seed))
    return NKey(seed=bytes(seed), public=kp.public_key.decode())


def new_user_nkey() -> NKey:
    return new_nkey(_nkeys().PREFIX_BYTE_USER)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def encode_jwt(claims: dict[str, Any], signer: NKey) -> str:
    """Sign ``claims`` (``iss`` is set to the signer) and return the compact JWT."""
    body = dict(claims)
    body["iss"] = signer.public
    body.setdefault("iat", int(time.time()))
    body["jti"] = ""
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).digest()
    body["jti"] = base64.b32encode(digest).rstrip(b"=").decode()
    header = _b64(json.dumps({"typ": "JWT", "alg": "ed25519-nkey"}).encode())
    payload = _b64(json.dumps(body, separators=(",", ":")).encode())
    signing_input = f"{header}.{payload}".encode()
    return f"{header}.{payload}.{_b64(signer.sign(signing_input))}"


def decode_jwt_claims(token: str) -> dict[str, Any]:
    """The claims of a JWT (no signature check)."""
    payload = token.split(".")[1]
    payload += "=" * (-len(payload) % 4)
    claims: dict[str, Any] = json.loads(base64.urlsafe_b64decode(payload))
    return claims


_UNLIMITED = {
    "subs": -1,
    "data": -1,
    "payload": -1,
}


@dataclass(frozen=True)
class Decentralized:
    """An operator with one account and one user, ready for a server config."""

    operator: NKey
    account: NKey
    user: NKey
    operator_jwt: str
    account_jwt: str
    user_jwt: str

    def server_config(self) -> str:
        """Config text: trust the operator, preload the account with a memory resolver."""
        return (
            f"operator: {self.operator_jwt}\n"
            "resolver: MEMORY\n"
            f"resolver_preload: {{\n  {self.account.public}: {self.account_jwt}\n}}\n"
        )

    def creds_text(self) -> str:
        return creds_text(self.user_jwt, self.user.seed)

    def write_creds(self, path: str | os.PathLike[str]) -> str:
        Path(path).write_text(self.creds_text(), encoding="ascii")
        return os.fspath(path)


def creds_text(user_jwt: str, seed: bytes) -> str:
    """A creds file in the standard layout that ``nsc`` writes."""
    return (
        "-----BEGIN NATS USER JWT-----\n"
        f"{user_jwt}\n"
        "------END NATS USER JWT------\n"
        "\n"
        "************************* IMPORTANT *************************\n"
        "NKEY Seed printed below can be used to sign and prove identity.\n"
        "NKEYs are sensitive and should be treated as secrets.\n"
        "\n"
        "-----BEGIN USER NKEY SEED-----\n"
        f"{seed.decode()}\n"
        "------END USER NKEY SEED------\n"
        "\n"
        "*************************************************************\n"
    )


def make_decentralized(user_name: str = "tester") -> Decentralized:
    """Generate keys and sign operator, account and user JWTs."""
    operator = new_nkey(_nkeys().PREFIX_BYTE_OPERATOR)
    account = new_nkey(_nkeys().PREFIX_BYTE_ACCOUNT)
    user = new_user_nkey()
    operator_jwt = encode_jwt(
        {
            "sub": operator.public,
            "name": "test-operator",
            "nats": {"type": "operator", "version": 2},
        },
        operator,
    )
    account_jwt = encode_jwt(
        {
            "sub": account.public,
            "name": "test-account",
            "nats": {
                "limits": {
                    **_UNLIMITED,
                    "imports": -1,
                    "exports": -1,
                    "wildcards": True,
                    "conn": -1,
                    "leaf": -1,
                },
                "default_permissions": {"pub": {}, "sub": {}},
                "type": "account",
                "version": 2,
            },
        },
        operator,
    )
    user_jwt = encode_jwt(
        {
            "sub": user.public,
            "name": user_name,
            "nats": {"pub": {}, "sub": {}, **_UNLIMITED, "type": "user", "version": 2},
        },
        account,
    )
    return Decentralized(operator, account, user, operator_jwt, account_jwt, user_jwt)
