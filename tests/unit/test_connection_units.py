"""Connection pieces that need no server: URLs, credentials, CONNECT options, -ERR mapping."""

from __future__ import annotations

import base64
import inspect
import os
from pathlib import Path
from typing import Any

import pytest

import jsclient
from jsclient import errors
from jsclient._io.auth import connect_options
from jsclient._io.auth import read_creds as _read_creds
from jsclient._io.auth import seed_bytes as _seed_bytes
from jsclient._io.auth import sign_nonce as _sign_nonce
from jsclient._io.handshake import err_to_exception
from jsclient._io.options import Options
from jsclient._io.servers import DEFAULT_PORT, ServerAddr, ServerPool


def _nkeys() -> Any:
    """The nkeys module, or skip the test that signs (the nkeys extra is not installed)."""
    return pytest.importorskip("nkeys", reason="the signing tests need jsclient[nkeys]")


def _user_seed() -> bytes:
    return bytes(_nkeys().encode_seed(os.urandom(32), _nkeys().PREFIX_BYTE_USER))


def _creds(jwt: str, seed: bytes) -> str:
    return (
        "-----BEGIN NATS USER JWT-----\n"
        f"{jwt}\n"
        "------END NATS USER JWT------\n"
        "\n"
        "-----BEGIN USER NKEY SEED-----\n"
        f"{seed.decode()}\n"
        "------END USER NKEY SEED------\n"
    )


# -- ServerAddr.parse ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "scheme", "host", "port"),
    [
        ("nats://127.0.0.1:4222", "nats", "127.0.0.1", 4222),
        ("nats://example.com:1234", "nats", "example.com", 1234),
        ("nats://example.com", "nats", "example.com", DEFAULT_PORT),
        ("127.0.0.1:5000", "nats", "127.0.0.1", 5000),
        ("localhost", "nats", "localhost", DEFAULT_PORT),
        ("  nats://h:1  ", "nats", "h", 1),
        ("tls://secure.example:4443", "tls", "secure.example", 4443),
        ("nats://[::1]:4222", "nats", "::1", 4222),
    ],
)
def test_parse(url: str, scheme: str, host: str, port: int) -> None:
    addr = ServerAddr.parse(url)
    assert (addr.scheme, addr.host, addr.port) == (scheme, host, port)
    assert addr.user is None and addr.password is None
    assert not addr.discovered
    assert addr.url == f"{scheme}://{host}:{port}"


def test_parse_credentials() -> None:
    addr = ServerAddr.parse("nats://alice:secret@host:4222")
    assert (addr.user, addr.password) == ("alice", "secret")
    assert addr.url == "nats://host:4222"  # credentials never leak into the URL
    token = ServerAddr.parse("nats://mytoken@host:4222")
    assert (token.user, token.password) == ("mytoken", None)


def test_parse_discovered() -> None:
    assert ServerAddr.parse("10.0.0.1:4222", discovered=True).discovered


@pytest.mark.parametrize("url", ["http://h:1", "ws://h:1", "ftp://h"])
def test_parse_rejects_schemes(url: str) -> None:
    with pytest.raises(errors.Error):
        ServerAddr.parse(url)


# -- creds files and seeds ----------------------------------------------------------


def test_read_creds(tmp_path: Path) -> None:
    seed = _user_seed()
    path = tmp_path / "u.creds"
    path.write_text(_creds("eyJhbGciOi.payload.sig", seed))
    assert _read_creds(str(path)) == (b"eyJhbGciOi.payload.sig", seed)


def test_read_creds_crlf_and_indent(tmp_path: Path) -> None:
    seed = _user_seed()
    path = tmp_path / "u.creds"
    text = _creds("the.jwt.here", seed).replace("\n", "\r\n").replace("the.jwt", "  the.jwt")
    path.write_bytes(text.encode())
    assert _read_creds(str(path)) == (b"the.jwt.here", seed)


def test_read_creds_missing_parts(tmp_path: Path) -> None:
    with pytest.raises(errors.InvalidUserCredentialsError):
        _read_creds(str(tmp_path / "missing.creds"))
    only_jwt = tmp_path / "jwt.creds"
    only_jwt.write_text(
        "-----BEGIN NATS USER JWT-----\nabc.def.ghi\n------END NATS USER JWT------\n"
    )
    with pytest.raises(errors.InvalidUserCredentialsError):
        _read_creds(str(only_jwt))


