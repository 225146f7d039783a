"""Golden vectors: inputs with hand-written expected results, run against both twins.

Each expected value is either the exact result or a :class:`Raises` naming the
exception type and a fragment of its message.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from jsclient.errors import BadHeaderError, InvalidJSAckError, ProtocolError


@dataclass(frozen=True)
class Raises:
    exc: type[BaseException]
    match: str = ""
    #: for the parser: frames completed before the error (``ProtocolError.events``)
    events: list[tuple[Any, ...]] = field(default_factory=list)


# ----------------------------------------------------------------------------- parser

ACK = "$JS.ACK.ORDERS.c1.1.123.123.1700000000000000000.5"
JS_FRAME = f"MSG orders.new 7 {ACK} 16\r\n".encode() + b"0123456789abcdef\r\n"
JS_EVENT = (0, 7, "orders.new", ACK, None, b"0123456789abcdef", 10 + 49 + 16)
HMSG_FRAME = b"HMSG a.b 3 _INBOX.x 12 14\r\nNATS/1.0\r\n\r\nhi\r\n"
HMSG_EVENT = (0, 3, "a.b", "_INBOX.x", b"NATS/1.0\r\n\r\n", b"hi", 3 + 8 + 14)
STATUS_FRAME = b"HMSG _INBOX.p 9 28 28\r\nNATS/1.0 404 No Messages\r\n\r\n\r\n"
STATUS_EVENT = (0, 9, "_INBOX.p", "", b"NATS/1.0 404 No Messages\r\n\r\n", b"", 8 + 28)


@dataclass(frozen=True)
class ParserVector:
    id: str
    chunks: list[bytes]
    expected: list[tuple[Any, ...]] | Raises
    max_control_line: int = 4096
    max_payload: int = 64 * 1024 * 1024
    buffered: int = 0


PARSER = [
    ParserVector("js-msg", [JS_FRAME], [JS_EVENT]),
    ParserVector("js-msg-x3", [JS_FRAME * 3], [JS_EVENT] * 3),
    ParserVector("hmsg", [HMSG_FRAME], [HMSG_EVENT]),
    ParserVector("status-404", [STATUS_FRAME], [STATUS_EVENT]),
    ParserVector(
        "msg-no-reply", [b"MSG foo 1 5\r\nhello\r\n"], [(0, 1, "foo", "", None, b"hello", 8)]
    ),
    ParserVector("msg-empty", [b"MSG x 1 0\r\n\r\n"], [(0, 1, "x", "", None, b"", 1)]),
    ParserVector("hmsg-empty", [b"HMSG x 1 0 0\r\n\r\n"], [(0, 1, "x", "", b"", b"", 1)]),
    ParserVector(
        "ping-pong-ok",
        [b"PING\r\nPONG\r\n+OK\r\nping\r\n"],
        [(1,), (2,), (3,), (1,)],
    ),
    ParserVector("ping-extra", [b"PING now\r\n"], [(1,)]),
    ParserVector(
        "err-quoted", [b"-ERR 'Authorization Violation'\r\n"], [(4, "Authorization Violation")]
    ),
    ParserVector("err-blanks", [b"-ERR    'x y'  \t\r\n"], [(4, "x y")]),
    ParserVector("err-bare", [b"-ERR\r\n"], [(4, "")]),
    ParserVector("err-bad-utf8", [b"-ERR '\xff'\r\n"], [(4, "\ufffd")]),
    ParserVector("info", [b'INFO {"a":1}\r\n'], [(5, '{"a":1}')]),
    ParserVector("info-trailing-blank", [b"INFO  {} \r\n"], [(5, "{} ")]),
    ParserVector("info-bare", [b"INFO\r\n"], [(5, "")]),
    ParserVector(
        "blanks",
        [b"\t msg\x0ba\x0c1 \r r\t\n 2 \r\nhi\r\n"],
        [(0, 1, "a", "r", None, b"hi", 4)],
    ),
    ParserVector(
        "non-utf8-subject",
        [b"MSG \xff.\xc3\xa9 1 \xfe 1\r\nx\r\n"],
        [(0, 1, "\udcff.\u00e9", "\udcfe", None, b"x", 4 + 1 + 1)],
    ),
    ParserVector(
        "payload-with-crlf", [b"MSG a 1 6\r\nPI\r\nNG\r\n"], [(0, 1, "a", "", None, b"PI\r\nNG", 7)]
    ),
    ParserVector(
        "split-control-line",
        [JS_FRAME[:5], JS_FRAME[5:30], JS_FRAME[30:]],
        [JS_EVENT],
    ),
    ParserVector(
        "split-payload",
        [JS_FRAME[:-10], JS_FRAME[-10:-1], JS_FRAME[-1:]],
        [JS_EVENT],
    ),
    ParserVector(
        "subjects-same-length",
        [b"MSG a.b 1 0\r\n\r\nMSG a.c 1 0\r\n\r\nMSG a.c 1 0\r\n\r\nMSG a.\xff 1 0\r\n\r\n"],
        [
            (0, 1, "a.b", "", None, b"", 3),
            (0, 1, "a.c", "", None, b"", 3),
            (0, 1, "a.c", "", None, b"", 3),
            (0, 1, "a.\udcff", "", None, b"", 3),
        ],
    ),
    ParserVector(
        "long-subjects",
        [b"MSG " + b"s" * 100 + b" 1 0\r\n\r\nMSG " + b"s" * 99 + b"t 1 0\r\n\r\n"],
        [(0, 1, "s" * 100, "", None, b"", 100), (0, 1, "s" * 99 + "t", "", None, b"", 100)],
    ),
    ParserVector("split-crlf", [b"PING\r", b"\nPONG\r\n"], [(1,), (2,)]),
    ParserVector("partial-kept", [b"PING\r\nPO"], [(1,)], buffered=2),
    ParserVector(
        "partial-msg-kept", [JS_FRAME + JS_FRAME[:-3]], [JS_EVENT], buffered=len(JS_FRAME) - 3
    ),
    ParserVector(
        "sid-18-digits",
        [b"MSG a 123456789012345678 1\r\nx\r\n"],
        [(0, 123456789012345678, "a", "", None, b"x", 2)],
    ),
    ParserVector(
        "sid-19-digits",
        [b"MSG a 1234567890123456789 1\r\nx\r\n"],
        Raises(ProtocolError, "invalid sid"),
    ),
    ParserVector("sid-plus", [b"MSG a +1 1\r\nx\r\n"], Raises(ProtocolError, "invalid sid b'+1'")),
    ParserVector(
        "sid-underscore", [b"MSG a 1_0 1\r\nx\r\n"], Raises(ProtocolError, "invalid sid b'1_0'")
    ),
    ParserVector(
        "size-arabic",
        [b"MSG a 1 \xd9\xa1\r\nx\r\n"],
        Raises(ProtocolError, "invalid size b'\\xd9\\xa1'"),
    ),
    ParserVector(
        "hdr-size-bad", [b"HMSG a 1 x 1\r\n"], Raises(ProtocolError, "invalid header size b'x'")
    ),
    ParserVector(
        "hdr-above-total", [b"HMSG a 1 5 4\r\n"], Raises(ProtocolError, "header size exceeds total")
    ),
    ParserVector(
        "too-few", [b"MSG a 1\r\n"], Raises(ProtocolError, "malformed MSG line b'MSG a 1'")
    ),
    ParserVector(
        "too-many",
        [b"msg a 1 r x 1\r\n"],
        Raises(ProtocolError, "malformed MSG line b'msg a 1 r x 1'"),
    ),
    ParserVector("hmsg-too-few", [b"HMSG a 1 1\r\n"], Raises(ProtocolError, "malformed HMSG line")),
    ParserVector(
        "no-crlf-after-payload",
        [b"MSG a 1 1\r\nxy\r\n"],
        Raises(ProtocolError, "not followed by CRLF"),
    ),
    ParserVector(
        "unknown-op",
        [b"PING\r\nFOO bar\r\n"],
        Raises(ProtocolError, "unknown operation b'FOO'", [(1,)]),
    ),
    ParserVector(
        "unknown-op-case", [b"hello\r\n"], Raises(ProtocolError, "unknown operation b'HELLO'")
    ),
    ParserVector("empty-line", [b"\r\n"], Raises(ProtocolError, "empty control line")),
    ParserVector(
        "blank-line", [b"PONG\r\n \t\x0b\r\n"], Raises(ProtocolError, "empty control line", [(2,)])
    ),
    ParserVector(
        "error-keeps-events",
        [JS_FRAME + b"PING\r\nMSG a 1 2\r\nabc\r\nPONG\r\n"],
        Raises(ProtocolError, "not followed by CRLF", [JS_EVENT, (1,)]),
    ),
    ParserVector(
        "control-line-limit-ok",
        [b"MSG abcdefghijk 1 0\r\n\r\n"],
        [(0, 1, "abcdefghijk", "", None, b"", 11)],
        max_control_line=19,
    ),
    ParserVector(
        "control-line-limit",
        [b"MSG abcdefghijkl 1 0\r\n\r\n"],
        Raises(ProtocolError, "control line too long"),
        max_control_line=19,
    ),
    ParserVector(
        "control-line-limit-partial",
        [b"MSG abcdefghijklmnopqrstu"],
        Raises(ProtocolError, "control line too long"),
        max_control_line=19,
    ),
    ParserVector(
        "info-limit-is-1mib",
        [b"INFO " + b"x" * 5000 + b"\r\n"],
        [(5, "x" * 5000)],
        max_control_line=100,
    ),
    ParserVector(
        "info-over-1mib",
        [b"INFO " + b"x" * (1024 * 1024)],
        Raises(ProtocolError, "control line too long"),
    ),
    ParserVector(
        "max-payload-ok",
        [b"MSG a 1 4\r\nabcd\r\n"],
        [(0, 1, "a", "", None, b"abcd", 5)],
        max_payload=4,
    ),
    ParserVector(
        "max-payload",
        [b"MSG a 1 5\r\n"],
        Raises(ProtocolError, "payload of 5 bytes exceeds max_payload 4"),
        max_payload=4,
    ),
]

# ----------------------------------------------------------------------------- jsack

JSACK: list[tuple[str, Any]] = [
    (ACK, ("ORDERS", "c1", 1, 123, 123, 1700000000000000000, 5, None)),
    ("$JS.ACK.S.C.0.0.0.0.0", ("S", "C", 0, 0, 0, 0, 0, None)),
    ("$JS.ACK._.AH.S.C.1.2.3.4.5", ("S", "C", 1, 2, 3, 4, 5, None)),
    ("$JS.ACK..AH.S.C.1.2.3.4.5", ("S", "C", 1, 2, 3, 4, 5, None)),
    ("$JS.ACK.hub.AH.S.C.1.2.3.4.5", ("S", "C", 1, 2, 3, 4, 5, "hub")),
    ("$JS.ACK.hub.AH.S.C.1.2.3.4.5.rnd", ("S", "C", 1, 2, 3, 4, 5, "hub")),
    ("$JS.ACK.hub.AH.S.C.1.2.3.4.5.a.b.c", ("S", "C", 1, 2, 3, 4, 5, "hub")),
    ("$JS.ACK.__.AH.S.C.1.2.3.4.5", ("S", "C", 1, 2, 3, 4, 5, "__")),
    ("$JS.ACK.S.C.18446744073709551615.1.1.1.1", ("S", "C", 2**64 - 1, 1, 1, 1, 1, None)),
    ("$JS.ACK.S.C.000000000000000000000001.1.1.1.1", ("S", "C", 1, 1, 1, 1, 1, None)),
    ("$JS.ACK.\u00e9.\U0001f600.1.2.3.4.5", ("\u00e9", "\U0001f600", 1, 2, 3, 4, 5, None)),
    ("$JS.ACK.d\u4e2d.h.S.C.1.2.3.4.5", ("S", "C", 1, 2, 3, 4, 5, "d\u4e2d")),
    (
        "$JS.ACK.S.C.18446744073709551616.1.1.1.1",
        Raises(InvalidJSAckError, "num delivered '18446744073709551616' overflows"),
    ),
    (
        "$JS.ACK.S.C.1.1.1.99999999999999999999999.1",
        Raises(InvalidJSAckError, "timestamp '99999999999999999999999' overflows"),
    ),
    ("$JS.ACK.S.C.1.1.1.9999999999999999999999x.1", Raises(InvalidJSAckError, "invalid timestamp")),
    ("$JS.ACK.hub.S.C.1.2.3.4.5", Raises(InvalidJSAckError, "has 10 tokens")),
    ("$JS.ACK.S.C.1.2.3.4", Raises(InvalidJSAckError, "has 8 tokens")),
    ("$JS.ACK", Raises(InvalidJSAckError, "has 2 tokens")),
    ("$JS", Raises(InvalidJSAckError, "does not start with $JS.ACK")),
    ("", Raises(InvalidJSAckError, "does not start with $JS.ACK")),
    ("$JS.ACKX.S.C.1.2.3.4.5", Raises(InvalidJSAckError, "does not start with $JS.ACK")),
    ("$JSX.ACK.S.C.1.2.3.4.5", Raises(InvalidJSAckError, "does not start with $JS.ACK")),
    ("$js.ack.S.C.1.2.3.4.5", Raises(InvalidJSAckError, "does not start with $JS.ACK")),
    ("$J\u00e9.ACK.S.C.1.2.3.4.5", Raises(InvalidJSAckError, "does not start with $JS.ACK")),
    ("$JS.ACK..C.1.2.3.4.5", Raises(InvalidJSAckError, "empty stream name")),
    ("$JS.ACK.S..1.2.3.4.5", Raises(InvalidJSAckError, "empty consumer name")),
    ("$JS.ACK.S.C. 5.2.3.4.5", Raises(InvalidJSAckError, "invalid num delivered ' 5'")),
    ("$JS.ACK.S.C.1.+5.3.4.5", Raises(InvalidJSAckError, "invalid stream sequence '+5'")),
    ("$JS.ACK.S.C.1.2.1_0.4.5", Raises(InvalidJSAckError, "invalid consumer sequence '1_0'")),
    (
        "$JS.ACK.S.C.1.2.3.\u0661\u0662.5",
        Raises(InvalidJSAckError, "invalid timestamp '\u0661\u0662'"),
    ),
    ("$JS.ACK.S.C.1.2.3.4.", Raises(InvalidJSAckError, "invalid num pending ''")),
    ("$JS.ACK.S.C.1.2.3.4.-5", Raises(InvalidJSAckError, "invalid num pending '-5'")),
    ("$JS.ACK.h.a.S.C.1.2.3.4.\uff15", Raises(InvalidJSAckError, "invalid num pending")),
]

# ----------------------------------------------------------------------------- pub ack

#: (reply payload, ``(stream, seq)`` or ``None``) for ``jsack.pub_ack_fields``
PUB_ACK: list[tuple[bytes, tuple[str, int] | None]] = [
    (b'{"stream":"ORDERS","seq":123456}', ("ORDERS", 123456)),
    (b'{"stream":"S","seq":0}', ("S", 0)),
    (b'{"stream":"S","seq":1}', ("S", 1)),
    (b'{"stream":"S","seq":18446744073709551615}', ("S", 2**64 - 1)),
    (b'{"stream":"S","seq":9999999999999999999}', ("S", 9999999999999999999)),
    ('{"stream":"\u00e9\u6d41","seq":7}'.encode(), ("\u00e9\u6d41", 7)),
    ('{"stream":"\U0001f600","seq":7}'.encode(), ("\U0001f600", 7)),
    (b'{"stream":"' + b"x" * 300 + b'","seq":42}', ("x" * 300, 42)),
    (b'{"stream":"a b/c\x7f:{}[],","seq":5}', ("a b/c\x7f:{}[],", 5)),
    (b'{"stream":"seq","seq":5}', ("seq", 5)),
    (b"", None),
    (b"{}", None),
    (b'{"stream":"S"}', None),
    (b'{"stream":"S","seq":}', None),
    (b'{"stream":"S","seq":5,"duplicate":true}', None),
    (b'{"stream":"S","seq":5,"domain":"hub"}', None),
    (b'{"stream":"S","domain":"hub","seq":5}', None),
    (b'{"seq":5,"stream":"S"}', None),
    (b'{"stream":"S","seq":1,"seq":2}', None),
    (b'{"stream":"S","stream":"T","seq":1}', None),
    (b'{\n"stream":"S","seq":5}', None),
    (b'{"stream":"S",\t"seq":5}', None),
    (b'{"stream": "S","seq":5}', None),
    (b'{"stream":"S", "seq":5}', None),
    (b'{"stream":"S","seq": 5}', None),
    (b'{"stream":"S","seq":5 }', None),
    (b' {"stream":"S","seq":5}', None),
    (b'{"stream":"S","seq":5}\n', None),
    (b'{"stream":"S","seq":5}}', None),
    (b'{"stream":"S","seq":5}x', None),
    (b'{"stream":"S""","seq":5}', None),
    (b'{"stream":"S\\"","seq":5}', None),
    (b'{"stream":"S\\u0041","seq":5}', None),
    (b'{"stream":"S\tT","seq":5}', None),
    (b'{"stream":"S\x00","seq":5}', None),
    (b'{"stream":"\x1f","seq":5}', None),
    (b'{"stream":"","seq":5}', None),
    (b'{"stream":"\xff","seq":5}', None),
    (b'{"stream":"\xc3","seq":5}', None),
    (b'{"stream":"\xc0\xaf","seq":5}', None),  # overlong "/"
    (b'{"stream":"\xed\xa0\x80","seq":5}', None),  # a surrogate
    (b'{"stream":"\xf4\x90\x80\x80","seq":5}', None),  # above U+10FFFF
    (b'{"stream":"S","seq":05}', None),
    (b'{"stream":"S","seq":00}', None),
    (b'{"stream":"S","seq":00000000000000000001}', None),
    (b'{"stream":"S","seq":100000000000000000000}', None),  # 21 digits
    (b'{"stream":"S","seq":18446744073709551616}', None),  # uint64 + 1
    (b'{"stream":"S","seq":99999999999999999999}', None),
    (b'{"stream":"S","seq":-5}', None),
    (b'{"stream":"S","seq":+5}', None),
    (b'{"stream":"S","seq":5.0}', None),
    (b'{"stream":"S","seq":5e3}', None),
    (b'{"stream":"S","seq":"5"}', None),
    (b'{"stream":"S","seq":\xd9\xa1}', None),  # ARABIC-INDIC DIGIT ONE
    (b'{"stream":"S","seq":5', None),
    (b'{"stream":"S","seq":', None),
    (b'{"stream":"S","se', None),
    (b'{"stream":"S', None),
    (b'{"stream":"', None),
    (b'{"stream":S,"seq":5}', None),
    (b'{"STREAM":"S","seq":5}', None),
    (b'{"error":{"code":503}}', None),
    (b'{"error":{"code":503,"err_code":10039,"description":"no responders"}}', None),
    (b"\xff" * 40, None),
]

