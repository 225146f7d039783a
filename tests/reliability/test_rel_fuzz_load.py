"""Fuzzing both parser twins and the decoders; thread stress; a short soak.

The fuzz properties: only typed errors (``ProtocolError`` for the parser)
ever escape, a stream split anywhere parses as it does whole, and the twins
agree. The random fuzzer (:mod:`jsbench.fuzz`) runs a bounded count
here and 10^6 frames in the long form; hypothesis adds shrinking properties.
"""

from __future__ import annotations

import importlib
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jsbench import fuzz as fz
from jsbench import reliability as rel
from jsclient import errors
from jsclient.protocol import headers as pure_headers

pytestmark = pytest.mark.timeout(180)

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))


def _twin(name: str) -> list[object]:
    # Both twins or an error: a missing Cython build must fail this module,
    # never shrink "the twins agree" to the pure twin agreeing with itself.
    return [
        importlib.import_module(f"jsclient.protocol.{name}"),
        importlib.import_module(f"jsclient._speedups.{name}"),
    ]


def test_random_fuzzer_short_run() -> None:
    counts = fz.fuzz(frames=20_000, seconds=60.0, seed=7)
    assert counts["twins"] == ["py", "c"]
    assert counts["frames"] >= 20_000 and counts["parse_errors"] > 0
    assert counts["decoder_inputs"] > 0


@st.composite
def hostile_stream(draw: st.DrawFn) -> bytes:
    seed = draw(st.integers(0, 2**32))
    import random

    rng = random.Random(seed)
    raw = fz.random_stream(rng)
    extra = draw(
        st.sampled_from(
            [
                b"",
                b"MSG a 1 18446744073709551616\r\n",
                b"HMSG a 1 5 3\r\nNATS/1.0\r\n",
                b"HMSG a 1 999999999999999999 1\r\n",
                b"MSG \xff\xfe 1 0\r\n\r\n",
                b"MSG a b 0\r\n\r\n",
                b"INFO\r\n",
                b"-ERR\r\n",
            ]
        )
    )
    return raw + extra + draw(st.binary(max_size=16))


@SETTINGS
@given(raw=hostile_stream(), mcl=st.sampled_from([4096, 16, 4]), mp=st.sampled_from([64, 1 << 20]))
def test_parser_only_protocol_errors_split_invariant_twins_agree(
    raw: bytes, mcl: int, mp: int
) -> None:
    results = []
    for mod in _twin("parser"):
        whole = fz._parse(mod, [raw], mcl, mp)  # anything but ProtocolError escapes
        for cut in range(0, len(raw) + 1, max(1, len(raw) // 40)):
            assert fz._parse(mod, [raw[:cut], raw[cut:]], mcl, mp) == whole
        results.append(whole)
    assert all(r == results[0] for r in results)


@SETTINGS
@given(block=st.binary(max_size=80).map(lambda b: b"NATS/1.0" + b) | st.binary(max_size=80))
def test_header_decoders_raise_only_typed_errors(block: bytes) -> None:
    try:
        pure_headers.decode(block)
    except errors.BadHeaderError:
        pass
    outs = []
    for mod in _twin("status"):
        try:
            outs.append(("ok", mod.status_of(block)))  # type: ignore[attr-defined]
        except errors.BadHeaderError as exc:
            outs.append(("raised", str(exc)))
    assert all(o == outs[0] for o in outs)


@SETTINGS
@given(
    reply=st.text(max_size=60) | st.lists(st.text("$JSACK_.0123456789", max_size=6)).map(".".join)
)
def test_jsack_parser_raises_only_typed_errors(reply: str) -> None:
    outs = []
    for mod in _twin("jsack"):
        try:
            outs.append(("ok", mod.parse_jsack(reply)))  # type: ignore[attr-defined]
        except errors.InvalidJSAckError as exc:
            outs.append(("raised", str(exc)))
    assert all(o == outs[0] for o in outs)


# -- load ------------------------------------------------------------------------------


def test_thread_stress_one_connection() -> None:
    old = sys.getswitchinterval()
    figs = rel.thread_stress(per_thread=1500, publishers=8, ackers=4)
    assert sys.getswitchinterval() == old
    assert figs["problems"] == [], figs
    assert figs["distinct"] == figs["n"] == 12_000 and figs["stuck_threads"] == []


@pytest.mark.once
def test_soak_short() -> None:
    figs = rel.soak(n=200_000, sample_every=20_000)
    assert figs["problems"] == [], figs
    # after warm-up the RSS is flat: well under 1 MiB per 20k messages
    assert figs["slope_kib_per_sample"] < 1024, figs
