"""Core publish/subscribe against a real nats-server."""

from __future__ import annotations

import builtins
import threading
import time
from typing import TYPE_CHECKING, Any

import nats.errors
import pytest

import jsclient
from jsclient import errors
from jsclient.msg import Msg
from jsclient.server import NatsServer

if TYPE_CHECKING:
    from conftest import CoreConnect, CoreEvents, CoreWaitFor

pytestmark = pytest.mark.timeout(30)


def _collect(sub: jsclient.Subscription, out: list[Msg], done: threading.Event) -> None:
    for msg in sub:
        out.append(msg)
    done.set()


# -- basics -------------------------------------------------------------------


def test_connect_properties(nats_server: NatsServer, core_connect: CoreConnect) -> None:
    nc = core_connect(nats_server.url, name="props")
    assert nc.is_connected and not nc.is_closed
    assert nc.connected_url == nats_server.url
    assert nc.server_info["server_name"] == nats_server.server_name
    assert nc.max_payload == nats_server.info["max_payload"]
    nc.close()
    assert nc.is_closed and not nc.is_connected
    assert nc.connected_url is None


def test_publish_and_next_msg(nats_server: NatsServer, core_connect: CoreConnect) -> None:
    nc = core_connect(nats_server.url)
    sub = nc.subscribe("greet.one")
    nc.publish("greet.one", b"hello")
    nc.publish("greet.one", b"again", reply="answer.here")
    first = sub.next_msg(timeout=2)
    assert (first.subject, first.reply, first.data, first.headers) == (
        "greet.one",
        "",
        b"hello",
        None,
    )
    assert first.size == len("greet.one") + 5
    second = sub.next_msg(timeout=2)
    assert (second.data, second.reply) == (b"again", "answer.here")
    assert sub.delivered == 2


def test_next_msg_timeout_is_every_timeout_error(
    nats_server: NatsServer, core_connect: CoreConnect
) -> None:
    nc = core_connect(nats_server.url)
    sub = nc.subscribe("nothing.here")
    start = time.monotonic()
    with pytest.raises(errors.TimeoutError) as info:
        sub.next_msg(timeout=0.2)
    assert 0.15 <= time.monotonic() - start < 1.5
    assert isinstance(info.value, builtins.TimeoutError)
    assert isinstance(info.value, nats.errors.TimeoutError)
    # A message arriving later is still delivered.
    nc.publish("nothing.here", b"late")
    assert sub.next_msg(timeout=2).data == b"late"


def test_iteration_ends_on_unsubscribe(
    nats_server: NatsServer, core_connect: CoreConnect, core_wait_for: CoreWaitFor
) -> None:
    nc = core_connect(nats_server.url)
    sub = nc.subscribe("iter.unsub")
    got: list[Msg] = []
    done = threading.Event()
    t = threading.Thread(target=_collect, args=(sub, got, done), daemon=True)
    t.start()
    for i in range(3):
        nc.publish("iter.unsub", str(i).encode())
    nc.flush()
    core_wait_for(lambda: len(got) == 3)
    sub.unsubscribe()
    assert done.wait(5), "iteration did not end on unsubscribe"
    assert [m.data for m in got] == [b"0", b"1", b"2"]
    assert sub.is_closed
    # After the unsubscribe nothing more arrives; the subscription is gone.
    nc.publish("iter.unsub", b"more")
    nc.flush()
    assert sub.sid not in nc._subs


def test_iteration_ends_on_close(
    nats_server: NatsServer, core_connect: CoreConnect, core_wait_for: CoreWaitFor
) -> None:
    nc = core_connect(nats_server.url)
    sub = nc.subscribe("iter.close")
    got: list[Msg] = []
    done = threading.Event()
    t = threading.Thread(target=_collect, args=(sub, got, done), daemon=True)
    t.start()
    nc.publish("iter.close", b"x")
    nc.flush()
    core_wait_for(lambda: len(got) == 1)
    nc.close()
    assert done.wait(5), "iteration did not end on close"
    t.join(5)
    assert not t.is_alive()


