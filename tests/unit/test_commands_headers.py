"""Command encoders (exact bytes) and header blocks (encode/decode), no server."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jsclient import errors
from jsclient.msg import Msg
from jsclient.protocol import commands, headers

# -- commands -----------------------------------------------------------------------


def test_ping_pong_constants() -> None:
    assert commands.PING == b"PING\r\n"
    assert commands.PONG == b"PONG\r\n"
    assert commands.CRLF == b"\r\n"


def test_pub() -> None:
    assert commands.pub(b"foo", b"", b"hello") == b"PUB foo 5\r\nhello\r\n"
    assert commands.pub(b"foo.bar", b"_INBOX.1", b"hi") == b"PUB foo.bar _INBOX.1 2\r\nhi\r\n"
    assert commands.pub(b"e", b"", b"") == b"PUB e 0\r\n\r\n"
    payload = b"a\r\nb"
    assert commands.pub(b"x", b"", payload) == b"PUB x 4\r\na\r\nb\r\n"


def test_hpub() -> None:
    hdr = b"NATS/1.0\r\nA: 1\r\n\r\n"
    assert len(hdr) == 18
    assert commands.hpub(b"foo", b"", hdr, b"hello") == (
        b"HPUB foo 18 23\r\nNATS/1.0\r\nA: 1\r\n\r\nhello\r\n"
    )
    assert commands.hpub(b"foo", b"rep", hdr, b"") == (
        b"HPUB foo rep 18 18\r\nNATS/1.0\r\nA: 1\r\n\r\n\r\n"
    )


def test_sub_unsub() -> None:
    assert commands.sub("foo.*", None, 1) == b"SUB foo.* 1\r\n"
    assert commands.sub("foo.>", "workers", 42) == b"SUB foo.> workers 42\r\n"
    assert commands.sub("foo", "", 3) == b"SUB foo 3\r\n"
    assert commands.unsub(7) == b"UNSUB 7\r\n"
    assert commands.unsub(7, 0) == b"UNSUB 7\r\n"
    assert commands.unsub(7, 10) == b"UNSUB 7 10\r\n"


def test_connect() -> None:
    opts = {"verbose": False, "pedantic": False, "name": "n", "headers": True}
    out = commands.connect(opts)
    assert out == (b'CONNECT {"verbose":false,"pedantic":false,"name":"n","headers":true}\r\n')
    assert json.loads(out[len(b"CONNECT ") : -2]) == opts
    assert commands.connect({}) == b"CONNECT {}\r\n"


@pytest.mark.parametrize(
    "subject", ["", " ", "a b", "a\tb", "a\nb", "a\rb", "a\x0bb", "a\x0cb", "a "]
)
def test_check_subject_rejects(subject: str) -> None:
    with pytest.raises(errors.BadSubjectError):
        commands.check_subject(subject)


@pytest.mark.parametrize("subject", ["a", "a.b", "a.*", "a.>", "_INBOX.abc", "$JS.API.INFO", "ü"])
def test_check_subject_accepts(subject: str) -> None:
    commands.check_subject(subject)


def test_check_subject_names_what() -> None:
    with pytest.raises(errors.BadSubjectError, match="queue group"):
        commands.check_subject("a b", "queue group")


# -- header encoding ---------------------------------------------------------------


def test_encode_empty() -> None:
    assert headers.encode(None) == b"NATS/1.0\r\n\r\n"
    assert headers.encode({}) == b"NATS/1.0\r\n\r\n"


def test_encode_single_and_multi() -> None:
    block = headers.encode({"A": "1", "Multi": ["x", "y"], "Empty": ""})
    assert block == b"NATS/1.0\r\nA: 1\r\nMulti: x\r\nMulti: y\r\nEmpty: \r\n\r\n"
    assert headers.encode({"T": ("a", "b")}) == b"NATS/1.0\r\nT: a\r\nT: b\r\n\r\n"


def test_encode_utf8() -> None:
    assert headers.encode({"K": "ünï"}) == "NATS/1.0\r\nK: ünï\r\n\r\n".encode()


@pytest.mark.parametrize("name", ["", "a b", "a:b", "a\r", "a\nb", "a\tb", ":"])
def test_encode_bad_names(name: str) -> None:
    with pytest.raises(errors.BadHeaderError):
        headers.encode({name: "v"})


@pytest.mark.parametrize("value", ["a\r\nB: injected", "a\n", "\r"])
def test_encode_bad_values(value: str) -> None:
    with pytest.raises(errors.BadHeaderError):
        headers.encode({"K": value})
    with pytest.raises(errors.BadHeaderError):
        headers.encode({"K": ["ok", value]})


# -- header decoding ----------------------------------------------------------------


def test_decode_plain() -> None:
    code, desc, multi = headers.decode(b"NATS/1.0\r\nA: 1\r\nB:  two words \r\nA: 3\r\n\r\n")
    assert (code, desc) == (None, "")
    assert multi == {"A": ["1", "3"], "B": ["two words"]}


def test_decode_status_only() -> None:
    assert headers.decode(b"NATS/1.0 503\r\n\r\n") == (503, "", {})


def test_decode_status_with_description() -> None:
    assert headers.decode(b"NATS/1.0 404 No Messages\r\n\r\n") == (404, "No Messages", {})
    code, desc, multi = headers.decode(
        b"NATS/1.0 409 Request Timeout\r\nNats-Pending-Messages: 5\r\n"
        b"Nats-Pending-Bytes: 100\r\n\r\n"
    )
    assert (code, desc) == (409, "Request Timeout")
    assert multi == {"Nats-Pending-Messages": ["5"], "Nats-Pending-Bytes": ["100"]}


def test_decode_status_heartbeat() -> None:
    block = b"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 3\r\nNats-Last-Stream: 9\r\n\r\n"
    code, desc, multi = headers.decode(block)
    assert (code, desc) == (100, "Idle Heartbeat")
    assert multi["Nats-Last-Stream"] == ["9"]


def test_decode_ignores_lines_without_colon_and_values_with_colons() -> None:
    code, _, multi = headers.decode(b"NATS/1.0\r\nnocolon\r\nUrl: http://x:1/y\r\n\r\n")
    assert code is None
    assert multi == {"Url": ["http://x:1/y"]}


def test_decode_bad_first_line() -> None:
    with pytest.raises(errors.BadHeaderError):
        headers.decode(b"HTTP/1.1 200 OK\r\n\r\n")
    with pytest.raises(errors.BadHeaderError):
        headers.decode(b"")


def test_to_dict() -> None:
    assert headers.to_dict(b"NATS/1.0\r\nA: 1\r\nA: 2\r\nB: x\r\n\r\n") == {"A": "1", "B": "x"}
    assert headers.to_dict(b"NATS/1.0 404 No Messages\r\n\r\n") == {
        "Status": "404",
        "Description": "No Messages",
    }
    assert headers.to_dict(b"NATS/1.0 503\r\n\r\n") == {"Status": "503"}


_names = st.text(
    alphabet=st.characters(min_codepoint=33, max_codepoint=126, blacklist_characters=":"),
    min_size=1,
    max_size=20,
)
_values = st.text(
    alphabet=st.characters(blacklist_categories=["Cs", "Cc", "Zs", "Zl", "Zp"]),
    max_size=30,
).map(str.strip)


@given(st.dictionaries(_names, st.lists(_values, min_size=1, max_size=3), max_size=6))
def test_encode_decode_roundtrip(hdrs: dict[str, list[str]]) -> None:
    block = headers.encode(hdrs)
    code, desc, multi = headers.decode(block)
    assert code is None and desc == ""
    assert multi == hdrs
    assert headers.to_dict(block) == {k: v[0] for k, v in hdrs.items()}


# -- headers on Msg -------------------------------------------------------------------


def test_msg_header_views() -> None:
    block = headers.encode({"A": "1", "M": ["x", "y"]})
    msg = Msg(None, "subj", "", b"data", block)
    assert msg.headers == {"A": "1", "M": "x"}
    assert msg.header_values("M") == ["x", "y"]
    assert msg.header_values("none") == []
    assert msg.raw_headers == block
    assert msg.status is None
    assert msg.size == len("subj") + len(block) + 4


def test_msg_status_views() -> None:
    msg = Msg(None, "_INBOX.x", "", b"", b"NATS/1.0 404 No Messages\r\n\r\n")
    assert msg.status == (404, "No Messages")
    assert msg.headers == {"Status": "404", "Description": "No Messages"}
    no_resp = Msg(None, "_INBOX.x", "", b"", b"NATS/1.0 503\r\n\r\n")
    assert no_resp.status is not None and no_resp.status[0] == 503


def test_msg_without_headers() -> None:
    msg = Msg(None, "s", "r", b"abc")
    assert msg.headers is None
    assert msg.header_values("x") == []
    assert msg.status is None
    assert msg.size == 1 + 1 + 3


def test_msg_headers_setter() -> None:
    msg = Msg(None, "s", "", b"abc")
    msg.headers = {"K": "v"}
    assert msg.raw_headers == b"NATS/1.0\r\nK: v\r\n\r\n"
    assert msg.size == 1 + len(b"NATS/1.0\r\nK: v\r\n\r\n") + 3
    msg.headers = None
    assert msg.raw_headers is None and msg.size == 4


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b'{"stream":"B","seq":12}', ("B", 12, None, None)),
        (b'{"stream":"B","seq":12,"duplicate":true}', ("B", 12, True, None)),
        (b'{"stream":"B","domain":"x","seq":3}', ("B", 3, None, "x")),
        (b'{"stream":"a\\"b","seq":1}', ('a"b', 1, None, None)),
        (b'{"seq":5,"stream":"S"}', ("S", 5, None, None)),
    ],
)
def test_pub_ack_fast_path_agrees_with_json(raw: bytes, expected: tuple[object, ...]) -> None:
    from jsclient.jetstream._wire import parse_pub_ack as _parse_pub_ack

    ack = _parse_pub_ack(raw)
    assert (ack.stream, ack.seq, ack.duplicate, ack.domain) == expected
