"""The pure frame parser (the specification): bytes in, frames out, no server."""

from __future__ import annotations

from typing import Any

import pytest

from jsclient.errors import ProtocolError
from jsclient.protocol.parser import (
    MAX_CONTROL_LINE,
    MAX_INFO_LINE,
    MAX_PAYLOAD,
    OP_ERR,
    OP_INFO,
    OP_MSG,
    OP_OK,
    OP_PING,
    OP_PONG,
    Parser,
)

ACK = "$JS.ACK.ORDERS.c1.1.123.123.1700000000000000000.5"
JS_FRAME = f"MSG orders.new 7 {ACK} 16\r\n".encode() + b"0123456789abcdef\r\n"
JS_EVENT = (OP_MSG, 7, "orders.new", ACK, None, b"0123456789abcdef", 10 + len(ACK) + 16)

HMSG_FRAME = b"HMSG a.b 3 _INBOX.x 12 14\r\nNATS/1.0\r\n\r\nhi\r\n"
HMSG_EVENT = (OP_MSG, 3, "a.b", "_INBOX.x", b"NATS/1.0\r\n\r\n", b"hi", 3 + 8 + 14)

STREAM = (
    b'INFO {"server_id":"x","max_payload":1048576}\r\n'
    + b"PING\r\n"
    + JS_FRAME
    + b"MSG x 1 0\r\n\r\n"
    + HMSG_FRAME
    + b"+OK\r\n"
    + b"-ERR 'Stale Connection'\r\n"
    + b"PONG\r\n"
)
STREAM_EVENTS = [
    (OP_INFO, '{"server_id":"x","max_payload":1048576}'),
    (OP_PING,),
    JS_EVENT,
    (OP_MSG, 1, "x", "", None, b"", 1),
    HMSG_EVENT,
    (OP_OK,),
    (OP_ERR, "Stale Connection"),
    (OP_PONG,),
]


def feed_all(chunks: list[bytes], parser: Parser | None = None) -> list[tuple[Any, ...]]:
    p = parser or Parser()
    out: list[tuple[Any, ...]] = []
    for chunk in chunks:
        out.extend(p.feed(chunk))
    return out


def errors_with(data: bytes, parser: Parser | None = None) -> ProtocolError:
    p = parser or Parser()
    with pytest.raises(ProtocolError) as info:
        p.feed(data)
    return info.value


def test_constants() -> None:
    assert (OP_MSG, OP_PING, OP_PONG, OP_OK, OP_ERR, OP_INFO) == (0, 1, 2, 3, 4, 5)
    assert MAX_CONTROL_LINE == 4096
    assert MAX_INFO_LINE == 1024 * 1024
    assert MAX_PAYLOAD == 64 * 1024 * 1024
    p = Parser()
    assert (p.max_control_line, p.max_payload, p.buffered) == (4096, MAX_PAYLOAD, 0)


def test_msg_with_reply() -> None:
    assert Parser().feed(JS_FRAME) == [JS_EVENT]


def test_msg_without_reply() -> None:
    assert Parser().feed(b"MSG foo.bar 12 5\r\nhello\r\n") == [
        (OP_MSG, 12, "foo.bar", "", None, b"hello", 7 + 5)
    ]


def test_hmsg() -> None:
    assert Parser().feed(HMSG_FRAME) == [HMSG_EVENT]
    assert Parser().feed(b"HMSG a 1 12 12\r\nNATS/1.0\r\n\r\n\r\n") == [
        (OP_MSG, 1, "a", "", b"NATS/1.0\r\n\r\n", b"", 1 + 12)
    ]


def test_whole_stream() -> None:
    assert Parser().feed(STREAM) == STREAM_EVENTS


def test_payload_may_hold_crlf_and_ops() -> None:
    body = b"PING\r\nMSG x 1 2\r\n"
    frame = b"MSG s 1 %d\r\n%s\r\n" % (len(body), body)
    assert Parser().feed(frame) == [(OP_MSG, 1, "s", "", None, body, 1 + len(body))]


def test_case_insensitive_ops_and_blanks() -> None:
    data = b"ping\r\n  PoNg\r\n+ok\r\n\tmsg\ta\t1 \x0b r\x0c 2  \r\nhi\r\nhmsg a 1 0 0\r\n\r\n"
    assert Parser().feed(data) == [
        (OP_PING,),
        (OP_PONG,),
        (OP_OK,),
        (OP_MSG, 1, "a", "r", None, b"hi", 1 + 1 + 2),
        (OP_MSG, 1, "a", "", b"", b"", 1),
    ]