def test_callback_runs_off_the_reader_thread(
    nats_server: NatsServer, core_connect: CoreConnect
) -> None:
    nc = core_connect(nats_server.url)
    seen: list[tuple[bytes, str]] = []
    done = threading.Event()

    def cb(msg: Msg) -> None:
        seen.append((msg.data, threading.current_thread().name))
        if len(seen) == 5:
            done.set()

    sub = nc.subscribe("cb.subject", cb=cb)
    for i in range(5):
        nc.publish("cb.subject", str(i).encode())
    assert done.wait(5)
    assert [d for d, _ in seen] == [b"0", b"1", b"2", b"3", b"4"]
    names = {name for _, name in seen}
    assert "jsclient-reader" not in names
    assert threading.main_thread().name not in names
    # next_msg is not for callback subscriptions.
    with pytest.raises(errors.BadSubscriptionError):
        sub.next_msg(timeout=0.1)


def test_callback_exception_goes_to_error_cb_and_delivery_continues(
    nats_server: NatsServer,
    core_connect: CoreConnect,
    core_events: CoreEvents,
    core_wait_for: CoreWaitFor,
) -> None:
    nc = core_connect(nats_server.url, error_cb=core_events.error_cb)
    seen: list[bytes] = []

    def cb(msg: Msg) -> None:
        if msg.data == b"boom":
            raise ValueError("boom")
        seen.append(msg.data)

    nc.subscribe("cb.raise", cb=cb)
    for data in (b"a", b"boom", b"b"):
        nc.publish("cb.raise", data)
    core_wait_for(lambda: seen == [b"a", b"b"])
    core_wait_for(lambda: core_events.errors_of(ValueError))
    assert core_events.threads["error"] != "jsclient-reader"


def test_queue_group_shares_messages(
    nats_server: NatsServer, core_connect: CoreConnect, core_wait_for: CoreWaitFor
) -> None:
    nc = core_connect(nats_server.url)
    pub = core_connect(nats_server.url)
    counts = {"a": 0, "b": 0}
    lock = threading.Lock()

    def make_cb(name: str):  # type: ignore[no-untyped-def]
        def cb(msg: Msg) -> None:
            with lock:
                counts[name] += 1

        return cb

    nc.subscribe("work.q", "workers", cb=make_cb("a"))
    nc.subscribe("work.q", queue="workers", cb=make_cb("b"))
    nc.flush()
    n = 200
    for i in range(n):
        pub.publish("work.q", str(i).encode())
    pub.flush()
    core_wait_for(lambda: counts["a"] + counts["b"] == n)
    time.sleep(0.1)
    assert counts["a"] + counts["b"] == n
    assert counts["a"] > 0 and counts["b"] > 0


def test_wildcard_subjects(nats_server: NatsServer, core_connect: CoreConnect) -> None:
    nc = core_connect(nats_server.url)
    star = nc.subscribe("orders.*")
    full = nc.subscribe("orders.>")
    mid = nc.subscribe("orders.*.shipped")
    for subject in ("orders.new", "orders.eu.shipped", "orders.eu.x.y", "other.new", "orders"):
        nc.publish(subject, subject.encode())
    nc.flush()

    def drain(sub: jsclient.Subscription) -> list[str]:
        out = []
        while True:
            try:
                out.append(sub.next_msg(timeout=0.2).subject)
            except errors.TimeoutError:
                return out

    assert drain(star) == ["orders.new"]
    assert drain(full) == ["orders.new", "orders.eu.shipped", "orders.eu.x.y"]
    assert drain(mid) == ["orders.eu.shipped"]


def test_subscribe_max_msgs_auto_unsubscribes(
    nats_server: NatsServer, core_connect: CoreConnect
) -> None:
    nc = core_connect(nats_server.url)
    sub = nc.subscribe("auto.max", max_msgs=3)
    for i in range(6):
        nc.publish("auto.max", str(i).encode())
    nc.flush()
    got = [m.data for m in sub]  # ends after the third message
    assert got == [b"0", b"1", b"2"]
    assert sub.is_closed
    assert sub.sid not in nc._subs
    with pytest.raises(errors.BadSubscriptionError):
        sub.next_msg(timeout=0.1)


def test_unsubscribe_with_limit(nats_server: NatsServer, core_connect: CoreConnect) -> None:
    nc = core_connect(nats_server.url)
    sub = nc.subscribe("auto.limit")
    nc.publish("auto.limit", b"0")
    nc.flush()
    assert sub.next_msg(timeout=2).data == b"0"
    sub.unsubscribe(limit=3)  # two more, then done
    for i in range(1, 6):
        nc.publish("auto.limit", str(i).encode())
    nc.flush()
    assert [m.data for m in sub] == [b"1", b"2"]
    assert sub.is_closed
    assert sub.delivered == 3


