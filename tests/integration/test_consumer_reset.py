"""A consumer reset by another process while it is being read (ADR-60, server 2.14).

``$JS.API.CONSUMER.RESET`` (``nats consumer reset``, ``Consumer.reset``) makes the
server forget the consumer's pending and redelivery state and start its delivery
sequence at 1 again, from the given stream sequence (none: just above the ack
floor). Pull requests already waiting stay. Nothing tells the reader; it sees
the consumer sequence start again at 1.

- consume()/messages() on a durable consumer take that as the consumer's own
  semantics: an earlier sequence redelivers (every message at least once), a
  later one skips what the server skipped; the pulls go on (no stall, no error).
- an ordered consumer (and so a KV watcher) sees the sequence go back, logs one
  WARNING and recreates itself after the last stream sequence it handed out:
  every message exactly once, in order.

The reset is made by a separate Python process (``python -c``) that finds the
consumer by name on the server, as the ``nats`` CLI would.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest
from _js import eventually, publish_stored

import jsclient
from jsclient.jetstream.context import JetStream
from jsclient.msg import Msg
from jsclient.server import NatsServer

_RESETTER = """
import sys, jsclient
url, stream, seq = sys.argv[1], sys.argv[2], int(sys.argv[3])
with jsclient.connect(url) as nc:
    js = nc.jetstream()
    names = list(js.stream(stream).consumer_names())
    assert len(names) == 1, names
    c = js.consumer(stream, names[0])
    got = c.reset(seq or None)
    print(names[0], got, c.cached_info.num_pending)
