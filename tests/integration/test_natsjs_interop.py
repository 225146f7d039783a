"""jsclient and nats.js (the npm ``@nats-io`` 3.x packages) share object stores and
buckets on one server.

nats.js runs as small node scripts in ``tests/natsjs``, installed and run by
``tests/_natsjs.py`` (the tests skip without node or npm).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _js import eventually
from _natsjs import natsjs_fixture  # noqa: F401 (the natsjs fixture)
from _natsjs import node as _node

import jsclient
from jsclient.api import ExternalStream, ObjectLink, StreamSource
from jsclient.client import Client
from jsclient.jetstream import JetStream
from jsclient.server import NatsServer
from jsclient.testing import NatsServerFactory


@pytest.fixture
def js(nc: Client) -> JetStream:
    return nc.jetstream()


# -- object store: a link nats.js adds ----------------------------------------------


@pytest.mark.parametrize("made_by", ["jsclient", "natsjs"])
def test_jsclient_reads_a_link_nats_js_adds(
    natsjs: Path, nats_server: NatsServer, js: JetStream, made_by: str
) -> None:
    data = "the target's bytes ü" * 100
    if made_by == "jsclient":
        # jsclient makes the store and the object; nats.js links to it in the same store.
        target_bucket = link_bucket = "LNK"
        js.create_object_store(bucket="LNK", storage="memory").put("n", data.encode())
        out = _node(natsjs, "obj_link.mjs", nats_server.url, "LNK", "n-link", "LNK", "n")
    else:
        # nats.js makes both stores, the object, and a link to it from the other store.
        target_bucket, link_bucket = "SRC", "LNK2"
        out = _node(natsjs, "obj_link.mjs", nats_server.url, "LNK2", "n-link", "SRC", "n", data)
    # What nats.js stores for a link: no nuid, size, chunks or digest.
    assert out["link"]["options"] == {"link": {"bucket": target_bucket, "name": "n"}}
    assert not {"nuid", "size", "chunks", "digest"} & set(out["link"])

    obs = js.object_store(link_bucket)
    info = obs.info("n-link")
    assert info.is_link() and info.options is not None
    assert info.options.link == ObjectLink(bucket=target_bucket, name="n")
    assert (info.name, info.nuid, info.size, info.chunks) == ("n-link", "", 0, 0)
    assert info.mtime  # the meta message's time
    with obs.get("n-link") as r:  # followed to the target
        assert r.info.nuid == out["target"]["nuid"] and r.info.size == len(data.encode())
        assert r.readall() == data.encode()
    assert "n-link" in [i.name for i in obs.list()]
    with obs.watch() as w:
        seen = []
        while (item := w.next(timeout=5.0)) is not None:
            seen.append(item)
    links = [i for i in seen if i.name == "n-link"]
    assert len(links) == 1 and links[0].is_link()


def test_jsclient_watch_sees_a_link_nats_js_adds(
    natsjs: Path, nats_server: NatsServer, js: JetStream
) -> None:
    obs = js.create_object_store(bucket="LW", storage="memory")
    obs.put("n", b"1234")
    errs: list[BaseException] = []
    with (
        jsclient.connect(nats_server.url, error_cb=errs.append) as other,
        other.jetstream().object_store("LW").watch(updates_only=True) as w,
    ):
        _node(natsjs, "obj_link.mjs", nats_server.url, "LW", "n-link", "LW", "n")
        got = w.next(timeout=10.0)
    assert got is not None and got.name == "n-link" and got.is_link()
    assert errs == []  # not reported as a BadObjectMetaError


# -- key-value: a mirror of a bucket in another account ("external") ----------------

#: One server, two accounts, as nats.go's TestJetStreamCrossAccountMirrorsAndSources:
#: HUB holds the origin bucket and exports its consumer API and a delivery subject;
#: LEAF imports them as ``hub.JS.API.CONSUMER.>`` and ``hub.deliver.>``, so a stream
#: in LEAF can mirror one in HUB with ``external`` (api and deliver prefix), as it
#: would one in another domain. Clients without credentials land in LEAF.
ACCOUNTS = """
accounts {
  HUB {
    jetstream: enabled
    users: [ { user: hub, password: hub } ]
    exports: [ { service: "$JS.API.CONSUMER.>" }, { stream: "hub.deliver.>" } ]
  }
  LEAF {
    jetstream: enabled
    users: [ { user: leaf, password: leaf } ]
    imports: [
      { service: { account: HUB, subject: "$JS.API.CONSUMER.>" }, to: "hub.JS.API.CONSUMER.>" }
      { stream: { account: HUB, subject: "hub.deliver.>" } }
    ]
  }
}
no_auth_user: leaf
"""


@pytest.fixture
def two_accounts(nats_server_factory: NatsServerFactory) -> NatsServer:
    return nats_server_factory(config=ACCOUNTS)


def test_nats_js_reads_through_a_mirror_of_an_external_bucket(
    natsjs: Path, two_accounts: NatsServer
) -> None:
    url = two_accounts.url
    with (
        jsclient.connect(url.replace("nats://", "nats://hub:hub@")) as hub,
        jsclient.connect(url) as leaf,
    ):
        src = hub.jetstream().create_key_value(bucket="src", storage="memory")
        src.put("a", b"1")
        src.put("b", b"2 \xc3\xbc")
        src.put("gone", b"x")
        src.delete("gone")
        js = leaf.jetstream()
        external = ExternalStream(api="hub.JS.API", deliver="hub.deliver.mir")
        mir = js.create_key_value(
            bucket="mir", storage="memory", mirror=StreamSource(name="src", external=external)
        )
        stream = js.stream("KV_mir")
        eventually(lambda: stream.info().state.last_seq == 4, 15.0, "the mirror to catch up")
        out = _node(natsjs, "kv_get.mjs", url, "mir", "a", "b", "gone", "none")
        assert out == {
            "prefix": "$KV.src",
            "values": {"a": "1", "b": "2 ü", "gone": None, "none": None},
        }
        # nats.go's shape (tests/unit/test_kv_stream_config.py): the mirror holds the
        # origin's subjects (no transform), where nats.js (and jsclient) read them.
        mirror = stream.info().config.mirror
        assert mirror is not None and mirror.name == "KV_src" and not mirror.subject_transforms
        assert mir.get("a").value == b"1"
