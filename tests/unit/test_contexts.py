"""NATS CLI contexts (ADR-21): paths, selection, every key, validation, override order.

Pure file handling; the connections themselves are in
tests/integration/test_contexts_connect.py.
"""

from __future__ import annotations

import json
import ssl
from pathlib import Path
from typing import Any

import pytest

import jsclient
from jsclient import contexts, errors
from jsclient.connection import Options
from jsclient.server import make_tls_files

SEED = "SUAMLK2ZNL35WSMW37E7UD4VZ7ELPKW7DHC3BWBSD2GCZ7IUQQXZIORRBU"

EVERY_KEY: dict[str, Any] = {
    "description": "orders, production",
    "url": "nats://a.example:4222, nats://b.example:4223,,",
    "token": "tok",
    "user": "alice",
    "password": "pw",
    "creds": "~/creds/orders.creds",
    "nkey": "$CTX_TEST_DIR/user.nk",
    "cert": "~/tls/cert.pem",
    "key": "~/tls/key.pem",
    "ca": "~/tls/ca.pem",
    "nsc": "",
    "jetstream_domain": "hub",
    "jetstream_api_prefix": "$JS.hub.API",
    "jetstream_event_prefix": "$JS.hub.EVENT",
    "inbox_prefix": "_INBOX_orders",
    "user_jwt": "eyJ0eXAiOiJKV1QifQ.e30.sig",
    "user_seed": SEED,
    "tls_first": True,
    "color_scheme": "dark",
    "socks_proxy": "",
    "windows_cert_store": "",
    "windows_cert_match_by": "",
    "windows_cert_match": "",
    "windows_ca_certs_match": None,
}


