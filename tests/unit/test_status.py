"""The pure status/header helpers (the specification)."""

from __future__ import annotations

import pytest

from jsclient.errors import BadHeaderError
from jsclient.protocol import status as st
from jsclient.protocol.jsheaders import header_value, js_headers
from jsclient.protocol.status import classify, status_of


def test_kind_constants() -> None:
    kinds = [
        st.USER,
        st.HEARTBEAT,
        st.FLOW_CONTROL,
        st.NO_MESSAGES,
        st.REQUEST_TIMEOUT,
        st.PULL_ENDED,
        st.WARNING,
        st.RESET,
        st.TERMINAL,
        st.NO_RESPONDERS,
        st.UNKNOWN,
    ]
    assert kinds == list(range(11))
    assert [st.KIND_NAMES[k] for k in (st.USER, st.RESET, st.UNKNOWN)] == [
        "USER",
        "RESET",
        "UNKNOWN",
    ]


# --------------------------------------------------------------------------- status_of


@pytest.mark.parametrize(
    ("block", "expected"),
    [
        (None, None),
        (b"NATS/1.0\r\n\r\n", None),
        (b"NATS/1.0\r\nFoo: bar\r\n\r\n", None),
        (b"NATS/1.0", None),
        (b"NATS/1.0 ", None),
        (b"NATS/1.0 40", None),
        (b"NATS/1.0 4040 x\r\n\r\n", None),
        (b"NATS/1.0 404x\r\n\r\n", None),
        (b"NATS/1.0 abc\r\n\r\n", None),
        (b"NATS/1.0 +40 x\r\n\r\n", None),
        (b"NATS/1.0x404\r\n\r\n", None),
        (b"NATS/1.0 \xd9\xa1\xd9\xa2\xd9\xa3\r\n\r\n", None),  # Arabic-Indic digits
        (b"NATS/1.0 404 No Messages\r\n\r\n", (404, "No Messages")),
        (b"NATS/1.0 404\r\n\r\n", (404, "")),
        (b"NATS/1.0 408", (408, "")),
        (b"NATS/1.0 503\r\n\r\n", (503, "")),
        (b"NATS/1.0\t\t100\tIdle Heartbeat \r\n\r\n", (100, "Idle Heartbeat")),
        (b"NATS/1.0   409   Exceeded MaxWaiting  \r\n\r\n", (409, "Exceeded MaxWaiting")),
        (b"NATS/1.0 409 Batch Completed", (409, "Batch Completed")),
        (
            b"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 5\r\n\r\n",
            (100, "Idle Heartbeat"),
        ),
        (b"NATS/1.0 409 bad \xff\r\n\r\n", (409, "bad \ufffd")),
        (b"NATS/1.0 000\r\n", (0, "")),
        (b"NATS/1.0 999 x\ry\r\n", (999, "x\ry")),
    ],
)
def test_status_of(block: bytes | None, expected: tuple[int, str] | None) -> None:
    assert status_of(block) == expected


@pytest.mark.parametrize(
    "block", [b"", b"NATS", b"NATS/1.1 404", b"HTTP/1.0 200\r\n", b" NATS/1.0"]
)
def test_status_of_bad_block(block: bytes) -> None:
    with pytest.raises(BadHeaderError, match=r"does not start with NATS/1\.0"):
        status_of(block)


# --------------------------------------------------------------------------- classify

CLASSIFY = [
    (100, "Idle Heartbeat", st.HEARTBEAT),
    (100, "idle heartbeat", st.HEARTBEAT),
    (100, "FlowControl Request", st.FLOW_CONTROL),
    (100, "", st.UNKNOWN),
    (100, "Something Else", st.UNKNOWN),
    (404, "No Messages", st.NO_MESSAGES),
    (404, "", st.NO_MESSAGES),
    (408, "Request Timeout", st.REQUEST_TIMEOUT),
    (408, "Interest Expired", st.REQUEST_TIMEOUT),
    (408, "", st.REQUEST_TIMEOUT),
    (409, "Message Size Exceeds MaxBytes", st.PULL_ENDED),
    (409, "Batch Completed", st.PULL_ENDED),
    (409, "batch completed", st.PULL_ENDED),
    (409, "Exceeded MaxRequestBatch of 100", st.WARNING),
    (409, "Exceeded MaxRequestExpires of 1m0s", st.WARNING),
    (409, "Exceeded MaxRequestMaxBytes of 1024", st.WARNING),
    (409, "Exceeded MaxWaiting", st.WARNING),
    (409, "exceeded maxwaiting of 512", st.WARNING),
    (409, "Leadership Change", st.RESET),
    (423, "Nats-Wrong-Pin-Id", st.RESET),
    (423, "", st.RESET),
    (400, "Bad Request", st.TERMINAL),
    (400, "Bad Request - Invalid Priority Group", st.TERMINAL),
    (409, "Consumer Deleted", st.TERMINAL),
    (409, "CONSUMER DELETED", st.TERMINAL),
    (409, "Consumer is push based", st.TERMINAL),
    (503, "", st.NO_RESPONDERS),
    (503, "No Responders", st.NO_RESPONDERS),
    (409, "Something New", st.UNKNOWN),
    (409, "", st.UNKNOWN),
    (409, "Batch Completed!", st.UNKNOWN),  # exact match, not a prefix
    (409, " Batch Completed", st.UNKNOWN),  # not stripped again
    (409, "Exceeded", st.UNKNOWN),
    (409, "Consumer Deleted\u212a", st.UNKNOWN),
    (409, "Leader\u017fhip Change", st.UNKNOWN),  # LATIN SMALL LONG S is not ASCII "s"
    (100, "Idl\u0435 Heartbeat", st.UNKNOWN),  # CYRILLIC SMALL LETTER IE
    (200, "OK", st.UNKNOWN),
    (500, "", st.UNKNOWN),
    (0, "", st.UNKNOWN),
    (-409, "Consumer Deleted", st.UNKNOWN),
    (10**30, "", st.UNKNOWN),
]


