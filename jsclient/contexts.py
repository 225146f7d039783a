"""NATS CLI contexts (ADR-21): read the ``nats`` CLI's named connection settings.

A context is a JSON file ``$XDG_CONFIG_HOME/nats/context/<name>.json``
(``~/.config`` when ``XDG_CONFIG_HOME`` is unset or empty); the selected
context's name is in ``.../nats/context.txt``. ``jsclient.connect(context=NAME)``
connects with one; this module lists, reads and validates them (it never
writes: use the ``nats context`` commands for that).

Every key is optional; unknown keys are ignored (the CLI may add more).
Keys jsclient cannot honour raise :class:`~jsclient.errors.ContextError` when
they hold a value: ``nsc`` (it needs the ``nsc`` tool), the Windows
certificate store keys and ``socks_proxy``. The CLI writes every key, so an
empty value (``""``, ``null``, ``[]``) is the same as an absent one.
"""

from __future__ import annotations

import json
import os
import re
import ssl
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from jsclient.errors import ContextError

#: The server used when a context's ``url`` is empty (nats.go's ``DefaultURL``).
DEFAULT_URL = "nats://127.0.0.1:4222"

# Keys jsclient reads but cannot act on: a non-empty value is refused.
_UNSUPPORTED = {
    "nsc": "nsc:// credential lookups need the nsc tool; put its creds file in 'creds'",
    "windows_cert_store": "the Windows certificate store is not supported",
    "windows_cert_match_by": "the Windows certificate store is not supported",
    "windows_cert_match": "the Windows certificate store is not supported",
    "windows_ca_certs_match": "the Windows certificate store is not supported",
    "socks_proxy": "connecting through a SOCKS proxy is not supported",
}

#: Path values the nats CLI resolves with an outside tool (1Password's ``op`` CLI):
#: refused with a ContextError rather than failing later as a missing file.
_SECRET_REFERENCES = ("op://",)

# Path keys: ``$VAR`` and a leading ``~`` are expanded on load, as the CLI does.
_PATH_KEYS = ("creds", "nkey", "cert", "key", "ca")


@dataclass(frozen=True)
class Context:
    """One context file, key by key (ADR-21 names; empty string when unset).

    ``description``, ``color_scheme`` and ``jetstream_event_prefix`` are CLI
    settings: read, but connecting ignores them. ``creds``, ``nkey``, ``cert``,
    ``key`` and ``ca`` are paths with ``$VAR`` and ``~`` expanded.
    ``user_seed`` (a later CLI key, not in ADR-21) is an inline nkey seed used
    with ``user_jwt``.
    """

    name: str
    #: The file this context was read from.
    path: str
    description: str = ""
    #: Comma-separated server URLs, as written; see :attr:`servers`.
    url: str = ""
    token: str = ""
    user: str = ""
    password: str = ""
    creds: str = ""
    #: A file holding an nkey seed.
    nkey: str = ""
    cert: str = ""
    key: str = ""
    ca: str = ""
    nsc: str = ""
    jetstream_domain: str = ""
    jetstream_api_prefix: str = ""
    jetstream_event_prefix: str = ""
    inbox_prefix: str = ""
    #: A user JWT; signed with the seed in ``nkey`` (a file) or ``user_seed``,
    #: or sent alone (bearer JWTs, auth callout) when neither is set.
    user_jwt: str = ""
    user_seed: str = ""
    tls_first: bool = False
    color_scheme: str = ""
    socks_proxy: str = ""
    windows_cert_store: str = ""
    windows_cert_match_by: str = ""
    windows_cert_match: str = ""
    windows_ca_certs_match: tuple[str, ...] = ()

    @property
    def servers(self) -> list[str]:
        """The server URLs ``url`` gives; ``[DEFAULT_URL]`` when it is empty."""
        urls = [u.strip() for u in self.url.split(",") if u.strip()]
        return urls or [DEFAULT_URL]


def config_dir() -> Path:
    """``$XDG_CONFIG_HOME/nats``, or ``~/.config/nats``."""
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(Path.home(), ".config")
    return Path(base) / "nats"


def context_path(name: str) -> Path:
    """The file of context ``name`` (which must be a valid name)."""
    _check_name(name)
    return config_dir() / "context" / f"{name}.json"


def names() -> list[str]:
    """Known contexts, sorted: every non-empty ``*.json`` file in the context directory."""
    folder = config_dir() / "context"
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return []
    out = []
    for entry in entries:
        try:
            if not entry.is_file() or entry.stat().st_size == 0:
                continue
        except OSError:
            continue
        stem, ext = os.path.splitext(entry.name)
        if ext == ".json" and stem:
            out.append(stem)
    return sorted(out)


def selected() -> str | None:
    """The selected context's name (``context.txt``), or None when none is selected."""
    try:
        text = (config_dir() / "context.txt").read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return text or None