"""


def _reset_elsewhere(server: NatsServer, stream: str, seq: int | None) -> tuple[str, int, int]:
    """Reset the one consumer of ``stream`` from another process: (name, reset
    sequence, what the server then had pending)."""
    out = subprocess.run(
        [sys.executable, "-c", _RESETTER, server.url, stream, str(seq or 0)],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout.split()
    return out[0], int(out[1]), int(out[2])


@pytest.fixture
def js(nc: jsclient.Client) -> Iterator[JetStream]:
    js = nc.jetstream()
    js.create_stream(name="S", subjects=["s.>"])
    yield js


def _publish(nc: jsclient.Client, start: int, n: int) -> None:
    publish_stored(nc, "s.a", (b"%d" % i for i in range(start, start + n)))


def _sseq(m: Msg) -> int:
    return m.metadata.sequence.stream


def _warned(caplog: pytest.LogCaptureFixture, name: str, stream: str = "S") -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "jsclient"
        and r.levelno == logging.WARNING
        and "reset elsewhere" in r.getMessage()
        and name in r.getMessage()
        and f"on stream {stream} " in r.getMessage()
    ]


# Where the other process resets to, once 10 of the 40 first messages were read:
# back (replay), ahead (skip), none (just above the ack floor).
_TARGETS = {"back": 3, "ahead": 35, "none": None}


# -- durable pull consumer: consume() and messages() ------------------------------


@pytest.mark.parametrize("target", ["back", "none"])
def test_consume_keeps_pulling_after_a_reset_elsewhere(
    nc: jsclient.Client,
    js: JetStream,
    nats_server: NatsServer,
    caplog: pytest.LogCaptureFixture,
    target: str,
) -> None:
    caplog.set_level(logging.WARNING, logger="jsclient")
    c = js.create_consumer("S", durable_name="d", ack_policy="explicit")
    _publish(nc, 0, 40)
    lock = threading.Lock()
    seen: list[int] = []
    errs: list[BaseException] = []
    ten = threading.Event()

    def on_msg(m: Msg) -> None:
        with lock:
            seen.append(_sseq(m))
            n = len(seen)
        if n == 10:
            ten.set()
        m.ack()

    cc = c.consume(on_msg, max_messages=5, error_cb=errs.append)
    try:
        assert ten.wait(10)
        name, _seq, _pending = _reset_elsewhere(nats_server, "S", _TARGETS[target])
        assert name == "d"
        _publish(nc, 40, 10)

        def drained() -> bool:
            info = c.info()
            with lock:
                have = set(seen)
            return have >= set(range(1, 51)) and info.num_pending == 0 and not info.num_ack_pending

        eventually(drained, what="every message received and acked after the reset")
    finally:
        cc.stop()
    if target == "back":
        # Redelivered from 3 on: at least once each, some twice.
        assert seen.count(3) >= 2
    assert not [e for e in errs if not isinstance(e, jsclient.errors.NoHeartbeatError)]
    assert len(_warned(caplog, "consumer d ")) == 1, caplog.text


def test_messages_after_a_reset_back_redelivers(
    nc: jsclient.Client, js: JetStream, nats_server: NatsServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="jsclient")
    c = js.create_consumer("S", durable_name="d", ack_policy="explicit")
    _publish(nc, 0, 20)
    seen: list[int] = []
    with c.messages(max_messages=4) as it:
        for _ in range(10):
            m = it.next(timeout=5)
            seen.append(_sseq(m))
            m.ack()
        assert _reset_elsewhere(nats_server, "S", 5)[1] == 5
        _publish(nc, 20, 5)
        deadline = time.monotonic() + 10
        while set(seen) != set(range(1, 26)) or seen.count(5) < 2:
            assert time.monotonic() < deadline, f"stalled with {sorted(set(seen))}"
            m = it.next(timeout=5)
            seen.append(_sseq(m))
            m.ack()
    # In order from where the server was reset to.
    assert seen[seen.index(5, 5) :][:3] == [5, 6, 7]
    assert len(_warned(caplog, "consumer d ")) == 1, caplog.text


def test_messages_after_a_reset_ahead_gets_what_the_server_has_pending(
    nc: jsclient.Client, js: JetStream, nats_server: NatsServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="jsclient")
    c = js.create_consumer("S", durable_name="d", ack_policy="explicit")
    _publish(nc, 0, 40)
    got: list[Msg] = []
    with c.messages(max_messages=4) as it:
        for _ in range(5):
            got.append(it.next(timeout=5))
        _name, seq, pending = _reset_elsewhere(nats_server, "S", 30)
        assert (seq, pending) == (30, 11)
        while len(got) < 5 + 11 or got[-1].metadata.sequence.consumer != 11:
            got.append(it.next(timeout=5))
            assert len(got) < 40
        for m in got:
            m.ack()
    # What came before the reset (delivered by then) and then exactly what the
    # server said was pending: stream sequences 30..40, consumer sequences 1..11.
    restart = max(i for i, m in enumerate(got) if m.metadata.sequence.consumer == 1)
    after = got[restart:]
    assert [_sseq(m) for m in after] == list(range(30, 41))
    assert [_sseq(m) for m in got[:restart]] == list(range(1, restart + 1))
    assert c.info().num_pending == 0
    assert len(_warned(caplog, "consumer d ")) == 1, caplog.text


def test_an_idle_consume_hears_of_a_reset_from_the_heartbeat(
    nc: jsclient.Client, js: JetStream, nats_server: NatsServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Caught up and idle: nothing is redelivered (all acked), yet the next idle
    heartbeat says the server's last consumer sequence is 0; new messages follow."""
    caplog.set_level(logging.WARNING, logger="jsclient")
    c = js.create_consumer("S", durable_name="d", ack_policy="explicit")
    _publish(nc, 0, 10)
    with c.messages(max_messages=4, expires=2.0, heartbeat=0.5) as it:
        for _ in range(10):
            it.next(timeout=5).ack_sync()
        assert _reset_elsewhere(nats_server, "S", None)[1:] == (11, 0)
        deadline = time.monotonic() + 8
        while not _warned(caplog, "consumer d "):
            assert time.monotonic() < deadline, "no warning"
            with pytest.raises(jsclient.errors.TimeoutError):
                it.next(timeout=0.5)  # the iterator's thread reads the heartbeats
        _publish(nc, 10, 3)
        got = [it.next(timeout=5) for _ in range(3)]
    assert [(_sseq(m), m.metadata.sequence.consumer) for m in got] == [(11, 1), (12, 2), (13, 3)]
    assert len(_warned(caplog, "consumer d ")) == 1, caplog.text


# -- ordered consumer: exactly once, in order -------------------------------------


