"""What jsclient says about a publish is true (``jetstream/publish/engine.py``).

Each scenario publishes numbered messages through ``js.publish_async`` or the
managed ``Publisher`` while the connection is cut, forced to reconnect, or
the server is killed and restarted, and then reads the stream back. The
oracle is the stream itself:

- a publish reported ``PublishDisconnectedError`` may be stored, but only by
  the connection it was written to, before it failed: never with a stream
  timestamp after the moment it failed (that would be a frame the library
  failed and then sent anyway, which a retry without a msg id duplicates);
- a publish reported ``PublishAckTimeoutError(sent=False)`` is never stored;
- an acked publish is stored, once.
"""

from __future__ import annotations

import gc
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import pytest
from _js import eventually, wait_for
from _relay import Relay

import jsclient
from jsclient import errors
from jsclient.client import Client
from jsclient.jetstream.context import JetStream
from jsclient.jetstream.publish.publisher import Flight, Publisher, PublisherListener, RetryConfig
from jsclient.server import NatsServer

pytestmark = pytest.mark.timeout(120)


def _stream(nc: Client, **js_options: Any) -> JetStream:
    js = nc.jetstream(timeout=30, publish_async_stall_wait=30, **js_options)
    js.create_stream(name="F", subjects=["f.>"], storage="file")
    return js


def stored(js: JetStream) -> dict[int, int]:
    """Every message of stream F: its payload (a number) -> its stream timestamp
    (ns since the epoch, the server's clock, which is this machine's)."""
    n = js.stream("F").info().state.messages
    c = js.create_consumer("F", ack_policy="none", inactive_threshold=60)
    got: dict[int, int] = {}
    deadline = time.monotonic() + 60
    while len(got) < n and time.monotonic() < deadline:
        for m in c.fetch(5000, expires=2):
            k = int(m.data)
            assert k not in got, f"message {k} stored twice"
            got[k] = m.metadata.timestamp_ns
    assert len(got) == n
    return got


class Outcomes:
    """When each publish failed (wall clock, ns) and with what."""

    def __init__(self) -> None:
        self.failed_at: dict[int, int] = {}
        self.errors: dict[int, BaseException] = {}
        self.lock = threading.Lock()

    def fail(self, i: int, exc: BaseException) -> None:
        now = time.time_ns()
        with self.lock:
            self.failed_at[i] = now
            self.errors[i] = exc

    def watch(self, i: int, fut: Future[Any]) -> None:
        def done(f: Future[Any]) -> None:
            exc = f.exception()
            if exc is not None:
                self.fail(i, exc)

        fut.add_done_callback(done)

    def check(self, got: dict[int, int], kinds: tuple[type[BaseException], ...]) -> None:
        """Every failure is of ``kinds``; none was stored after it failed; a publish
        that says it was never sent is not stored at all."""
        for i, exc in self.errors.items():
            assert isinstance(exc, kinds), (i, exc)
            if isinstance(exc, errors.PublishAckTimeoutError) and not exc.sent:
                assert i not in got, f"publish {i} failed as never sent, and is stored"
            elif i in got:
                assert got[i] < self.failed_at[i], (
                    f"publish {i} failed ({exc!r}) and was stored "
                    f"{(got[i] - self.failed_at[i]) / 1e6:.1f} ms later"
                )


def _force_reconnects(nc: Client, n: int, every: int, publish: Callable[[int], None]) -> None:
    """Publish ``n`` messages, forcing a reconnect every ``every`` of them (4 in all),
    each on a live connection; publishing goes on right after each call."""
    forced = 0
    for i in range(n):
        publish(i)
        if (i + 1) % every == 0 and forced < 4:
            assert wait_for(lambda: nc.is_connected, 10)
            nc.force_reconnect()
            forced += 1
    assert wait_for(lambda: nc.stats["reconnects"] == 4, 10)


def test_forced_reconnects_during_publish_async_fail_nothing(
    nats_server: NatsServer, nc: Client
) -> None:
    js = _stream(nc)
    out = Outcomes()
    futs: list[Future[Any]] = []

    def publish(i: int) -> None:
        f = js.publish_async("f.x", b"%d" % i)
        out.watch(i, f)
        futs.append(f)

    _force_reconnects(nc, 30_000, 6_000, publish)
    js.publish_async_complete(timeout=60)
    got = stored(js)
    assert wait_for(lambda: len(out.errors) == sum(f.exception() is not None for f in futs))
    out.check(got, (errors.PublishDisconnectedError,))
    for i, f in enumerate(futs):
        if f.exception() is None:
            assert f.result().seq and i in got
    # Each forced reconnect let the acks of what was written come back first.
    assert len(out.errors) <= 30, sorted(out.errors)[:20]


