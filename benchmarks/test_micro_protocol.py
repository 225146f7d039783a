"""Micro benchmarks of the protocol hot path, pure Python vs Cython side by side.

Run: ``.venv/bin/python -m pytest benchmarks/test_micro_protocol.py --benchmark-only -q``.
Each group (``parser-msg``, ``jsack``, ``pub-ack``, ``status``, ``sizes``, ``delivery-mux``,
``writer-pub``, ``writer-ack``) has
a ``py`` and a ``c`` row; the parser rows time one feed of 1000 JetStream MSG frames, so divide
by 1000 for the cost per message (``delivery-mux``: by 100). Without the compiled twins the
``c`` rows skip.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

import pytest

from jsclient._mux import RequestMux

ACK = "$JS.ACK.ORDERS.c1.1.123.123.1700000000000000000.5"
FRAME = f"MSG orders.new 7 {ACK} 16\r\n".encode() + b"0123456789abcdef\r\n"
FRAMES_PER_FEED = 1000
BATCH = FRAME * FRAMES_PER_FEED
PUB_ACK = b'{"stream":"ORDERS","seq":123456}'
USER_HEADER = b"NATS/1.0\r\nX-Trace: abc\r\n\r\n"
STATUS_HEADER = b"NATS/1.0 409 Exceeded MaxWaiting\r\n\r\n"
ENDED_HEADER = (
    b"NATS/1.0 408 Request Timeout\r\nNats-Pending-Messages: 10\r\nNats-Pending-Bytes: 2048\r\n\r\n"
)


def _mod(impl: str, name: str) -> ModuleType:
    if impl == "py":
        return importlib.import_module(f"jsclient.protocol.{name}")
    try:
        return importlib.import_module(f"jsclient._speedups.{name}")
    except ImportError as exc:
        pytest.skip(f"Cython speedups not built: {exc}")


IMPLS = pytest.mark.parametrize("impl", ["py", "c"])


def run(benchmark: Any, fn: Any, *args: Any, iterations: int = 2000, rounds: int = 30) -> Any:
    """Time ``fn(*args)`` per call, with enough calls per round that timer overhead vanishes."""
    return benchmark.pedantic(fn, args=args, iterations=iterations, rounds=rounds, warmup_rounds=1)


@IMPLS
@pytest.mark.benchmark(group="parser-msg")
def test_parser_msg_batch(benchmark: Any, impl: str) -> None:
    parser = _mod(impl, "parser").Parser()
    events = run(benchmark, parser.feed, BATCH, iterations=5, rounds=40)
    assert len(events) == FRAMES_PER_FEED
    assert events[0][3] == ACK


@IMPLS
@pytest.mark.benchmark(group="parser-msg-split")
def test_parser_msg_split_feeds(benchmark: Any, impl: str) -> None:
    # a socket read rarely ends on a frame boundary: 1000 frames in 4 KiB reads
    parser = _mod(impl, "parser").Parser()
    chunks = [BATCH[i : i + 4096] for i in range(0, len(BATCH), 4096)]

    def feed_all() -> int:
        n = 0
        for chunk in chunks:
            n += len(parser.feed(chunk))
        return n

    assert run(benchmark, feed_all, iterations=5, rounds=40) == FRAMES_PER_FEED


@IMPLS
@pytest.mark.benchmark(group="jsack")
def test_parse_jsack(benchmark: Any, impl: str) -> None:
    parse = _mod(impl, "jsack").parse_jsack
    assert run(benchmark, parse, ACK)[3] == 123


@IMPLS
@pytest.mark.benchmark(group="pub-ack")
def test_pub_ack_fields(benchmark: Any, impl: str) -> None:
    pub_ack_fields = _mod(impl, "jsack").pub_ack_fields
    assert run(benchmark, pub_ack_fields, PUB_ACK) == ("ORDERS", 123456)


@IMPLS
@pytest.mark.benchmark(group="status")
def test_status_user_header(benchmark: Any, impl: str) -> None:
    status_of = _mod(impl, "status").status_of
    assert run(benchmark, status_of, USER_HEADER) is None


@IMPLS
@pytest.mark.benchmark(group="status")
def test_status_of_and_classify(benchmark: Any, impl: str) -> None:
    mod = _mod(impl, "status")
    status_of, classify = mod.status_of, mod.classify

    def status_kind() -> int:
        code, description = status_of(STATUS_HEADER)
        return int(classify(code, description))

    assert run(benchmark, status_kind) == mod.WARNING


@IMPLS
@pytest.mark.benchmark(group="status")
def test_js_headers(benchmark: Any, impl: str) -> None:
    js_headers = _mod(impl, "jsheaders").js_headers
    assert run(benchmark, js_headers, ENDED_HEADER)[:2] == (10, 2048)


@IMPLS
@pytest.mark.benchmark(group="sizes")
def test_msg_size(benchmark: Any, impl: str) -> None:
    msg_size = _mod(impl, "sizes").msg_size
    assert run(benchmark, msg_size, "orders.new", ACK, None, b"0123456789abcdef") == 75


@IMPLS
@pytest.mark.benchmark(group="sizes")
def test_pending_counter_per_message(benchmark: Any, impl: str) -> None:
    counter = _mod(impl, "sizes").PendingCounter(500, 0, 250, 0)
    counter.next_pull()

    def per_message() -> Any:
        counter.on_message(75)
        return counter.next_pull()

    run(benchmark, per_message)
    assert counter.msgs > 0


REPLIES_PER_ROUTE = 100
REPLY_PREFIX = "_INBOX.Xk3bQ9pL2mN7rT4vW8yZ1a."


class _Waiter:
    __slots__ = ()

    def deliver(self, msg: Any) -> None:
        pass


class _Client:
    """The reply handler's state: a multiplexer's prefix and waiter map (its handler is
    the multiplexer's own)."""

    def __init__(self, resp_map: dict[str, Any]) -> None:
        self._prefix = REPLY_PREFIX
        self._map = resp_map

    on_response = RequestMux.on_response


@IMPLS
@pytest.mark.parametrize("path", ["mux", "handler"])
@pytest.mark.benchmark(group="delivery-mux")
def test_route_reply_mux(benchmark: Any, impl: str, path: str) -> None:
    # 100 publish acks routed to the request/reply sub, each finding its waiter; "mux" lets
    # route pop the waiter itself, "handler" is the Python on_response frame per reply.
    # Each call first re-registers the 100 waiters the previous call popped.
    d = _mod(impl, "delivery")

    class Msg(d.MsgBase):
        __slots__ = ()

    tokens = [str(n) for n in range(1000, 1000 + REPLIES_PER_ROUTE)]
    waiters = {t: _Waiter() for t in tokens}
    resp: dict[str, Any] = {}
    client = _Client(resp)
    sub = d.SubState(1, 0, 0, 0, client.on_response)
    if path == "mux":
        sub._mux, sub._mux_skip = resp, len(REPLY_PREFIX)
    subs = {1: sub}
    events = [(0, 1, REPLY_PREFIX + t, "", None, PUB_ACK, len(PUB_ACK) + 40) for t in tokens]
    route = d.route

    def route_replies() -> Any:
        resp.update(waiters)
        return route(client, events, subs, Msg)

    assert run(benchmark, route_replies, iterations=200) == (100, 100 * len(PUB_ACK))
    assert not resp


@IMPLS
@pytest.mark.benchmark(group="writer-pub")
def test_writer_pub(benchmark: Any, impl: str) -> None:
    """Encode and queue one 16 B publish (the core publish hot path)."""
    q = _mod(impl, "writer").WriteQueue(1 << 60)
    q.open = True
    payload = b"0123456789abcdef"
    run(benchmark, q.pub, b"orders.new", payload, 1 << 20)
    assert q.take()[0][0] == b"PUB orders.new 16\r\n0123456789abcdef\r\n"


@IMPLS
@pytest.mark.benchmark(group="writer-ack")
def test_writer_ack(benchmark: Any, impl: str) -> None:
    """Encode and queue one ack for a server-made reply subject."""
    q = _mod(impl, "writer").WriteQueue(1 << 60)
    q.open = True
    run(benchmark, q.ack, ACK, b"+ACK")
    assert q.take()[0][0] == f"PUB {ACK} 4\r\n+ACK\r\n".encode()