def test_unsubscribe_with_limit_on_callback_sub(
    nats_server: NatsServer, core_connect: CoreConnect, core_wait_for: CoreWaitFor
) -> None:
    nc = core_connect(nats_server.url)
    seen: list[bytes] = []
    sub = nc.subscribe("auto.cb", cb=lambda m: seen.append(m.data))
    sub.unsubscribe(limit=3)
    for i in range(6):
        nc.publish("auto.cb", str(i).encode())
    nc.flush()
    core_wait_for(lambda: len(seen) == 3)
    time.sleep(0.1)
    assert seen == [b"0", b"1", b"2"]
    assert sub.is_closed


# -- headers and payloads ----------------------------------------------------


def test_headers_single_and_multi_valued(
    nats_server: NatsServer, core_connect: CoreConnect
) -> None:
    nc = core_connect(nats_server.url)
    sub = nc.subscribe("hdr.test")
    nc.publish(
        "hdr.test",
        b"body",
        headers={"X-One": "1", "X-Multi": ["a", "b", "c"], "Nats-Msg-Id": "id-7"},
    )
    msg = sub.next_msg(timeout=2)
    assert msg.data == b"body"
    assert msg.headers == {"X-One": "1", "X-Multi": "a", "Nats-Msg-Id": "id-7"}
    assert msg.header_values("X-Multi") == ["a", "b", "c"]
    assert msg.header_values("X-One") == ["1"]
    assert msg.header_values("Missing") == []
    assert msg.status is None
    raw = msg.raw_headers
    assert raw is not None and raw.startswith(b"NATS/1.0\r\n")
    assert msg.size == len("hdr.test") + len(raw) + 4


def test_headers_with_reply_and_empty_payload(
    nats_server: NatsServer, core_connect: CoreConnect
) -> None:
    nc = core_connect(nats_server.url)
    sub = nc.subscribe("hdr.empty")
    nc.publish("hdr.empty", headers={"K": "v"}, reply="rep.to")
    msg = sub.next_msg(timeout=2)
    assert (msg.data, msg.reply, msg.headers) == (b"", "rep.to", {"K": "v"})


def test_empty_payload(nats_server: NatsServer, core_connect: CoreConnect) -> None:
    nc = core_connect(nats_server.url)
    sub = nc.subscribe("empty.payload")
    nc.publish("empty.payload")
    nc.publish("empty.payload", b"")
    for _ in range(2):
        msg = sub.next_msg(timeout=2)
        assert msg.data == b"" and msg.headers is None


def test_binary_payload_with_crlf_inside(
    nats_server: NatsServer, core_connect: CoreConnect
) -> None:
    nc = core_connect(nats_server.url)
    sub = nc.subscribe("bin.data")
    payload = bytes(range(256)) + b"\r\nMSG fake 1 2\r\nxx\r\n"
    nc.publish("bin.data", payload)
    assert sub.next_msg(timeout=2).data == payload


def test_large_payload_near_max_payload(nats_server: NatsServer, core_connect: CoreConnect) -> None:
    nc = core_connect(nats_server.url)
    sub = nc.subscribe("big.payload")
    limit = nc.max_payload
    big = bytes(i % 251 for i in range(limit))
    nc.publish("big.payload", big)
    hdrs = {"Big": "yes"}
    hdr_len = len(b"NATS/1.0\r\nBig: yes\r\n\r\n")
    nc.publish("big.payload", big[: limit - hdr_len], headers=hdrs)
    first = sub.next_msg(timeout=5)
    assert first.data == big
    second = sub.next_msg(timeout=5)
    assert second.data == big[: limit - hdr_len]
    assert second.headers == hdrs


def test_many_messages_in_order(nats_server: NatsServer, core_connect: CoreConnect) -> None:
    nc = core_connect(nats_server.url)
    pub = core_connect(nats_server.url)
    sub = nc.subscribe("many.msgs")
    nc.flush()
    n = 5000
    for i in range(n):
        pub.publish("many.msgs", b"%d" % i)
    pub.flush()
    got = [sub.next_msg(timeout=5).data for _ in range(n)]
    assert got == [b"%d" % i for i in range(n)]


# -- echo ---------------------------------------------------------------------


