"""Split invariance: a byte stream split anywhere parses exactly as it does whole.

The parser's contract is that bytes may arrive split at any boundary. For any
stream (valid frames, mutated frames, random bytes) and any limits, feeding it
in pieces must give the same frames, the same error (type and message, with
the frames completed before it) and the same bytes left buffered as feeding it
whole; and the two twins must agree with each other on all of it.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jsclient.errors import ProtocolError

from .test_equiv_differential import cuts, split, stream

SETTINGS = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

Outcome = tuple[list[tuple[Any, ...]], tuple[type, str] | None, int | None]


def parse(impl: SimpleNamespace, chunks: list[bytes], mcl: int, mp: int) -> Outcome:
    """(frames, error or None, bytes buffered at the end or None after an error)."""
    p = impl.parser.Parser(mcl, mp)
    frames: list[tuple[Any, ...]] = []
    for chunk in chunks:
        try:
            frames += p.feed(chunk)
        except ProtocolError as exc:
            frames += getattr(exc, "events", [])
            return frames, (type(exc), str(exc)), None
    return frames, None, p.buffered


def check(
    both: tuple[SimpleNamespace, SimpleNamespace], raw: bytes, points: list[int], mcl: int, mp: int
) -> None:
    outcomes = []
    for impl in both:
        whole = parse(impl, [raw], mcl, mp)
        pieces = parse(impl, split(raw, points), mcl, mp)
        assert pieces == whole, (impl.name, raw, points)
        bytewise = parse(impl, [raw[i : i + 1] for i in range(len(raw))], mcl, mp)
        assert bytewise[:2] == whole[:2], (impl.name, raw)
        outcomes.append(whole)
    assert outcomes[0] == outcomes[1]


@SETTINGS
@given(data=st.data())
def test_split_anywhere_same_as_whole(both: Any, data: st.DataObject) -> None:
    raw = data.draw(stream())
    check(both, raw, data.draw(cuts(raw)), 4096, 64 << 20)


@SETTINGS
@given(data=st.data())
def test_split_anywhere_same_as_whole_small_limits(both: Any, data: st.DataObject) -> None:
    # Small limits put lines and payloads right at the edge, where a split
    # between CR and LF, or inside "INFO", used to change the verdict.
    raw = data.draw(stream())
    mcl = data.draw(st.integers(0, 64))
    mp = data.draw(st.integers(0, 48))
    check(both, raw, data.draw(cuts(raw)), mcl, mp)


@SETTINGS
@given(
    raw=st.binary(max_size=80)
    | st.lists(st.sampled_from([b"\r", b"\n", b"\r\n", b"PING", b"INFO", b"MSG a 1 2", b"x"])).map(
        b"".join
    ),
    data=st.data(),
)
def test_split_random_bytes(both: Any, raw: bytes, data: st.DataObject) -> None:
    mcl = data.draw(st.sampled_from([0, 1, 3, 4, 5, 8, 4096]))
    check(both, raw, data.draw(cuts(raw)), mcl, 64)


@pytest.mark.parametrize("size", [4095, 4096])
def test_line_of_exactly_max_control_line_split_between_cr_and_lf(
    impl: SimpleNamespace, size: int
) -> None:
    line = b"MSG " + b"a" * (size - 8) + b" 1 0"
    assert len(line) == size
    whole = impl.parser.Parser().feed(line + b"\r\n\r\n")
    assert [f[2] for f in whole] == ["a" * (size - 8)]
    p = impl.parser.Parser()
    assert p.feed(line + b"\r") == []  # the CR may be the end of the line: wait for the LF
    assert p.feed(b"\n\r\n") == whole


def test_line_one_byte_over_is_still_rejected_before_its_crlf(impl: SimpleNamespace) -> None:
    line = b"MSG " + b"a" * 4089 + b" 1 0"  # 4097 bytes
    with pytest.raises(ProtocolError, match="too long"):
        impl.parser.Parser().feed(line + b"\r")
    with pytest.raises(ProtocolError, match="too long"):
        impl.parser.Parser().feed(line + b"\r\n\r\n")


def test_info_split_inside_its_name_with_a_tiny_limit(impl: SimpleNamespace) -> None:
    # INFO lines have their own limit; a read ending inside "INFO" must not
    # be judged by the ordinary one.
    raw = b'INFO {"a":1}\r\n'
    p = impl.parser.Parser(2, 64)
    for i in range(len(raw) - 1):
        assert p.feed(raw[i : i + 1]) == []
    assert p.feed(raw[-1:]) == [(impl.parser.OP_INFO, '{"a":1}')]