# ----------------------------------------------------------------------------- status

STATUS_OF: list[tuple[bytes | None, Any]] = [
    (None, None),
    (b"NATS/1.0\r\n\r\n", None),
    (b"NATS/1.0\r\nFoo: bar\r\n\r\n", None),
    (b"NATS/1.0", None),
    (b"NATS/1.0 40", None),
    (b"NATS/1.0 4040\r\n", None),
    (b"NATS/1.0 404x\r\n", None),
    (b"NATS/1.0 4 04\r\n", None),
    (b"NATS/1.0 404 No Messages\r\n\r\n", (404, "No Messages")),
    (b"NATS/1.0 408 Request Timeout\r\nNats-Pending-Messages: 1\r\n\r\n", (408, "Request Timeout")),
    (b"NATS/1.0 100 Idle Heartbeat\r\n\r\n", (100, "Idle Heartbeat")),
    (b"NATS/1.0\t503\r\n\r\n", (503, "")),
    (b"NATS/1.0 409  Exceeded MaxWaiting \x0b\r\n", (409, "Exceeded MaxWaiting")),
    (b"NATS/1.0 409 x\xffy", (409, "x\ufffdy")),
    (b"", Raises(BadHeaderError, "does not start with NATS/1.0")),
    (b"NATS/2.0 404\r\n", Raises(BadHeaderError, "does not start with NATS/1.0")),
    (b"nats/1.0 404\r\n", Raises(BadHeaderError, "does not start with NATS/1.0")),
]