def test_seed_bytes_inline_and_file(tmp_path: Path) -> None:
    seed = _user_seed()
    assert _seed_bytes(seed.decode()) == seed
    assert _seed_bytes("  " + seed.decode() + "\n") == seed
    path = tmp_path / "seed.nk"
    path.write_bytes(b"# a comment\n" + seed + b"\n")
    assert _seed_bytes(str(path)) == seed
    with pytest.raises(errors.InvalidUserCredentialsError):
        _seed_bytes(str(tmp_path / "none.nk"))
    empty = tmp_path / "empty.nk"
    empty.write_text("nothing\n")
    with pytest.raises(errors.InvalidUserCredentialsError):
        _seed_bytes(str(empty))


def test_sign_nonce_verifies() -> None:
    seed = _user_seed()
    public, sig = _sign_nonce(seed, "abc-nonce")
    kp = _nkeys().from_seed(bytearray(seed))
    assert public == kp.public_key.decode() and public.startswith("U")
    raw = base64.urlsafe_b64decode(sig + "=" * (-len(sig) % 4))
    assert "=" not in sig
    assert kp.verify(b"abc-nonce", raw)


def test_sign_nonce_bad_seed() -> None:
    _nkeys()
    with pytest.raises(errors.InvalidUserCredentialsError):
        _sign_nonce(b"SUNOTAVALIDSEED", "nonce")


def test_nkey_auth_without_the_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "nkeys", None)  # as if not installed
    with pytest.raises(errors.MissingExtraError, match=r"jsclient\[nkeys\]") as ei:
        jsclient.connect("nats://127.0.0.1:1", nkey_seed="SUAM" + "A" * 54)
    assert isinstance(ei.value, ImportError)
    with pytest.raises(errors.MissingExtraError):
        _sign_nonce(b"SUAM", "nonce")


# -- CONNECT options ------------------------------------------------------------------


def _options(url: str = "nats://127.0.0.1:4222", **kw: Any) -> dict[str, Any]:
    opts = Options(servers=[url], **kw)
    srv = ServerAddr.parse(url)
    return connect_options(opts, srv, {"nonce": "n0nce"}, False)


def test_connect_options_defaults() -> None:
    out = _options()
    assert out["verbose"] is False and out["pedantic"] is False
    assert out["headers"] is True and out["no_responders"] is True
    assert out["echo"] is True and out["protocol"] == 1
    assert out["lang"] and out["version"] == jsclient.__version__
    for key in ("user", "pass", "auth_token", "jwt", "nkey", "sig", "name"):
        assert key not in out


def test_connect_options_name_and_no_echo() -> None:
    out = _options(name="my-app", no_echo=True)
    assert out["name"] == "my-app" and out["echo"] is False


def test_connect_options_user_password() -> None:
    out = _options(user="alice", password="pw")
    assert (out["user"], out["pass"]) == ("alice", "pw")
    url = _options("nats://bob:pw2@h:1")
    assert (url["user"], url["pass"]) == ("bob", "pw2")
    # URL credentials win over the options.
    both = _options("nats://bob:pw2@h:1", user="alice", password="pw")
    assert (both["user"], both["pass"]) == ("bob", "pw2")


def test_connect_options_token() -> None:
    assert _options(token="tok")["auth_token"] == "tok"
    url = _options("nats://tok2@h:1")
    assert url["auth_token"] == "tok2" and "user" not in url


def test_connect_options_nkey() -> None:
    seed = _user_seed()
    out = _options(nkey_seed=seed.decode())
    kp = _nkeys().from_seed(bytearray(seed))
    assert out["nkey"] == kp.public_key.decode()
    raw = base64.urlsafe_b64decode(out["sig"] + "=" * (-len(out["sig"]) % 4))
    assert kp.verify(b"n0nce", raw)


def test_connect_options_creds(tmp_path: Path) -> None:
    seed = _user_seed()
    path = tmp_path / "u.creds"
    path.write_text(_creds("hdr.claims.sig", seed))
    out = _options(creds=str(path))
    assert out["jwt"] == "hdr.claims.sig"
    raw = base64.urlsafe_b64decode(out["sig"] + "=" * (-len(out["sig"]) % 4))
    assert _nkeys().from_seed(bytearray(seed)).verify(b"n0nce", raw)
    assert "nkey" not in out


# -- misc -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "cls"),
    [
        ("Authorization Violation", errors.AuthorizationError),
        ("User Authentication Expired", errors.AuthorizationError),
        ("Stale Connection", errors.StaleConnectionError),
        ("Maximum Payload Violation", errors.MaxPayloadError),
        ("Permissions Violation for Publish to foo", errors.PermissionViolationError),
    ],
)
def test_err_to_exception(text: str, cls: type[errors.Error]) -> None:
    exc = err_to_exception(text)
    assert type(exc) is cls
    assert text in str(exc)


