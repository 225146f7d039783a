"""The I/O core under interrupts, reconnects, lost acks and slow callbacks.

Each test pins one defect the core once had (and must not have again):

- an interrupt raised into a thread that reads its reply lost frames or
  desynchronised the parser;
- ``publish_async`` done callbacks ran on the socket reader, so one that
  published synchronously stalled every subscription;
- the unsent tail of a half-written command went out after a reconnect;
- ``publish_async_complete()`` could wait forever for a lost ack;
- library threads waited for room in a full write queue;
- a slow ``error_cb`` held up the library's own reaction to a disconnect;
- bad connect options leaked threads;
- ``nc.drain()`` dropped what consume/messages/fetch had buffered.
"""

from __future__ import annotations

import random
import signal
import sys
import threading
import time
from typing import Any

import pytest
from _js import raise_in

import jsclient
from jsbench.faults import FaultProxy
from jsclient import errors
from jsclient.connection import CONNECTED, Connection, Options
from jsclient.msg import Msg
from jsclient.server import NatsServer


class Interrupt(Exception):
    """Raised into a thread from outside, as KeyboardInterrupt is."""


class _Target:
    """A thread that runs ``step`` until stopped and takes Interrupt anywhere in it.

    Interrupts are checked on a loop's backward jump, and CPython 3.13 places
    that jump outside a ``try`` written around the loop; so the loop runs in
    a function called from inside the ``try``, and ``interrupt()`` raises only
    while the thread is inside that call.
    """

    def __init__(self, name: str, step: Any, on_interrupt: Any) -> None:
        self.stop = threading.Event()
        self.handled = threading.Semaphore(0)
        self._armed = False
        self._step = step
        self._on_interrupt = on_interrupt
        self.thread = threading.Thread(target=self._run, name=name)
        self.thread.start()

    def _steps(self) -> None:
        self._armed = True
        while not self.stop.is_set():
            self._step()

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                self._steps()
            except Interrupt:
                self._armed = False
                self._on_interrupt()
                self.handled.release()

    def interrupt(self, wait: float = 10.0) -> bool:
        """Raise Interrupt into the thread once it is inside the loop; True when handled."""
        deadline = time.monotonic() + wait
        while not self._armed:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.0002)
        raise_in(self.thread, Interrupt)
        return self.handled.acquire(timeout=wait)

    def join(self) -> None:
        self.stop.set()
        self.thread.join(10)


def _feed(peer: jsclient.Client, n: int, stop: threading.Event) -> threading.Thread:
    def run() -> None:
        for i in range(n):
            if stop.is_set():
                return
            peer.publish("feed", b"%d" % i)
            if i % 50 == 0:
                peer.flush()
                time.sleep(0.0005)
        peer.flush()

    t = threading.Thread(target=run, name="feeder")
    t.start()
    return t


def _all_in_order(sub: jsclient.Subscription, n: int) -> list[int]:
    got = []
    while len(got) < n:
        got.append(int(sub.next_msg(timeout=10).data))
    return got


# -- interrupts --------------------------------------------------------------------