def test_extra_tokens_after_ping_are_ignored() -> None:
    assert Parser().feed(b"PING x y\r\nPONG z\r\n") == [(OP_PING,), (OP_PONG,)]


@pytest.mark.parametrize(
    ("line", "text"),
    [
        (b"-ERR 'Authorization Violation'", "Authorization Violation"),
        (b"-ERR   'Stale Connection'   ", "Stale Connection"),
        (b"-ERR Unquoted text", "Unquoted text"),
        (b"-ERR ''quoted twice''", "quoted twice"),
        (b"-ERR", ""),
        (b"-err 'x'", "x"),
        (b"-ERR '\xff'", "\ufffd"),
    ],
)
def test_err_text(line: bytes, text: str) -> None:
    assert Parser().feed(line + b"\r\n") == [(OP_ERR, text)]


def test_info_json_verbatim() -> None:
    # Only the blanks after INFO go; the JSON text (trailing blank included) is untouched.
    assert Parser().feed(b'INFO   {"a": 1} \r\n') == [(OP_INFO, '{"a": 1} ')]
    assert Parser().feed(b"INFO\r\n") == [(OP_INFO, "")]
    assert Parser().feed(b"info {}\r\n") == [(OP_INFO, "{}")]


def test_subject_decoding_and_size() -> None:
    (ev,) = Parser().feed("MSG é.\U0001f600 1 r.\xe9 3\r\nabc\r\n".encode())
    assert ev[2:4] == ("é.\U0001f600", "r.\xe9")
    # the size counts bytes, not characters
    assert ev[6] == len("é.\U0001f600".encode()) + len("r.é".encode()) + 3
    (ev,) = Parser().feed(b"MSG \xff\xfe 1 3\r\nabc\r\n")
    assert ev[2] == "\udcff\udcfe"
    assert ev[2].encode("utf-8", "surrogateescape") == b"\xff\xfe"
    assert ev[6] == 2 + 3


def test_partial_frames_at_every_split() -> None:
    for cut in range(len(STREAM) + 1):
        p = Parser()
        first = p.feed(STREAM[:cut])
        rest = p.feed(STREAM[cut:])
        assert first + rest == STREAM_EVENTS, cut
        assert p.buffered == 0


def test_partial_frames_at_every_pair_of_splits() -> None:
    data = JS_FRAME + HMSG_FRAME + b"PING\r\n"
    expected = [JS_EVENT, HMSG_EVENT, (OP_PING,)]
    for a in range(len(data) + 1):
        for b in range(a, len(data) + 1):
            assert feed_all([data[:a], data[a:b], data[b:]]) == expected, (a, b)


def test_byte_by_byte() -> None:
    p = Parser()
    got = feed_all([STREAM[i : i + 1] for i in range(len(STREAM))], p)
    assert got == STREAM_EVENTS
    assert p.buffered == 0


def test_buffered_counts_held_bytes() -> None:
    p = Parser()
    assert p.feed(JS_FRAME[:10]) == []
    assert p.buffered == 10
    assert p.feed(JS_FRAME[10:-1]) == []
    assert p.buffered == len(JS_FRAME) - 1
    assert p.feed(JS_FRAME[-1:] + b"PI") == [JS_EVENT]
    assert p.buffered == 2
    p.reset()
    assert p.buffered == 0
    # the held "PI" is gone: what follows is parsed afresh
    assert "unknown operation b'NG'" in str(errors_with(b"NG\r\n", p))


def test_reset_drops_partial_frame() -> None:
    p = Parser()
    p.feed(JS_FRAME[:30])
    p.reset()
    assert p.buffered == 0
    assert p.feed(b"PING\r\n") == [(OP_PING,)]


def test_big_payload_in_many_chunks() -> None:
    payload = bytes(range(256)) * 4096  # 1 MiB
    data = b"MSG big 9 %d\r\n%s\r\nPING\r\n" % (len(payload), payload)
    chunks = [data[i : i + 1000] for i in range(0, len(data), 1000)]
    p = Parser()
    got: list[tuple[Any, ...]] = []
    for i, chunk in enumerate(chunks):
        events = p.feed(chunk)
        if i < len(chunks) - 1:
            assert events == []
        got.extend(events)
    assert got == [(OP_MSG, 9, "big", "", None, payload, 3 + len(payload)), (OP_PING,)]


