"""Batched direct gets (ADR-31) against a real nats-server: ``Stream.get_batch`` and
``Stream.get_last_msgs_for``, their pages, limits, empty answers and errors."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import jsclient
from jsclient import errors
from jsclient.api import RawStreamMsg, StreamInfo, StreamSource
from jsclient.client import Client
from jsclient.jetstream import JetStream
from jsclient.jetstream.manage import direct as _direct
from jsclient.jetstream.manage.stream import Stream
from jsclient.protocol import commands


@pytest.fixture
def js(nc: Client) -> JetStream:
    return nc.jetstream()


def _fill(js: JetStream, n: int, subjects: int = 3, size: int = 4) -> None:
    """``n`` messages: seq k (1-based) on ``s.<(k-1) % subjects>`` with payload ``p<k-1>``."""
    for i in range(n):
        js.publish_async(f"s.{i % subjects}", b"p%d" % i + b"." * max(0, size - 4))
    js.publish_async_complete(timeout=30)


@pytest.fixture
def stream(js: JetStream) -> Stream:
    """Stream ``S`` on ``s.>`` (direct gets allowed) holding 30 messages on s.0, s.1, s.2."""
    st: Stream = js.create_stream(name="S", subjects=["s.>"], allow_direct=True, storage="memory")
    _fill(js, 30)
    return st


def _seqs(msgs: Any) -> list[int]:
    return [m.seq for m in msgs]


# -- ranges ---------------------------------------------------------------------


def test_get_batch_from_start_and_from_seq(stream: Stream) -> None:
    msgs = list(stream.get_batch(batch=10))
    assert _seqs(msgs) == list(range(1, 11))
    m = msgs[4]
    assert isinstance(m, RawStreamMsg)
    assert (m.subject, m.seq, m.data, m.stream, m.headers, m.hdrs) == (
        "s.1",
        5,
        b"p4",
        "S",
        None,
        None,
    )
    assert m.time is not None and m.time.tzinfo is not None
    assert abs(m.time - datetime.now(UTC)) < timedelta(minutes=1)
    assert _seqs(stream.get_batch(seq=25, batch=3)) == [25, 26, 27]
    assert [m.data for m in stream.get_batch(seq=29)] == [b"p28", b"p29"]


def test_get_batch_matches_get_msg(stream: Stream, js: JetStream) -> None:
    js.publish("s.h", b"with headers", headers={"A": ["1", "2"], "B": "x"})
    (got,) = stream.get_batch(seq=31, batch=1)
    one = stream.get_msg(31)
    assert got == one
    assert got.headers == {"A": "1", "B": "x"}
    assert got.hdrs is not None and b"A: 2" in got.hdrs and b"Nats-" not in got.hdrs


def test_get_batch_by_subject_with_wildcards(stream: Stream, js: JetStream) -> None:
    js.publish("s.x.deep", b"deep")  # seq 31
    assert _seqs(stream.get_batch(subject="s.1", batch=100)) == list(range(2, 31, 3))
    assert _seqs(stream.get_batch(subject="s.1", seq=10, batch=2)) == [11, 14]
    assert _seqs(stream.get_batch(subject="s.*", seq=28, batch=100)) == [28, 29, 30]
    assert _seqs(stream.get_batch(subject="s.>", seq=29, batch=100)) == [29, 30, 31]
    assert _seqs(stream.get_batch(subject="s.x.*", batch=100)) == [31]


def test_get_batch_by_start_time(stream: Stream, js: JetStream) -> None:
    time.sleep(0.05)
    middle = datetime.now(UTC)
    time.sleep(0.05)
    _fill(js, 5)  # seqs 31..35
    assert _seqs(stream.get_batch(start_time=middle, batch=100)) == [31, 32, 33, 34, 35]
    assert _seqs(stream.get_batch(start_time=middle, subject="s.1", batch=100)) == [32, 35]
    early = datetime(2000, 1, 1)  # naive: UTC
    assert _seqs(stream.get_batch(start_time=early, batch=2)) == [1, 2]
    later = datetime.now(UTC) + timedelta(hours=1)
    assert list(stream.get_batch(start_time=later)) == []
    # A message's own stamp starts the read at it.
    m31 = stream.get_msg(31)
    assert m31.time is not None
    assert _seqs(stream.get_batch(start_time=m31.time, batch=1)) == [31]


def test_get_batch_skips_deleted_messages(stream: Stream) -> None:
    for seq in (3, 4, 10):
        stream.delete_msg(seq)
    assert _seqs(stream.get_batch(batch=8)) == [1, 2, 5, 6, 7, 8, 9, 11]
    assert _seqs(stream.get_batch(seq=3, batch=1)) == [5]


# -- limits and pages -------------------------------------------------------------


def test_get_batch_max_bytes_counts_as_the_server_does(stream: Stream) -> None:
    # Each message counts subject (3) + payload (2 or 3): p0..p9 are 5 bytes.
    assert _seqs(stream.get_batch(batch=100, max_bytes=10)) == [1, 2]
    assert _seqs(stream.get_batch(batch=100, max_bytes=11)) == [1, 2, 3]
    assert _seqs(stream.get_batch(batch=100, max_bytes=1)) == [1]  # one at least
    assert _seqs(stream.get_batch(batch=2, max_bytes=1000)) == [1, 2]


def test_get_batch_max_bytes_over_several_pages(
    stream: Stream, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_direct, "PAGE_MSGS", 3)
    assert _seqs(stream.get_batch(batch=100, max_bytes=40)) == list(range(1, 9))
    monkeypatch.setattr(_direct, "PAGE_BYTES", 12)
    assert _seqs(stream.get_batch(batch=100, max_bytes=40)) == list(range(1, 9))


@pytest.mark.parametrize("batch", [29, 30, 31, 1000])
def test_get_batch_boundaries(stream: Stream, batch: int) -> None:
    assert _seqs(stream.get_batch(batch=batch)) == list(range(1, min(batch, 30) + 1))


@pytest.mark.parametrize("page", [1, 7, 10, 29, 30])
def test_get_batch_pages(stream: Stream, monkeypatch: pytest.MonkeyPatch, page: int) -> None:
    monkeypatch.setattr(_direct, "PAGE_MSGS", page)
    assert _seqs(stream.get_batch(batch=1000)) == list(range(1, 31))
    assert _seqs(stream.get_batch(batch=20, seq=5)) == list(range(5, 25))
    assert _seqs(stream.get_batch(batch=1000, subject="s.2")) == list(range(3, 31, 3))


def test_get_batch_many_server_pages(js: JetStream) -> None:
    st = js.create_stream(name="BIG", subjects=["big.>"], allow_direct=True, storage="memory")
    n = 2 * _direct.PAGE_MSGS + 500
    for i in range(n):
        js.publish_async("big.x", b"%d" % i)
    js.publish_async_complete(timeout=60)
    seen = 0
    for m in st.get_batch(batch=n + 10):
        seen += 1
        assert m.seq == seen and m.data == b"%d" % (seen - 1)
    assert seen == n
    assert sum(1 for _ in st.get_batch(batch=n - 1, seq=2)) == n - 1


def test_slow_reader_loses_nothing_and_buffers_one_page(
    nats_server: Any, js: JetStream, monkeypatch: pytest.MonkeyPatch
) -> None:
    st = js.create_stream(name="SLOW", subjects=["slow"], allow_direct=True, storage="memory")
    for _ in range(300):
        js.publish_async("slow", b"x" * 1000)
    js.publish_async_complete(timeout=30)
    monkeypatch.setattr(_direct, "PAGE_MSGS", 50)
    slow_errors: list[BaseException] = []
    with jsclient.connect(nats_server.url, error_cb=slow_errors.append) as nc2:
        s2 = nc2.jetstream().stream("SLOW")
        it = s2.get_batch(batch=300)
        first = next(it)
        time.sleep(0.3)  # the server had time to send everything it wanted to
        before = nc2.stats["in_msgs"]
        assert before <= 51 + 2  # one page and its EOB (+ the stream info answer)
        seqs = [first.seq]
        for m in it:
            seqs.append(m.seq)
            if len(seqs) % 25 == 0:
                time.sleep(0.01)
        assert seqs == list(range(1, 301))
    assert slow_errors == []
    assert st.name == "SLOW"


def test_closing_the_iterator_ends_the_subscription(stream: Stream, nc: Client) -> None:
    subs = len(nc._subs)
    it = stream.get_batch(batch=20)
    assert next(it).seq == 1
    assert len(nc._subs) == subs + 1
    it.close()
    assert len(nc._subs) == subs
    for _ in stream.get_batch(batch=5):
        break
    assert len(nc._subs) == subs


# -- empty answers -----------------------------------------------------------------


def test_get_batch_empty_answers(js: JetStream, stream: Stream) -> None:
    empty = js.create_stream(name="EMPTY", subjects=["e.>"], allow_direct=True)
    assert list(empty.get_batch()) == []
    assert list(stream.get_batch(seq=31)) == []
    assert list(stream.get_batch(subject="nothing.here")) == []
    assert list(stream.get_batch(subject="s.1", seq=30)) == []
    stream.purge()
    assert list(stream.get_batch()) == []


# -- last messages of many subjects -----------------------------------------------


def test_get_last_msgs_for_subjects_and_wildcards(stream: Stream, js: JetStream) -> None:
    js.publish("s.x.y", b"deep")  # seq 31
    got = list(stream.get_last_msgs_for(["s.0", "s.2"]))
    assert [(m.subject, m.seq, m.data) for m in got] == [("s.0", 28, b"p27"), ("s.2", 30, b"p29")]
    assert {m.subject: m.seq for m in stream.get_last_msgs_for("s.*")} == {
        "s.0": 28,
        "s.1": 29,
        "s.2": 30,
    }
    assert {m.subject: m.seq for m in stream.get_last_msgs_for(["s.>"])} == {
        "s.0": 28,
        "s.1": 29,
        "s.2": 30,
        "s.x.y": 31,
    }
    assert {m.subject for m in stream.get_last_msgs_for(["s.x.*", "s.1"])} == {"s.x.y", "s.1"}
    assert list(stream.get_last_msgs_for("nothing.*")) == []


def test_get_last_msgs_for_up_to_seq_and_time(stream: Stream, js: JetStream) -> None:
    assert {m.subject: m.seq for m in stream.get_last_msgs_for("s.*", up_to_seq=4)} == {
        "s.0": 4,
        "s.1": 2,
        "s.2": 3,
    }
    assert {m.subject: m.seq for m in stream.get_last_msgs_for("s.*", up_to_seq=1)} == {"s.0": 1}
    time.sleep(0.05)
    cut = datetime.now(UTC)
    time.sleep(0.05)
    _fill(js, 2)  # 31 on s.0, 32 on s.1
    assert {m.subject: m.seq for m in stream.get_last_msgs_for("s.*", up_to_time=cut)} == {
        "s.0": 28,
        "s.1": 29,
        "s.2": 30,
    }
    assert {m.subject: m.seq for m in stream.get_last_msgs_for("s.*")} == {
        "s.0": 31,
        "s.1": 32,
        "s.2": 30,
    }
    assert list(stream.get_last_msgs_for("s.*", up_to_time=datetime(2000, 1, 1))) == []


def test_get_last_msgs_for_pages_stay_at_one_point_in_time(
    stream: Stream, js: JetStream, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_direct, "PAGE_MSGS", 1)
    it = stream.get_last_msgs_for("s.*")
    first = next(it)
    _fill(js, 3)  # new last messages for every subject, between two pages
    rest = list(it)
    assert [(m.subject, m.seq) for m in [first, *rest]] == [("s.0", 28), ("s.1", 29), ("s.2", 30)]


def test_get_last_msgs_for_413_over_1024_subjects(js: JetStream) -> None:
    st = js.create_stream(name="MANY", subjects=["m.>"], allow_direct=True, storage="memory")
    for i in range(1025):
        js.publish_async(f"m.{i}", b"x")
    js.publish_async_complete(timeout=30)
    with pytest.raises(errors.TooManyResultsError) as exc:
        list(st.get_last_msgs_for("m.*"))
    assert exc.value.code == 413 and isinstance(exc.value, errors.APIError)
    assert len(list(st.get_last_msgs_for("m.*", up_to_seq=1024))) == 1024
    with pytest.raises(errors.TooManyResultsError):
        list(st.get_last_msgs_for([f"m.{i}" for i in range(1025)]))


# -- errors ----------------------------------------------------------------------------


def test_stream_without_allow_direct(js: JetStream) -> None:
    st = js.create_stream(name="ND", subjects=["nd.>"])
    js.publish("nd.1", b"x")
    with pytest.raises(errors.DirectGetNotAllowedError) as exc:
        list(st.get_batch())
    assert exc.value.code == 503
    assert isinstance(exc.value, errors.ServiceUnavailableError)
    with pytest.raises(errors.DirectGetNotAllowedError):
        list(st.get_last_msgs_for("nd.*"))
    js.update_stream(name="ND", subjects=["nd.>"], allow_direct=True)
    assert [m.data for m in st.get_batch()] == [b"x"]


def test_mirror_with_mirror_direct_only(js: JetStream) -> None:
    # mirror_direct makes a mirror answer its origin's direct gets, not its own
    # (issue 33): without allow_direct it does not allow direct gets.
    js.create_stream(name="ORIG", subjects=["o.>"], allow_direct=True, storage="memory")
    js.publish("o.1", b"x")
    mirror = js.create_stream(
        name="MIR", mirror=StreamSource(name="ORIG"), mirror_direct=True, storage="memory"
    )
    with pytest.raises(errors.DirectGetNotAllowedError):
        list(mirror.get_batch())
    assert [m.data for m in js.stream("ORIG").get_batch()] == [b"x"]


def test_stream_deleted_under_the_handle(js: JetStream) -> None:
    st = js.create_stream(name="GONE", subjects=["g.>"], allow_direct=True)
    js.delete_stream("GONE")
    with pytest.raises(errors.StreamNotFoundError):
        list(st.get_batch())


def test_bad_arguments_fail_before_anything_is_sent(stream: Stream) -> None:
    for kwargs in (
        {"batch": 0},
        {"batch": True},
        {"batch": "5"},
        {"max_bytes": 0},
        {"seq": 0},
        {"seq": 1, "start_time": datetime.now(UTC)},
    ):
        with pytest.raises(ValueError):
            stream.get_batch(**kwargs)
    with pytest.raises(TypeError):
        stream.get_batch(start_time="2024-01-01")  # type: ignore[arg-type]
    for subject in ("", "a b", 5):
        with pytest.raises(errors.BadSubjectError):
            stream.get_batch(subject=subject)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        stream.get_last_msgs_for([])
    with pytest.raises(ValueError):
        stream.get_last_msgs_for("s.*", up_to_seq=1, up_to_time=datetime.now(UTC))
    with pytest.raises(errors.BadSubjectError):
        stream.get_last_msgs_for(["s.*", "a b"])


# -- a server without batched gets ------------------------------------------------------
#
# nats-server 2.15 is the only server the suite has. What 2.10 answers is fixed by
# ADR-31 (a batched get brings the first message alone, without Nats-Num-Pending
# and without an EOB; a request it cannot read, such as start_time or
# multi_last alone, gets "408 Empty Request"), so a peer connection answers an
# API prefix of its own that way, over the real server.


def _info() -> StreamInfo:
    state = {"messages": 1, "bytes": 1, "first_seq": 1, "last_seq": 1, "consumer_count": 0}
    return StreamInfo.from_response({"config": {"name": "S"}, "state": state})


def _old_api(peer: Client, prefix: str, level: int | None) -> None:
    def answer(msg: Any) -> None:
        if msg.subject == f"{prefix}.INFO":
            api = b"" if level is None else b',"api":{"level":%d}' % level
            msg.respond(b'{"type":"io.nats.jetstream.api.v1.account_info_response"%s}' % api)
        elif b'"seq"' in msg.data:
            hdr = (
                b"NATS/1.0\r\nNats-Stream: S\r\nNats-Subject: s.0\r\nNats-Sequence: 1\r\n"
                b"Nats-Time-Stamp: 2024-01-01T00:00:00Z\r\n\r\n"
            )
            peer._publish_raw(commands.hpub(msg.reply.encode(), b"", hdr, b"old"), 3)
        else:
            hdr = b"NATS/1.0 408 Empty Request\r\n\r\n"
            peer._publish_raw(commands.hpub(msg.reply.encode(), b"", hdr, b""), 0)

    peer.subscribe(f"{prefix}.>", cb=answer)
    peer.flush()


@pytest.mark.parametrize("level", [None, 0])
def test_server_before_2_11_is_detected(nats_server: Any, nc: Client, level: int | None) -> None:
    with jsclient.connect(nats_server.url) as peer:
        _old_api(peer, "OLD", level)
        js = nc.jetstream(prefix="OLD", timeout=2.0)
        st = Stream(js, _info())
        for read in (
            lambda: list(st.get_batch()),
            lambda: list(st.get_batch(start_time=datetime.now(UTC))),
            lambda: list(st.get_last_msgs_for("s.*")),
        ):
            with pytest.raises(errors.BatchGetNotSupportedError) as exc:
                read()
            assert exc.value.api_level == 0
            assert "2.11" in str(exc.value)


def test_unexpected_answer_of_a_new_server_is_not_called_old(nats_server: Any, nc: Client) -> None:
    with jsclient.connect(nats_server.url) as peer:
        _old_api(peer, "ODD", 3)
        js = nc.jetstream(prefix="ODD", timeout=2.0)
        st = Stream(js, _info())
        with pytest.raises(errors.JetStreamError) as exc:
            list(st.get_batch())
        assert not isinstance(exc.value, errors.BatchGetNotSupportedError)
        with pytest.raises(errors.BadRequestError) as bad:
            list(st.get_last_msgs_for("s.*"))
        assert bad.value.code == 408