def test_no_echo(nats_server: NatsServer, core_connect: CoreConnect) -> None:
    quiet = core_connect(nats_server.url, no_echo=True)
    loud = core_connect(nats_server.url)
    q_sub = quiet.subscribe("echo.test")
    l_sub = loud.subscribe("echo.test")
    quiet.flush()
    loud.flush()
    quiet.publish("echo.test", b"from-quiet")
    quiet.flush()
    loud.publish("echo.test", b"from-loud")
    loud.flush()
    assert q_sub.next_msg(timeout=2).data == b"from-loud"
    with pytest.raises(errors.TimeoutError):
        q_sub.next_msg(timeout=0.2)
    # The default (echo on) delivers a client's own messages.
    assert {l_sub.next_msg(timeout=2).data for _ in range(2)} == {b"from-quiet", b"from-loud"}


# -- draining -------------------------------------------------------------------


def test_sub_drain_callback_processes_queued_messages(
    nats_server: NatsServer, core_connect: CoreConnect
) -> None:
    nc = core_connect(nats_server.url)
    pub = core_connect(nats_server.url)
    seen: list[bytes] = []

    def slow(msg: Msg) -> None:
        time.sleep(0.002)
        seen.append(msg.data)

    sub = nc.subscribe("drain.cb", cb=slow)
    nc.flush()
    n = 100
    for i in range(n):
        pub.publish("drain.cb", b"%d" % i)
    pub.flush()
    sub.drain(timeout=10)
    assert seen == [b"%d" % i for i in range(n)]
    assert sub.is_closed
    assert sub.sid not in nc._subs
    pub.publish("drain.cb", b"after")
    pub.flush()
    nc.flush()
    time.sleep(0.05)
    assert len(seen) == n
    assert nc.is_connected  # draining a subscription leaves the connection open


def test_sub_drain_iterator_ends_after_queued(
    nats_server: NatsServer, core_connect: CoreConnect
) -> None:
    nc = core_connect(nats_server.url)
    pub = core_connect(nats_server.url)
    sub = nc.subscribe("drain.iter")
    nc.flush()
    for i in range(20):
        pub.publish("drain.iter", b"%d" % i)
    pub.flush()
    sub.drain(timeout=5)
    pub.publish("drain.iter", b"after")
    pub.flush()
    assert [m.data for m in sub] == [b"%d" % i for i in range(20)]


def test_connection_drain_loses_nothing(
    nats_server: NatsServer, core_connect: CoreConnect, core_events: CoreEvents
) -> None:
    nc = core_connect(nats_server.url, closed_cb=core_events.closed_cb)
    pub = core_connect(nats_server.url)
    a: list[bytes] = []
    b: list[bytes] = []

    def slow_a(msg: Msg) -> None:
        time.sleep(0.001)
        a.append(msg.data)

    sub_a = nc.subscribe("cdrain.a", cb=slow_a)
    sub_b = nc.subscribe("cdrain.b", cb=lambda m: b.append(m.data))
    it = nc.subscribe("cdrain.c")
    nc.flush()
    n = 300
    for i in range(n):
        pub.publish("cdrain.a", b"%d" % i)
        pub.publish("cdrain.b", b"%d" % i)
    pub.publish("cdrain.c", b"c")
    pub.flush()
    nc.drain(timeout=10)
    assert nc.is_closed
    assert len(a) == n and len(b) == n
    assert a == [b"%d" % i for i in range(n)]
    assert sub_a.is_closed and sub_b.is_closed and it.is_closed
    assert [m.data for m in it] == [b"c"]
    assert core_events.closed.wait(2)
    with pytest.raises(errors.ConnectionClosedError):
        nc.publish("cdrain.a", b"x")


def test_subscribe_while_draining_is_refused(
    nats_server: NatsServer, core_connect: CoreConnect, core_wait_for: CoreWaitFor
) -> None:
    nc = core_connect(nats_server.url)
    entered = threading.Event()
    release = threading.Event()

    def blocking(msg: Msg) -> None:
        entered.set()
        release.wait(5)

    nc.subscribe("busy.cb", cb=blocking)
    nc.publish("busy.cb", b"x")
    assert entered.wait(5)
    drainer = threading.Thread(target=nc.drain, kwargs={"timeout": 10}, daemon=True)
    drainer.start()
    try:
        core_wait_for(lambda: nc.is_draining)
        with pytest.raises(errors.ConnectionDrainingError):
            nc.subscribe("too.late")
    finally:
        release.set()
    drainer.join(10)
    assert nc.is_closed