CLASSIFY: list[tuple[int, str, int]] = [
    (100, "Idle Heartbeat", 1),
    (100, "FlowControl Request", 2),
    (100, "Other", 10),
    (404, "No Messages", 3),
    (408, "Request Timeout", 4),
    (408, "Interest Expired", 4),
    (409, "Message Size Exceeds MaxBytes", 5),
    (409, "Batch Completed", 5),
    (409, "Exceeded MaxRequestBatch of 10", 6),
    (409, "Exceeded MaxRequestExpires of 1s", 6),
    (409, "Exceeded MaxRequestMaxBytes of 5", 6),
    (409, "Exceeded MaxWaiting", 6),
    (409, "EXCEEDED MAXWAITING", 6),
    (409, "Leadership Change", 7),
    (423, "Nats-Wrong-Pin-Id", 7),
    (400, "Bad Request", 8),
    (409, "Consumer Deleted", 8),
    (409, "consumer is push based", 8),
    (503, "", 9),
    (409, "Consumer Deleted.", 10),
    (409, "Exceeded", 10),
    (409, "Batch Compl\u00e9ted", 10),
    (200, "", 10),
]

HB = (
    b"NATS/1.0 100 Idle Heartbeat\r\n"
    b"Nats-Last-Consumer: 42\r\n"
    b"Nats-Last-Stream: 1000\r\n"
    b"Nats-Consumer-Stalled: _INBOX.fc\r\n\r\n"
)
ENDED = (
    b"NATS/1.0 409 Batch Completed\r\n"
    b"nats-pending-messages: 10\r\n"
    b"NATS-PENDING-BYTES:\t2048 \r\n"
    b"Nats-Pin-Id:  pin-1 \r\n\r\n"
)