@pytest.mark.parametrize("target", list(_TARGETS))
@pytest.mark.parametrize("how", ["consume", "messages", "fetch"])
def test_ordered_consumer_recreates_itself_after_a_reset_elsewhere(
    nc: jsclient.Client,
    js: JetStream,
    nats_server: NatsServer,
    caplog: pytest.LogCaptureFixture,
    how: str,
    target: str,
) -> None:
    caplog.set_level(logging.WARNING, logger="jsclient")
    _publish(nc, 0, 40)
    oc = js.ordered_consumer("S")
    seen: list[int] = []
    lock = threading.Lock()
    ten = threading.Event()
    first = oc.name

    def take(m: Msg) -> None:
        with lock:
            seen.append(_sseq(m))
            if len(seen) == 10:
                ten.set()

    def slow_take(m: Msg) -> None:
        take(m)
        time.sleep(0.01)  # the reset lands mid-stream

    def done() -> bool:
        with lock:
            return len(seen) >= 50

    if how == "consume":
        cc = oc.consume(slow_take, max_messages=5)
        try:
            assert ten.wait(10)
            assert _reset_elsewhere(nats_server, "S", _TARGETS[target])[0] == first
            _publish(nc, 40, 10)
            eventually(done, what="50 messages")
        finally:
            cc.stop()
    elif how == "messages":
        with oc.messages(max_messages=5) as it:
            for _ in range(10):
                take(it.next(timeout=5))
            assert _reset_elsewhere(nats_server, "S", _TARGETS[target])[0] == first
            _publish(nc, 40, 10)
            deadline = time.monotonic() + 10
            while not done():
                assert time.monotonic() < deadline, f"stalled at {seen[-1]}"
                take(it.next(timeout=5))
    else:
        for m in oc.fetch(5, expires=2):
            take(m)
        for m in oc.fetch(5, expires=2):
            take(m)
        assert _reset_elsewhere(nats_server, "S", _TARGETS[target])[0] == first
        _publish(nc, 40, 10)
        deadline = time.monotonic() + 10
        while not done():
            assert time.monotonic() < deadline, f"stalled at {seen[-1]}"
            for m in oc.fetch(10, expires=1):
                take(m)
    time.sleep(0.2)  # nothing more (no duplicate) trails in
    assert seen == list(range(1, 51))
    assert oc.name != first
    # The server resends from where it was reset (or above what it last sent):
    # the consumer sequence starts again at 1 and the client says so, once.
    assert len(_warned(caplog, first)) == 1, caplog.text


# -- KV watcher ------------------------------------------------------------------


@pytest.mark.parametrize("target", list(_TARGETS))
def test_kv_watcher_after_a_reset_elsewhere(
    nc: jsclient.Client, nats_server: NatsServer, caplog: pytest.LogCaptureFixture, target: str
) -> None:
    caplog.set_level(logging.WARNING, logger="jsclient")
    js = nc.jetstream()
    kv = js.create_key_value(bucket="B", history=10)
    for i in range(20):
        kv.put(f"k{i % 4}", b"%d" % i)
    # include_history: deliver policy all, so the other side may reset it to
    # any sequence (a last-per-subject consumer takes only a reset without one).
    with kv.watch(">", include_history=True) as w:
        revs: list[int] = []
        while True:
            e = w.next(timeout=5)
            if e is None:
                break
            revs.append(e.revision)
        assert revs == list(range(1, 21))
        seq = {"back": 3, "ahead": 25, "none": None}[target]
        name, _seq, _pending = _reset_elsewhere(nats_server, "KV_B", seq)
        for i in range(20, 30):
            kv.put(f"k{i % 4}", b"%d" % i)
        deadline = time.monotonic() + 10
        while len(revs) < 30:
            assert time.monotonic() < deadline, f"stalled at {revs[-1]}"
            e = w.next(timeout=5)
            assert e is not None
            revs.append(e.revision)
        with pytest.raises(jsclient.errors.TimeoutError):
            w.next(timeout=0.3)
    assert revs == list(range(1, 31))
    assert len(_warned(caplog, name, "KV_B")) == 1, caplog.text


def test_default_kv_watcher_after_a_reset_without_a_sequence(
    nc: jsclient.Client, nats_server: NatsServer
) -> None:
    js = nc.jetstream()
    kv = js.create_key_value(bucket="B", history=5)
    for i in range(8):
        kv.put(f"k{i % 4}", b"%d" % i)
    with kv.watch(">") as w:
        got = []
        while (e := w.next(timeout=5)) is not None:
            got.append((e.key, e.revision))
        assert got == [("k0", 5), ("k1", 6), ("k2", 7), ("k3", 8)]
        _reset_elsewhere(nats_server, "KV_B", None)
        for i in range(8, 14):
            kv.put(f"k{i % 4}", b"%d" % i)
        for rev in range(9, 15):
            e = w.next(timeout=5)
            assert e is not None and e.revision == rev
        with pytest.raises(jsclient.errors.TimeoutError):
            w.next(timeout=0.3)
