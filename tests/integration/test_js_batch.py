"""Atomic and fast-ingest batch publish (ADR-50) against a real server."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

import jsclient
from jsclient import errors
from jsclient.client import Client
from jsclient.jetstream import JetStream
from jsclient.server import NatsServer
from jsclient.testing import NatsServerFactory


@pytest.fixture
def js(nc: Client) -> JetStream:
    j = nc.jetstream()
    j.create_stream(name="AB", subjects=["ab.>"], storage="memory", allow_atomic=True)
    j.create_stream(name="PLAIN", subjects=["plain.>"], storage="memory")
    return j


def _count(js: JetStream, stream: str) -> int:
    return int(js.stream(stream).info().state.messages)


# -- atomic batch --------------------------------------------------------------------


def test_commit_with_a_message_stores_all(js: JetStream) -> None:
    with js.atomic_batch() as b:
        for i in range(10):
            b.add(f"ab.{i % 3}", b"m%d" % i, headers={"X-I": str(i)})
        assert b.size == 10 and _count(js, "AB") == 0  # staged, not stored
        ack = b.commit("ab.last", b"the end")
    assert (ack.stream, ack.seq, ack.batch_id, ack.batch_size) == ("AB", 11, b.batch_id, 11)
    assert b.closed and _count(js, "AB") == 11
    s = js.stream("AB")
    first, last = s.get_msg(1), s.get_msg(11)
    assert (first.subject, first.data) == ("ab.0", b"m0")
    assert first.headers is not None and first.headers["X-I"] == "0"
    assert first.headers["Nats-Batch-Id"] == b.batch_id
    assert first.headers["Nats-Batch-Sequence"] == "1"
    assert last.data == b"the end" and last.headers is not None
    assert last.headers["Nats-Batch-Commit"] == "1"


def test_commit_without_a_message_ends_the_batch(js: JetStream) -> None:
    b = js.atomic_batch()
    for i in range(100):
        b.add("ab.x", b"%d" % i)
    ack = b.commit()
    assert (ack.seq, ack.batch_size) == (100, 100)
    last = js.stream("AB").get_msg(100)
    assert last.data == b"99" and last.headers is not None
    assert last.headers["Nats-Batch-Commit"] == "1"
    assert _count(js, "AB") == 100
    with pytest.raises(errors.BatchClosedError):
        b.add("ab.x", b"late")
    with pytest.raises(errors.BatchClosedError):
        b.commit()
    with pytest.raises(ValueError):
        js.atomic_batch().commit()  # empty


def test_single_message_batch(js: JetStream) -> None:
    ack = js.atomic_batch().commit("ab.one", b"1")
    assert (ack.seq, ack.batch_size) == (1, 1)


def test_leaving_the_block_without_commit_stores_nothing(js: JetStream) -> None:
    with js.atomic_batch() as b:
        for i in range(20):
            b.add("ab.x", b"%d" % i)
    assert b.closed
    with pytest.raises(errors.BatchClosedError):
        b.commit()
    with pytest.raises(RuntimeError), js.atomic_batch() as b2:
        b2.add("ab.y", b"1")
        raise RuntimeError("boom")
    # The server still holds nothing of either; a new batch goes through.
    assert js.atomic_batch().commit("ab.z", b"z").batch_size == 1
    assert _count(js, "AB") == 1
    assert js.stream("AB").get_msg(1).subject == "ab.z"


def test_closing_the_client_before_commit_stores_nothing(
    nats_server: NatsServer, js: JetStream
) -> None:
    other = jsclient.connect(nats_server.url)
    b = other.jetstream().atomic_batch()
    for i in range(10):
        b.add("ab.x", b"%d" % i)
    other.close()
    with pytest.raises(errors.ConnectionClosedError):
        b.commit("ab.x", b"last")
    assert _count(js, "AB") == 0


def test_server_restart_mid_batch_stores_nothing(nats_server_factory: NatsServerFactory) -> None:
    srv = nats_server_factory()
    with jsclient.connect(srv.url, reconnect_wait=0.1, max_reconnect_attempts=-1) as nc:
        js = nc.jetstream()
        js.create_stream(name="F", subjects=["f.>"], storage="file", allow_atomic=True)
        b = js.atomic_batch()
        for i in range(5):
            b.add("f.x", b"%d" % i)
        nc.flush()
        srv.restart()
        for i in range(5, 10):
            b.add("f.x", b"%d" % i)  # plain publishes, buffered over the reconnect
        with pytest.raises(errors.AtomicPublishIncompleteBatchError) as e:
            b.commit("f.x", b"last")
        assert e.value.err_code == 10176
        assert _count(js, "F") == 0


def test_failed_expectation_fails_the_whole_batch(js: JetStream) -> None:
    js.publish("ab.seed", b"s")  # seq 1
    b = js.atomic_batch()
    b.add("ab.a", b"1", expected_last_seq=7)
    b.add("ab.b", b"2")
    with pytest.raises(errors.WrongLastSequenceError):
        b.commit("ab.c", b"3")
    assert _count(js, "AB") == 1
    with pytest.raises(errors.BatchClosedError):
        b.add("ab.d")
    # Right expectations: stored, checked against the stream before the batch.
    b = js.atomic_batch()
    b.add("ab.a", b"1", expected_last_seq=1, expected_stream="AB")
    b.add("ab.seed", b"2", expected_last_subject_seq=1)
    assert b.commit().batch_size == 2
    b = js.atomic_batch()
    b.add("ab.a", b"1")
    b.add("ab.seed", b"2", expected_last_subject_seq=1)  # it is 3 now
    with pytest.raises(errors.WrongLastSequenceError):
        b.commit()
    assert _count(js, "AB") == 3


def test_server_limits_are_typed_errors(js: JetStream) -> None:
    b = js.atomic_batch()
    b.add("ab.a", b"1", expected_last_msg_id="x")
    with pytest.raises(errors.AtomicPublishUnsupportedHeaderError) as e:
        b.commit()
    assert e.value.err_code == 10177
    js.publish("ab.seen", b"", msg_id="dup")
    b = js.atomic_batch()
    b.add("ab.a", b"1", msg_id="dup")
    with pytest.raises(errors.AtomicPublishDuplicateMessageError) as e2:
        b.commit("ab.b", b"2")
    assert e2.value.err_code == 10201
    # More than the server's 1000 messages: the commit says so.
    b = js.atomic_batch()
    for i in range(1001):
        b.add("ab.big", b"%d" % i)
    with pytest.raises(errors.AtomicPublishTooLargeBatchError) as e3:
        b.commit()
    assert e3.value.err_code == 10199
    # ack_every asks for the server's answer as it goes: the refusal comes at once.
    b = js.atomic_batch(ack_every=7)
    for i in range(1000):
        b.add("ab.big", b"%d" % i)
    with pytest.raises(errors.AtomicPublishTooLargeBatchError):
        b.add("ab.big", b"1000")  # the 1001st (7 * 143) waits for its answer: refused
    assert _count(js, "AB") == 1


def test_too_many_open_batches(js: JetStream) -> None:
    open_batches = []
    with pytest.raises(errors.AtomicPublishTooManyInflightError) as e:
        for _ in range(60):
            b = js.atomic_batch()
            b.add("ab.x", b"1")
            open_batches.append(b)
    assert e.value.err_code == 10210 and e.value.code == 429
    assert len(open_batches) == 50
    for b in open_batches:
        b.discard()


def test_stream_without_allow_atomic(js: JetStream) -> None:
    b = js.atomic_batch()
    with pytest.raises(errors.AtomicPublishDisabledError) as e:
        b.add("plain.x", b"1")
    assert (e.value.code, e.value.err_code) == (400, 10174)
    with pytest.raises(errors.BatchClosedError):
        b.add("plain.x", b"2")
    with pytest.raises(errors.NoStreamResponseError):
        js.atomic_batch(timeout=1.0).add("nowhere.x", b"1")
    assert _count(js, "PLAIN") == 0


def test_batch_messages_can_carry_a_ttl(js: JetStream) -> None:
    js.create_stream(
        name="ABT", subjects=["abt.>"], storage="memory", allow_atomic=True, allow_msg_ttl=True
    )
    b = js.atomic_batch()
    b.add("abt.a", b"1", ttl=60)
    assert b.commit("abt.b", b"2", ttl="never").batch_size == 2
    s = js.stream("ABT")
    assert (s.get_msg(1).headers or {})["Nats-TTL"] == "60s"
    assert (s.get_msg(2).headers or {})["Nats-TTL"] == "never"


# -- fast ingest ---------------------------------------------------------------------


@pytest.fixture
def fjs(js: JetStream) -> Iterator[JetStream]:
    js.create_stream(name="FI", subjects=["fi.>"], storage="memory", allow_batched=True)
    yield js


def test_fast_publisher_stores_everything_in_order(fjs: JetStream) -> None:
    js = fjs
    with js.fast_publisher() as fp:
        for i in range(5000):
            assert fp.add(f"fi.{i % 7}", b"m%d" % i) == i + 1
        ack = fp.commit()
    assert (ack.stream, ack.seq, ack.batch_size, ack.batch_id) == ("FI", 5000, 5000, fp.batch_id)
    assert fp.acked <= 5000
    assert _count(js, "FI") == 5000
    s = js.stream("FI")
    assert s.get_msg(1).data == b"m0" and s.get_msg(5000).data == b"m4999"
    assert s.get_msg(4999).headers is None  # no per-message headers


def test_fast_publisher_commit_with_a_message_and_ttl(fjs: JetStream) -> None:
    js = fjs
    js.update_stream(
        name="FI", subjects=["fi.>"], storage="memory", allow_batched=True, allow_msg_ttl=True
    )
    fp = js.fast_publisher(flow=10)
    fp.add("fi.a", b"1", ttl=30, headers={"X-A": "a"})
    fp.add("fi.a", b"2")
    ack = fp.commit("fi.b", b"3", headers={"X-B": "b"})
    assert (ack.seq, ack.batch_size) == (3, 3)
    assert js.stream("FI").get_msg(1).headers == {"X-A": "a", "Nats-TTL": "30s"}
    assert js.stream("FI").get_msg(3).headers == {"X-B": "b"}
    with pytest.raises(errors.BatchClosedError):
        fp.add("fi.a", b"late")
    # A batch of one that commits at once.
    assert js.fast_publisher().commit("fi.one", b"1").batch_size == 1


def test_fast_publisher_is_paced_by_the_server(fjs: JetStream) -> None:
    js = fjs
    fp = js.fast_publisher(flow=10, max_outstanding_acks=1)
    ahead = 0
    for i in range(2000):
        fp.add("fi.x", b"%d" % i)
        ahead = max(ahead, fp.size - fp.acked)
    # Never more unacknowledged than one ack interval (10) allows, and acks came.
    assert ahead <= 10 and fp.acked >= 1990
    assert fp.commit().batch_size == 2000


def test_leaving_the_block_commits_and_an_error_stops(fjs: JetStream) -> None:
    js = fjs
    with js.fast_publisher() as fp:
        for i in range(50):
            fp.add("fi.x", b"%d" % i)
    with pytest.raises(errors.BatchClosedError):
        fp.add("fi.x")
    assert _count(js, "FI") == 50
    with pytest.raises(RuntimeError), js.fast_publisher() as fp2:
        fp2.add("fi.y", b"1")
        raise RuntimeError("boom")
    with pytest.raises(errors.BatchClosedError):
        fp2.commit()


def test_gap_fails_the_batch_in_fail_mode(fjs: JetStream) -> None:
    js = fjs
    fp = js.fast_publisher()
    for i in range(10):
        fp.add("fi.x", b"%d" % i)
    fp._seq += 2  # two messages the server never sees: a gap at 11-12
    with pytest.raises(errors.BatchPublishGapError) as e:
        fp.add("fi.x", b"after the gap")
        fp.commit()
    assert (e.value.expected, e.value.received) == (11, 13)
    with pytest.raises((errors.BatchPublishGapError, errors.BatchClosedError)):
        fp.add("fi.x", b"more")
    # What came before the gap is stored, nothing after it.
    assert _count(js, "FI") == 10


def test_gap_and_refusals_are_reported_in_ok_mode(fjs: JetStream) -> None:
    js = fjs
    seen: list[BaseException] = []
    got = threading.Event()

    def on_error(exc: BaseException) -> None:
        seen.append(exc)
        if len(seen) == 2:
            got.set()

    fp = js.fast_publisher(gap="ok", error_cb=on_error)
    for i in range(10):
        fp.add("fi.x", b"%d" % i)
    fp._seq += 1  # one lost message
    fp.add("fi.x", b"12")
    fp.add("fi.x", b"13", headers={"Nats-Expected-Last-Sequence": "1"})
    fp.add("fi.x", b"14")
    ack = fp.commit()
    assert got.wait(5)
    gap = next(e for e in seen if isinstance(e, errors.BatchPublishGapError))
    assert (gap.expected, gap.received) == (11, 12)
    refused = next(e for e in seen if isinstance(e, errors.WrongLastSequenceError))
    assert refused.batch_seq == 13  # type: ignore[attr-defined]
    assert (fp.gaps, fp.refused) == (1, 1)
    assert _count(js, "FI") == 12 and ack.seq == 12


def test_refused_message_fails_the_batch_in_fail_mode(fjs: JetStream) -> None:
    js = fjs
    fp = js.fast_publisher()
    fp.add("fi.x", b"1")
    fp.add("fi.x", b"2", headers={"Nats-Expected-Last-Sequence": "99"})
    with pytest.raises(errors.WrongLastSequenceError):
        for i in range(3, 50):
            fp.add("fi.x", b"%d" % i)
        fp.commit()
    assert _count(js, "FI") == 1


def test_fast_publisher_refusals(fjs: JetStream) -> None:
    js = fjs
    fp = js.fast_publisher()
    with pytest.raises(errors.BatchPublishDisabledError) as e:
        fp.add("plain.x", b"1")
    assert e.value.err_code == 10205
    with pytest.raises(errors.BatchClosedError) as closed:
        fp.add("plain.x", b"2")
    assert isinstance(closed.value.__cause__, errors.BatchPublishDisabledError)
    for bad in ({"flow": 0}, {"flow": 70000}, {"max_outstanding_acks": 4}, {"gap": "maybe"}):
        with pytest.raises(ValueError):
            js.fast_publisher(**bad)  # type: ignore[arg-type]
    assert _count(js, "PLAIN") == 0


def test_closing_the_client_mid_fast_batch(nats_server: NatsServer, fjs: JetStream) -> None:
    other = jsclient.connect(nats_server.url)
    fp = other.jetstream().fast_publisher()
    for i in range(100):
        fp.add("fi.x", b"%d" % i)
    other.close()
    with pytest.raises((errors.ConnectionClosedError, errors.TimeoutError)):
        fp.add("fi.x", b"late")
        fp.commit()


def test_a_first_add_that_times_out_leaves_no_subscription(nc: jsclient.Client) -> None:
    # Nothing answers on "nobody.>": the first add waits for a flow ack, pings
    # once, and times out. Outside a with block, nothing else would close it.
    js = nc.jetstream()
    fp = js.fast_publisher(ack_timeout=0.3)
    subs_before = set(nc._subs)  # the connection's own request inbox
    with pytest.raises(errors.TimeoutError):
        fp.add("nobody.x", b"1")
    assert set(nc._subs) == subs_before
    with pytest.raises(errors.BatchClosedError):
        fp.add("nobody.x", b"2")
    assert set(nc._subs) == subs_before
