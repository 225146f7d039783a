"""Differential tests: for every input, the Cython twin does what the pure spec does.

"The same" means the same result (equal and of the same types), or the same
exception type with the same message; for the parser also the same
``ProtocolError.events`` and the same ``buffered`` count after every feed.
Inputs are valid frames/subjects/header blocks, mutated (bytes flipped,
whitespace inserted, digits changed, tokens dropped...), and split at random
points (every point, for small inputs).
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from . import vectors as v

Pair = tuple[SimpleNamespace, SimpleNamespace]

SETTINGS = settings(
    max_examples=250,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def outcome(call: Callable[[], Any]) -> tuple[Any, ...]:
    try:
        result = call()
    except Exception as exc:
        return ("raised", type(exc), str(exc), getattr(exc, "events", None))
    return ("ok", result, _types(result))


def _types(value: Any) -> Any:
    if isinstance(value, (tuple, list)):
        return (type(value), [_types(x) for x in value])
    return type(value)


def same(py: Callable[[], Any], c: Callable[[], Any]) -> Any:
    a, b = outcome(py), outcome(c)
    assert a == b
    return a


# ----------------------------------------------------------------------------- mutation

WHITESPACE = b" \t\n\r\x0b\x0c"


@st.composite
def mutated(draw: st.DrawFn, base: bytes, max_mutations: int = 4) -> bytes:
    data = bytearray(base)
    for _ in range(draw(st.integers(0, max_mutations))):
        kind = draw(st.sampled_from(["flip", "ws", "digit", "delete", "insert", "dup"]))
        if not data and kind not in ("ws", "insert"):
            continue
        i = draw(st.integers(0, max(len(data) - 1, 0)))
        if kind == "flip":
            data[i] = draw(st.integers(0, 255))
        elif kind == "ws":
            data[i:i] = bytes([draw(st.sampled_from(WHITESPACE))])
        elif kind == "digit":
            data[i] = draw(st.sampled_from(b"0123456789+-_x"))
        elif kind == "delete":
            del data[i]
        elif kind == "insert":
            data[i:i] = draw(
                st.sampled_from([b"\r\n", b"\r", b"\n", b"9", b"99999999999999999999", b"\xd9\xa1"])
            )
        else:
            j = draw(st.integers(i, min(len(data), i + 8)))
            data[i:i] = data[i:j]
    return bytes(data)


# ----------------------------------------------------------------------------- parser

subjects = st.text(alphabet="abcXYZ.>*_$é中", min_size=1, max_size=12).map(
    lambda s: s.encode()
) | st.binary(min_size=1, max_size=6).filter(lambda b: not any(c in WHITESPACE for c in b))
payloads = st.binary(max_size=40) | st.sampled_from([b"", b"\r\n", b"PING\r\n", b"MSG a 1 2\r\n"])


@st.composite
def frame(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["msg", "msg", "hmsg", "ping", "pong", "ok", "err", "info"]))
    op_case = draw(st.sampled_from([str.upper, str.lower, str.title]))
    if kind in ("msg", "hmsg"):
        subj = draw(subjects)
        sid = str(draw(st.integers(0, 10**6))).encode()
        reply = draw(st.none() | subjects)
        payload = draw(payloads)
        args = [subj, sid] + ([reply] if reply is not None else [])
        if kind == "hmsg":
            hdr = draw(
                st.sampled_from([b"NATS/1.0\r\n\r\n", b"NATS/1.0 404 No Messages\r\n\r\n", b""])
            )
            args += [str(len(hdr)).encode(), str(len(hdr) + len(payload)).encode()]
            body = hdr + payload
        else:
            args.append(str(len(payload)).encode())
            body = payload
        sep = draw(st.sampled_from([b" ", b"\t", b"  "]))
        return op_case(kind).encode() + sep + sep.join(args) + b"\r\n" + body + b"\r\n"
    if kind == "err":
        text = draw(st.text(max_size=20)).encode()
        return op_case("-err").encode() + b" '" + text.replace(b"\r\n", b"") + b"'\r\n"
    if kind == "info":
        return op_case(kind).encode() + b' {"server_id":"x","max_payload":1048576}\r\n'
    simple = {"ping": b"PING\r\n", "pong": b"PONG\r\n", "ok": b"+OK\r\n"}[kind]
    return simple.lower() if draw(st.booleans()) else simple


@st.composite
def stream(draw: st.DrawFn) -> bytes:
    base = b"".join(draw(st.lists(frame(), min_size=1, max_size=6)))
    return draw(mutated(base)) if draw(st.booleans()) else base


def cuts(data: bytes) -> st.SearchStrategy[list[int]]:
    return st.lists(st.integers(0, len(data)), max_size=6).map(sorted)


def run_both(both: Pair, chunks: list[bytes], mcl: int = 4096, mp: int = 64 << 20) -> None:
    py, c = both
    pp, cp = py.parser.Parser(mcl, mp), c.parser.Parser(mcl, mp)
    for chunk in chunks:
        same(lambda ch=chunk: pp.feed(ch), lambda ch=chunk: cp.feed(ch))
        assert pp.buffered == cp.buffered


def split(data: bytes, points: list[int]) -> list[bytes]:
    bounds = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


@SETTINGS
@given(data=st.data())
def test_parser_random_splits(both: Pair, data: st.DataObject) -> None:
    raw = data.draw(stream())
    run_both(both, split(raw, data.draw(cuts(raw))))


@SETTINGS
@given(data=st.data())
def test_parser_limits(both: Pair, data: st.DataObject) -> None:
    raw = data.draw(stream())
    mcl = data.draw(st.integers(0, 80))
    mp = data.draw(st.integers(0, 64))
    run_both(both, split(raw, data.draw(cuts(raw))), mcl, mp)


@settings(max_examples=60, deadline=None)
@given(raw=st.lists(frame(), min_size=1, max_size=2).map(b"".join).flatmap(mutated))
def test_parser_every_split_point(both: Pair, raw: bytes) -> None:
    raw = raw[:200]
    for cut in range(len(raw) + 1):
        run_both(both, [raw[:cut], raw[cut:]])


@SETTINGS
@given(raw=st.binary(max_size=120), mcl=st.sampled_from([4096, 4, 16]))
def test_parser_random_bytes(both: Pair, raw: bytes, mcl: int) -> None:
    run_both(both, [raw, raw], mcl)


@SETTINGS
@given(
    head=st.lists(
        st.sampled_from(
            [
                b"MSG",
                b"HMSG",
                b"msg",
                b"a",
                b"1",
                b"0",
                b"12",
                b"+1",
                b"-1",
                b"1_0",
                b"\xd9\xa1",
                b"123456789012345678",
                b"1234567890123456789",
                b"x.y",
                b"",
                b" ",
                b"\t",
                b"\x0b",
                b"\r",
            ]
        ),
        max_size=8,
    ),
    tail=st.binary(max_size=12),
)
def test_parser_control_lines(both: Pair, head: list[bytes], tail: bytes) -> None:
    run_both(both, [b" ".join(head) + b"\r\n" + tail + b"\r\nPING\r\n"])


def test_parser_every_split_of_vectors(both: Pair) -> None:
    for vec in v.PARSER:
        raw = b"".join(vec.chunks)
        if len(raw) > 400:
            continue
        for cut in range(len(raw) + 1):
            run_both(both, [raw[:cut], raw[cut:]], vec.max_control_line, vec.max_payload)


def test_parser_big_payload_many_chunks(both: Pair) -> None:
    payload = bytes(range(256)) * 2000
    raw = b"MSG big 1 r %d\r\n%s\r\nPING\r\n" % (len(payload), payload)
    run_both(both, [raw[i : i + 997] for i in range(0, len(raw), 997)])


def test_parser_rejects_non_bytes_alike(both: Pair) -> None:
    py, c = both
    with pytest.raises(TypeError):
        c.parser.Parser().feed("PING\r\n")
    with pytest.raises(TypeError):
        py.parser.Parser().feed("PING\r\n")


# ----------------------------------------------------------------------------- jsack

name_tok = st.text(alphabet="abcXYZ_-$é中😀0123456789", min_size=0, max_size=8)
num_tok = (
    st.integers(0, 2**64 + 5).map(str)
    | st.integers(2**64 - 3, 2**64 + 3).map(str)  # the uint64 edge
    | st.sampled_from(
        [
            "",
            " 5",
            "5 ",
            "+5",
            "-5",
            "1_0",
            "١٢",
            "٣",
            "\uff15",
            "\u00b2",
            "0x5",
            "00",
            "0" * 25 + "7",
        ]
    )
    | st.text(alphabet="0123456789", min_size=18, max_size=24)
)


@st.composite
def ack_subject(draw: st.DrawFn) -> str:
    v2 = draw(st.booleans())
    toks = ["$JS", "ACK"]
    if v2:
        toks += [draw(st.sampled_from(["_", "", "hub"]) | name_tok), draw(name_tok)]
    toks += [draw(name_tok), draw(name_tok)] + [draw(num_tok) for _ in range(5)]
    if v2:
        toks += draw(st.lists(name_tok, max_size=3))
    for _ in range(draw(st.integers(0, 3))):
        op = draw(st.sampled_from(["drop", "add", "replace", "prefix"]))
        i = draw(st.integers(0, len(toks) - 1))
        if op == "drop" and len(toks) > 1:
            del toks[i]
        elif op == "add":
            toks.insert(i, draw(name_tok | num_tok))
        elif op == "replace":
            toks[i] = draw(name_tok | num_tok)
        elif op == "prefix":
            toks[i] = draw(st.sampled_from(["$js", "ack", "$JS ", "$J", "ACKS", "$JS.ACK"]))
    return ".".join(toks)


@SETTINGS
@given(reply=ack_subject())
def test_jsack_mutated(both: Pair, reply: str) -> None:
    py, c = both
    same(lambda: py.jsack.parse_jsack(reply), lambda: c.jsack.parse_jsack(reply))


@SETTINGS
@given(
    reply=st.text(alphabet="$JSACK._0123456789 +-١é\U0001f600", max_size=40) | st.text(max_size=40)
)
def test_jsack_random(both: Pair, reply: str) -> None:
    py, c = both
    same(lambda: py.jsack.parse_jsack(reply), lambda: c.jsack.parse_jsack(reply))


@SETTINGS
@given(
    reply=ack_subject(),
    stream=st.sampled_from(["S", "ORDERS", "é", "", "ACK", None]),
    consumer=st.sampled_from(["C", "dur", "\U0001f600", "1", None]),
)
def test_jsack_hints(both: Pair, reply: str, stream: str | None, consumer: str | None) -> None:
    py, c = both
    same(
        lambda: py.jsack.parse_jsack(reply, stream, consumer),
        lambda: c.jsack.parse_jsack(reply, stream, consumer),
    )
    same(lambda: py.jsack.parse_jsack(reply), lambda: c.jsack.parse_jsack(reply, stream, consumer))


@pytest.mark.parametrize("reply", [None, b"$JS.ACK.S.C.1.2.3.4.5", 5, ["$JS"]])
def test_jsack_odd_types(both: Pair, reply: Any) -> None:
    py, c = both
    same(lambda: py.jsack.parse_jsack(reply), lambda: c.jsack.parse_jsack(reply))


# ----------------------------------------------------------------------------- pub ack

#: stream names as the server writes them, plus bytes the fast path must refuse
ack_names = (
    st.text(alphabet="abcXYZ_-.é流😀 0", min_size=1, max_size=12).map(str.encode)
    | st.text(min_size=1, max_size=8).map(lambda t: t.encode("utf-8", "surrogatepass"))
    | st.binary(min_size=0, max_size=8)
    | st.sampled_from([b"", b'"', b"\\", b"\x00", b"\x1f", b"\x7f", b"\xc3", b"\xed\xa0\x80"])
)
ack_seqs = (
    st.integers(0, 2**64 + 5).map(lambda n: str(n).encode())
    | st.integers(2**64 - 3, 2**64 + 3).map(lambda n: str(n).encode())
    | st.sampled_from([b"", b"00", b"01", b"-1", b"+1", b"1.0", b"1e3", b'"5"', b"\xd9\xa1"])
    | st.text(alphabet="0123456789", min_size=18, max_size=22).map(str.encode)
)


def pub_ack(name: bytes, seq: bytes) -> bytes:
    return b'{"stream":"' + name + b'","seq":' + seq + b"}"


@st.composite
def pub_ack_mutated(draw: st.DrawFn) -> bytes:
    data = bytearray(pub_ack(draw(ack_names), draw(ack_seqs)))
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["insert", "delete", "replace"]))
        i = draw(st.integers(0, len(data) - (kind != "insert")))
        byte = draw(
            st.sampled_from(b' \t\n"\\{}:,0159-\x00\x1f\x7f\x80\xc3\xff') | st.integers(0, 255)
        )
        if kind == "insert":
            data.insert(i, byte)
        elif kind == "delete":
            del data[i]
        else:
            data[i] = byte
    return bytes(data)


@SETTINGS
@given(
    data=st.binary(max_size=60)
    | st.binary(max_size=30).map(lambda b: b'{"stream":"' + b)
    | st.binary(max_size=30).map(lambda b: b'{"stream":"S","seq":' + b)
)
def test_pub_ack_random_bytes(both: Pair, data: bytes) -> None:
    py, c = both
    same(lambda: py.jsack.pub_ack_fields(data), lambda: c.jsack.pub_ack_fields(data))


@SETTINGS
@given(data=pub_ack_mutated() | st.tuples(ack_names, ack_seqs).map(lambda t: pub_ack(*t)))
def test_pub_ack_mutated(both: Pair, data: bytes) -> None:
    py, c = both
    same(lambda: py.jsack.pub_ack_fields(data), lambda: c.jsack.pub_ack_fields(data))


@SETTINGS
@given(
    names=st.lists(
        st.text(min_size=1, max_size=20).filter(
            lambda t: not any(ch in t for ch in '"\\') and min(t) >= " "
        )
        | st.sampled_from(["ORDERS", "ORDERS2", "ORDER", "é流"]),
        min_size=1,
        max_size=4,
    ),
    seqs=st.lists(
        st.integers(0, 2**64 - 1) | st.sampled_from([0, 1, 2**64 - 1]), min_size=1, max_size=6
    ),
)
def test_pub_ack_valid(both: Pair, names: list[str], seqs: list[int]) -> None:
    # several acks in a row, so the twin's reuse of the last name is exercised
    py, c = both
    for name, seq in zip(names * len(seqs), seqs, strict=False):
        data = pub_ack(name.encode(), str(seq).encode())  # st.text() draws no surrogates
        result = same(
            lambda d=data: py.jsack.pub_ack_fields(d), lambda d=data: c.jsack.pub_ack_fields(d)
        )
        assert result == ("ok", (name, seq), (tuple, [str, int]))


class _Bytes(bytes):
    pass


@pytest.mark.parametrize(
    "data",
    [
        None,
        5,
        1.5,
        True,
        '{"stream":"S","seq":5}',
        ["x"],
        {"stream": "S", "seq": 5},
        bytearray(b'{"stream":"S","seq":5}'),
        bytearray(b'{"stream":"S","seq":05}'),
        memoryview(b'{"stream":"S","seq":5}'),
        memoryview(b'x{"stream":"S","seq":5}x')[1:-1],
        memoryview(b'{"stream":"S","seq":5}x')[::2],
        _Bytes(b'{"stream":"S","seq":5}'),
        _Bytes(b'{"stream":"S","seq":x}'),
    ],
)
def test_pub_ack_odd_types(both: Pair, data: Any) -> None:
    py, c = both
    same(lambda: py.jsack.pub_ack_fields(data), lambda: c.jsack.pub_ack_fields(data))


def test_pub_ack_released_memoryview(both: Pair) -> None:
    py, c = both
    view = memoryview(b'{"stream":"S","seq":5}')
    view.release()
    assert same(lambda: py.jsack.pub_ack_fields(view), lambda: c.jsack.pub_ack_fields(view)) == (
        "ok",
        None,
        type(None),
    )


def test_pub_ack_vectors_every_mutation(both: Pair) -> None:
    # every single-byte delete, and every replacement by a telling byte, of the valid vectors
    py, c = both
    for data, expected in v.PUB_ACK:
        if expected is None or len(data) > 80:
            continue
        for i in range(len(data)):
            variants = [data[:i] + data[i + 1 :]]
            variants += [data[:i] + bytes([b]) + data[i + 1 :] for b in b' "\\}0a\x00\xff']
            variants += [data[:i] + bytes([b]) + data[i:] for b in b' "0']
            for m in variants:
                same(lambda m=m: py.jsack.pub_ack_fields(m), lambda m=m: c.jsack.pub_ack_fields(m))


# ----------------------------------------------------------------------------- status

JS_NAMES = [
    "Nats-Pending-Messages", "Nats-Pending-Bytes", "Nats-Last-Consumer", "Nats-Last-Stream",
    "Nats-Consumer-Stalled", "Nats-Pin-Id", "Nats-Pin-Ids", "Nats-", "Foo", "",
]  # fmt: skip
DESCRIPTIONS = [
    "Idle Heartbeat", "FlowControl Request", "No Messages", "Request Timeout",
    "Interest Expired", "Message Size Exceeds MaxBytes", "Batch Completed",
    "Exceeded MaxRequestBatch of 5", "Exceeded MaxRequestExpires of 1s",
    "Exceeded MaxRequestMaxBytes of 9", "Exceeded MaxWaiting", "Leadership Change",
    "Nats-Wrong-Pin-Id", "Consumer Deleted", "Consumer is push based", "Bad Request", "",
]  # fmt: skip


def recase(draw: st.DrawFn, text: str) -> str:
    mode = draw(st.sampled_from(["keep", "upper", "lower", "swap"]))
    return {"keep": text, "upper": text.upper(), "lower": text.lower(), "swap": text.swapcase()}[
        mode
    ]


@st.composite
def description(draw: st.DrawFn) -> str:
    d = recase(draw, draw(st.sampled_from(DESCRIPTIONS)))
    if draw(st.booleans()):
        d += draw(st.text(alphabet=" x1é\u212a\u0130.", max_size=3))
    if draw(st.integers(0, 4)) == 0:
        d = draw(st.text(max_size=20))
    return d


@st.composite
def header_block(draw: st.DrawFn) -> bytes:
    first = b"NATS/1.0"
    if draw(st.booleans()):
        code = draw(
            st.sampled_from(
                ["100", "404", "408", "409", "423", "400", "503", "40", "4040", "abc", "١٢٣"]
            )
        )
        blank = draw(st.sampled_from([" ", "\t", "  ", " \t", ""]))
        first += (blank + code).encode()
        if draw(st.booleans()):
            first += (draw(st.sampled_from([" ", "\t", "", "\x0b"])) + draw(description())).encode(
                "utf-8", "surrogatepass"
            )
    lines = [first]
    for _ in range(draw(st.integers(0, 5))):
        name = recase(draw, draw(st.sampled_from(JS_NAMES))).encode()
        value = draw(num_tok.map(str.encode) | st.binary(max_size=8) | name_tok.map(str.encode))
        sep = draw(st.sampled_from([b": ", b":", b" : ", b":\t", b" ", b"::"]))
        lines.append(
            draw(st.sampled_from([b"", b" ", b"\t"]))
            + name
            + sep
            + value
            + draw(st.sampled_from([b"", b" ", b"\r", b"\n"]))
        )
    block = b"\r\n".join(lines) + draw(st.sampled_from([b"\r\n\r\n", b"\r\n", b""]))
    return draw(mutated(block, 2)) if draw(st.integers(0, 3)) == 0 else block


@SETTINGS
@given(
    block=header_block()
    | st.binary(max_size=40).map(lambda b: b"NATS/1.0" + b)
    | st.binary(max_size=20)
)
def test_status_blocks(both: Pair, block: bytes) -> None:
    py, c = both
    same(lambda: py.status.status_of(block), lambda: c.status.status_of(block))
    same(lambda: py.jsheaders.js_headers(block), lambda: c.jsheaders.js_headers(block))
    for name in ("Nats-Pin-Id", "nats-pending-bytes", "Foo", ""):
        same(
            lambda n=name: py.jsheaders.header_value(block, n),
            lambda n=name: c.jsheaders.header_value(block, n),
        )


@SETTINGS
@given(block=header_block(), name=st.sampled_from(JS_NAMES) | st.text(max_size=6))
def test_header_value_names(both: Pair, block: bytes, name: str) -> None:
    py, c = both
    same(
        lambda: py.jsheaders.header_value(block, name),
        lambda: c.jsheaders.header_value(block, name),
    )


@SETTINGS
@given(
    code=st.sampled_from([100, 400, 404, 408, 409, 409, 409, 423, 503, 0, 200])
    | st.integers(-(2**70), 2**70),
    desc=description(),
)
def test_classify(both: Pair, code: int, desc: str) -> None:
    py, c = both
    same(lambda: py.status.classify(code, desc), lambda: c.status.classify(code, desc))
    result = outcome(
        lambda: py.status.status_of(f"NATS/1.0 {code} {desc}".encode("utf-8", "surrogatepass"))
    )
    if result[0] == "ok" and result[1] is not None:
        same(lambda: py.status.classify(*result[1]), lambda: c.status.classify(*result[1]))


@pytest.mark.parametrize(
    ("code", "desc"),
    [(True, "x"), (409.0, "Batch Completed"), (409, None), (404, None), (100, b"x")],
)
def test_classify_odd_types(both: Pair, code: Any, desc: Any) -> None:
    py, c = both
    same(lambda: py.status.classify(code, desc), lambda: c.status.classify(code, desc))


@pytest.mark.parametrize(
    "block", [bytearray(b"NATS/1.0 404 x\r\n"), memoryview(b"NATS/1.0 404"), "NATS/1.0 404", 5]
)
def test_status_odd_types(both: Pair, block: Any) -> None:
    py, c = both
    same(lambda: py.status.status_of(block), lambda: c.status.status_of(block))
    same(lambda: py.jsheaders.js_headers(block), lambda: c.jsheaders.js_headers(block))
    same(
        lambda: py.jsheaders.header_value(block, "x"), lambda: c.jsheaders.header_value(block, "x")
    )


# ----------------------------------------------------------------------------- sizes

wire_text = st.binary(max_size=20).map(lambda b: b.decode("utf-8", "surrogateescape")) | st.text(
    max_size=10
)


@SETTINGS
@given(
    subject=wire_text,
    reply=wire_text,
    header=st.none() | st.binary(max_size=30),
    payload=st.binary(max_size=30),
)
def test_msg_size(
    both: Pair, subject: str, reply: str, header: bytes | None, payload: bytes
) -> None:
    py, c = both
    same(
        lambda: py.sizes.msg_size(subject, reply, header, payload),
        lambda: c.sizes.msg_size(subject, reply, header, payload),
    )


@pytest.mark.parametrize(
    "args",
    [
        ("\ud800", "", None, b""),
        ("a", "\udfff", None, b""),
        (b"ab", "", None, b""),
        ("a", "b", bytearray(b"xy"), memoryview(b"abc")),
        (None, "", None, b""),
        ("a", "", 5, b""),
    ],
)
def test_msg_size_odd(both: Pair, args: tuple[Any, ...]) -> None:
    py, c = both
    same(lambda: py.sizes.msg_size(*args), lambda: c.sizes.msg_size(*args))


setting = st.integers(0, 50) | st.sampled_from([-1, 2**63 - 1, 2**63])
op = st.one_of(
    st.tuples(
        st.just("on_message"), st.tuples(st.integers(0, 60) | st.sampled_from([-1, 2**63 - 1]))
    ),
    st.tuples(
        st.just("on_status"),
        st.tuples(st.integers(-1, 60) | st.just(2**64 - 1), st.integers(-1, 60) | st.just(2**70)),
    ),
    st.tuples(st.just("next_pull"), st.just(())),
    st.tuples(st.just("reset"), st.just(())),
)


@SETTINGS
@given(ctor=st.tuples(setting, setting, setting, setting), ops=st.lists(op, max_size=30))
def test_pending_counter(both: Pair, ctor: tuple[int, int, int, int], ops: list[Any]) -> None:
    py, c = both

    def settings_of(mod: Any) -> tuple[int, ...]:
        pc = mod.sizes.PendingCounter(*ctor)
        return (pc.max_messages, pc.max_bytes, pc.threshold_messages, pc.threshold_bytes)

    res = same(lambda: settings_of(py), lambda: settings_of(c))
    if res[0] != "ok":
        return
    pc, cc = py.sizes.PendingCounter(*ctor), c.sizes.PendingCounter(*ctor)
    for method, args in ops:
        same(
            lambda m=method, a=args: getattr(pc, m)(*a), lambda m=method, a=args: getattr(cc, m)(*a)
        )
        assert (pc.msgs, pc.bytes) == (cc.msgs, cc.bytes)


def test_public_names_match(both: Pair) -> None:
    py, c = both
    ignore = {"annotations", "Any"}  # typing helpers of the pure modules

    def public(mod: Any) -> set[str]:
        # "@py_builtins"/"@pytest_ar": pytest's assertion rewriting of the plugin's package
        return {n for n in vars(mod) if not n.startswith(("_", "@"))} - ignore

    for name in ("parser", "jsack", "status", "jsheaders", "sizes"):
        pub_py = public(getattr(py, name))
        pub_c = public(getattr(c, name))
        assert pub_py == pub_c, name
        for n in pub_py:
            a, b = getattr(getattr(py, name), n), getattr(getattr(c, name), n)
            if not callable(a):
                assert a == b, (name, n)
            elif isinstance(a, type) and issubclass(a, BaseException):
                assert a is b, (name, n)


def _params(fn: Any) -> list[str]:
    return [p for p in inspect.signature(fn).parameters if p != "self"]


@pytest.mark.parametrize(
    ("module", "name"),
    [
        ("parser", "Parser.feed"),
        ("parser", "Parser.reset"),
        ("jsack", "parse_jsack"),
        ("jsack", "pub_ack_fields"),
        ("status", "status_of"),
        ("status", "classify"),
        ("jsheaders", "js_headers"),
        ("jsheaders", "header_value"),
        ("jsheaders", "direct_headers"),
        ("jsheaders", "stamp_ns"),
        ("sizes", "msg_size"),
        ("sizes", "PendingCounter.on_message"),
        ("sizes", "PendingCounter.on_status"),
        ("sizes", "PendingCounter.next_pull"),
        ("sizes", "PendingCounter.reset"),
    ],
)
def test_parameter_names_match(both: Pair, module: str, name: str) -> None:
    # callers may pass any argument by keyword, so the names are part of the interface
    fns = []
    for ns in both:
        obj: Any = getattr(ns, module)
        for part in name.split("."):
            obj = getattr(obj, part)
        fns.append(obj)
    assert _params(fns[0]) == _params(fns[1])


def test_constructor_keywords(both: Pair) -> None:
    # extension types expose no signature for __init__: call both by keyword instead
    for ns in both:
        p = ns.parser.Parser(max_control_line=10, max_payload=20)
        assert (p.max_control_line, p.max_payload) == (10, 20)
        c = ns.sizes.PendingCounter(
            max_messages=4, max_bytes=3, threshold_messages=2, threshold_bytes=1
        )
        assert (c.max_messages, c.max_bytes, c.threshold_messages, c.threshold_bytes) == (
            4,
            3,
            2,
            1,
        )
