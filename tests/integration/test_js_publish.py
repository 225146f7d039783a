"""js.publish and js.publish_async against a real server."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, wait

import pytest

import jsclient
from jsclient import errors
from jsclient.api import PubAck
from jsclient.client import Client
from jsclient.jetstream import JetStream
from jsclient.server import NatsServer


@pytest.fixture
def js(nc: Client) -> JetStream:
    j = nc.jetstream()
    j.create_stream(name="S", subjects=["s.>"], storage="memory")
    return j


# -- sync publish -------------------------------------------------------------


def test_publish_returns_puback_and_stores_headers(js: JetStream) -> None:
    ack = js.publish("s.a", b"hello", headers={"X-Trace": "t1"})
    assert isinstance(ack, PubAck)
    assert (ack.stream, ack.seq, ack.duplicate) == ("S", 1, None)
    assert js.publish("s.b").seq == 2
    stored = js.stream("S").get_msg(1)
    assert (stored.data, stored.headers) == (b"hello", {"X-Trace": "t1"})


def test_msg_id_deduplicates(js: JetStream) -> None:
    first = js.publish("s.a", b"1", msg_id="m-1")
    dup = js.publish("s.a", b"1 again", msg_id="m-1")
    assert not first.duplicate
    assert dup.duplicate is True and dup.seq == first.seq
    assert js.stream("S").get_msg(1).headers == {"Nats-Msg-Id": "m-1"}
    assert js.stream("S").info().state.messages == 1


def test_expectations_pass_and_fail(js: JetStream) -> None:
    js.publish("s.a", b"1", msg_id="id-1")  # seq 1
    js.publish("s.b", b"2", msg_id="id-2")  # seq 2

    assert js.publish("s.a", expected_stream="S").seq == 3
    with pytest.raises(errors.StreamNotMatchError) as e1:
        js.publish("s.a", expected_stream="OTHER")
    assert (e1.value.err_code, e1.value.code) == (10060, 400)
    assert e1.value.description

    assert js.publish("s.c", expected_last_seq=3).seq == 4
    with pytest.raises(errors.WrongLastSequenceError) as e2:
        js.publish("s.c", expected_last_seq=1)
    assert e2.value.err_code == 10071
    assert "wrong last sequence" in (e2.value.description or "")

    # s.b was last written at seq 2.
    assert js.publish("s.b", expected_last_subject_seq=2).seq == 5
    with pytest.raises(errors.WrongLastSequenceError) as e3:
        js.publish("s.b", expected_last_subject_seq=2)
    assert e3.value.err_code == 10071
    # 0 means "no message on this subject yet".
    assert js.publish("s.new", expected_last_subject_seq=0).seq == 6

    js.publish("s.d", msg_id="id-7")  # seq 7
    assert js.publish("s.d", expected_last_msg_id="id-7").seq == 8
    with pytest.raises(errors.WrongLastMsgIDError) as e4:
        js.publish("s.d", expected_last_msg_id="id-1")
    assert e4.value.err_code == 10070

    # A failed expectation stores nothing.
    assert js.stream("S").info().state.messages == 8


def test_no_stream_retries_then_fails(js: JetStream) -> None:
    start = time.monotonic()
    with pytest.raises(errors.NoStreamResponseError):
        js.publish("nobody.listens", b"x")
    elapsed = time.monotonic() - start
    assert 0.45 <= elapsed < 2.0  # two retries 250 ms apart, not the 5 s timeout

    # A total timeout shorter than the retry wait: no retry, the 503's own error
    # (a retry left with less time than a round trip could only time out, an
    # unknown outcome, where the first answer was a certain one).
    start = time.monotonic()
    with pytest.raises(errors.NoStreamResponseError):
        js.publish("nobody.listens", b"x", timeout=0.2)
    assert time.monotonic() - start < 0.2 + 0.15


def test_503_retry_succeeds_when_stream_appears(nats_server: NatsServer, js: JetStream) -> None:
    # Connected before: the stream comes 0.1 s into the publish's 0.5 s of
    # retries (twice, 250 ms apart) even when connecting is slow (a loaded
    # machine, a free-threaded build without PGO).
    other = jsclient.connect(nats_server.url)

    def create_later() -> None:
        with other:
            time.sleep(0.1)
            other.jetstream().create_stream(name="LATE", subjects=["late"], storage="memory")

    t = threading.Thread(target=create_later)
    t.start()
    try:
        ack = js.publish("late", b"x")
    finally:
        t.join(10)
    assert (ack.stream, ack.seq) == ("LATE", 1)


def test_publish_timeout(nc: Client, js: JetStream) -> None:
    nc.subscribe("silent.>")  # a responder that never answers
    nc.flush()
    start = time.monotonic()
    with pytest.raises(errors.TimeoutError):
        js.publish("silent.x", b"x", timeout=0.3)
    assert 0.25 <= time.monotonic() - start < 1.5


@pytest.mark.parametrize(
    "answer", [b"garbage", b'{"seq": 1}', b"[1, 2]"], ids=["not-json", "no-stream", "not-object"]
)
def test_invalid_publish_response(nc: Client, js: JetStream, answer: bytes) -> None:
    nc.subscribe("fake.>", cb=lambda m: m.respond(answer))
    nc.flush()
    with pytest.raises(errors.JetStreamError):
        js.publish("fake.x", b"x")
    fut = js.publish_async("fake.y", b"y")
    with pytest.raises(errors.JetStreamError):
        fut.result(timeout=5)


# -- async publish ------------------------------------------------------------


def test_publish_async_many(js: JetStream) -> None:
    futs = [js.publish_async("s.x", str(i).encode(), headers={"I": str(i)}) for i in range(2000)]
    js.publish_async_complete(timeout=10)
    assert js.publish_async_pending == 0
    assert all(f.done() for f in futs)
    seqs = [f.result().seq for f in futs]
    assert sorted(seqs) == list(range(1, 2001))
    assert js.stream("S").get_msg(1500).headers == {"I": str(seqs.index(1500))}


def test_publish_async_plain_results_every_way_they_are_read(js: JetStream) -> None:
    """A plain publish's future (no headers, nobody waiting) is completed on the
    reader from the ack's stream and sequence; every way of reading it gives
    the same PubAck: result(), repr, the stock state (``futures.wait``) and a
    done callback added afterwards."""
    futs = [js.publish_async("s.x", b"p") for _ in range(50)]
    js.publish_async_complete(timeout=10)
    first = futs[0].result()
    assert isinstance(first, PubAck) and (first.stream, first.seq) == ("S", 1)
    assert futs[0].result() is first  # built once
    assert f"returned {first!r}" in repr(futs[0])
    assert "returned PubAck(stream='S', seq=2" in repr(futs[1])
    assert futs[1].result().seq == 2  # after repr: the same value
    done, _ = wait(futs[2:4], timeout=5)  # the stock state
    assert sorted(f.result().seq for f in done) == [3, 4]
    seen: list[PubAck] = []
    futs[4].add_done_callback(lambda f: seen.append(f.result()))
    assert seen == [PubAck(stream="S", seq=5)]
    assert [f.result().seq for f in futs] == list(range(1, 51))


def test_publish_async_options_and_errors(js: JetStream) -> None:
    ok = js.publish_async("s.a", b"1", msg_id="a1")
    dup = js.publish_async("s.a", b"1", msg_id="a1")
    assert ok.result(5).seq == 1 and dup.result(5).duplicate is True
    good = js.publish_async("s.a", expected_last_seq=1, expected_stream="S")
    assert good.result(5).seq == 2
    bad = js.publish_async("s.a", expected_last_seq=1)
    with pytest.raises(errors.WrongLastSequenceError):
        bad.result(5)
    bad_id = js.publish_async("s.a", expected_last_msg_id="nope")
    with pytest.raises(errors.WrongLastMsgIDError):
        bad_id.result(5)
    bad_subj = js.publish_async("s.a", expected_last_subject_seq=0)
    with pytest.raises(errors.WrongLastSequenceError):
        bad_subj.result(5)

    start = time.monotonic()
    nostream = js.publish_async("nobody.listens", b"x")
    with pytest.raises(errors.NoStreamResponseError):
        nostream.result(5)
    assert time.monotonic() - start >= 0.45  # retried twice, 250 ms apart
    js.publish_async_complete(timeout=5)
    assert js.publish_async_pending == 0
    # A future of ours cannot be cancelled from outside (it would leak its slot).
    assert not js.publish_async("s.z").cancel()
    js.publish_async_complete(timeout=5)


def test_publish_async_retry_succeeds_when_stream_appears(
    nats_server: NatsServer, js: JetStream
) -> None:
    fut = js.publish_async("late2", b"x")
    with jsclient.connect(nats_server.url) as other:
        time.sleep(0.1)
        other.jetstream().create_stream(name="LATE2", subjects=["late2"], storage="memory")
    assert fut.result(5).stream == "LATE2"


def test_stall_blocks_then_fails(nc: Client) -> None:
    requests = nc.subscribe("hold.>")  # never answers on its own
    nc.flush()
    js = nc.jetstream(publish_async_max_pending=5, publish_async_stall_wait=0.2)
    futs = [js.publish_async(f"hold.{i}") for i in range(5)]
    assert js.publish_async_pending == 5
    start = time.monotonic()
    with pytest.raises(errors.TooManyStalledMsgsError):
        js.publish_async("hold.x")
    assert 0.15 <= time.monotonic() - start < 1.0
    assert js.publish_async_pending == 5

    # A stalled publisher resumes as soon as an ack frees a slot (no polling).
    js2 = nc.jetstream(publish_async_max_pending=1, publish_async_stall_wait=5.0)
    first = js2.publish_async("hold.first")
    for _ in range(6):
        m = requests.next_msg(timeout=2)
    assert m.subject == "hold.first"

    def answer() -> None:
        time.sleep(0.3)
        m.respond(b'{"stream": "HOLD", "seq": 7}')

    t = threading.Thread(target=answer)
    start = time.monotonic()  # before the answer's 0.3 s start: it cannot come sooner
    t.start()
    second = js2.publish_async("hold.second")
    waited = time.monotonic() - start
    t.join(5)
    assert 0.2 <= waited < 2.0
    assert first.result(1).seq == 7
    assert not second.done()
    for f in futs:
        assert not f.done()


def test_ack_timeout_and_complete_timeout(nc: Client) -> None:
    nc.subscribe("hold.>")
    nc.flush()
    js = nc.jetstream()
    f = js.publish_async("hold.a", b"x", ack_timeout=0.2)
    g = js.publish_async("hold.b", b"x")
    with pytest.raises(errors.TimeoutError):
        js.publish_async_complete(timeout=0.3)
    with pytest.raises(errors.TimeoutError):
        f.result(timeout=0)  # the ack timeout failed it already
    assert not g.done()
    assert js.publish_async_pending == 1
    h = js.publish_async("hold.c", b"x", timeout=0.1)  # `timeout` is the same option
    with pytest.raises(errors.TimeoutError):
        h.result(timeout=2)
    with pytest.raises(TypeError):
        js.publish_async("hold.d", ack_timeout=1, timeout=1)


def test_close_fails_pending(nats_server: NatsServer) -> None:
    nc = jsclient.connect(nats_server.url)
    try:
        nc.subscribe("hold.>")
        nc.flush()
        js = nc.jetstream()
        futs = [js.publish_async(f"hold.{i}") for i in range(10)]
    finally:
        nc.close()
    done, not_done = wait(futs, timeout=5)
    assert not not_done
    for f in done:
        assert isinstance(f.exception(), errors.ConnectionClosedError)
    assert js.publish_async_pending == 0


def test_disconnect_fails_pending(nats_server: NatsServer) -> None:
    nc = jsclient.connect(nats_server.url, reconnect_wait=0.1, max_reconnect_attempts=-1)
    try:
        js = nc.jetstream()
        js.create_stream(name="F", subjects=["f.>"])  # file storage: survives the restart
        nc.subscribe("hold.>")
        nc.flush()
        held = [js.publish_async(f"hold.{i}") for i in range(10)]
        nc.flush()  # written to this socket (one not yet written would go out on the next)
        nats_server.restart()
        done, not_done = wait(held, timeout=10)
        assert not not_done
        for f in done:
            assert isinstance(f.exception(), errors.PublishDisconnectedError)
        assert js.publish_async_pending == 0
        # Publishing works again once reconnected.
        assert js.publish("f.after", b"x", timeout=10).stream == "F"
        assert js.publish_async("f.after", b"y").result(5).seq == 2
    finally:
        nc.close()


def test_publish_async_across_restart(nats_server: NatsServer) -> None:
    nc = jsclient.connect(nats_server.url, reconnect_wait=0.1, max_reconnect_attempts=-1)
    try:
        js = nc.jetstream()
        js.create_stream(name="R", subjects=["r.>"])  # file storage
        futs: list[Future[PubAck]] = []
        stop = threading.Event()
        failures: list[BaseException] = []

        def publisher() -> None:
            i = 0
            while not stop.is_set():
                try:
                    futs.append(js.publish_async(f"r.{i % 10}", b"payload", ack_timeout=10))
                except errors.TooManyStalledMsgsError:
                    pass
                except BaseException as exc:  # pragma: no cover - reported below
                    failures.append(exc)
                    return
                i += 1
                if i % 200 == 0:
                    time.sleep(0.002)

        t = threading.Thread(target=publisher)
        t.start()
        try:
            time.sleep(0.2)
            nats_server.restart()
            time.sleep(0.5)
        finally:
            stop.set()
            t.join(10)
        assert not failures
        assert nc.stats["reconnects"] >= 1
        js.publish_async_complete(timeout=15)
        _, not_done = wait(futs, timeout=1)
        assert not not_done
        ok = [f for f in futs if f.exception() is None]
        lost = [f for f in futs if f.exception() is not None]
        assert ok
        for f in lost:
            assert isinstance(f.exception(), errors.PublishDisconnectedError), f.exception()
        print(f"restart: {len(ok)} acked, {len(lost)} failed with PublishDisconnectedError")
        stored = js.stream("R").info().state.messages
        assert stored >= len(ok)
        after = js.publish("r.after", b"x", timeout=10)
        assert after.seq == stored + 1
        assert js.publish_async("r.after", b"y").result(5).seq == stored + 2
    finally:
        nc.close()
