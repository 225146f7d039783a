"""JetStream management against a real server: streams, consumers, paging, messages, errors."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

import jsclient
from jsclient import errors
from jsclient.api import (
    AckPolicy,
    ConsumerConfig,
    DeliverPolicy,
    StorageType,
    StreamConfig,
)
from jsclient.client import Client
from jsclient.jetstream import Consumer, JetStream, Stream
from jsclient.server import NatsServer
from jsclient.testing import NatsServerFactory


@pytest.fixture
def js(nc: Client) -> JetStream:
    return nc.jetstream()


class _Spy:
    """Counts the API subjects a JetStream context requests."""

    def __init__(self, js: JetStream) -> None:
        self.subjects: list[str] = []
        real = js._api_request

        def spy(suffix: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
            self.subjects.append(suffix)
            return real(suffix, *args, **kwargs)

        js._api_request = spy  # type: ignore[method-assign]

    def count(self, prefix: str) -> int:
        return sum(1 for s in self.subjects if s.startswith(prefix))


# -- streams -----------------------------------------------------------------


def test_stream_create_info_update_delete(js: JetStream) -> None:
    s = js.create_stream(name="ORDERS", subjects=["orders.>"], storage=StorageType.MEMORY)
    assert isinstance(s, Stream)
    assert s.name == "ORDERS"
    assert s.cached_info.config.subjects == ["orders.>"]
    assert s.cached_info.config.storage == StorageType.MEMORY

    # Same config again: the server treats it as a no-op.
    again = js.create_stream(StreamConfig(name="ORDERS", subjects=["orders.>"], storage="memory"))
    assert again.cached_info.config.subjects == ["orders.>"]

    with pytest.raises(errors.StreamNameAlreadyInUseError) as ei:
        js.create_stream(name="ORDERS", subjects=["other.>"], storage="memory")
    assert ei.value.err_code == 10058 and ei.value.code == 400
    assert ei.value.description

    up = js.update_stream(name="ORDERS", subjects=["orders.>", "extra"], storage="memory")
    assert up.cached_info.config.subjects == ["orders.>", "extra"]
    assert js.stream("ORDERS").cached_info.config.subjects == ["orders.>", "extra"]

    # A config object plus field overrides.
    base = StreamConfig(name="ORDERS", subjects=["orders.>"], storage=StorageType.MEMORY)
    up2 = js.update_stream(base, max_msgs=10)
    assert up2.cached_info.config.max_msgs == 10
    assert up2.cached_info.config.subjects == ["orders.>"]

    js.publish("orders.1", b"x")
    assert s.info().state.messages == 1
    assert s.cached_info.state.messages == 1

    js.delete_stream("ORDERS")
    with pytest.raises(errors.StreamNotFoundError) as ei2:
        js.stream("ORDERS")
    assert ei2.value.err_code == 10059 and ei2.value.code == 404
    assert "not found" in (ei2.value.description or "")
    with pytest.raises(errors.StreamNotFoundError):
        js.delete_stream("ORDERS")
    with pytest.raises(errors.StreamNotFoundError):
        js.update_stream(name="ORDERS", subjects=["orders.>"])


def test_create_or_update_stream(js: JetStream) -> None:
    created = js.create_or_update_stream(name="S", subjects=["s"], storage="memory")
    assert created.cached_info.config.subjects == ["s"]
    updated = js.create_or_update_stream(name="S", subjects=["s", "t"], storage="memory")
    assert updated.cached_info.config.subjects == ["s", "t"]
    assert [i.config.name for i in js.streams()] == ["S"]


def test_config_the_server_rejects(js: JetStream) -> None:
    js.create_stream(name="A", subjects=["shared.>"], storage="memory")
    with pytest.raises(errors.BadRequestError) as ei:
        js.create_stream(name="B", subjects=["shared.x"], storage="memory")
    assert ei.value.code == 400
    assert "overlap" in (ei.value.description or "")
    with pytest.raises(errors.APIError) as ei2:
        js.update_stream(name="A", subjects=["shared.>"], storage="file")
    assert ei2.value.description  # storage type cannot change


BAD_NAMES = ["", "a.b", "a*", "a>", "a b", "a\tb", "a/b", "a\\b", "x\n"]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_invalid_names_fail_before_any_request(nc: Client, js: JetStream, name: str) -> None:
    js.create_stream(name="OK", subjects=["ok"], storage="memory")
    sent = nc.stats["out_msgs"]
    with pytest.raises(errors.InvalidStreamNameError):
        js.create_stream(name=name, subjects=["x"])
    with pytest.raises(errors.InvalidStreamNameError):
        js.stream(name)
    with pytest.raises(errors.InvalidStreamNameError):
        js.delete_stream(name)
    with pytest.raises(errors.InvalidStreamNameError):
        js.create_consumer(name, durable_name="c")
    with pytest.raises(errors.InvalidConsumerNameError):
        js.create_consumer("OK", durable_name=name)
    with pytest.raises(errors.InvalidConsumerNameError):
        js.create_consumer("OK", name=name)
    with pytest.raises(errors.InvalidConsumerNameError):
        js.consumer("OK", name)
    with pytest.raises(errors.InvalidConsumerNameError):
        js.delete_consumer("OK", name)
    assert nc.stats["out_msgs"] == sent


def test_stream_config_without_name(js: JetStream) -> None:
    with pytest.raises(errors.InvalidStreamNameError):
        js.create_stream(subjects=["x"])


def test_paging_streams_and_consumers(js: JetStream) -> None:
    # More than one page of STREAM.LIST (256), STREAM.NAMES (1024),
    # CONSUMER.LIST (256) and CONSUMER.NAMES (1024).
    n = 1030
    for i in range(n):
        js.create_stream(name=f"P{i}", subjects=[f"p.{i}"], storage="memory")
    spy = _Spy(js)
    infos = list(js.streams())
    assert sorted(i.config.name for i in infos) == sorted(f"P{i}" for i in range(n))
    assert spy.count("STREAM.LIST") == 5
    names = list(js.stream_names())
    assert sorted(names) == sorted(f"P{i}" for i in range(n))
    assert spy.count("STREAM.NAMES") == 2
    assert list(js.stream_names(subject="p.7")) == ["P7"]
    assert [i.config.name for i in js.streams(subject="p.8")] == ["P8"]
    assert list(js.stream_names(subject="nothing.here")) == []

    # The server caps consumers per stream at 1000 unless the stream allows more.
    stream = js.update_stream(name="P0", subjects=["p.0"], storage="memory", max_consumers=2000)
    for i in range(n):
        stream.create_consumer(durable_name=f"C{i}", ack_policy=AckPolicy.EXPLICIT)
    infos_c = list(stream.consumers())
    assert sorted(c.name for c in infos_c) == sorted(f"C{i}" for i in range(n))
    assert spy.count("CONSUMER.LIST.P0") == 5
    assert sorted(stream.consumer_names()) == sorted(f"C{i}" for i in range(n))
    assert spy.count("CONSUMER.NAMES.P0") == 2
    assert js.account_info().streams == n
    assert list(js.stream("P1").consumers()) == []


# -- consumers ---------------------------------------------------------------


def test_consumer_create_update_delete(js: JetStream) -> None:
    js.create_stream(name="S", subjects=["s.>"], storage="memory")
    c = js.create_consumer("S", durable_name="dur", ack_wait=10.0, description="one")
    assert isinstance(c, Consumer)
    assert (c.name, c.stream_name) == ("dur", "S")
    assert c.cached_info.config.ack_wait == 10.0
    assert c.cached_info.config.durable_name == "dur"

    # Creating again with the same config is fine; a different config is not.
    same = js.create_consumer(
        "S", ConsumerConfig(durable_name="dur", ack_wait=10.0, description="one")
    )
    assert same.name == "dur"
    with pytest.raises(errors.ConsumerAlreadyExistsError) as ei:
        js.create_consumer("S", durable_name="dur", ack_wait=10.0, description="two")
    assert ei.value.err_code in (10148, 10105)
    assert ei.value.description

    up = js.update_consumer("S", durable_name="dur", ack_wait=10.0, description="two")
    assert up.cached_info.config.description == "two"
    assert c.info().config.description == "two"
    assert c.cached_info.config.description == "two"

    with pytest.raises(errors.ConsumerDoesNotExistError) as ei2:
        js.update_consumer("S", durable_name="missing")
    assert ei2.value.err_code == 10149

    cu = js.create_or_update_consumer("S", name="cu", description="a")
    assert cu.cached_info.config.description == "a"
    cu2 = js.create_or_update_consumer("S", name="cu", description="b")
    assert cu2.cached_info.config.description == "b"

    got = js.consumer("S", "dur")
    assert got.cached_info.config.description == "two"
    got.delete()
    with pytest.raises(errors.ConsumerNotFoundError) as ei3:
        js.consumer("S", "dur")
    assert ei3.value.err_code == 10014
    with pytest.raises(errors.ConsumerNotFoundError):
        js.delete_consumer("S", "dur")
    with pytest.raises(errors.StreamNotFoundError):
        js.consumer("NOPE", "dur")
    with pytest.raises(errors.StreamNotFoundError):
        js.create_consumer("NOPE", durable_name="x")


def test_ephemeral_and_filtered_consumers(js: JetStream) -> None:
    stream = js.create_stream(name="S", subjects=["s.>"], storage="memory")
    for i in range(3):
        js.publish(f"s.{i}", b"x")
    spy = _Spy(js)
    eph = stream.create_consumer(inactive_threshold=30.0)
    assert eph.name
    assert eph.cached_info.config.durable_name is None
    assert eph.cached_info.num_pending == 3

    one = stream.create_consumer(name="one", filter_subject="s.1")
    assert one.cached_info.config.filter_subject == "s.1"
    assert one.cached_info.num_pending == 1

    wild = stream.create_consumer(name="wild", filter_subject="s.>")
    assert wild.cached_info.num_pending == 3

    many = stream.create_consumer(
        name="many", filter_subjects=["s.0", "s.2"], deliver_policy=DeliverPolicy.ALL
    )
    assert many.cached_info.config.filter_subjects == ["s.0", "s.2"]
    assert many.cached_info.num_pending == 2
    # CONSUMER.CREATE.<stream>.<name>[.<single filter>]
    assert spy.subjects[-4:] == [
        f"CONSUMER.CREATE.S.{eph.name}",
        "CONSUMER.CREATE.S.one.s.1",
        "CONSUMER.CREATE.S.wild.s.>",
        "CONSUMER.CREATE.S.many",
    ]

    assert stream.consumer(eph.name).name == eph.name
    with pytest.raises(errors.BadRequestError) as ei:
        stream.create_consumer(name="bad", deliver_policy=DeliverPolicy.BY_START_SEQUENCE)
    assert ei.value.description

    assert sorted(stream.consumer_names()) == sorted(["many", "one", "wild", eph.name])
    stream.delete_consumer("one")
    upd = stream.update_consumer(name="wild", filter_subject="s.>", description="d")
    assert upd.cached_info.config.description == "d"
    cou = stream.create_or_update_consumer(name="wild", filter_subject="s.>", description="e")
    assert cou.cached_info.config.description == "e"
    assert sorted(stream.consumer_names()) == sorted(["many", "wild", eph.name])


# -- messages ----------------------------------------------------------------


def test_purge(js: JetStream) -> None:
    s = js.create_stream(name="S", subjects=["s.>"], storage="memory")
    for i in range(10):
        js.publish(f"s.{i % 2}", str(i).encode())
    assert s.purge(subject="s.0") == 5
    assert s.purge(keep=2) == 3
    assert s.info().state.messages == 2
    assert s.purge(seq=10) == 1  # everything below seq 10
    assert s.purge() == 1
    assert s.info().state.messages == 0


@pytest.mark.parametrize("direct", [False, True], ids=["msg_get", "direct_get"])
def test_get_and_delete_msg(nats_server: NatsServer, js: JetStream, direct: bool) -> None:
    s = js.create_stream(name="S", subjects=["s.>"], storage="memory", allow_direct=direct)
    js.publish("s.a", b"first", headers={"K": "1"})
    js.publish("s.b", b"second")
    js.publish("s.a", b"", headers={"K": "3", "Multi": ["x", "y"]})

    # Watch which API subject the reads use.
    watcher = jsclient.connect(nats_server.url)
    try:
        spy = watcher.subscribe("$JS.API.>")
        watcher.flush()

        m1 = s.get_msg(1)
        assert (m1.subject, m1.seq, m1.data, m1.stream) == ("s.a", 1, b"first", "S")
        assert m1.headers == {"K": "1"}
        assert m1.time is not None and m1.time.tzinfo is not None

        last = s.get_msg(last_by_subject="s.a")
        assert (last.seq, last.data) == (3, b"")
        assert last.headers == {"K": "3", "Multi": "x"}
        assert last.hdrs is not None and b"Multi: y" in last.hdrs

        nxt = s.get_msg(2, next_by_subject="s.a")
        assert nxt.seq == 3
        nxt0 = s.get_msg(next_by_subject="s.b")
        assert (nxt0.seq, nxt0.data, nxt0.headers) == (2, b"second", None)

        with pytest.raises(errors.MessageNotFoundError) as ei:
            s.get_msg(99)
        assert ei.value.code == 404
        with pytest.raises(errors.MessageNotFoundError):
            s.get_msg(last_by_subject="s.none")

        seen = []
        while True:
            try:
                seen.append(spy.next_msg(timeout=0.2).subject)
            except errors.TimeoutError:
                break
        kind = "DIRECT.GET" if direct else "STREAM.MSG.GET"
        assert seen and all(kind in subj for subj in seen), seen
    finally:
        watcher.close()

    s.delete_msg(1)
    with pytest.raises(errors.MessageNotFoundError):
        s.get_msg(1)
    s.delete_msg(2, erase=True)
    with pytest.raises(errors.MessageNotFoundError):
        s.get_msg(2)
    with pytest.raises(errors.APIError):
        s.delete_msg(2)
    assert s.info().state.messages == 1
    with pytest.raises(ValueError):
        s.get_msg()
    with pytest.raises(ValueError):
        s.get_msg(1, last_by_subject="s.a")


# -- account, domain, unavailable, timeouts ------------------------------------


def test_account_info(js: JetStream) -> None:
    info = js.account_info()
    assert info.streams == 0
    js.create_stream(name="S", subjects=["s"], storage="memory")
    js.create_consumer("S", durable_name="c")
    info = js.account_info()
    assert (info.streams, info.consumers) == (1, 1)
    assert info.limits is not None


def test_domain(nats_server_factory: NatsServerFactory, tmp_path: Path) -> None:
    store = tmp_path / "js"
    srv = nats_server_factory(
        jetstream=False, config=f'jetstream {{ domain: hub, store_dir: "{store}" }}'
    )
    with jsclient.connect(srv.url) as nc:
        js = nc.jetstream(domain="hub")
        assert js._prefix == "$JS.hub.API"
        assert js.account_info().domain == "hub"
        js.create_stream(name="D", subjects=["d"], storage="memory")
        ack = js.publish("d", b"x")
        assert (ack.stream, ack.domain) == ("D", "hub")
        with pytest.raises(errors.ServiceUnavailableError):
            nc.jetstream(domain="elsewhere", timeout=1.0).account_info()
    with pytest.raises(ValueError):
        JetStream(nc, prefix="$JS.x.API", domain="hub")


def test_jetstream_not_enabled(nats_server_factory: NatsServerFactory) -> None:
    srv = nats_server_factory(jetstream=False)
    with jsclient.connect(srv.url) as nc:
        js = nc.jetstream()
        with pytest.raises(errors.ServiceUnavailableError) as ei:
            js.account_info()
        assert ei.value.code == 503
        with pytest.raises(errors.ServiceUnavailableError):
            js.create_stream(name="S", subjects=["s"])


def test_api_timeout(nc: Client) -> None:
    # Something listens on the API subjects but never answers.
    silent = nc.subscribe("$JS.SILENT.API.>")
    js = nc.jetstream(prefix="$JS.SILENT.API", timeout=0.3)
    start = time.monotonic()
    with pytest.raises(errors.TimeoutError):
        js.stream("S")
    assert 0.25 <= time.monotonic() - start < 2.0
    assert silent.next_msg(timeout=1.0).subject == "$JS.SILENT.API.STREAM.INFO.S"


def test_invalid_api_response(nc: Client) -> None:
    def answer(msg: jsclient.Msg) -> None:
        msg.respond(b"not json")

    nc.subscribe("$JS.BAD.API.>", cb=answer)
    nc.flush()
    js = nc.jetstream(prefix="$JS.BAD.API", timeout=1.0)
    with pytest.raises(errors.JetStreamError):
        js.account_info()


def test_concurrent_management(js: JetStream) -> None:
    # Management calls are safe from several threads at once.
    failures: list[BaseException] = []

    def work(k: int) -> None:
        try:
            for i in range(20):
                js.create_stream(name=f"T{k}_{i}", subjects=[f"t.{k}.{i}"], storage="memory")
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not failures
    assert len(list(js.stream_names())) == 80


def test_consumer_handles_pull(js: JetStream) -> None:
    # The handles carry what the pull engine needs (a smoke test of the wiring).
    stream = js.create_stream(name="S", subjects=["s.>"], storage="memory")
    js.publish("s.a", b"1")
    js.publish("s.b", b"2")
    c = stream.create_consumer(durable_name="c")
    got = list(c.fetch(2, expires=2.0))
    assert [m.data for m in got] == [b"1", b"2"]
    for m in got:
        m.ack_sync()
    assert c.info().num_ack_pending == 0

    oc = stream.ordered_consumer()
    assert type(oc).__name__ == "OrderedConsumer"
    assert [m.data for m in oc.fetch(2, expires=2.0)] == [b"1", b"2"]
    assert js.ordered_consumer("S", filter_subjects="s.b").next(timeout=5).data == b"2"