@pytest.fixture
def xdg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh XDG_CONFIG_HOME (and HOME, so ``~`` is inside the test dir)."""
    home = tmp_path / "home"
    home.mkdir()
    cfg = tmp_path / "xdg"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(cfg))
    return cfg


def write_context(cfg: Path, name: str, body: dict[str, Any] | str) -> Path:
    path = cfg / "nats" / "context" / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body if isinstance(body, str) else json.dumps(body), encoding="utf-8")
    return path


def select(cfg: Path, name: str) -> None:
    (cfg / "nats").mkdir(parents=True, exist_ok=True)
    (cfg / "nats" / "context.txt").write_text(name + "\n", encoding="utf-8")


def test_every_key_is_read(xdg: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTX_TEST_DIR", "/keys")
    home = Path.home()
    path = write_context(xdg, "orders", EVERY_KEY)
    ctx = contexts.load("orders")
    assert ctx.name == "orders" and ctx.path == str(path)
    assert ctx.description == "orders, production"
    assert ctx.url == EVERY_KEY["url"]  # as written
    assert ctx.servers == ["nats://a.example:4222", "nats://b.example:4223"]
    assert (ctx.token, ctx.user, ctx.password) == ("tok", "alice", "pw")
    # Path keys: $VAR and a leading ~ are expanded.
    assert ctx.creds == str(home / "creds" / "orders.creds")
    assert ctx.nkey == "/keys/user.nk"
    assert ctx.cert == str(home / "tls" / "cert.pem")
    assert ctx.key == str(home / "tls" / "key.pem")
    assert ctx.ca == str(home / "tls" / "ca.pem")
    assert ctx.nsc == ""
    assert ctx.jetstream_domain == "hub"
    assert ctx.jetstream_api_prefix == "$JS.hub.API"
    assert ctx.jetstream_event_prefix == "$JS.hub.EVENT"
    assert ctx.inbox_prefix == "_INBOX_orders"
    assert ctx.user_jwt == EVERY_KEY["user_jwt"] and ctx.user_seed == SEED
    assert ctx.tls_first is True
    assert ctx.color_scheme == "dark"
    assert ctx.socks_proxy == ""
    assert ctx.windows_cert_store == ctx.windows_cert_match_by == ctx.windows_cert_match == ""
    assert ctx.windows_ca_certs_match == ()
    with pytest.raises(AttributeError):
        ctx.url = "nats://elsewhere:4222"  # type: ignore[misc]  # frozen


def test_empty_context_defaults(xdg: Path) -> None:
    write_context(xdg, "bare", {"name": "bare", "some_future_key": 1})
    ctx = contexts.load("bare")
    assert ctx.url == "" and ctx.servers == [contexts.DEFAULT_URL] == ["nats://127.0.0.1:4222"]
    assert ctx.tls_first is False and ctx.user == "" and ctx.windows_ca_certs_match == ()
    assert contexts.connect_options(ctx) == {"servers": ["nats://127.0.0.1:4222"]}


def test_xdg_config_home_else_home_dot_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", "")  # empty: as unset
    write_context(home / ".config", "dotconfig", {"url": "nats://dot:1"})
    assert contexts.config_dir() == home / ".config" / "nats"
    assert contexts.names() == ["dotconfig"]
    assert contexts.load("dotconfig").url == "nats://dot:1"
    monkeypatch.delenv("XDG_CONFIG_HOME")
    assert contexts.load("dotconfig").url == "nats://dot:1"
    xdg = tmp_path / "xdg"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(xdg))
    write_context(xdg, "xdgctx", {"url": "nats://xdg:1"})
    assert contexts.names() == ["xdgctx"]
    assert contexts.context_path("xdgctx") == xdg / "nats" / "context" / "xdgctx.json"
    with pytest.raises(errors.ContextError, match="dotconfig"):
        contexts.load("dotconfig")


def test_names_sorted_and_filtered(xdg: Path) -> None:
    assert contexts.names() == []  # no directory yet
    for name in ("zeta", "alpha", "ngs.js", "Mid"):
        write_context(xdg, name, {"url": "nats://x:1"})
    write_context(xdg, "empty", "")  # zero bytes: not a context
    (xdg / "nats" / "context" / "notes.txt").write_text("x")
    (xdg / "nats" / "context" / "dir.json").mkdir()
    assert contexts.names() == ["Mid", "alpha", "ngs.js", "zeta"]


def test_selected_context(xdg: Path) -> None:
    assert contexts.selected() is None
    select(xdg, "")
    assert contexts.selected() is None
    with pytest.raises(errors.ContextError, match=r"context\.txt"):
        contexts.load("")
    write_context(xdg, "ngs", {"url": "nats://ngs:4222"})
    write_context(xdg, "other", {"url": "nats://other:4222"})
    select(xdg, "  ngs ")
    assert contexts.selected() == "ngs"
    assert contexts.load("").name == "ngs"
    assert contexts.load().url == "nats://ngs:4222"
    assert contexts.load("other").url == "nats://other:4222"


def test_unknown_and_invalid_names(xdg: Path) -> None:
    with pytest.raises(errors.ContextError) as info:
        contexts.load("missing")
    assert "missing" in str(info.value)
    assert str(xdg / "nats" / "context" / "missing.json") in str(info.value)
    write_context(xdg, "ok", {})
    (xdg / "nats" / "secret.json").write_text("{}")  # what "../secret" would reach
    for bad in ("../secret", "a/b", "a\\b", "..", "x..y"):
        with pytest.raises(errors.ContextError, match="invalid context name"):
            contexts.load(bad)
    select(xdg, "../secret")  # a tampered context.txt cannot escape either
    with pytest.raises(errors.ContextError, match="invalid context name"):
        contexts.load("")
    assert isinstance(errors.ContextError(), errors.Error)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("nsc", "nsc://operator/account/user"),
        ("windows_cert_store", "windowscurrentuser"),
        ("windows_cert_match_by", "subject"),
        ("windows_cert_match", "my-cert"),
        ("windows_ca_certs_match", ["my-ca"]),
        ("socks_proxy", "socks5://proxy:1080"),
    ],
)
def test_unsupported_keys_named(xdg: Path, key: str, value: Any) -> None:
    path = write_context(xdg, "unsup", {"url": "nats://x:1", key: value})
    with pytest.raises(errors.ContextError) as info:
        contexts.load("unsup")
    assert repr(key) in str(info.value) and str(path) in str(info.value)
    with pytest.raises(errors.ContextError, match=repr(key)):
        jsclient.connect(context="unsup")


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "JSON object"),
        (json.dumps({"url": 4222}), "'url' must be a string"),
        (json.dumps({"tls_first": "yes"}), "'tls_first' must be true or false"),
        (json.dumps({"windows_ca_certs_match": "ca"}), "list of strings"),
    ],
)
def test_malformed_files(xdg: Path, body: str, match: str) -> None:
    path = write_context(xdg, "bad", body)
    with pytest.raises(errors.ContextError, match=match) as info:
        contexts.load("bad")
    assert str(path) in str(info.value)


def test_tls_files(xdg: Path, tmp_path: Path) -> None:
    tls = make_tls_files(tmp_path / "tls")
    write_context(
        xdg,
        "tls",
        {"ca": tls.ca_file, "cert": tls.client_cert_file, "key": tls.client_key_file},
    )
    opts = contexts.connect_options(contexts.load("tls"))
    assert isinstance(opts["tls"], ssl.SSLContext)
    write_context(xdg, "half", {"cert": tls.client_cert_file})
    with pytest.raises(errors.ContextError, match="'key' is empty"):
        contexts.connect_options(contexts.load("half"))
    write_context(xdg, "nofile", {"ca": str(tmp_path / "nope.pem")})
    with pytest.raises(errors.ContextError, match="TLS files"):
        contexts.connect_options(contexts.load("nofile"))


def test_credentials_order(xdg: Path) -> None:
    """user/password, else creds, else user_jwt (+ seed), else nkey; token goes beside."""

    def opts(body: dict[str, Any]) -> dict[str, Any]:
        write_context(xdg, "c", body)
        out = contexts.connect_options(contexts.load("c"))
        out.pop("servers")
        return out

    everything = {"user": "u", "password": "p", "creds": "/c", "nkey": "/n", "user_jwt": "J"}
    assert opts({**everything, "token": "t"}) == {"user": "u", "password": "p", "token": "t"}
    assert opts({**everything, "user": ""}) == {"creds": "/c"}
    assert opts({"nkey": "/n", "user_jwt": "J"}) == {"user_jwt": "J", "nkey_seed": "/n"}
    assert opts({"user_seed": SEED, "user_jwt": "J"}) == {"user_jwt": "J", "nkey_seed": SEED}
    assert opts({"user_jwt": "J"}) == {"user_jwt": "J"}
    assert opts({"nkey": "/n"}) == {"nkey_seed": "/n"}
    assert opts({"tls_first": True, "inbox_prefix": "_I", "jetstream_domain": "d"}) == {
        "tls_handshake_first": True,
        "inbox_prefix": "_I",
        "jetstream_domain": "d",
    }
    assert opts({"jetstream_api_prefix": "$JS.x.API", "jetstream_event_prefix": "e"}) == {
        "jetstream_api_prefix": "$JS.x.API"
    }


class _FakeClient:
    """Stands in for Client so connect() can be checked without a server."""

    last: Options | None = None

    def __init__(self, opts: Options) -> None:
        _FakeClient.last = opts

    def _start(self) -> None:
        pass


def _connect_opts(**kwargs: Any) -> Options:
    jsclient.connect(**kwargs)
    assert _FakeClient.last is not None
    return _FakeClient.last


def test_explicit_arguments_override_the_context(
    xdg: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jsclient, "Client", _FakeClient)
    write_context(
        xdg,
        "orders",
        {
            "url": "nats://a:1,nats://b:2",
            "user": "alice",
            "password": "pw",
            "token": "tok",
            "inbox_prefix": "_CTX",
            "tls_first": True,
            "jetstream_domain": "hub",
        },
    )
    o = _connect_opts(context="orders")
    assert o.servers == ["nats://a:1", "nats://b:2"]
    assert (o.user, o.password, o.token, o.inbox_prefix) == ("alice", "pw", "tok", "_CTX")
    assert o.tls_handshake_first is True and o.jetstream_domain == "hub"
    # Each argument given wins, even when it equals connect()'s default value.
    o = _connect_opts(
        context="orders",
        servers="nats://c:3",
        user="bob",
        inbox_prefix="_INBOX",
        tls_handshake_first=False,
        jetstream_domain=None,
    )
    assert o.servers == ["nats://c:3"]
    assert (o.user, o.password, o.token, o.inbox_prefix) == ("bob", "pw", "tok", "_INBOX")
    assert o.tls_handshake_first is False and o.jetstream_domain is None
    # Positional servers too.
    jsclient.connect("nats://d:4", context="orders")
    assert _FakeClient.last is not None and _FakeClient.last.servers == ["nats://d:4"]
    # context="" is the selected one; context=None reads nothing.
    select(xdg, "orders")
    assert _connect_opts(context="").user == "alice"
    o = _connect_opts()
    assert o.user is None and o.servers == ["nats://127.0.0.1:4222"]
    with pytest.raises(errors.ContextError, match="nope"):
        jsclient.connect(context="nope")
    with pytest.raises(TypeError):
        jsclient.connect(context="orders", no_such_option=1)


def test_an_unset_variable_expands_to_nothing(xdg: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # As the nats CLI (Go's os.ExpandEnv): set variables expand, unset ones vanish.
    monkeypatch.setenv("JSC_SET", "/keys")
    monkeypatch.delenv("JSC_UNSET", raising=False)
    write_context(
        xdg, "vars", {"creds": "${JSC_SET}/${JSC_UNSET}user.creds", "ca": "$JSC_UNSET/ca.pem"}
    )
    ctx = contexts.load("vars")
    assert ctx.creds == "/keys/user.creds" and ctx.ca == "/ca.pem"


def test_a_secret_manager_reference_is_a_context_error(xdg: Path) -> None:
    write_context(xdg, "op", {"creds": "op://Private/nats/user.creds"})
    with pytest.raises(errors.ContextError, match=r"'creds' is a secret manager reference \(op://"):
        contexts.load("op")