@pytest.mark.parametrize(
    "line",
    [
        b"MSG a 1",  # too few
        b"MSG a",
        b"MSG",
        b"MSG a 1 r x 2",  # too many
        b"HMSG a 1 2",
        b"HMSG a 1 r x 2 3",
    ],
)
def test_malformed_msg_line(line: bytes) -> None:
    exc = errors_with(line + b"\r\n")
    assert "malformed" in str(exc)
    assert ("HMSG" if line.startswith(b"HMSG") else "MSG") in str(exc)


@pytest.mark.parametrize(
    ("line", "what"),
    [
        (b"MSG a x 1", "sid"),
        (b"MSG a +1 1", "sid"),
        (b"MSG a -1 1", "sid"),
        (b"MSG a 1_0 1", "sid"),
        (b"MSG a 1 0x1", "size"),
        (b"MSG a 1 +5", "size"),
        (b"MSG a 1 \xd9\xa1", "size"),  # ARABIC-INDIC DIGIT ONE
        (b"MSG a 1 1234567890123456789", "size"),  # 19 digits
        (b"HMSG a 1 x 5", "header size"),
        (b"HMSG a 1 r -1 5", "header size"),
    ],
)
def test_bad_numbers(line: bytes, what: str) -> None:
    exc = errors_with(line + b"\r\n")
    assert f"invalid {what} " in str(exc)


def test_eighteen_digits_is_the_limit() -> None:
    p = Parser(max_payload=10**18)
    # accepted as a number, so the frame just waits for its payload
    assert p.feed(b"MSG a 123456789012345678 999999999999999999\r\n") == []
    assert p.buffered > 0


def test_header_size_above_total() -> None:
    assert "header size exceeds" in str(errors_with(b"HMSG a 1 6 5\r\n"))


def test_payload_not_followed_by_crlf() -> None:
    assert "not followed by CRLF" in str(errors_with(b"MSG a 1 2\r\nabc\r\n"))
    assert "not followed by CRLF" in str(errors_with(b"MSG a 1 2\r\nab\n\r"))


def test_max_payload() -> None:
    p = Parser(max_payload=4)
    assert p.feed(b"MSG a 1 4\r\nabcd\r\n")[0][5] == b"abcd"
    exc = errors_with(b"MSG a 1 5\r\n", p)
    assert "payload of 5 bytes exceeds max_payload 4" in str(exc)
    p.max_payload = 5
    assert p.feed(b"MSG a 1 5\r\nabcde\r\n")[0][5] == b"abcde"


def test_unknown_and_empty() -> None:
    assert "unknown operation b'FOO'" in str(errors_with(b"foo bar\r\n"))
    assert "empty control line" in str(errors_with(b"\r\n"))
    assert "empty control line" in str(errors_with(b" \t \r\n"))


def test_control_line_limit() -> None:
    p = Parser(max_control_line=20)
    assert p.feed(b"MSG abcdefghijk 1 0\r\n\r\n")[0][2] == "abcdefghijk"  # 19 bytes
    assert "control line too long" in str(errors_with(b"MSG abcdefghijklmn 1 0\r\n", p))
    # without its CRLF yet: an error as soon as more than the limit is held
    assert p.feed(b"MSG abcdefghijklmnop") == []
    assert "control line too long" in str(errors_with(b"q", p))


def test_info_may_be_long() -> None:
    body = b"{" + b"x" * 100_000 + b"}"
    assert Parser().feed(b"INFO " + body + b"\r\n") == [(OP_INFO, body.decode())]
    p = Parser()
    assert p.feed(b"INFO " + b"x" * (MAX_INFO_LINE - 5)) == []  # exactly the limit
    assert "control line too long" in str(errors_with(b"xx", p))


def test_error_carries_prior_frames_and_resets() -> None:
    p = Parser()
    p.feed(b"PI")
    exc = errors_with(b"NG\r\n" + JS_FRAME + b"BAD\r\nPONG\r\n", p)
    assert exc.events == [(OP_PING,), JS_EVENT]  # type: ignore[attr-defined]
    assert p.buffered == 0
    assert p.feed(b"PONG\r\n") == [(OP_PONG,)]
