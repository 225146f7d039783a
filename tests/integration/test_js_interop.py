"""jsclient and nats-py (asyncio) on the same server see each other's streams and messages."""

from __future__ import annotations

import asyncio

import nats
import pytest
from nats.js.api import AckPolicy as NatsAckPolicy
from nats.js.api import ConsumerConfig as NatsConsumerConfig

from jsclient import errors
from jsclient.api import StreamConfig
from jsclient.client import Client
from jsclient.jetstream import JetStream
from jsclient.server import NatsServer


@pytest.fixture
def js(nc: Client) -> JetStream:
    return nc.jetstream()


def test_nats_py_publishes_jsclient_reads(nats_server: NatsServer, js: JetStream) -> None:
    stream = js.create_stream(name="IOP", subjects=["iop.>"], storage="memory")

    async def produce() -> list[int]:
        other = await nats.connect(nats_server.url)
        try:
            njs = other.jetstream()
            seqs = []
            for i in range(5):
                ack = await njs.publish(
                    f"iop.{i}", f"m{i}".encode(), headers={"Nats-Msg-Id": f"id{i}", "K": str(i)}
                )
                seqs.append(ack.seq)
            # nats-py sees the stream jsclient created, config included.
            info = await njs.stream_info("IOP")
            assert info.config.subjects == ["iop.>"]
            return seqs
        finally:
            await other.close()

    assert asyncio.run(produce()) == [1, 2, 3, 4, 5]

    m = stream.get_msg(3)
    assert (m.subject, m.data, m.headers) == ("iop.2", b"m2", {"Nats-Msg-Id": "id2", "K": "2"})
    # The dedupe window is shared: the same id from jsclient is a duplicate.
    dup = js.publish("iop.2", b"again", msg_id="id2")
    assert dup.duplicate is True and dup.seq == 3

    # Read them back through a consumer, via a core pull.
    js.create_consumer("IOP", durable_name="reader")
    nc = js._client
    inbox = nc.new_inbox()
    sub = nc.subscribe(inbox)
    nc.publish(
        "$JS.API.CONSUMER.MSG.NEXT.IOP.reader", b'{"batch": 5, "expires": 2000000000}', reply=inbox
    )
    got = [sub.next_msg(timeout=3) for _ in range(5)]
    assert [g.data for g in got] == [f"m{i}".encode() for i in range(5)]
    assert [g.headers["K"] for g in got if g.headers] == [str(i) for i in range(5)]
    assert [g.metadata.sequence.stream for g in got] == [1, 2, 3, 4, 5]
    for g in got:
        g.ack_sync()
    assert js.consumer("IOP", "reader").info().num_ack_pending == 0


def test_jsclient_publishes_nats_py_reads(nats_server: NatsServer, js: JetStream) -> None:
    js.create_stream(StreamConfig(name="BACK", subjects=["back.>"], storage="memory"))
    js.create_consumer("BACK", durable_name="pyreader", ack_policy="explicit")
    for i in range(3):
        js.publish(f"back.{i}", f"s{i}".encode(), headers={"H": f"v{i}"}, msg_id=f"b{i}")
    futs = [js.publish_async(f"back.{i}", f"a{i}".encode()) for i in range(3, 6)]
    js.publish_async_complete(timeout=5)
    assert [f.result().seq for f in futs] == [4, 5, 6]

    async def consume() -> list[tuple[str, bytes, str | None, int]]:
        other = await nats.connect(nats_server.url)
        try:
            njs = other.jetstream()
            psub = await njs.pull_subscribe_bind("pyreader", stream="BACK")
            msgs = await psub.fetch(6, timeout=5)
            out = []
            for m in msgs:
                await m.ack_sync()
                out.append(
                    (m.subject, m.data, (m.headers or {}).get("H"), m.metadata.sequence.stream)
                )
            # A consumer nats-py creates is readable from jsclient.
            await njs.add_consumer(
                "BACK", NatsConsumerConfig(durable_name="fromnatspy", ack_policy=NatsAckPolicy.ALL)
            )
            # A duplicate from nats-py of a jsclient msg id.
            ack = await njs.publish("back.0", b"dup", headers={"Nats-Msg-Id": "b0"})
            assert ack.duplicate and ack.seq == 1
            return out
        finally:
            await other.close()

    got = asyncio.run(consume())
    assert got == [
        ("back.0", b"s0", "v0", 1),
        ("back.1", b"s1", "v1", 2),
        ("back.2", b"s2", "v2", 3),
        ("back.3", b"a3", None, 4),
        ("back.4", b"a4", None, 5),
        ("back.5", b"a5", None, 6),
    ]
    info = js.consumer("BACK", "pyreader").info()
    assert info.num_ack_pending == 0 and info.ack_floor is not None
    assert info.ack_floor.stream_seq == 6
    theirs = js.consumer("BACK", "fromnatspy")
    assert theirs.cached_info.config.ack_policy == "all"
    assert sorted(js.stream("BACK").consumer_names()) == ["fromnatspy", "pyreader"]


def test_errors_match_nats_py_classes(js: JetStream) -> None:
    # jsclient's errors are nats-py's too, so code written for nats-py catches them.
    with pytest.raises(nats.js.errors.NotFoundError):
        js.stream("MISSING")
    js.create_stream(name="E", subjects=["e"], storage="memory")
    with pytest.raises(nats.js.errors.BadRequestError):
        js.publish("e", b"x", expected_last_seq=7)
    with pytest.raises(nats.js.errors.NoStreamResponseError):
        js.publish("unrouted", b"x", timeout=0.2)
    with pytest.raises(errors.APIError):
        js.create_stream(name="E", subjects=["other"], storage="memory")