def load(name: str = "") -> Context:
    """Read and validate context ``name``; ``""`` is the selected context.

    Raises ContextError for an invalid or unknown name, an empty name with no
    context selected, a file that is not a JSON object, a key of the wrong
    type, or an unsupported key with a value.
    """
    if not name:
        chosen = selected()
        if chosen is None:
            where = config_dir() / "context.txt"
            raise ContextError(f"nats: no context name given and none selected in {where}")
        name = chosen
    path = context_path(name)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ContextError(f"nats: unknown context {name!r}: no file {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ContextError(f"nats: cannot read context file {path}: {exc}") from exc
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ContextError(f"nats: context file {path} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ContextError(f"nats: context file {path} does not hold a JSON object")
    return _from_mapping(name, path, data)


def _check_name(name: str) -> None:
    # The CLI's rule: a name is a file name, never a path.
    if not isinstance(name, str) or not name:
        raise ContextError(f"nats: invalid context name {name!r}")
    if ".." in name or "/" in name or "\\" in name or "\0" in name:
        raise ContextError(
            f"nats: invalid context name {name!r}: it must not contain '..', '/' or '\\'"
        )


def _from_mapping(name: str, path: Path, data: dict[str, Any]) -> Context:
    values: dict[str, Any] = {}
    for f in fields(Context):
        if f.name in ("name", "path") or f.name not in data or data[f.name] is None:
            continue
        raw = data[f.name]
        if f.name == "tls_first":
            if not isinstance(raw, bool):
                raise ContextError(
                    f"nats: context file {path}: key 'tls_first' must be true or false"
                )
            values[f.name] = raw
        elif f.name == "windows_ca_certs_match":
            if not (isinstance(raw, list) and all(isinstance(x, str) for x in raw)):
                key = "windows_ca_certs_match"
                raise ContextError(
                    f"nats: context file {path}: key {key!r} must be a list of strings"
                )
            values[f.name] = tuple(raw)
        else:
            if not isinstance(raw, str):
                raise ContextError(f"nats: context file {path}: key {f.name!r} must be a string")
            if f.name in _PATH_KEYS and raw.startswith(_SECRET_REFERENCES):
                raise ContextError(
                    f"nats: context file {path}: key {f.name!r} is a secret manager "
                    f"reference ({raw.split('://', 1)[0]}://, which the nats CLI resolves "
                    "through its own tool); jsclient reads files only: put the path of the "
                    "file in it"
                )
            values[f.name] = _expand_path(raw) if f.name in _PATH_KEYS else raw
    for key, why in _UNSUPPORTED.items():
        if values.get(key):
            raise ContextError(f"nats: context file {path}: key {key!r} is not supported: {why}")
    return Context(name=name, path=str(path), **values)


def _expand_path(value: str) -> str:
    # As the CLI (Go's os.ExpandEnv, then a leading "~"): $VAR and ${VAR}, and an
    # unset variable becomes empty (os.path.expandvars would leave it as written).
    if not value:
        return value
    expanded = _ENV_VAR.sub(lambda m: os.environ.get(m.group(1) or m.group(2), ""), value)
    return os.path.expanduser(expanded)


#: ``${NAME}`` or ``$NAME``.
_ENV_VAR = re.compile(r"\$\{([^}]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def tls_context(ctx: Context) -> ssl.SSLContext | None:
    """An SSLContext from ``ca`` (trust) and ``cert``/``key`` (client identity), or None."""
    if not (ctx.ca or ctx.cert or ctx.key):
        return None
    if bool(ctx.cert) != bool(ctx.key):
        missing = "key" if ctx.cert else "cert"
        raise ContextError(
            f"nats: context file {ctx.path}: 'cert' and 'key' go together; {missing!r} is empty"
        )
    try:
        tls = ssl.create_default_context(cafile=ctx.ca or None)
        if ctx.cert:
            tls.load_cert_chain(ctx.cert, ctx.key)
    except (OSError, ssl.SSLError) as exc:
        raise ContextError(
            f"nats: context file {ctx.path}: cannot load its TLS files: {exc}"
        ) from exc
    return tls


def connect_options(ctx: Context) -> dict[str, Any]:
    """The :func:`jsclient.connect` keyword arguments context ``ctx`` gives.

    Credentials: ``user``/``password``, else ``creds``, else ``user_jwt``
    (signed with the seed of ``nkey`` or ``user_seed``; unsigned without one),
    else ``nkey``; ``token`` is sent beside any of them. That is the CLI's
    order except that the CLI ranks ``nkey`` above ``user_jwt`` and so never
    pairs them; here a JWT beside an nkey file is signed with its seed (as
    nats.go's ``UserJWTAndSeed``). Only what the context sets is returned, so
    ``connect()``'s defaults stay for the rest.
    """
    out: dict[str, Any] = {"servers": ctx.servers}
    if ctx.user:
        out["user"] = ctx.user
        out["password"] = ctx.password
    elif ctx.creds:
        out["creds"] = ctx.creds
    elif ctx.user_jwt:
        out["user_jwt"] = ctx.user_jwt
        seed = ctx.nkey or ctx.user_seed
        if seed:
            out["nkey_seed"] = seed
    elif ctx.nkey:
        out["nkey_seed"] = ctx.nkey
    if ctx.token:
        out["token"] = ctx.token
    tls = tls_context(ctx)
    if tls is not None:
        out["tls"] = tls
    if ctx.tls_first:
        out["tls_handshake_first"] = True
    if ctx.inbox_prefix:
        out["inbox_prefix"] = ctx.inbox_prefix
    if ctx.jetstream_domain:
        out["jetstream_domain"] = ctx.jetstream_domain
    if ctx.jetstream_api_prefix:
        out["jetstream_api_prefix"] = ctx.jetstream_api_prefix
    return out


def jetstream_defaults(opts: Any, options: dict[str, Any]) -> dict[str, Any]:
    """``nc.jetstream(**options)`` with a context's defaults: without ``domain``
    or ``prefix``, the connection's ``jetstream_domain`` (from its context),
    else its ``jetstream_api_prefix``; the domain wins, as in the nats CLI."""
    if "domain" not in options and "prefix" not in options:
        if opts.jetstream_domain:
            return {**options, "domain": opts.jetstream_domain}
        if opts.jetstream_api_prefix:
            return {**options, "prefix": opts.jetstream_api_prefix}
    return options


__all__ = ["DEFAULT_URL", "Context", "config_dir", "context_path", "load", "names", "selected"]