def test_async_interrupts_into_a_requester_lose_no_frame(
    nats_server: NatsServer, echo: jsclient.Client
) -> None:
    reported: list[BaseException] = []
    nc = jsclient.connect(nats_server.url, error_cb=reported.append)
    try:
        sub = nc.subscribe("feed")
        nc.flush()
        counts = {"ok": 0, "interrupted": 0}
        seq = [0]

        def request() -> None:
            seq[0] += 1
            body = b"%d" % seq[0]
            reply = nc.request("echo.a", body, timeout=3)
            assert reply.data == body  # never another request's reply
            counts["ok"] += 1

        def interrupted() -> None:
            counts["interrupted"] += 1

        req = _Target("requester", request, interrupted)
        n = 20_000
        feeder = _feed(echo, n, req.stop)
        rng = random.Random(7)
        deadline = time.monotonic() + 8
        sent = swallowed = 0
        # An exception raised into a thread can land in a finalizer that the
        # garbage collector runs in that thread; Python then reports it as
        # unraisable instead of raising it. Those are counted, not lost frames.
        unraisable: list[Any] = []
        old_hook = sys.unraisablehook
        sys.unraisablehook = lambda u: unraisable.append(u.exc_type)
        try:
            while time.monotonic() < deadline and sent < 1500:
                time.sleep(rng.uniform(0, 0.002))
                sent += 1
                if not req.interrupt(wait=3):
                    swallowed += 1
        finally:
            sys.unraisablehook = old_hook
        got = _all_in_order(sub, n)
        req.join()
        feeder.join(10)
        assert got == list(range(n))  # every frame of the other subscription, once, in order
        assert swallowed == unraisable.count(Interrupt) and swallowed < sent // 50
        assert counts["interrupted"] == sent - swallowed and counts["ok"] > 100
        assert nc.stats["reconnects"] == 0 and not reported  # never desynchronised
        assert nc.request("echo.b", b"after", timeout=2).data == b"after"
    finally:
        nc.close()


def test_signal_interrupts_of_the_main_thread_lose_no_frame(
    nats_server: NatsServer, echo: jsclient.Client
) -> None:
    assert threading.current_thread() is threading.main_thread()
    reported: list[BaseException] = []
    nc = jsclient.connect(nats_server.url, error_cb=reported.append)
    armed = False

    def on_alarm(signum: int, frame: Any) -> None:
        nonlocal armed
        if armed:
            armed = False
            raise Interrupt()

    # A handler that runs inside a garbage-collector callback or a finalizer
    # has its exception reported as unraisable by Python: counted, not lost.
    unraisable: list[Any] = []
    old_hook = sys.unraisablehook
    sys.unraisablehook = lambda u: unraisable.append(u.exc_type)
    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, 0.0003, 0.0015)
    stop = threading.Event()
    try:
        sub = nc.subscribe("feed")
        nc.flush()
        n = 20_000
        feeder = _feed(echo, n, stop)
        ok = interrupted = 0
        end = time.monotonic() + 6
        i = 0
        while time.monotonic() < end:
            i += 1
            body = b"%d" % i
            try:
                armed = True
                reply = nc.request("echo.a", body, timeout=3)
                armed = False
                assert reply.data == body
                ok += 1
            except Interrupt:
                interrupted += 1
        armed = False
        signal.setitimer(signal.ITIMER_REAL, 0, 0)
        got = _all_in_order(sub, n)
        feeder.join(10)
        assert interrupted > 100 and ok > 100, (interrupted, ok)
        assert set(unraisable) <= {Interrupt} and len(unraisable) < interrupted // 10
        assert got == list(range(n))
        assert nc.stats["reconnects"] == 0 and not reported
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0, 0)
        signal.signal(signal.SIGALRM, old)
        sys.unraisablehook = old_hook
        stop.set()
        nc.close()


def test_interrupted_publishers_never_send_bytes_twice(
    nats_server: NatsServer, echo: jsclient.Client
) -> None:
    # Publishing threads write the queue themselves once it passes write_at;
    # an interrupt between a send and the queue's advance used to resend bytes.
    reported: list[BaseException] = []
    nc = jsclient.connect(nats_server.url, error_cb=reported.append)
    seen: list[int] = []
    bad: list[bytes] = []

    def on_msg(m: Msg) -> None:
        k, _, rest = m.data.partition(b":")
        if rest != b"p" * 500:
            bad.append(m.data[:40])
        seen.append(int(k))

    echo.subscribe("pub.>", cb=on_msg, pending_msgs_limit=0, pending_bytes_limit=0)
    echo.flush()
    published: list[int] = []
    seq = [0]

    def publish() -> None:
        nc.publish("pub.x", b"%d:" % seq[0] + b"p" * 500)
        published.append(seq[0])
        seq[0] += 1

    def interrupted() -> None:
        seq[0] += 1  # that publish may or may not have been queued

    t = _Target("publisher", publish, interrupted)
    try:
        for _ in range(250):
            time.sleep(0.001)
            assert t.interrupt()
        t.join()
        nc.flush(timeout=10)
        echo.flush(timeout=10)
        deadline = time.monotonic() + 20
        while len(seen) < len(published) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)
        assert not bad
        # An interrupted publish may or may not have been queued; nothing is
        # sent twice, and every publish that returned arrived.
        assert len(seen) == len(set(seen)) and set(published) <= set(seen)
        assert nc.stats["reconnects"] == 0 and not reported
    finally:
        t.join()
        nc.close()


