"""A fast random fuzzer for the protocol decoders, run against both twins.

``fuzz(frames=..., seconds=..., seed=...)`` makes random NATS frames (valid
ones, then mutated: bytes flipped, inserted, deleted, duplicated; oversize and
non-digit lengths; bad header blocks and status lines; invalid UTF-8 in
subjects) and feeds each stream to the pure parser and the Cython parser,
whole and split (at every byte for short streams, at random points for long
ones). Every outcome must be frames or a :class:`jsclient.errors.ProtocolError`
(nothing else may escape), the split outcome must equal the whole one, and the
twins must agree. The ``$JS.ACK`` parser, the PubAck fast path, the status
line reader and the header decoder get the same treatment with their own
inputs and their own typed errors. No hypothesis needed: this is the long
form's engine (``python -m jsclient bench --reliability``); the test suite
adds hypothesis-driven properties on top.
"""

from __future__ import annotations

import importlib
import itertools
import random
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

from jsclient import errors
from jsclient.protocol import headers as _headers

__all__ = ["check", "fuzz", "load_twins", "random_stream"]

Twins = list[tuple[str, dict[str, ModuleType]]]
_SUBJECTS = [b"a", b"foo.bar", b"$JS.ACK.S.C.1.2.3.4.5", b"_INBOX.x.1", b"\xff\xfe", b"\xc3(", b">"]


def load_twins() -> Twins:
    """``(name, {module: twin})`` for the pure twin and the Cython one.

    Both, always: without the Cython twin "the twins agree" would compare the
    pure module with itself, so a missing build is an error here, not a skip.
    """
    pure = {m: importlib.import_module(f"jsclient.protocol.{m}") for m in _MODS}
    try:
        built = {m: importlib.import_module(f"jsclient._speedups.{m}") for m in _MODS}
    except ImportError as exc:
        raise RuntimeError(
            f"the Cython twins are not built ({exc}): fuzzing compares both twins; "
            "build them first (python setup.py build_ext --inplace, or the README's setup)"
        ) from exc
    return [("py", pure), ("c", built)]


_MODS = ("parser", "jsack", "status", "jsheaders")


def _frame(rng: random.Random) -> bytes:
    kind = rng.choice(("msg", "msg", "hmsg", "hmsg", "ping", "pong", "ok", "err", "info"))
    if kind in ("msg", "hmsg"):
        subj = rng.choice(_SUBJECTS)
        args = [subj, str(rng.randrange(0, 10**6)).encode()]
        if rng.random() < 0.5:
            args.append(rng.choice(_SUBJECTS))
        payload = rng.randbytes(rng.choice((0, 1, 5, 40, 300)))
        if kind == "hmsg":
            hdr = rng.choice(
                (
                    b"NATS/1.0\r\n\r\n",
                    b"NATS/1.0 404 No Messages\r\n\r\n",
                    b"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 5\r\n\r\n",
                    b"NATS/1.0 4x4\r\n\r\n",  # a bad status line
                    b"NATS/2.0\r\nA: b\r\n\r\n",  # a bad version
                    b"NATS/1.0\r\nno colon\r\n:empty\r\n\r\n",
                    b"garbage\r\n\r\n",
                    b"",
                )
            )
            args += [str(len(hdr)).encode(), str(len(hdr) + len(payload)).encode()]
            body = hdr + payload
        else:
            args.append(str(len(payload)).encode())
            body = payload
        op = b"MSG" if kind == "msg" else b"HMSG"
        return op + b" " + b" ".join(args) + b"\r\n" + body + b"\r\n"
    if kind == "err":
        return b"-ERR '" + rng.randbytes(rng.randrange(0, 20)).replace(b"\r\n", b"") + b"'\r\n"
    if kind == "info":
        return b'INFO {"server_id":"x","max_payload":1048576}\r\n'
    return {"ping": b"PING\r\n", "pong": b"PONG\r\n", "ok": b"+OK\r\n"}[kind]