class _Recorder(PublisherListener):
    def __init__(self, out: Outcomes) -> None:
        self.out = out
        self.n_acked = 0

    def acked(self, flight: Flight) -> None:
        self.n_acked += 1

    def completed_exceptionally(self, flight: Flight) -> None:
        assert flight.error is not None
        self.out.fail(int(flight.body), flight.error)

    def timeout(self, flight: Flight) -> None:
        assert flight.error is not None
        self.out.fail(int(flight.body), flight.error)


def test_forced_reconnects_during_a_publisher_run_fail_nothing(
    nats_server: NatsServer, nc: Client
) -> None:
    js = _stream(nc)
    out = Outcomes()
    rec = _Recorder(out)
    # No retries: a failure shows as a failed flight.
    with Publisher(js, wait_timeout=30.0, max_in_flight=200, listener=rec) as pub:
        _force_reconnects(nc, 12_000, 2_400, lambda i: pub.publish_async("f.x", b"%d" % i))
    got = stored(js)
    out.check(got, (errors.PublishDisconnectedError,))
    assert pub.acked_count + len(out.errors) == 12_000
    assert len(got) >= pub.acked_count
    assert len(out.errors) <= 30, sorted(out.errors)[:20]


def test_kill9_and_restart_during_publish_async(nats_server: NatsServer, nc: Client) -> None:
    js = _stream(nc)
    out = Outcomes()
    futs: list[Future[Any]] = []
    dead: list[int] = []

    def kill() -> None:
        assert wait_for(lambda: len(futs) >= 4_000, 30)
        nats_server.kill()
        dead.append(time.time_ns())  # from here on only the restarted server stores
        time.sleep(0.5)
        nats_server.start()

    killer = threading.Thread(target=kill, name="test-killer")
    killer.start()
    try:
        for i in range(16_000):
            f = js.publish_async("f.x", b"%d" % i)
            out.watch(i, f)
            futs.append(f)
            if i % 500 == 0:
                time.sleep(0.002)  # spread the publishes over the kill
    finally:
        killer.join(30)
    js.publish_async_complete(timeout=60)
    got = stored(js)
    assert wait_for(lambda: len(out.errors) == sum(f.exception() is not None for f in futs))
    out.check(got, (errors.PublishDisconnectedError,))
    # What the dead server had not answered: failed if it was written to it,
    # else sent to the restarted server and acked (none of it stored twice).
    restarted = [i for i, ts in got.items() if ts > dead[0]]
    assert restarted, "nothing was published after the restart"
    assert not set(restarted) & set(out.errors)


def test_an_outage_longer_than_the_ack_timeout_withdraws_the_buffered_publishes(
    nats_server: NatsServer, nc: Client
) -> None:
    js = _stream(nc, publish_async_timeout=0.5)
    nats_server.stop(keep_store=True)  # same port and store on start()
    assert wait_for(lambda: not nc.is_connected)
    out = Outcomes()
    futs = [js.publish_async("f.x", b"%d" % i) for i in range(3_000)]
    futs += [js.publish_async("f.x", b"%d" % i, ack_timeout=0.6) for i in range(3_000, 4_000)]
    for i, f in enumerate(futs):
        out.watch(i, f)
    rec = _Recorder(out)
    with Publisher(js, wait_timeout=0.5, max_in_flight=2_000, listener=rec) as pub:
        for i in range(4_000, 6_000):
            pub.publish_async("f.x", b"%d" % i)
        assert wait_for(lambda: len(out.errors) == 6_000, 20)
    assert all(isinstance(e, errors.PublishAckTimeoutError) for e in out.errors.values())
    assert not any(e.sent for e in out.errors.values())  # type: ignore[attr-defined]
    assert "never sent" in str(out.errors[0]) and "not stored" in str(out.errors[5_000])
    assert pub.timed_out_count == 2_000
    nats_server.start()
    assert wait_for(lambda: nc.is_connected, 10)
    nc.flush(timeout=10)
    ack = js.publish("f.x", b"-1")  # anything buffered was sent before this
    assert ack.seq == 1
    out.check(stored(js), (errors.PublishAckTimeoutError,))
    assert nc._conn.writer.held == 0 and nc._conn.pending_bytes() == 0