# -- callbacks ---------------------------------------------------------------------


def test_a_publish_async_callback_that_publishes_does_not_stall_subscriptions(
    nats_server: NatsServer, echo: jsclient.Client
) -> None:
    with FaultProxy("127.0.0.1", nats_server.port) as proxy:
        nc = jsclient.connect(proxy.url)
        try:
            js = nc.jetstream()
            js.create_stream(name="CB", subjects=["cb.>"])
            live = nc.subscribe("live")
            nc.flush()
            inner: list[Any] = []
            ran_on: list[str] = []

            def publish_more(fut: Any) -> None:
                ran_on.append(threading.current_thread().name)
                inner.append(js.publish("cb.inner", b"i", timeout=5))

            proxy.set_mode("stall")  # hold the ack, so the callback is added first
            fut = js.publish_async("cb.outer", b"o")
            fut.add_done_callback(publish_more)
            time.sleep(0.1)
            proxy.set_mode("pass")
            time.sleep(0.05)
            t0 = time.monotonic()
            echo.publish("live", b"now")
            echo.flush()
            assert live.next_msg(timeout=5).data == b"now"
            assert time.monotonic() - t0 < 1.0  # the reader was not held up
            deadline = time.monotonic() + 5
            while not inner and time.monotonic() < deadline:
                time.sleep(0.01)
            assert inner and inner[0].seq == 2 and fut.result(0).seq == 1
            assert ran_on == ["jsclient-callbacks"]
        finally:
            nc.close()


def test_a_slow_error_cb_does_not_hold_up_the_library(nats_server: NatsServer) -> None:
    gate = threading.Event()
    entered = threading.Event()

    def slow_error_cb(exc: BaseException) -> None:
        entered.set()
        gate.wait(10)

    nc = jsclient.connect(nats_server.url, error_cb=slow_error_cb, reconnect_wait=0.2)
    try:
        js = nc.jetstream(timeout=30)
        nc.subscribe("silent.>")  # answers nothing: acks stay pending
        slow = nc.subscribe("burst", pending_msgs_limit=1)
        nc.flush()
        for _ in range(5):
            nc.publish("burst", b"x")
        nc.flush()
        assert entered.wait(5)  # the callback thread is now busy with a SlowConsumerError
        futs = [js.publish_async("silent.x", b"%d" % i) for i in range(5)]
        nc.flush()
        t0 = time.monotonic()
        nats_server.kill()
        for f in futs:
            assert isinstance(f.exception(timeout=3), errors.PublishDisconnectedError)
        assert time.monotonic() - t0 < 2.0
        assert slow.dropped > 0
    finally:
        gate.set()
        nc.close()


# -- writes across a reconnect ----------------------------------------------------------