def test_drain_timeout(nats_server: NatsServer, core_connect: CoreConnect) -> None:
    nc = core_connect(nats_server.url)
    release = threading.Event()
    entered = threading.Event()

    def stuck(msg: Msg) -> None:
        entered.set()
        release.wait(10)

    nc.subscribe("stuck.cb", cb=stuck)
    nc.publish("stuck.cb", b"x")
    assert entered.wait(5)
    try:
        start = time.monotonic()
        with pytest.raises(errors.DrainTimeoutError):
            nc.drain(timeout=0.3)
        assert time.monotonic() - start < 3
        assert nc.is_closed
    finally:
        release.set()


def test_context_manager_drains_and_closes(nats_server: NatsServer) -> None:
    seen: list[bytes] = []
    with jsclient.connect(nats_server.url) as nc:
        nc.subscribe("ctx.cb", cb=lambda m: (time.sleep(0.001), seen.append(m.data)))
        for i in range(50):
            nc.publish("ctx.cb", b"%d" % i)
        nc.flush()
    assert nc.is_closed
    assert len(seen) == 50


def test_context_manager_closes_on_exception(nats_server: NatsServer) -> None:
    with pytest.raises(RuntimeError), jsclient.connect(nats_server.url) as nc:
        raise RuntimeError("inside")
    assert nc.is_closed


# -- slow consumers -----------------------------------------------------------


def test_slow_consumer_drops_and_reports(
    nats_server: NatsServer,
    core_connect: CoreConnect,
    core_events: CoreEvents,
    core_wait_for: CoreWaitFor,
) -> None:
    nc = core_connect(nats_server.url, error_cb=core_events.error_cb)
    pub = core_connect(nats_server.url)
    release = threading.Event()
    handled: list[bytes] = []

    def slow(msg: Msg) -> None:
        release.wait(5)
        handled.append(msg.data)

    sub = nc.subscribe("slow.sub", cb=slow, pending_msgs_limit=10)
    nc.flush()
    n = 60
    for i in range(n):
        pub.publish("slow.sub", b"%d" % i)
    pub.flush()
    nc.flush()  # everything the server sent has been routed
    slow_errors = core_wait_for(lambda: core_events.errors_of(errors.SlowConsumerError))
    err = slow_errors[0]
    assert isinstance(err, nats.errors.SlowConsumerError)
    assert err.sid == sub.sid and err.subject == "slow.sub"
    assert core_events.threads["error"] != "jsclient-reader"
    assert sub.dropped > 0
    assert sub.delivered + sub.dropped == n
    assert sub.delivered <= 11  # the limit plus the one the callback holds
    release.set()
    core_wait_for(lambda: len(handled) == sub.delivered)
    # Once caught up, messages flow again.
    pub.publish("slow.sub", b"again")
    pub.flush()
    core_wait_for(lambda: handled[-1:] == [b"again"])


def test_pending_bytes_limit_drops(
    nats_server: NatsServer,
    core_connect: CoreConnect,
    core_events: CoreEvents,
    core_wait_for: CoreWaitFor,
) -> None:
    nc = core_connect(nats_server.url, error_cb=core_events.error_cb)
    sub = nc.subscribe("slow.bytes", pending_bytes_limit=1000)
    for _ in range(10):
        nc.publish("slow.bytes", b"x" * 300)
    nc.flush()
    core_wait_for(lambda: core_events.errors_of(errors.SlowConsumerError))
    assert sub.delivered == 3 and sub.dropped == 7
    assert sub.pending_msgs == 3 and sub.pending_bytes == 900
    for _ in range(3):
        sub.next_msg(timeout=1)
    assert sub.pending_msgs == 0 and sub.pending_bytes == 0


# -- misc ---------------------------------------------------------------------


def test_stats_count_messages_and_bytes(nats_server: NatsServer, core_connect: CoreConnect) -> None:
    nc = core_connect(nats_server.url)
    assert nc.stats == {"in_msgs": 0, "out_msgs": 0, "in_bytes": 0, "out_bytes": 0, "reconnects": 0}
    sub = nc.subscribe("stats.subj")
    for data in (b"abc", b"defgh", b""):
        nc.publish("stats.subj", data)
    nc.publish("stats.subj", b"xy", headers={"A": "b"})
    nc.flush()
    for _ in range(4):
        sub.next_msg(timeout=2)
    stats = nc.stats
    assert stats["out_msgs"] == 4
    assert stats["out_bytes"] == 10
    assert stats["in_msgs"] == 4
    assert stats["in_bytes"] == 10
    assert stats["reconnects"] == 0


