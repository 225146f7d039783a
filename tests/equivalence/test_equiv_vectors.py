"""Golden vectors (``vectors.py``) against each implementation (ids ``py`` and ``c``)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from . import vectors as v
from .vectors import Raises


def check(call: Any, expected: Any) -> None:
    if isinstance(expected, Raises):
        with pytest.raises(expected.exc) as info:
            call()
        assert expected.match in str(info.value)
    else:
        got = call()
        assert got == expected
        assert type(got) is type(expected)


@pytest.mark.parametrize("vec", v.PARSER, ids=[x.id for x in v.PARSER])
def test_parser(impl: SimpleNamespace, vec: v.ParserVector) -> None:
    p = impl.parser.Parser(vec.max_control_line, vec.max_payload)
    events: list[tuple[Any, ...]] = []
    if isinstance(vec.expected, Raises):
        with pytest.raises(vec.expected.exc) as info:
            for chunk in vec.chunks:
                events.extend(p.feed(chunk))
        assert vec.expected.match in str(info.value)
        assert events + info.value.events == vec.expected.events
        assert p.buffered == 0  # reset after an error
    else:
        for chunk in vec.chunks:
            events.extend(p.feed(chunk))
        assert events == vec.expected
        for got, want in zip(events, vec.expected, strict=True):
            assert [type(x) for x in got] == [type(x) for x in want]
        assert p.buffered == vec.buffered


def test_parser_defaults(impl: SimpleNamespace) -> None:
    m = impl.parser
    assert (m.OP_MSG, m.OP_PING, m.OP_PONG, m.OP_OK, m.OP_ERR, m.OP_INFO) == (0, 1, 2, 3, 4, 5)
    assert (m.MAX_CONTROL_LINE, m.MAX_INFO_LINE, m.MAX_PAYLOAD) == (4096, 1 << 20, 64 << 20)
    p = m.Parser()
    assert (p.max_control_line, p.max_payload, p.buffered) == (4096, 64 << 20, 0)
    p = m.Parser(max_control_line=10, max_payload=20)
    p.max_control_line = 11
    p.max_payload = 21
    assert (p.max_control_line, p.max_payload) == (11, 21)
    with pytest.raises(AttributeError):
        p.unknown_attribute = 1


def test_parser_error_resets(impl: SimpleNamespace) -> None:
    p = impl.parser.Parser()
    p.feed(b"MSG a 1 3\r\nab")
    with pytest.raises(impl.parser.ProtocolError):
        p.feed(b"cXY")
    assert p.buffered == 0
    assert p.feed(b"PING\r\n") == [(1,)]


@pytest.mark.parametrize(("reply", "expected"), v.JSACK, ids=[r[:40] for r, _ in v.JSACK])
def test_jsack(impl: SimpleNamespace, reply: str, expected: Any) -> None:
    check(lambda: impl.jsack.parse_jsack(reply), expected)


@pytest.mark.parametrize(("reply", "expected"), v.JSACK, ids=[r[:40] for r, _ in v.JSACK])
def test_jsack_with_name_hints(impl: SimpleNamespace, reply: str, expected: Any) -> None:
    # The names a reader expects change nothing in the result, matching or not.
    if isinstance(expected, tuple):
        stream, consumer = expected[0], expected[1]
        check(lambda: impl.jsack.parse_jsack(reply, stream, consumer), expected)
    check(lambda: impl.jsack.parse_jsack(reply, "other", "names"), expected)
    check(lambda: impl.jsack.parse_jsack(reply, 5, b"x"), expected)


def test_jsack_hints_are_reused(impl: SimpleNamespace) -> None:
    stream, consumer = "".join(["ORD", "ERS"]), "".join(["dur", "able-é"])
    got = impl.jsack.parse_jsack("$JS.ACK.ORDERS.durable-é.1.2.3.4.5", stream, consumer)
    assert got[0] is stream and got[1] is consumer
    got = impl.jsack.parse_jsack("$JS.ACK.hub.ACC.ORDERS.durable-é.1.2.3.4.5", stream, "durable")
    assert got[0] is stream and got[1] == consumer and got[1] is not consumer


@pytest.mark.parametrize(("data", "expected"), v.PUB_ACK, ids=[repr(d[:48]) for d, _ in v.PUB_ACK])
def test_pub_ack_fields(impl: SimpleNamespace, data: bytes, expected: Any) -> None:
    check(lambda: impl.jsack.pub_ack_fields(data), expected)
    # bytearray and memoryview are read as the bytes they hold
    check(lambda: impl.jsack.pub_ack_fields(bytearray(data)), expected)
    check(lambda: impl.jsack.pub_ack_fields(memoryview(data)), expected)


def test_pub_ack_fields_reuses_no_stale_name(impl: SimpleNamespace) -> None:
    # the twin reuses the last decoded name: changing names must never return an old one
    f = impl.jsack.pub_ack_fields
    seq = [b"ORDERS", b"ORDERS", b"ORDER", b"ORDERSX", b"ORDERT", "\u00e9".encode(), b"\xc3\xa9x"]
    seq += [b"L" * 256, b"L" * 256, b"L" * 257, b"L" * 257, b"L" * 255, b"L" * 256, b"ORDERS"]
    for name in seq * 2:
        assert f(b'{"stream":"' + name + b'","seq":9}') == (name.decode(), 9)
    assert f(b'{"stream":"\xc3","seq":9}') is None
    assert f(b'{"stream":"\xc3\xa9x","seq":9}') == ("\u00e9x", 9)


@pytest.mark.parametrize(
    "data", [None, 5, 1.5, '{"stream":"S","seq":5}', ["x"], {"stream": "S", "seq": 5}, object()]
)
def test_pub_ack_fields_other_types(impl: SimpleNamespace, data: Any) -> None:
    assert impl.jsack.pub_ack_fields(data) is None


def test_pub_ack_fields_released_memoryview(impl: SimpleNamespace) -> None:
    view = memoryview(b'{"stream":"S","seq":5}')
    assert impl.jsack.pub_ack_fields(view) == ("S", 5)
    view.release()
    assert impl.jsack.pub_ack_fields(view) is None


@pytest.mark.parametrize(("block", "expected"), v.STATUS_OF)
def test_status_of(impl: SimpleNamespace, block: bytes | None, expected: Any) -> None:
    check(lambda: impl.status.status_of(block), expected)


@pytest.mark.parametrize(("code", "description", "kind"), v.CLASSIFY)
def test_classify(impl: SimpleNamespace, code: int, description: str, kind: int) -> None:
    check(lambda: impl.status.classify(code, description), kind)


def test_status_constants(impl: SimpleNamespace) -> None:
    s = impl.status
    names = [
        "USER", "HEARTBEAT", "FLOW_CONTROL", "NO_MESSAGES", "REQUEST_TIMEOUT", "PULL_ENDED",
        "WARNING", "RESET", "TERMINAL", "NO_RESPONDERS", "UNKNOWN",
    ]  # fmt: skip
    assert [getattr(s, n) for n in names] == list(range(11))
    assert list(s.KIND_NAMES) == names


@pytest.mark.parametrize(("block", "expected"), v.JS_HEADERS)
def test_js_headers(impl: SimpleNamespace, block: bytes, expected: Any) -> None:
    check(lambda: impl.jsheaders.js_headers(block), expected)


@pytest.mark.parametrize(("block", "name", "expected"), v.HEADER_VALUE)
def test_header_value(impl: SimpleNamespace, block: bytes, name: str, expected: Any) -> None:
    got = impl.jsheaders.header_value(block, name)
    assert got == expected


@pytest.mark.parametrize(("args", "expected"), v.MSG_SIZE)
def test_msg_size(impl: SimpleNamespace, args: tuple[Any, ...], expected: int) -> None:
    check(lambda: impl.sizes.msg_size(*args), expected)


@pytest.mark.parametrize(("ctor", "ops", "final"), v.PENDING)
def test_pending_counter(
    impl: SimpleNamespace, ctor: tuple[int, ...], ops: list[Any], final: tuple[int, int]
) -> None:
    c = impl.sizes.PendingCounter(*ctor)
    assert (c.max_messages, c.max_bytes, c.threshold_messages, c.threshold_bytes) == ctor
    for method, args, expected in ops:
        check(lambda m=method, a=args: getattr(c, m)(*a), expected)
    assert (c.msgs, c.bytes) == final


@pytest.mark.parametrize("args", v.PENDING_BAD_ARGS)
def test_pending_counter_bad_args(impl: SimpleNamespace, args: tuple[Any, ...]) -> None:
    with pytest.raises(ValueError, match="PendingCounter"):
        impl.sizes.PendingCounter(*args)


def test_pending_counter_read_only(impl: SimpleNamespace) -> None:
    c = impl.sizes.PendingCounter(1, 0, 0, 0)
    for name in ("msgs", "bytes", "max_messages", "max_bytes", "threshold_messages"):
        with pytest.raises(AttributeError):
            setattr(c, name, 5)
