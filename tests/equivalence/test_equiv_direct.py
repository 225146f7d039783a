"""``jsheaders.direct_headers`` and ``jsheaders.stamp_ns`` (batched direct gets): shared
vectors for both implementations, and the two against each other on generated input."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

SETTINGS = settings(max_examples=400, suppress_health_check=[HealthCheck.function_scoped_fixture])

# What nats-server 2.15.1 sends for a message of a batched get (taken from the wire).
SERVER = (
    b"NATS/1.0\r\nNats-Stream: S\r\nNats-Subject: s.0\r\nNats-Sequence: 1\r\n"
    b"Nats-Time-Stamp: 2026-11-25T19:55:32.595981289Z\r\nNats-Num-Pending: 9\r\n"
    b"Nats-Last-Sequence: 0\r\n\r\n"
)
T0 = 1795636532595981289

DIRECT: list[tuple[bytes, tuple[Any, ...]]] = [
    (SERVER, ("s.0", 1, T0, 9, 0, 0)),
    # the publisher's own headers first, as the server keeps them
    (b"NATS/1.0\r\nA: 1\r\nA: 2\r\n" + SERVER[10:], ("s.0", 1, T0, 9, 0, 2)),
    # an old server's answer: no pending, no last sequence
    (
        b"NATS/1.0\r\nNats-Stream: S\r\nNats-Subject: a.b\r\nNats-Sequence: 7\r\n"
        b"Nats-Time-Stamp: 1970-01-01T00:00:01Z\r\n\r\n",
        ("a.b", 7, 1_000_000_000, -1, -1, 0),
    ),
    # case-insensitive names, stripped values, the first of a repeated name wins
    (
        b"NATS/1.0\r\nnats-subject:  x \r\nNATS-SEQUENCE:\t18446744073709551615\r\n"
        b"Nats-Sequence: 3\r\nNats-Time-Stamp: 2024-02-29T23:59:59.5Z\r\n",
        ("x", 18446744073709551615, 1709251199500000000, -1, -1, 0),
    ),
    # numbers that are not uint64, a line without ':', an empty value
    (
        b"NATS/1.0\r\nNats-Sequence: 18446744073709551616\r\nNats-Num-Pending: +5\r\n"
        b"Nats-Last-Sequence: \r\nno colon\r\nNats-Subject:\r\n\r\n",
        ("", -1, None, -1, -1, 0),
    ),
    (
        b"NATS/1.0 204 EOB\r\nNats-Num-Pending: 0\r\nNats-Last-Sequence: 10\r\n\r\n",
        (None, -1, None, 0, 10, 0),
    ),
    (b"NATS/1.0", (None, -1, None, -1, -1, 0)),
    (b"", (None, -1, None, -1, -1, 0)),
    # a non-ASCII value is kept (surrogateescape), as header_value does
    (b"NATS/1.0\r\nNats-Subject: \xff.a\r\nOther: \xff\r\n\r\n", ("\udcff.a", -1, None, -1, -1, 1)),
]

STAMPS: list[tuple[bytes, int | None]] = [
    (b"1970-01-01T00:00:00Z", 0),
    (b"1970-01-01T00:00:00.000000001Z", 1),
    (b"1970-01-01T00:00:00.1Z", 100_000_000),
    (b"1969-12-31T23:59:59.999999999Z", -1),
    (b"2026-11-25T19:55:32.595981289Z", T0),
    (b"2000-02-29T12:00:00Z", 951825600_000_000_000),
    (b"0001-01-01T00:00:00Z", -62135596800_000_000_000),
    (b"9999-12-31T23:59:59.999999999Z", 253402300799_999_999_999),
    (b"2262-04-11T23:47:16.854775808Z", 9223372036854775808),
    (b"1900-02-29T00:00:00Z", None),  # not a leap year
    (b"2023-02-29T00:00:00Z", None),
    (b"2024-04-31T00:00:00Z", None),
    (b"2024-13-01T00:00:00Z", None),
    (b"2024-00-01T00:00:00Z", None),
    (b"2024-01-00T00:00:00Z", None),
    (b"0000-01-01T00:00:00Z", None),
    (b"2024-01-01T24:00:00Z", None),
    (b"2024-01-01T00:60:00Z", None),
    (b"2024-01-01T00:00:60Z", None),
    (b"2024-01-01T00:00:00.Z", None),
    (b"2024-01-01T00:00:00.1234567890Z", None),
    (b"2024-01-01T00:00:00.12a4Z", None),
    (b"2024-01-01T00:00:00+00:00", None),
    (b"2024-01-01 00:00:00Z", None),
    (b"2024-01-01T00:00:00z", None),
    (b"2024-1-01T00:00:00Z", None),
    (b"+024-01-01T00:00:00Z", None),
    (b"2024-01-01T00:00:00.+1Z", None),
    (b"2024-01-01T00:00:00", None),
    (b"2024-01-01T00:00:00 Z", None),
    (b"\xd9\xa2024-01-01T00:00:00Z", None),
    (b"", None),
]


@pytest.mark.parametrize(("block", "expected"), DIRECT)
def test_direct_headers(impl: SimpleNamespace, block: bytes, expected: tuple[Any, ...]) -> None:
    got = impl.jsheaders.direct_headers(block)
    assert got == expected
    assert [type(x) for x in got] == [type(x) for x in expected]


@pytest.mark.parametrize(("raw", "expected"), STAMPS)
def test_stamp_ns(impl: SimpleNamespace, raw: bytes, expected: int | None) -> None:
    assert impl.jsheaders.stamp_ns(raw) == expected
    if expected is not None:
        block = b"NATS/1.0\r\nNats-Time-Stamp: " + raw + b"\r\n\r\n"
        assert impl.jsheaders.direct_headers(block)[2] == expected


@pytest.mark.parametrize("arg", [bytearray(SERVER), memoryview(SERVER), "NATS/1.0", 5])
def test_odd_types(both: tuple[SimpleNamespace, SimpleNamespace], arg: Any) -> None:
    py, c = both
    for fn in ("direct_headers", "stamp_ns"):
        results = []
        for ns in (py, c):
            try:
                results.append(("ok", getattr(ns.status, fn)(arg)))
            except Exception as exc:
                results.append(("raise", type(exc)))
        assert results[0] == results[1], fn


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@SETTINGS
@given(
    when=st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31)),
    nanos=st.integers(0, 999),
    digits=st.integers(0, 9),
)
def test_stamps_agree_with_datetime(
    both: tuple[SimpleNamespace, SimpleNamespace], when: datetime, nanos: int, digits: int
) -> None:
    frac9 = f"{when.microsecond:06d}{nanos:03d}"
    text = when.strftime("%Y-%m-%dT%H:%M:%S").rjust(19, "0")
    if digits:
        text += "." + frac9[:digits]
    raw = (text + "Z").encode()
    whole = when.replace(microsecond=0, tzinfo=UTC) - _EPOCH
    want = (whole // timedelta(seconds=1)) * 1_000_000_000 + int(frac9[:digits].ljust(9, "0"))
    for ns in both:
        assert ns.jsheaders.stamp_ns(raw) == want


@SETTINGS
@given(
    raw=st.binary(max_size=34)
    | st.text(alphabet="0123456789-T:.Z+ z", min_size=18, max_size=32).map(str.encode)
)
def test_stamps_differential(both: tuple[SimpleNamespace, SimpleNamespace], raw: bytes) -> None:
    py, c = both
    assert py.jsheaders.stamp_ns(raw) == c.jsheaders.stamp_ns(raw)


_NAMES = [
    b"Nats-Subject",
    b"nats-sequence",
    b"NATS-TIME-STAMP",
    b"Nats-Num-Pending",
    b"Nats-Last-Sequence",
    b"Nats-Stream",
    b"Nats-Streams",
    b"X",
    b"",
]


@st.composite
def direct_block(draw: st.DrawFn) -> bytes:
    lines = [draw(st.sampled_from([b"NATS/1.0", b"NATS/1.0 204 EOB", b"NATS/1.0 404"]))]
    for _ in range(draw(st.integers(0, 8))):
        name = draw(st.sampled_from(_NAMES) | st.binary(max_size=6))
        value = draw(
            st.sampled_from([b"1", b"18446744073709551616", b"2024-01-01T00:00:00.5Z", b" x "])
            | st.binary(max_size=10)
        )
        sep = draw(st.sampled_from([b": ", b":", b" : ", b" "]))
        lines.append(name + sep + value)
    return b"\r\n".join(lines) + draw(st.sampled_from([b"\r\n\r\n", b"\r\n", b""]))


@SETTINGS
@given(block=direct_block() | st.binary(max_size=60))
def test_direct_headers_differential(
    both: tuple[SimpleNamespace, SimpleNamespace], block: bytes
) -> None:
    py, c = both
    assert py.jsheaders.direct_headers(block) == c.jsheaders.direct_headers(block)