JS_HEADERS: list[tuple[bytes, tuple[int, int, int, int, str | None, str | None]]] = [
    (HB, (-1, -1, 42, 1000, "_INBOX.fc", None)),
    (ENDED, (10, 2048, -1, -1, None, "pin-1")),
    (b"NATS/1.0 404 No Messages\r\n\r\n", (-1, -1, -1, -1, None, None)),
    (b"NATS/1.0", (-1, -1, -1, -1, None, None)),
    (
        b"NATS/1.0\r\nNats-Pending-Messages: 3\r\nNats-Pending-Messages: 4\r\n",
        (3, -1, -1, -1, None, None),
    ),
    (b"NATS/1.0\r\nNats-Pending-Messages: +3\r\n", (-1, -1, -1, -1, None, None)),
    (b"NATS/1.0\r\nNats-Pending-Bytes: 18446744073709551616\r\n", (-1, -1, -1, -1, None, None)),
    (
        b"NATS/1.0\r\nNats-Pending-Bytes: 18446744073709551615\r\n",
        (-1, 2**64 - 1, -1, -1, None, None),
    ),
    (b"NATS/1.0\r\nNats-Last-Stream: \xd9\xa1\r\n", (-1, -1, -1, -1, None, None)),
    (b"NATS/1.0\r\nNats-Pin-Id: \xff:x\r\n", (-1, -1, -1, -1, None, "\udcff:x")),
    (b"NATS/1.0\r\nNats-Pin-Id\r\nNats-Pin-Id:y\r\n", (-1, -1, -1, -1, None, "y")),
    (b"NATS/1.0\r\nNats-Pin-Ids: x\r\nXNats-Pin-Id: z\r\n", (-1, -1, -1, -1, None, None)),
]

