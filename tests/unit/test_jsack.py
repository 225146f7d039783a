"""The pure ``$JS.ACK`` subject parser (the specification)."""

from __future__ import annotations

import nats.errors
import pytest

from jsclient.errors import InvalidJSAckError
from jsclient.protocol.jsack import MAX_UINT64, parse_jsack

V1 = "$JS.ACK.ORDERS.c1.2.123.45.1700000000000000000.5"
V1_RESULT = ("ORDERS", "c1", 2, 123, 45, 1700000000000000000, 5, None)
V2 = "$JS.ACK.hub.ACCHASH.ORDERS.c1.2.123.45.1700000000000000000.5"
V2_RESULT = ("ORDERS", "c1", 2, 123, 45, 1700000000000000000, 5, "hub")

# index of each numeric token in a v1 subject, with the name used in errors
NUMBERS = [
    (4, "num delivered"),
    (5, "stream sequence"),
    (6, "consumer sequence"),
    (7, "timestamp"),
    (8, "num pending"),
]


def with_token(subject: str, index: int, value: str) -> str:
    toks = subject.split(".")
    toks[index] = value
    return ".".join(toks)


def test_v1() -> None:
    assert parse_jsack(V1) == V1_RESULT


def test_v2_with_domain() -> None:
    assert parse_jsack(V2) == V2_RESULT


@pytest.mark.parametrize("domain", ["_", ""])
def test_v2_without_domain(domain: str) -> None:
    assert parse_jsack(with_token(V2, 2, domain)) == V1_RESULT


@pytest.mark.parametrize("extra", [".x", ".x.y", ".", ".a.b.c.d.e"])
def test_v2_extra_tokens_ignored(extra: str) -> None:
    assert parse_jsack(V2 + extra) == V2_RESULT


def test_account_hash_not_checked() -> None:
    assert parse_jsack(with_token(V2, 3, "")) == V2_RESULT


@pytest.mark.parametrize(
    "subject",
    [
        "$JS.ACK.hub.ORDERS.c1.2.123.45.1700000000000000000.5",  # 10 tokens
        "$JS.ACK.ORDERS.c1.2.123.45.1700000000000000000",  # 8
        "$JS.ACK.ORDERS",
        "$JS.ACK",
    ],
)
def test_wrong_token_count(subject: str) -> None:
    n = subject.count(".") + 1
    with pytest.raises(InvalidJSAckError, match=f"has {n} tokens"):
        parse_jsack(subject)


@pytest.mark.parametrize(
    "subject",
    [
        "",
        "$JS",
        "_INBOX.x",
        "$JS.NAK.ORDERS.c1.2.123.45.1700000000000000000.5",
        "$js.ack.ORDERS.c1.2.123.45.1700000000000000000.5",
        "JS.ACK.ORDERS.c1.2.123.45.1700000000000000000.5",
        "$JS.ACKS.ORDERS.c1.2.123.45.1700000000000000000.5",
        " $JS.ACK.ORDERS.c1.2.123.45.1700000000000000000.5",
        "$JS.ACK .ORDERS.c1.2.123.45.1700000000000000000.5",
    ],
)
def test_wrong_prefix(subject: str) -> None:
    with pytest.raises(InvalidJSAckError, match=r"does not start with \$JS\.ACK"):
        parse_jsack(subject)


def test_empty_names() -> None:
    with pytest.raises(InvalidJSAckError, match="empty stream name"):
        parse_jsack(with_token(V1, 2, ""))
    with pytest.raises(InvalidJSAckError, match="empty consumer name"):
        parse_jsack(with_token(V1, 3, ""))
    with pytest.raises(InvalidJSAckError, match="empty stream name"):
        parse_jsack(with_token(V2, 4, ""))


def test_uint64_bounds() -> None:
    assert MAX_UINT64 == 2**64 - 1
    got = parse_jsack(with_token(V1, 7, "18446744073709551615"))
    assert got[5] == 18446744073709551615
    with pytest.raises(InvalidJSAckError, match="timestamp '18446744073709551616' overflows"):
        parse_jsack(with_token(V1, 7, "18446744073709551616"))
    with pytest.raises(InvalidJSAckError, match="overflows uint64"):
        parse_jsack(with_token(V1, 5, "9" * 40))


def test_leading_zeros() -> None:
    assert parse_jsack(with_token(V1, 4, "007"))[2] == 7
    assert parse_jsack(with_token(V1, 4, "0" * 30 + "18446744073709551615"))[2] == MAX_UINT64
    assert parse_jsack(with_token(V1, 8, "0" * 5000))[6] == 0


@pytest.mark.parametrize(("index", "name"), NUMBERS)
@pytest.mark.parametrize(
    "bad",
    ["", " 5", "5 ", "+5", "-5", "1_0", "\u0661\u0662", "\uff15", "\u00b2", "0x5", "5e3", "x"],
)
def test_numbers_are_ascii_digits_only(index: int, name: str, bad: str) -> None:
    with pytest.raises(InvalidJSAckError, match=f"invalid {name} "):
        parse_jsack(with_token(V1, index, bad))
    with pytest.raises(InvalidJSAckError, match=f"invalid {name} "):
        parse_jsack(with_token(V2, index + 2, bad))


def test_first_bad_number_is_reported() -> None:
    with pytest.raises(InvalidJSAckError, match="invalid stream sequence 'x'"):
        parse_jsack("$JS.ACK.S.C.1.x.y.z.w")


def test_non_ascii_names() -> None:
    got = parse_jsack("$JS.ACK.d\u00e9.h.\u00f6rders.\U0001f600.1.2.3.4.5")
    assert got == ("\u00f6rders", "\U0001f600", 1, 2, 3, 4, 5, "d\u00e9")


def test_results_are_ints() -> None:
    assert all(type(v) is int for v in parse_jsack(V1)[2:7])


def test_error_type() -> None:
    with pytest.raises(nats.errors.NotJSMessageError):
        parse_jsack("foo")
