"""nc.request_many (ADR-47): the replies of many responders, and every way the iterator ends."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest
from _js import wait_for

import jsclient
from jsclient import errors
from jsclient.client import Client
from jsclient.msg import Msg
from jsclient.server import NatsServer


@pytest.fixture
def peer(nats_server: NatsServer) -> Iterator[Client]:
    """A second connection for the responders."""
    with jsclient.connect(nats_server.url) as other:
        yield other


def _responders(peer: Client, subject: str, replies: list[Callable[[Msg], None]]) -> None:
    for fn in replies:
        peer.subscribe(subject, cb=fn)
    peer.flush()


def _answer(data: bytes, delay: float = 0.0) -> Callable[[Msg], None]:
    def cb(msg: Msg) -> None:
        if delay:
            time.sleep(delay)
        msg.respond(data)

    return cb


def test_max_count_ends_before_the_timeout(nc: Client, peer: Client) -> None:
    _responders(peer, "many.max", [_answer(b"a"), _answer(b"b"), _answer(b"c")])
    t0 = time.monotonic()
    got = list(nc.request_many("many.max", b"q", timeout=10.0, max_count=2))
    assert len(got) == 2
    assert {m.data for m in got} <= {b"a", b"b", b"c"}
    assert time.monotonic() - t0 < 5.0
    assert len(nc._mux) == 0  # the token is forgotten at the end


def test_total_timeout_collects_every_reply(nc: Client, peer: Client) -> None:
    _responders(peer, "many.all", [_answer(b"a"), _answer(b"b"), _answer(b"c")])
    t0 = time.monotonic()
    got = list(nc.request_many("many.all", timeout=0.5))
    elapsed = time.monotonic() - t0
    assert sorted(m.data for m in got) == [b"a", b"b", b"c"]
    assert 0.45 <= elapsed < 5.0
    assert len(nc._mux) == 0


def test_stall_ends_when_replies_stop(nc: Client, peer: Client) -> None:
    _responders(peer, "many.stall", [_answer(b"a"), _answer(b"b"), _answer(b"late", delay=3.0)])
    t0 = time.monotonic()
    got = list(nc.request_many("many.stall", timeout=8.0, stall=0.3))
    elapsed = time.monotonic() - t0
    assert sorted(m.data for m in got) == [b"a", b"b"]
    assert elapsed < 2.5  # well before the late reply and the total timeout


def test_stall_does_not_cut_the_first_wait(nc: Client, peer: Client) -> None:
    # ADR-47: the first reply is waited for with the total timeout.
    _responders(peer, "many.first", [_answer(b"slow", delay=0.6)])
    got = list(nc.request_many("many.first", timeout=5.0, stall=0.2, max_count=1))
    assert [m.data for m in got] == [b"slow"]


def _sequence(parts: list[bytes]) -> Callable[[Msg], None]:
    def cb(msg: Msg) -> None:
        for p in parts:
            msg.respond(p)

    return cb


def test_default_sentinel_is_an_empty_payload_not_yielded(nc: Client, peer: Client) -> None:
    _responders(peer, "many.sentinel", [_sequence([b"1", b"2", b"", b"3"])])
    t0 = time.monotonic()
    got = list(nc.request_many("many.sentinel", timeout=10.0))
    assert [m.data for m in got] == [b"1", b"2"]
    assert time.monotonic() - t0 < 5.0
    assert jsclient.EMPTY_SENTINEL(got[0]) is False
    assert repr(jsclient.EMPTY_SENTINEL) == "jsclient.EMPTY_SENTINEL"


def test_sentinel_none_yields_empty_payloads(nc: Client, peer: Client) -> None:
    _responders(peer, "many.nosentinel", [_sequence([b"1", b"", b"3"])])
    got = list(nc.request_many("many.nosentinel", timeout=5.0, max_count=3, sentinel=None))
    assert [m.data for m in got] == [b"1", b"", b"3"]


def test_callable_sentinel_replaces_the_default(nc: Client, peer: Client) -> None:
    _responders(peer, "many.custom", [_sequence([b"1", b"", b"end", b"4"])])
    got = list(nc.request_many("many.custom", timeout=5.0, sentinel=lambda m: m.data == b"end"))
    assert [m.data for m in got] == [b"1", b""]


def test_no_responders_ends_at_once_quietly(nc: Client) -> None:
    t0 = time.monotonic()
    got = list(nc.request_many("many.nobody", timeout=5.0))
    assert got == []
    assert time.monotonic() - t0 < 2.5
    assert len(nc._mux) == 0


def test_headers_reach_the_responders(nc: Client, peer: Client) -> None:
    def cb(msg: Msg) -> None:
        hdrs = msg.headers or {}
        msg.respond(hdrs.get("X-Trace", "").encode())

    _responders(peer, "many.hdr", [cb])
    got = list(nc.request_many("many.hdr", headers={"X-Trace": "t1"}, max_count=1, timeout=5.0))
    assert [m.data for m in got] == [b"t1"]


def test_breaking_out_forgets_the_request(nc: Client, peer: Client) -> None:
    _responders(peer, "many.break", [_sequence([b"1", b"2", b"3", b"4"])])
    it = nc.request_many("many.break", timeout=10.0)
    first = next(it)
    assert first.data == b"1"
    it.close()
    assert len(nc._mux) == 0
    with pytest.raises(StopIteration):
        next(it)
    # An iterator dropped unread lets go of its token too.
    it2 = nc.request_many("many.break", timeout=10.0)
    del it2
    assert len(nc._mux) == 0


def test_replies_from_many_threads_at_once(nc: Client, peer: Client) -> None:
    _responders(peer, "many.conc", [_answer(b"a"), _answer(b"b")])
    results: list[int] = []
    lock = threading.Lock()

    def run() -> None:
        n = len(list(nc.request_many("many.conc", timeout=5.0, max_count=2)))
        with lock:
            results.append(n)

    threads = [threading.Thread(target=run) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert results == [2] * 8
    assert len(nc._mux) == 0


def test_closed_connection_raises(nats_server: NatsServer, peer: Client) -> None:
    _responders(peer, "many.close", [_answer(b"a")])
    nc = jsclient.connect(nats_server.url)
    it = nc.request_many("many.close", timeout=10.0)
    assert next(it).data == b"a"
    threading.Timer(0.2, nc.close).start()
    t0 = time.monotonic()
    with pytest.raises(errors.ConnectionClosedError):
        next(it)
    assert time.monotonic() - t0 < 5.0


def test_arguments_are_checked(nc: Client) -> None:
    with pytest.raises(ValueError):
        nc.request_many("many.args", max_count=0)
    with pytest.raises(TypeError):
        nc.request_many("many.args", sentinel=b"")  # type: ignore[arg-type]


def test_no_token_left_behind_when_replies_race_the_end(nc: Client, peer: Client) -> None:
    # The reader puts the waiter back after each reply while the iterator ends
    # on the first one: whichever runs last removes the entry.
    _responders(peer, "many.race", [_answer(str(i).encode()) for i in range(5)])
    for _ in range(200):
        got = list(nc.request_many("many.race", timeout=5.0, max_count=1))
        assert len(got) == 1
    nc.flush()  # the late replies have been routed
    assert len(nc._mux) == 0


# -- to the letter of api.md: end_reason, a bound, nothing after the timeout ----------


def _flood(peer: Client, subject: str, n: int, size: int = 16) -> None:
    """A responder that answers each request with ``n`` replies at once."""

    def cb(msg: Msg) -> None:
        body = b"r" * size
        for _ in range(n):
            peer.publish(msg.reply, body)

    peer.subscribe(subject, cb=cb)
    peer.flush()


def test_each_end_says_why(nc: Client, peer: Client) -> None:
    _responders(peer, "why.a", [_answer(b"a"), _answer(b"b")])
    it = nc.request_many("why.a", timeout=5.0, max_count=2)
    assert len(list(it)) == 2 and it.end_reason == "max_count"
    it = nc.request_many("why.a", timeout=0.3)
    assert len(list(it)) == 2 and it.end_reason == "timeout"
    it = nc.request_many("why.a", timeout=5.0, stall=0.2)
    assert len(list(it)) == 2 and it.end_reason == "stall"
    _responders(peer, "why.s", [_answer(b"x"), _answer(b"", delay=0.05)])
    it = nc.request_many("why.s", timeout=5.0)
    assert [m.data for m in it] == [b"x"] and it.end_reason == "sentinel"
    it = nc.request_many("why.nobody", timeout=5.0)
    assert list(it) == [] and it.end_reason == "no_responders"
    it = nc.request_many("why.a", timeout=5.0)
    next(it)
    it.close()
    assert it.end_reason == "closed"


def test_a_reader_that_stops_reading_holds_a_bounded_number(nc: Client, peer: Client) -> None:
    _flood(peer, "flood.a", 20_000)
    it = nc.request_many("flood.a", timeout=10.0, pending_msgs_limit=1000)
    first = next(it)
    assert first.data
    # The caller stops reading; the replies keep coming: at most 1000 are held,
    # then the request stops listening.
    assert wait_for(lambda: it._waiter.done)
    assert it._waiter.q.qsize() <= 1000
    rest = list(it)
    assert 900 <= len(rest) <= 1000 and it.end_reason == "slow_consumer"
    assert len(nc._mux) == 0


def test_the_byte_bound_holds_too(nc: Client, peer: Client) -> None:
    _flood(peer, "flood.b", 2_000, size=1024)
    it = nc.request_many("flood.b", timeout=10.0, pending_bytes_limit=64 * 1024)
    next(it)
    assert wait_for(lambda: it._waiter.done)
    assert it._waiter.in_bytes - it._waiter.out_bytes <= 64 * 1024
    list(it)
    assert it.end_reason == "slow_consumer"


def test_nothing_is_yielded_after_the_timeout(nc: Client, peer: Client) -> None:
    _responders(peer, "late.a", [_answer(b"early"), _answer(b"late", delay=0.6)])
    it = nc.request_many("late.a", timeout=0.3, sentinel=None)
    assert next(it).data == b"early"
    time.sleep(1.0)  # the late reply arrives after the deadline, while nobody reads
    assert list(it) == [] and it.end_reason == "timeout"


def test_the_request_stops_listening_at_its_deadline_unread(nc: Client, peer: Client) -> None:
    _flood(peer, "late.b", 10)
    it = nc.request_many("late.b", timeout=0.3)
    assert wait_for(lambda: len(nc._mux) == 0, 3.0)  # the timer forgot the token
    del it