def test_new_inbox_format(nats_server: NatsServer, core_connect: CoreConnect) -> None:
    nc = core_connect(nats_server.url)
    inboxes = {nc.new_inbox() for _ in range(1000)}
    assert len(inboxes) == 1000
    for inbox in inboxes:
        prefix, _, token = inbox.partition(".")
        assert prefix == "_INBOX"
        assert len(token) == 22 and token.isalnum() and "." not in token
    custom = core_connect(nats_server.url, inbox_prefix="_MY.APP")
    inbox = custom.new_inbox()
    assert inbox.startswith("_MY.APP.") and len(inbox) == len("_MY.APP.") + 22
    # An inbox is a usable subject.
    sub = nc.subscribe(inbox)
    nc.publish(inbox, b"to-inbox")
    assert sub.next_msg(timeout=2).data == b"to-inbox"


def test_flush(nats_server: NatsServer, core_connect: CoreConnect) -> None:
    nc = core_connect(nats_server.url)
    other = core_connect(nats_server.url)
    sub = other.subscribe("flush.subj")
    other.flush()
    for i in range(1000):
        nc.publish("flush.subj", b"%d" % i)
    nc.flush(timeout=5)
    assert nc.pending_data_size == 0
    # After our flush the server has routed everything; the other side's flush
    # proves it has read them all.
    other.flush(timeout=5)
    assert sub.pending_msgs == 1000
    nc.flush(timeout=None)
    nc.close()
    with pytest.raises(errors.ConnectionClosedError):
        nc.flush()


def test_servers_list_and_connect_with_list(
    nats_server: NatsServer, core_connect: CoreConnect
) -> None:
    nc = core_connect([nats_server.url])
    assert nc.servers == [nats_server.url]
    assert nc.discovered_servers == []
    nc2 = core_connect(f"{nats_server.url}, {nats_server.url}")
    assert nc2.is_connected


def test_connect_rejects_unknown_options(nats_server: NatsServer) -> None:
    with pytest.raises(TypeError):
        jsclient.connect(nats_server.url, no_such_option=True)


def test_concurrent_publishers_keep_per_thread_order(
    nats_server: NatsServer, core_connect: CoreConnect, core_wait_for: CoreWaitFor
) -> None:
    nc = core_connect(nats_server.url)
    sub_nc = core_connect(nats_server.url)
    sub = sub_nc.subscribe("conc.pub")
    sub_nc.flush()
    n_threads, per_thread = 8, 500

    def worker(tid: int) -> None:
        for i in range(per_thread):
            nc.publish("conc.pub", b"%d:%d" % (tid, i))

    threads = [threading.Thread(target=worker, args=(t,), daemon=True) for t in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    nc.flush(timeout=5)
    by_thread: dict[int, list[int]] = {t: [] for t in range(n_threads)}
    for _ in range(n_threads * per_thread):
        tid, i = sub.next_msg(timeout=5).data.split(b":")
        by_thread[int(tid)].append(int(i))
    assert all(v == list(range(per_thread)) for v in by_thread.values())
    assert nc.stats["out_msgs"] == n_threads * per_thread


def test_unsubscribe_stops_delivery_of_queued_messages(
    core_connect: Any, core_wait_for: Any
) -> None:
    """nats.go semantics: after unsubscribe() no queued message reaches the callback."""
    from jsclient.server import NatsServer

    with NatsServer(jetstream=False) as srv:
        nc = core_connect(srv.url)
        gate = threading.Event()
        seen: list[bytes] = []

        def slow(msg: Any) -> None:
            gate.wait(5)
            seen.append(msg.data)

        sub = nc.subscribe("u.q", cb=slow)
        for i in range(50):
            nc.publish("u.q", str(i).encode())
        nc.flush()
        core_wait_for(lambda: sub.pending_msgs >= 49)
        sub.unsubscribe()
        gate.set()
        sub._dispatcher.join(5)
        assert len(seen) <= 1
        it_sub = nc.subscribe("u.it")
        for _ in range(5):
            nc.publish("u.it", b"x")
        nc.flush()
        core_wait_for(lambda: it_sub.pending_msgs == 5)
        it_sub.unsubscribe()
        assert list(it_sub) == []
