"""The pure ADR-37 size and pull accounting (the specification)."""

from __future__ import annotations

import pytest

from jsclient.protocol.parser import Parser
from jsclient.protocol.sizes import PendingCounter, msg_size


@pytest.mark.parametrize(
    ("subject", "reply", "header", "payload", "size"),
    [
        ("orders.new", "", None, b"", 10),
        ("a", "$JS.ACK.S.C.1.2.3.4.5", None, b"0123456789", 1 + 21 + 10),
        ("a", "r", b"NATS/1.0\r\n\r\n", b"x", 1 + 1 + 12 + 1),
        ("a", "r", b"", b"x", 3),
        ("\u00e9", "", None, b"", 2),
        ("\U0001f600.\u00e9", "\u4e2d", None, b"", 4 + 1 + 2 + 3),
        ("\udcff\udcfe", "", None, b"ab", 2 + 2),  # surrogateescape: wire bytes 0xff 0xfe
    ],
)
def test_msg_size(
    subject: str, reply: str, header: bytes | None, payload: bytes, size: int
) -> None:
    assert msg_size(subject, reply, header, payload) == size


def test_msg_size_lone_surrogate_is_an_error() -> None:
    with pytest.raises(UnicodeEncodeError):
        msg_size("\ud800", "", None, b"")


def test_msg_size_matches_parser_size() -> None:
    frames = (
        b"MSG \xc3\xa9.x 1 $JS.ACK.S.C.1.2.3.4.5 3\r\nabc\r\n"
        b"HMSG \xff 2 r 12 14\r\nNATS/1.0\r\n\r\nhi\r\n"
    )
    events = Parser().feed(frames)
    assert [msg_size(e[2], e[3], e[4], e[5]) for e in events] == [e[6] for e in events]
    assert [e[6] for e in events] == [4 + 21 + 3, 1 + 1 + 14]


def test_counter_starts_empty() -> None:
    c = PendingCounter(100, 0, 50, 0)
    assert (c.msgs, c.bytes) == (0, 0)
    assert (c.max_messages, c.max_bytes, c.threshold_messages, c.threshold_bytes) == (100, 0, 50, 0)


def test_counter_messages_mode() -> None:
    c = PendingCounter(10, 0, 5, 0)
    assert c.next_pull() == (10, 0)
    assert (c.msgs, c.bytes) == (10, 0)
    assert c.next_pull() is None
    for _ in range(4):
        c.on_message(1000)  # sizes do not count in messages mode
    assert (c.msgs, c.bytes) == (6, 0)
    assert c.next_pull() is None
    c.on_message(1)
    assert c.msgs == 5
    assert c.next_pull() == (5, 0)  # tops back up to max_messages
    assert c.msgs == 10


def test_counter_bytes_mode() -> None:
    c = PendingCounter(1_000_000, 1000, 500_000, 400)
    assert c.next_pull() == (1_000_000, 1000)
    assert (c.msgs, c.bytes) == (1_000_000, 1000)
    c.on_message(300)
    assert c.next_pull() is None  # 700 bytes pending > 400
    c.on_message(300)
    assert (c.msgs, c.bytes) == (999_998, 400)
    assert c.next_pull() == (2, 600)  # the message count is not what decides here
    assert (c.msgs, c.bytes) == (1_000_000, 1000)


def test_counter_clamps_at_zero() -> None:
    c = PendingCounter(2, 100, 1, 10)
    c.next_pull()
    for _ in range(5):
        c.on_message(70)
    assert (c.msgs, c.bytes) == (0, 0)
    c.on_message(0)
    assert (c.msgs, c.bytes) == (0, 0)


def test_counter_on_status() -> None:
    c = PendingCounter(100, 1000, 50, 500)
    c.next_pull()
    c.on_status(30, 200)
    assert (c.msgs, c.bytes) == (70, 800)
    c.on_status(-1, -1)  # headers absent
    assert (c.msgs, c.bytes) == (70, 800)
    c.on_status(-1, 100)
    assert (c.msgs, c.bytes) == (70, 700)
    c.on_status(2**64 - 1, 2**70)  # any int, clamped
    assert (c.msgs, c.bytes) == (0, 0)
    assert c.next_pull() == (100, 1000)


def test_counter_on_status_messages_mode_bytes_stay_zero() -> None:
    c = PendingCounter(100, 0, 50, 0)
    c.next_pull()
    c.on_status(10, 5000)
    assert (c.msgs, c.bytes) == (90, 0)


def test_counter_reset() -> None:
    c = PendingCounter(100, 1000, 50, 500)
    c.next_pull()
    c.reset()
    assert (c.msgs, c.bytes) == (0, 0)
    assert c.next_pull() == (100, 1000)


def test_counter_threshold_equal_triggers() -> None:
    c = PendingCounter(4, 0, 2, 0)
    c.next_pull()
    c.on_message(1)
    assert c.next_pull() is None  # 3 > 2
    c.on_message(1)
    assert c.next_pull() == (2, 0)  # 2 <= 2


@pytest.mark.parametrize(
    "args",
    [
        (0, 0, 0, 0),  # max_messages must be >= 1
        (-1, 0, 0, 0),
        (10, -1, 0, 0),
        (10, 0, -1, 0),
        (10, 0, 0, -1),
        (2**63, 0, 0, 0),
        (10, 0, 0, 2**63),
        (10.0, 0, 0, 0),
        ("10", 0, 0, 0),
        (None, 0, 0, 0),
    ],
)
def test_counter_settings_validated(args: tuple[object, object, object, object]) -> None:
    with pytest.raises(ValueError, match="PendingCounter"):
        PendingCounter(*args)  # type: ignore[arg-type]


def test_counter_on_message_size_range() -> None:
    c = PendingCounter(10, 100, 5, 50)
    with pytest.raises(ValueError, match="negative size"):
        c.on_message(-1)
    with pytest.raises(OverflowError):
        c.on_message(2**63)
    with pytest.raises(OverflowError):
        c.on_message(-(2**63) - 1)
    c.on_message(2**63 - 1)
    assert (c.msgs, c.bytes) == (0, 0)


@pytest.mark.parametrize(
    "name",
    ["msgs", "bytes", "max_messages", "max_bytes", "threshold_messages", "threshold_bytes"],
)
def test_counter_attributes_read_only(name: str) -> None:
    c = PendingCounter(10, 100, 5, 50)
    with pytest.raises(AttributeError):
        setattr(c, name, 1)