@pytest.mark.parametrize("run", range(0, 10, 3))  # the drop starts at 1,000 ... 1,900
def test_a_relay_that_drops_the_writes_then_cuts(nats_server: NatsServer, run: int) -> None:
    # The relay swallows what the client writes for a while (the acks of what
    # came through before still come back), then cuts the connection: what it
    # swallowed fails as disconnected and is not stored; the rest is acked.
    relay = Relay(nats_server.url)
    try:
        with jsclient.connect(relay.url, reconnect_wait=0.05) as nc:
            js = _stream(nc)
            out = Outcomes()
            futs: list[Future[Any]] = []
            for i in range(3_000):
                f = js.publish_async("f.x", b"%d" % i)
                out.watch(i, f)
                futs.append(f)
                if i == 1_000 + 100 * run:
                    relay.drop = True
                if i == 2_000:
                    time.sleep(0.3)  # the acks of what went through arrive
                    relay.cut()
                    relay.drop = False
            js.publish_async_complete(timeout=60)
            got = stored(js)
            assert wait_for(lambda: len(out.errors) == sum(f.exception() is not None for f in futs))
            assert out.errors, "nothing was swallowed"
            out.check(got, (errors.PublishDisconnectedError,))
            assert not set(got) & set(out.errors), "a failed publish is stored"
            assert set(got) | set(out.errors) == set(range(3_000))
    finally:
        relay.close()


# -- keep-alive: on the library's own timer -----------------------------------


def test_keepalive_does_not_wait_behind_a_slow_done_callback(nc: Client) -> None:
    js = _stream(nc)
    c = js.create_consumer("F", durable_name="slow", ack_policy="explicit", ack_wait=2.0)
    deliveries: list[int] = []
    done = threading.Event()

    def handler(msg: Any) -> None:
        deliveries.append(msg.metadata.num_delivered)
        time.sleep(5.0)  # longer than ack_wait: only the keep-alive saves it
        msg.ack()
        done.set()

    cc = c.consume(handler, keepalive=True)
    try:
        # A done callback that sleeps holds the client's callback thread.
        f = js.publish_async("f.x", b"1")
        f.add_done_callback(lambda _: time.sleep(4.0))
        assert done.wait(15)
        time.sleep(0.5)
    finally:
        cc.stop()
    assert deliveries == [1]
    info = c.info()
    assert info.num_redelivered == 0 and info.num_ack_pending == 0


def test_stopped_keepalive_consumes_leave_nothing_alive(nc: Client) -> None:
    js = _stream(nc)
    for i in range(3_000):
        js.publish_async("f.x", b"%d" % i)
    js.publish_async_complete(timeout=30)
    c = js.create_consumer(
        "F", durable_name="kept", ack_policy="explicit", ack_wait=3600.0, max_ack_pending=-1
    )
    refs = []

    def take(msg: Any, got: threading.Event) -> None:
        msg.ack()
        got.set()

    # Each stop drops up to 19 buffered messages (redelivered after ack_wait, as
    # are those its pull request still takes).
    for _ in range(50):
        got = threading.Event()
        cc = c.consume(lambda m, got=got: take(m, got), keepalive=True, max_messages=20)
        assert got.wait(10)
        cc.stop()
        assert cc.wait(5)
        refs.append(weakref.ref(cc))
        del cc
    gc.collect()
    eventually(lambda: not any(r() is not None for r in refs), what="the contexts to be freed")
    live = [h.fn for _, _, h in list(nc._timers._heap) if not h.cancelled]
    assert len(live) <= 3, live  # the ping, the publish sweep: no keep-alive timer left


def test_a_publisher_rides_out_a_kill9(nats_server: NatsServer, nc: Client) -> None:
    js = _stream(nc)
    rec = _Recorder(Outcomes())
    # The default stall_wait (60 s): feeding it through the outage waits.
    pub = Publisher(js, retry=RetryConfig(attempts=10), listener=rec).start()
    try:
        for i in range(20_000):
            pub.publish_async("f.x", b"%d" % i)
            if i == 5_000:
                nats_server.kill()
                threading.Timer(1.0, nats_server.start).start()
        pub.drain(timeout=60)
    finally:
        pub.stop()
    assert rec.out.errors == {}
    assert pub.acked_count == rec.n_acked == 20_000 and pub.failed_count == 0
    got = stored(js)  # each at most once (Nats-Msg-Id)
    assert len(got) >= 19_000  # a killed server may lose what it had not flushed