def test_a_half_written_command_goes_out_whole_after_a_reconnect(
    nats_server: NatsServer, echo: jsclient.Client
) -> None:
    size = 32 * 1024
    n = 600
    got: list[bytes] = []
    done = threading.Event()

    def on_msg(m: Msg) -> None:
        got.append(m.data)
        if m.data.startswith(b"%05d" % (n - 1)):
            done.set()

    echo.subscribe("cut", cb=on_msg)
    echo.flush()
    reported: list[BaseException] = []
    with FaultProxy("127.0.0.1", nats_server.port) as proxy:
        nc = jsclient.connect(
            proxy.url,
            reconnect_wait=0.1,
            pending_size=64 * 1024 * 1024,
            error_cb=reported.append,
        )
        try:
            proxy.set_mode("stall")
            for i in range(n):
                nc.publish("cut", b"%05d" % i + b"." * (size - 5))
            # The socket backs up: the flusher is blocked in the middle of a
            # batch of commands, and the cut falls inside one of them.
            time.sleep(1.0)
            proxy.drop_all()
            proxy.set_mode("pass")
            assert done.wait(20)
            nc.flush(timeout=10)
        finally:
            nc.close()
    seqs = [int(d[:5]) for d in got]
    assert all(len(d) == size and d[5:] == b"." * (size - 5) for d in got)  # whole
    assert len(seqs) == len(set(seqs)) and seqs == sorted(seqs)  # once, in order
    # What the old connection delivered (0..k-1), then everything the client
    # still held, from the half-written command on (c..n-1): only what sat in
    # the dead connection's kernel buffers (k..c-1) may be lost, as with any TCP.
    k = next((i for i, s in enumerate(seqs) if s != i), len(seqs))
    c = seqs[k] if k < len(seqs) else n
    assert seqs == [*range(k), *range(c, n)] and c < n
    assert nc.stats["reconnects"] == 1
    assert not [e for e in reported if "Protocol" in str(e) or "-ERR" in str(e)], reported


# -- acks ---------------------------------------------------------------------------


def test_publish_async_has_a_default_ack_timeout(nats_server: NatsServer) -> None:
    with jsclient.connect(nats_server.url) as nc:
        js = nc.jetstream(timeout=0.5, publish_async_max_pending=5, publish_async_stall_wait=3)
        js.create_stream(name="REAL", subjects=["real.>"])
        nc.subscribe("void.x")  # a subscriber that never answers: no 503, no ack
        nc.flush()
        t0 = time.monotonic()
        futs = [js.publish_async("void.x", b"%d" % i) for i in range(5)]
        # The window is full of lost acks; the next publish waits for room (up to
        # the stall wait) and gets it when they time out...
        late = js.publish_async("real.a", b"after", ack_timeout=5)
        box: list[BaseException | None] = []
        t = threading.Thread(target=lambda: box.append(js.publish_async_complete()))
        t.start()
        t.join(5)
        assert not t.is_alive(), "publish_async_complete() never returned"
        assert time.monotonic() - t0 < 3
        assert all(isinstance(f.exception(0), errors.TimeoutError) for f in futs)
        assert late.result(0).seq == 1  # ...and got it once the lost acks timed out
        assert js.publish_async_pending == 0
        never = nc.jetstream(publish_async_timeout=None)
        f = never.publish_async("void.x", b"no timeout")
        time.sleep(0.7)
        assert not f.done()
        with pytest.raises(errors.TimeoutError):
            never.publish_async_complete(timeout=0.2)


# -- library threads never wait for room --------------------------------------------


def test_the_readers_pong_never_waits_for_room() -> None:
    conn = Connection(None, Options(servers=["nats://127.0.0.1:1"], flush_timeout=3.0), {}, Msg)
    conn._set_status(CONNECTED)
    wq = conn.writer.wq
    wq.limit = 1024
    wq.push(b"x" * 1024)
    t0 = time.monotonic()
    conn.on_ping()  # on the reader thread in real life
    assert time.monotonic() - t0 < 0.5
    chunks, _ = wq.take()
    assert b"".join(chunks) == b"x" * 1024 + b"PONG\r\n"  # queued past the limit, last


