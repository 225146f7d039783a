"""``connect(context=...)`` (ADR-21) against real servers: each kind of auth, TLS,
JetStream domain / API prefix and inbox prefix, from hand-written context files
in a temporary ``XDG_CONFIG_HOME``.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from _auth import roundtrip
from _jwt import make_decentralized, new_user_nkey

from jsclient import contexts, errors
from jsclient.server import TLSFiles, make_tls_files
from jsclient.testing import NatsServerFactory

if TYPE_CHECKING:
    from conftest import CoreConnect

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def xdg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cfg = tmp_path / "xdg"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(cfg))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return cfg


@pytest.fixture
def tls_files(tmp_path: Path) -> TLSFiles:
    return make_tls_files(tmp_path / "tls")


def write_context(cfg: Path, name: str, **keys: Any) -> None:
    path = cfg / "nats" / "context" / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(keys), encoding="utf-8")


def test_token_and_comma_separated_url(
    nats_server_factory: NatsServerFactory,
    core_connect: CoreConnect,
    core_free_port: Callable[[], int],
    xdg: Path,
) -> None:
    srv = nats_server_factory(jetstream=False, token="s3cr3t")
    dead = f"nats://127.0.0.1:{core_free_port()}"
    write_context(
        xdg,
        "tok",
        description="CLI-only keys are read and do not get in the way",
        color_scheme="dark",
        jetstream_event_prefix="$JS.EVENT",
        url=f"{dead}, {srv.url}",
        token="s3cr3t",
    )
    nc = core_connect(context="tok", connect_timeout=1.0)
    roundtrip(nc)
    assert nc.connected_url is not None and str(srv.port) in str(nc.connected_url)
    # An explicit argument wins over the context's value.
    write_context(xdg, "badtok", url=srv.url, token="wrong")
    with pytest.raises(errors.AuthorizationError):
        core_connect(context="badtok")
    roundtrip(core_connect(context="badtok", token="s3cr3t"))


def test_user_password_and_selected_context(
    nats_server_factory: NatsServerFactory, core_connect: CoreConnect, xdg: Path
) -> None:
    srv = nats_server_factory(jetstream=False, user="alice", password="pa$$")
    write_context(xdg, "up", url=srv.url, user="alice", password="pa$$")
    (xdg / "nats" / "context.txt").write_text("up\n")
    roundtrip(core_connect(context=""))
    write_context(xdg, "wrongpw", url=srv.url, user="alice", password="nope")
    with pytest.raises(errors.AuthorizationError):
        core_connect(context="wrongpw")


def test_creds_operator_mode(
    nats_server_factory: NatsServerFactory,
    core_connect: CoreConnect,
    xdg: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    d = make_decentralized()
    srv = nats_server_factory(jetstream=False, config=d.server_config())
    home = tmp_path / "home"
    home.mkdir()
    d.write_creds(home / "user.creds")
    write_context(xdg, "creds", url=srv.url, creds="~/user.creds")  # ~ is expanded
    roundtrip(core_connect(context="creds"))
    other = make_decentralized()
    monkeypatch.setenv("CTX_CREDS", other.write_creds(tmp_path / "other.creds"))
    write_context(xdg, "stranger", url=srv.url, creds="$CTX_CREDS")
    with pytest.raises(errors.AuthorizationError):
        core_connect(context="stranger")


def test_nkey_file(
    nats_server_factory: NatsServerFactory, core_connect: CoreConnect, xdg: Path, tmp_path: Path
) -> None:
    key = new_user_nkey()
    srv = nats_server_factory(jetstream=False, nkey_users=[key.public])
    seed_file = tmp_path / "user.nk"
    seed_file.write_bytes(key.seed + b"\n")
    write_context(xdg, "nk", url=srv.url, nkey=str(seed_file))
    roundtrip(core_connect(context="nk"))
    stranger = tmp_path / "stranger.nk"
    stranger.write_bytes(new_user_nkey().seed + b"\n")
    write_context(xdg, "nk2", url=srv.url, nkey=str(stranger))
    with pytest.raises(errors.AuthorizationError):
        core_connect(context="nk2")


def test_user_jwt_with_nkey_or_user_seed(
    nats_server_factory: NatsServerFactory, core_connect: CoreConnect, xdg: Path, tmp_path: Path
) -> None:
    """``user_jwt`` signed with the seed in ``nkey`` (a file) or ``user_seed``."""
    d = make_decentralized()
    srv = nats_server_factory(jetstream=False, config=d.server_config())
    seed_file = tmp_path / "user.nk"
    seed_file.write_bytes(d.user.seed + b"\n")
    write_context(xdg, "jwtnk", url=srv.url, user_jwt=d.user_jwt, nkey=str(seed_file))
    roundtrip(core_connect(context="jwtnk"))
    write_context(xdg, "jwtseed", url=srv.url, user_jwt=d.user_jwt, user_seed=d.user.seed.decode())
    roundtrip(core_connect(context="jwtseed"))
    # The signature is checked: another seed, or none, is refused.
    wrong = new_user_nkey().seed.decode()
    write_context(xdg, "jwtwrong", url=srv.url, user_jwt=d.user_jwt, user_seed=wrong)
    with pytest.raises(errors.AuthorizationError):
        core_connect(context="jwtwrong")
    write_context(xdg, "jwtonly", url=srv.url, user_jwt=d.user_jwt)
    with pytest.raises(errors.AuthorizationError):
        core_connect(context="jwtonly")


def test_tls_cert_key_ca_with_client_verification(
    nats_server_factory: NatsServerFactory,
    core_connect: CoreConnect,
    xdg: Path,
    tls_files: TLSFiles,
) -> None:
    srv = nats_server_factory(jetstream=False, tls=tls_files.server_config(verify=True))
    write_context(
        xdg,
        "mtls",
        url=srv.url,
        ca=tls_files.ca_file,
        cert=tls_files.client_cert_file,
        key=tls_files.client_key_file,
    )
    nc = core_connect(context="mtls")
    assert isinstance(nc._conn._sock, ssl.SSLSocket)
    roundtrip(nc)
    # Without the client certificate the server refuses the handshake.
    write_context(xdg, "caonly", url=srv.url, ca=tls_files.ca_file)
    with pytest.raises((errors.SecureConnFailedError, errors.NoServersError)):
        core_connect(context="caonly", connect_timeout=1.0)


def test_tls_first(
    nats_server_factory: NatsServerFactory,
    core_connect: CoreConnect,
    xdg: Path,
    tls_files: TLSFiles,
) -> None:
    srv = nats_server_factory(
        jetstream=False, tls=tls_files.server_config(), tls_handshake_first=True
    )
    write_context(xdg, "first", url=srv.url, ca=tls_files.ca_file, tls_first=True)
    nc = core_connect(context="first")
    assert isinstance(nc._conn._sock, ssl.SSLSocket)
    roundtrip(nc)
    # The same context without tls_first waits for an INFO the server never sends first.
    write_context(xdg, "notfirst", url=srv.url, ca=tls_files.ca_file)
    with pytest.raises(errors.Error):
        core_connect(context="notfirst", connect_timeout=1.0, max_reconnect_attempts=0)


def test_inbox_prefix(
    nats_server_factory: NatsServerFactory, core_connect: CoreConnect, xdg: Path
) -> None:
    srv = nats_server_factory(jetstream=False)
    write_context(xdg, "inbox", url=srv.url, inbox_prefix="_CTX_INBOX")
    nc = core_connect(context="inbox")
    replies: list[str] = []

    def responder(m: Any) -> None:
        replies.append(m.reply)
        m.respond(b"ok")

    nc.subscribe("svc.inbox", cb=responder)
    assert nc.request("svc.inbox", b"", timeout=5).data == b"ok"
    assert replies and replies[0].startswith("_CTX_INBOX.")


def test_jetstream_domain(
    nats_server_factory: NatsServerFactory, core_connect: CoreConnect, xdg: Path, tmp_path: Path
) -> None:
    store = tmp_path / "js"
    srv = nats_server_factory(
        jetstream=False, config=f'jetstream {{ store_dir: "{store}", domain: hub }}'
    )
    write_context(xdg, "hub", url=srv.url, jetstream_domain="hub")
    nc = core_connect(context="hub")
    js = nc.jetstream()
    assert js._prefix == "$JS.hub.API"
    js.create_stream(name="ORDERS", subjects=["orders.>"])
    plain = core_connect(srv.url)
    assert plain.jetstream(domain="hub").stream("ORDERS").info().config.name == "ORDERS"
    # The domain is really used: one no server serves gets no answer.
    write_context(xdg, "nowhere", url=srv.url, jetstream_domain="nowhere")
    with pytest.raises(errors.Error):
        core_connect(context="nowhere").jetstream(timeout=1.0).stream("ORDERS")
    # An explicit prefix or domain wins over the context's.
    assert nc.jetstream(prefix="$JS.API")._prefix == "$JS.API"
    assert nc.jetstream(domain="other")._prefix == "$JS.other.API"


def test_jetstream_api_prefix(
    nats_server_factory: NatsServerFactory, core_connect: CoreConnect, xdg: Path, tmp_path: Path
) -> None:
    """An account that reaches another account's JetStream through an import under a prefix."""
    store = tmp_path / "js"
    config = f"""
jetstream {{ store_dir: "{store}" }}
accounts {{
  JS: {{
    jetstream: enabled
    users: [ {{ user: js, password: js }} ]
    exports: [ {{ service: "$JS.API.>" }} ]
  }}
  APP: {{
    users: [ {{ user: app, password: app }} ]
    imports: [ {{ service: {{ account: JS, subject: "$JS.API.>" }}, to: "JS.acc.API.>" }} ]
  }}
}}
"""
    srv = nats_server_factory(jetstream=False, config=config)
    write_context(
        xdg, "app", url=srv.url, user="app", password="app", jetstream_api_prefix="JS.acc.API"
    )
    nc = core_connect(context="app")
    js = nc.jetstream()
    assert js._prefix == "JS.acc.API"
    js.create_stream(name="VIA_IMPORT", subjects=["via.>"])
    owner = core_connect(srv.url, user="js", password="js")
    assert owner.jetstream().stream("VIA_IMPORT").info().config.name == "VIA_IMPORT"


def test_unsupported_key_stops_connect(core_connect: CoreConnect, xdg: Path) -> None:
    write_context(xdg, "nsc", url="nats://127.0.0.1:1", nsc="nsc://op/acc/user")
    with pytest.raises(errors.ContextError, match="'nsc'"):
        core_connect(context="nsc")
    assert contexts.names() == ["nsc"]