def test_pool_needs_a_server() -> None:
    with pytest.raises(errors.NoServersError):
        ServerPool([])


def test_pool_keeps_order_with_dont_randomize() -> None:
    urls = [f"nats://h{i}:4222" for i in range(10)]
    assert [s.url for s in ServerPool(urls, randomize=False)] == urls


def test_pool_rotates_and_drops_exhausted_servers() -> None:
    pool = ServerPool(["nats://a:1", "nats://b:2"], randomize=False, max_attempts=2)
    a = pool.next_server()
    b = pool.next_server()
    assert a is not None and b is not None and (a.host, b.host) == ("a", "b")
    pool.attempt(a, 1.0)
    pool.attempt(a, 2.0)  # a has failed max_attempts times in a row: dropped
    assert pool.next_server() is b
    assert pool.next_server() is b
    pool.attempt(b, 3.0)
    pool.connected(b)  # a success resets the count
    assert b.attempts == 0 and pool.current is b
    pool.attempt(b, 4.0)
    pool.attempt(b, 5.0)
    assert pool.next_server() is None


def test_pool_never_gives_up_with_negative_attempts() -> None:
    pool = ServerPool(["nats://a:1"], max_attempts=-1)
    srv = pool.next_server()
    assert srv is not None
    for t in range(100):
        pool.attempt(srv, float(t))
    assert pool.next_server() is srv


def test_pool_auth_failure_twice_drops_the_server() -> None:
    pool = ServerPool(["nats://a:1"], max_attempts=-1)
    srv = pool.next_server()
    assert srv is not None
    pool.auth_failed(srv)
    assert pool.next_server() is srv
    pool.auth_failed(srv)
    pool.max_attempts = 60
    assert pool.next_server() is None


def test_pool_waits_reconnect_wait_after_an_attempt() -> None:
    srv = ServerAddr.parse("nats://a:1")
    assert ServerPool.wait_before(srv, 100.0, 2.0, 0.0) == 0.0  # never tried
    ServerPool.attempt(srv, 100.0)
    assert ServerPool.wait_before(srv, 100.5, 2.0, 0.0) == pytest.approx(1.5)
    assert 1.5 <= ServerPool.wait_before(srv, 100.5, 2.0, 0.1) <= 1.6
    assert ServerPool.wait_before(srv, 103.0, 2.0, 0.1) == 0.0


def test_pool_learns_discovered_servers_once() -> None:
    pool = ServerPool(["nats://a:1"], randomize=False)
    assert pool.learn(["b:2", "nats://a:1", "c:3", "bad://x"])
    assert [s.url for s in pool] == ["nats://a:1", "nats://b:2", "nats://c:3"]
    assert all(s.discovered for s in pool.servers[1:])
    assert not pool.learn(["b:2"])
    off = ServerPool(["nats://a:1"], learn=False)
    assert not off.learn(["b:2"]) and len(off.servers) == 1


def test_pool_discovered_servers_inherit_tls() -> None:
    pool = ServerPool(["tls://a:1"], randomize=False)
    pool.connected(pool.servers[0])
    pool.learn(["b:2"])
    assert pool.servers[1].scheme == "tls"


def test_parse_rejects_a_bad_port() -> None:
    with pytest.raises(errors.Error, match="port"):
        ServerAddr.parse("nats://h:notaport")


def test_connect_defaults_match_the_documented_api() -> None:
    params = inspect.signature(jsclient.connect).parameters
    expected = {
        "servers": "nats://127.0.0.1:4222",
        "name": None,
        "connect_timeout": 2.0,
        "reconnect": True,
        "max_reconnect_attempts": 60,
        "reconnect_wait": 2.0,
        "reconnect_buffer_size": 8 * 1024 * 1024,
        "ping_interval": 120.0,
        "max_pings_outstanding": 2,
        "no_echo": False,
        "inbox_prefix": "_INBOX",
    }
    for name, default in expected.items():
        assert params[name].default == default, name
    for name in ("user", "password", "token", "creds", "nkey_seed", "tls", "error_cb"):
        assert params[name].default is None


def test_connect_rejects_unknown_keyword() -> None:
    with pytest.raises(TypeError, match="bogus"):
        jsclient.connect("nats://127.0.0.1:1", bogus=1)