@pytest.mark.parametrize(("code", "description", "kind"), CLASSIFY)
def test_classify(code: int, description: str, kind: int) -> None:
    assert classify(code, description) == kind


# --------------------------------------------------------------------------- headers

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


@pytest.mark.parametrize(
    ("block", "expected"),
    [
        (HB, (-1, -1, 42, 1000, "_INBOX.fc", None)),
        (ENDED, (10, 2048, -1, -1, None, "pin-1")),
        (b"NATS/1.0 404 No Messages\r\n\r\n", (-1, -1, -1, -1, None, None)),
        (b"NATS/1.0 404 No Messages", (-1, -1, -1, -1, None, None)),
        (
            b"NATS/1.0\r\nNats-Pending-Messages: 3\r\nNats-Pending-Messages: 4\r\n\r\n",
            (
                3,
                -1,
                -1,
                -1,
                None,
                None,
            ),
        ),
        (
            b"NATS/1.0\r\nNats-Pending-Messages\r\nNats-Pending-Messages: 4\r\n\r\n",
            (
                4,
                -1,
                -1,
                -1,
                None,
                None,
            ),
        ),
        (
            b"NATS/1.0\r\n Nats-Pin-Id : a:b \r\nNats-Pin-Id: c\r\n",
            (
                -1,
                -1,
                -1,
                -1,
                None,
                "a:b",
            ),
        ),
        (
            b"NATS/1.0\r\nNats-Pin-Id:\r\nNats-Consumer-Stalled:  \r\n",
            (
                -1,
                -1,
                -1,
                -1,
                "",
                "",
            ),
        ),
        (b"NATS/1.0\r\nNats-Pin-Id: \xff\r\n", (-1, -1, -1, -1, None, "\udcff")),
        (
            b"NATS/1.0\r\nNats-Pending-Bytes: 18446744073709551615\r\n",
            (
                -1,
                2**64 - 1,
                -1,
                -1,
                None,
                None,
            ),
        ),
        (
            b"NATS/1.0\r\nNats-Pending-Bytes: 0018446744073709551615\r\n",
            (
                -1,
                2**64 - 1,
                -1,
                -1,
                None,
                None,
            ),
        ),
        (b"NATS/1.0 100 Idle Heartbeat Nats-Last-Stream: 5\r\n", (-1, -1, -1, -1, None, None)),
    ],
)
def test_js_headers(
    block: bytes, expected: tuple[int, int, int, int, str | None, str | None]
) -> None:
    assert js_headers(block) == expected


@pytest.mark.parametrize(
    "value",
    [
        b"",
        b"+5",
        b"-5",
        b"5 5",
        b"1_0",
        b"0x10",
        b"\xd9\xa1\xd9\xa2",
        b"18446744073709551616",
        b"9" * 50,
    ],
)
def test_js_headers_bad_numbers_are_minus_one(value: bytes) -> None:
    block = b"NATS/1.0 409 Batch Completed\r\nNats-Pending-Messages: " + value + b"\r\n\r\n"
    assert js_headers(block)[0] == -1


def test_header_value() -> None:
    block = b"NATS/1.0 404 x\r\nFoo: bar\r\nfoo: baz\r\nEmpty:\r\nColon: a: b \r\n\r\n"
    assert header_value(block, "Foo") == "bar"
    assert header_value(block, "FOO") == "bar"
    assert header_value(block, "empty") == ""
    assert header_value(block, "colon") == "a: b"
    assert header_value(block, "Missing") is None
    assert header_value(block, "NATS/1.0 404 x") is None  # the status line is not a header
    assert header_value(b"NATS/1.0 404 Foo: bar", "Foo") is None
    assert header_value(b"NATS/1.0\r\n\xc3\xa9: \xff\r\n", "\u00e9") == "\udcff"
    assert header_value(b"NATS/1.0\r\n\xc3\x89: x\r\n", "\u00e9") is None  # ASCII folding only