HEADER_VALUE: list[tuple[bytes, str, str | None]] = [
    (b"NATS/1.0\r\nFoo: bar\r\nfoo: baz\r\n\r\n", "FOO", "bar"),
    (b"NATS/1.0\r\nFoo: bar\r\n\r\n", "Bar", None),
    (b"NATS/1.0 404 Foo: x", "Foo", None),
    (b"NATS/1.0\r\n  Foo\t:  a : b \r\n", "foo", "a : b"),
    (b"NATS/1.0\r\nFoo:\r\n", "foo", ""),
    (b"NATS/1.0\r\n: x\r\n", "", "x"),
    (b"NATS/1.0\r\n\xc3\xa9: 1\r\n", "\u00e9", "1"),
    (b"NATS/1.0\r\n\xc3\x89: 1\r\n", "\u00e9", None),
]

# ----------------------------------------------------------------------------- sizes

MSG_SIZE: list[tuple[tuple[str, str, bytes | None, bytes], int]] = [
    (("a.b", "", None, b""), 3),
    (("a.b", "r", b"NATS/1.0\r\n\r\n", b"xyz"), 3 + 1 + 12 + 3),
    (("\u00e9", "\u4e2d", None, b""), 2 + 3),
    (("\udcff", "", b"", b"1"), 2),
    (("orders.new", ACK, None, b"0123456789abcdef"), 10 + 49 + 16),
]