def test_the_timer_threads_503_retry_never_waits_for_room(nats_server: NatsServer) -> None:
    nc = jsclient.connect(nats_server.url, pending_size=64 * 1024, flush_timeout=4.0)
    token = nc._conn.writer.token  # held by whoever writes to the socket
    held = False
    try:
        js = nc.jetstream()
        fut = js.publish_async("nostream.x", b"?")  # 503: retried from the timer thread
        time.sleep(0.1)  # the 503 has come; its retry is due 250 ms after it
        # As when the flusher is stuck in a send to a stalled socket: nobody
        # writes, and a filler fills the queue to pending_size and waits.
        assert token.acquire(timeout=2)
        held = True
        filled = threading.Event()

        def fill() -> None:
            try:
                for _ in range(10_000):
                    nc.publish("fill", b"f")  # to the brim: no retry fits any more
                    if nc.pending_data_size > 64 * 1024 - 20:
                        filled.set()
            except errors.Error:
                pass

        threading.Thread(target=fill, name="filler", daemon=True).start()
        assert filled.wait(2)
        probe = threading.Event()
        nc._scheduler.call_later(0.4, probe.set)
        t0 = time.monotonic()
        assert probe.wait(3), "the timer thread was blocked"
        assert time.monotonic() - t0 < 1.0  # the retry (due meanwhile) did not wait for room
        token.release()
        held = False
        assert isinstance(fut.exception(timeout=10), errors.NoStreamResponseError)
    finally:
        if held:
            token.release()
        nc.close()


# -- no thread leaks ---------------------------------------------------------------


@pytest.mark.parametrize(
    "servers", ["http://x", [], "nats://127.0.0.1:1", "nats://h:notaport", "tls://[::1"]
)
def test_bad_options_leak_no_thread(servers: Any) -> None:
    before = set(threading.enumerate())
    with pytest.raises((errors.Error, ValueError)):
        jsclient.connect(servers, connect_timeout=0.5)
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        new = [t.name for t in set(threading.enumerate()) - before if t.is_alive()]
        if not new:
            break
        time.sleep(0.02)
    assert not new


# -- drain ----------------------------------------------------------------------------


def _fill_stream(js: Any, n: int) -> None:
    js.create_stream(name="DR", subjects=["dr.>"])
    for i in range(n):
        js.publish_async("dr.x", b"%d" % i)
    js.publish_async_complete(timeout=10)


def _ack_pending(nats_server: NatsServer) -> tuple[int, int]:
    with jsclient.connect(nats_server.url) as other:
        info = other.jetstream().consumer("DR", "w").info()
        return info.num_ack_pending, info.delivered.consumer_seq


def test_drain_lets_consume_finish_its_buffer(nats_server: NatsServer) -> None:
    nc = jsclient.connect(nats_server.url)
    js = nc.jetstream()
    _fill_stream(js, 300)
    c = js.create_consumer("DR", durable_name="w", ack_policy="explicit", ack_wait=60)
    seen: list[int] = []

    def handle(m: Msg) -> None:
        time.sleep(0.002)
        seen.append(int(m.data))
        m.ack()

    cc = c.consume(handle, max_messages=200)
    time.sleep(0.2)  # a buffer fills while the callback works
    nc.drain(timeout=20)
    assert cc.closed
    pending, delivered = _ack_pending(nats_server)
    assert pending == 0 and len(seen) == delivered > 0  # every delivered message handled, acked
    assert seen == sorted(seen)


def test_drain_lets_a_reader_finish_messages_and_fetch(nats_server: NatsServer) -> None:
    nc = jsclient.connect(nats_server.url)
    js = nc.jetstream()
    _fill_stream(js, 300)
    c = js.create_consumer("DR", durable_name="w", ack_policy="explicit", ack_wait=60)
    seen: list[int] = []
    ended: list[str] = []
    started = threading.Event()

    def read_messages() -> None:
        it = c.messages(max_messages=100)
        for m in it:
            started.set()
            time.sleep(0.003)
            seen.append(int(m.data))
            m.ack()
        ended.append("messages")

    def read_fetch() -> None:
        for m in c.fetch(100, expires=10):
            time.sleep(0.003)
            seen.append(int(m.data))
            m.ack()
        ended.append("fetch")

    threads = [threading.Thread(target=f) for f in (read_messages, read_fetch)]
    for t in threads:
        t.start()
    assert started.wait(5)
    time.sleep(0.05)
    nc.drain(timeout=20)
    for t in threads:
        t.join(10)
    assert sorted(ended) == ["fetch", "messages"]  # both iterations ended cleanly
    pending, delivered = _ack_pending(nats_server)
    assert pending == 0 and len(seen) == delivered > 0