def _mutate(rng: random.Random, data: bytes) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.randrange(1, 5)):
        op = rng.randrange(8)
        i = rng.randrange(len(buf) + 1)
        if op == 0 and buf:
            buf[min(i, len(buf) - 1)] = rng.randrange(256)
        elif op == 1:
            buf[i:i] = rng.choice((b"\r\n", b"\r", b"\n", b" ", b"\t", b"\x00", b"\xd9\xa1"))
        elif op == 2 and buf:
            del buf[min(i, len(buf) - 1)]
        elif op == 3:
            buf[i:i] = rng.choice((b"99999999999999999999", b"9" * 12, b"-1", b"+5", b"1_0"))
        elif op == 4:
            j = min(len(buf), i + rng.randrange(1, 16))
            buf[i:i] = buf[i:j]
        elif op == 5:
            buf[i:i] = rng.choice((b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf0\x9f"))
        elif op == 6:
            del buf[i:]
        else:
            buf[i:i] = b"MSG x 1 %d\r\n" % rng.choice((0, 3, 64 << 20, 1 << 40))
    return bytes(buf)


def _stream(rng: random.Random, p_mutate: float) -> tuple[int, bytes]:
    """``(frame count, bytes)``: one to four frames, mutated with probability ``p_mutate``."""
    nframes = rng.randrange(1, 5)
    raw = b"".join(_frame(rng) for _ in range(nframes))
    return nframes, _mutate(rng, raw) if rng.random() < p_mutate else raw


def random_stream(rng: random.Random) -> bytes:
    """A few frames, mutated half of the time."""
    return _stream(rng, 0.5)[1]


def _parse(parser_mod: ModuleType, chunks: list[bytes], mcl: int, mp: int) -> tuple[Any, ...]:
    p = parser_mod.Parser(mcl, mp)
    frames: list[Any] = []
    for chunk in chunks:
        try:
            frames += p.feed(chunk)
        except errors.ProtocolError as exc:
            return tuple(frames + list(getattr(exc, "events", []))), type(exc), str(exc)
        # anything else escapes: a crash the caller reports
    return tuple(frames), None, p.buffered


def _outcome(fn: Any, arg: Any) -> tuple[Any, ...]:
    try:
        return ("ok", fn(arg))
    except errors.Error as exc:
        return ("raised", type(exc), str(exc))


class FuzzFailure(AssertionError):
    """A fuzz input broke a rule; ``data`` is the input."""

    def __init__(self, what: str, data: Any) -> None:
        super().__init__(f"{what}: {data!r}"[:2000])
        self.data = data


def check(
    twins: Twins, raw: bytes, splits: list[list[bytes]], mcl: int, mp: int
) -> tuple[Any, ...]:
    """Parse ``raw`` whole and cut as each of ``splits`` with every twin's parser.

    Returns the whole outcome (``(frames, error type, message or buffered)``);
    raises :class:`FuzzFailure` when a parser raises anything but
    ``ProtocolError``, a split changes the outcome, or the twins disagree."""
    whole = None
    for name, mods in twins:
        try:
            got = _parse(mods["parser"], [raw], mcl, mp)
            for chunks in splits:
                if _parse(mods["parser"], chunks, mcl, mp) != got:
                    raise FuzzFailure(f"{name} parser: split != whole at {chunks!r}", raw)
        except FuzzFailure:
            raise
        except Exception as exc:
            raise FuzzFailure(f"{name} parser raised {exc!r}", raw) from exc
        if whole is None:
            whole = got
        elif got != whole:
            raise FuzzFailure("the twins disagree", raw)
    assert whole is not None
    return whole


def _agree(twins: Twins, what: str, data: Any, fn: Callable[[dict[str, ModuleType]], Any]) -> None:
    """``fn(modules)`` must not raise and must give the same for every twin."""
    seen = None
    for name, mods in twins:
        try:
            got = fn(mods)
        except Exception as exc:
            raise FuzzFailure(f"{name} {what} raised {exc!r}", data) from exc
        if seen is None:
            seen = got
        elif got != seen:
            raise FuzzFailure(f"{what}: the twins disagree", data)


def fuzz(frames: int = 100_000, seconds: float = 60.0, seed: int = 1) -> dict[str, Any]:
    """Run until ``frames`` frames went through the parsers or ``seconds`` passed.

    Returns counts; raises :class:`FuzzFailure` on the first broken rule (an
    exception other than the typed one, a split changing the outcome, the
    twins disagreeing)."""
    rng = random.Random(seed)
    twins = load_twins()
    deadline = time.monotonic() + seconds
    counts: dict[str, Any] = dict.fromkeys(
        ("frames", "streams", "parse_errors", "feeds", "decoder_inputs"), 0
    )
    counts["twins"] = [name for name, _ in twins]
    while counts["frames"] < frames and time.monotonic() < deadline:
        nframes, raw = _stream(rng, 0.6)
        mcl, mp = rng.choice(((4096, 64 << 20), (4096, 300), (32, 1 << 20), (8, 64)))
        if len(raw) <= 160 and rng.random() < 0.25:
            splits = [[raw[:i], raw[i:]] for i in range(len(raw) + 1)]
        else:
            cuts = sorted(rng.randrange(len(raw) + 1) for _ in range(rng.randrange(1, 6)))
            bounds = [0, *cuts, len(raw)]
            splits = [[raw[a:b] for a, b in itertools.pairwise(bounds)]]
        whole = check(twins, raw, splits, mcl, mp)
        counts["feeds"] += len(twins) * sum(len(chunks) for chunks in splits)
        counts["parse_errors"] += whole[1] is not None
        counts["frames"] += nframes
        counts["streams"] += 1
        for frame in whole[0]:
            if frame[0] == 0 and frame[4] is not None:
                _decoders(twins, frame[4], counts)
        if rng.random() < 0.3:
            _ack_inputs(rng, twins, counts)
    return counts


def _decoders(twins: Twins, block: bytes, counts: Any) -> None:
    counts["decoder_inputs"] += 1
    try:
        _headers.decode(block)
    except errors.BadHeaderError:
        pass
    except Exception as exc:
        raise FuzzFailure(f"headers.decode raised {exc!r}", block) from exc
    _agree(
        twins,
        "status decoders",
        block,
        lambda mods: (_outcome(mods["status"].status_of, block), _js_headers(mods, block)),
    )


def _js_headers(mods: dict[str, ModuleType], block: bytes) -> tuple[Any, ...]:
    if not block.startswith(b"NATS/1.0"):
        return ("skipped",)
    return _outcome(mods["jsheaders"].js_headers, block)


def _ack_inputs(rng: random.Random, twins: Twins, counts: Any) -> None:
    toks = ["$JS", "ACK"] + (["_", "acc"] if rng.random() < 0.5 else [])
    toks += ["S", "C"] + [str(rng.choice((1, 0, 2**64 - 1, 2**64, 10**20))) for _ in range(5)]
    reply = ".".join(toks)
    raw = _mutate(rng, reply.encode()).decode("utf-8", "surrogateescape")
    ack = b'{"stream":"S","seq":%d}' % rng.randrange(2**64 + 5)
    mutated_ack = _mutate(rng, ack)
    _agree(
        twins,
        "ack decoders",
        (raw, mutated_ack),
        lambda mods: (
            _outcome(mods["jsack"].parse_jsack, raw),
            _outcome(mods["jsack"].pub_ack_fields, mutated_ack),
            _outcome(mods["jsack"].pub_ack_fields, ack),
        ),
    )
    counts["decoder_inputs"] += 3