# (constructor args, [(method, args, expected return)], final (msgs, bytes))
PENDING: list[
    tuple[tuple[int, int, int, int], list[tuple[str, tuple[int, ...], Any]], tuple[int, int]]
] = [
    (
        (10, 0, 5, 0),
        [
            ("next_pull", (), (10, 0)),
            ("next_pull", (), None),
            ("on_message", (100,), None),
            ("on_message", (100,), None),
            ("on_message", (100,), None),
            ("on_message", (100,), None),
            ("next_pull", (), None),
            ("on_message", (100,), None),
            ("next_pull", (), (5, 0)),
            ("on_status", (3, 999), None),
            ("next_pull", (), None),
            ("reset", (), None),
            ("next_pull", (), (10, 0)),
        ],
        (10, 0),
    ),
    (
        (1_000_000, 1000, 500_000, 400),
        [
            ("next_pull", (), (1_000_000, 1000)),
            ("on_message", (300,), None),
            ("next_pull", (), None),
            ("on_message", (300,), None),
            ("next_pull", (), (2, 600)),
            ("on_status", (-1, 700), None),
            ("on_status", (2**64 - 1, -1), None),
            ("next_pull", (), (1_000_000, 700)),
            ("on_message", (5000,), None),
        ],
        (999_999, 0),
    ),
    (
        (5, 10, 1, 5),
        [
            ("on_message", (-1,), Raises(ValueError, "negative size")),
            ("on_message", (2**63,), Raises(OverflowError)),
            ("next_pull", (), (5, 10)),
            ("on_message", (2**63 - 1,), None),
        ],
        (4, 0),
    ),
]

PENDING_BAD_ARGS: list[tuple[Any, ...]] = [
    (0, 0, 0, 0),
    (-1, 0, 0, 0),
    (1, -1, 0, 0),
    (1, 0, -1, 0),
    (1, 0, 0, -1),
    (2**63, 0, 0, 0),
    (1.5, 0, 0, 0),
    ("1", 0, 0, 0),
]
