"""The pull engine's pure logic, without a server: options, status mapping, accounting.

A fake client records the pull requests a :class:`Feed` publishes; statuses and
messages are fed to ``Feed.process`` as the consuming thread would.
"""

from __future__ import annotations

import json
import queue
from types import SimpleNamespace
from typing import Any

import pytest

from jsclient import errors
from jsclient.jetstream.consume import engine as pe
from jsclient.jetstream.consume import feed as fd
from jsclient.jetstream.consume.feed import Feed
from jsclient.jetstream.consume.priority import Priority
from jsclient.msg import ACK_NONE_POLICY, Msg


class _Timer:
    def cancel(self) -> None:
        pass


class _Scheduler:
    def __init__(self) -> None:
        self.calls: list[tuple[float, Any]] = []

    def call_later(self, delay: float, fn: Any, *args: Any) -> _Timer:
        self.calls.append((delay, fn))
        return _Timer()


class _FakeClient:
    def __init__(self) -> None:
        self.pulls: list[tuple[str, str, dict[str, Any]]] = []
        self.listeners: list[Any] = []
        self.subs: dict[int, Any] = {}
        self._scheduler = _Scheduler()
        self.reported: list[BaseException] = []
        self._n = 0
        self.is_closed = False

    def new_inbox(self) -> str:
        self._n += 1
        return f"_INBOX.t{self._n}"

    def _subscribe_internal(self, subject: str, handler: Any) -> int:
        sid = len(self.subs) + 1
        self.subs[sid] = handler
        return sid

    def _subscribe_batched(self, subject: str, q: Any) -> Any:
        sid = len(self.subs) + 1
        state = SimpleNamespace(sid=sid, _received=0, _q=q)
        self.subs[sid] = state
        return state

    def _unsubscribe_internal(self, sid: int) -> None:
        self.subs.pop(sid, None)

    def _release_internal_later(self, sids: list[int]) -> None:
        for sid in sids:
            self.subs.pop(sid, None)

    def _reap_internal(self) -> None:
        pass

    def _add_listener(self, fn: Any) -> None:
        self.listeners.append(fn)

    def _remove_listener(self, fn: Any) -> None:
        if fn in self.listeners:
            self.listeners.remove(fn)

    def _publish_raw(self, data: bytes, payload_len: int) -> None:
        line, body = data.split(b"\r\n")[:2]
        _, subject, reply, _n = line.decode().split(" ")
        self.pulls.append((subject, reply, json.loads(body)))


class _FakeJS:
    def __init__(self) -> None:
        self._client = _FakeClient()
        self._prefix = "$JS.API"
        self._timeout = 5.0


def _feed(**options: Any) -> tuple[Feed, _FakeClient, list[BaseException]]:
    js = _FakeJS()
    engine = pe.Engine(js, "S", "C", ack_none=options.pop("ack_none", False))  # type: ignore[arg-type]
    defaults: dict[str, Any] = {
        "max_messages": None,
        "max_bytes": None,
        "expires": 30.0,
        "heartbeat": None,
        "threshold_messages": None,
        "threshold_bytes": None,
    }
    defaults.update(options)
    opts = pe.continuous_options(**defaults)
    reported: list[BaseException] = []
    feed = Feed(engine, opts, queue.SimpleQueue(), reported.append)
    feed.start()
    return feed, js._client, reported


def _user(n: int = 1, payload: bytes = b"0123456789", hdr: bytes | None = None) -> Msg:
    reply = f"$JS.ACK.S.C.1.{n}.{n}.1700000000000000000.0"
    size = len("s.a") + len(reply) + (len(hdr) if hdr else 0) + len(payload)
    return Msg(None, "s.a", reply, payload, hdr, size, 1)


def _status(feed: Feed, token: int, line: str, **headers: str) -> Msg:
    block = f"NATS/1.0 {line}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    return Msg(None, f"{feed.prefix}{token}", "", b"", (block + "\r\n").encode(), -1, 1)


# -- options -----------------------------------------------------------------


def test_continuous_defaults_follow_adr37() -> None:
    o = pe.continuous_options(None, None, 30.0, None, None, None)
    assert (o.max_messages, o.max_bytes, o.threshold_messages) == (500, 0, 250)
    assert o.heartbeat == 15.0
    assert pe.continuous_options(None, None, 120.0, None, None, None).heartbeat == 30.0
    b = pe.continuous_options(None, 4096, 10.0, None, None, None)
    assert (b.max_messages, b.max_bytes, b.threshold_bytes) == (pe.BYTES_MODE_BATCH, 4096, 2048)
    assert pe.continuous_options(1, None, 30.0, None, None, None).threshold_messages == 0


@pytest.mark.parametrize(
    "args",
    [
        (10, 100, 30.0, None, None, None),  # exclusive
        (0, None, 30.0, None, None, None),
        (None, 0, 30.0, None, None, None),
        (None, None, 0.5, None, None, None),  # expires < 1 s
        (None, None, 30.0, 0.4, None, None),  # heartbeat < 0.5 s
        (None, None, 30.0, 31.0, None, None),  # heartbeat > 30 s
        (None, None, 2.0, 1.5, None, None),  # heartbeat > expires / 2
        (10, None, 30.0, None, 11, None),  # threshold > max
        (10, None, 30.0, None, -1, None),
        (10, None, 30.0, None, None, 5),  # bytes threshold in messages mode
        (None, 100, 30.0, None, 5, None),  # messages threshold in bytes mode
        (None, 100, 30.0, None, None, 101),
        (True, None, 30.0, None, None, None),
    ],
)
def test_continuous_options_reject(args: tuple[Any, ...]) -> None:
    with pytest.raises(ValueError):
        pe.continuous_options(*args)


def test_fetch_heartbeat_defaults_and_limits() -> None:
    assert pe.fetch_heartbeat(30.0, None) == 5.0
    assert pe.fetch_heartbeat(10.0, None) == 5.0
    assert pe.fetch_heartbeat(9.9, None) == 0.0
    assert pe.fetch_heartbeat(4.0, 2.0) == 2.0
    with pytest.raises(ValueError):
        pe.fetch_heartbeat(4.0, 2.5)
    with pytest.raises(ValueError):
        pe.fetch_heartbeat(0.0, None)


def test_status_errors_are_typed() -> None:
    t = pe.TERMINAL
    assert type(pe.status_error(400, "Bad Request", t)) is errors.BadPullRequestError
    assert type(pe.status_error(409, "Consumer Deleted", t)) is errors.ConsumerDeletedError
    assert (
        type(pe.status_error(409, "Consumer is push based", t)) is errors.ConsumerIsPushBasedError
    )
    assert type(pe.status_error(503, "", pe.NO_RESPONDERS)) is errors.NoRespondersError
    w = pe.status_error(409, "Exceeded MaxWaiting", pe.WARNING)
    assert type(w) is errors.StatusError
    assert (w.status, w.description) == (409, "Exceeded MaxWaiting")


def test_token_parsing() -> None:
    assert fd._token("_INBOX.x.17", "_INBOX.x.") == 17
    assert fd._token("_INBOX.y.17", "_INBOX.x.") == -1
    assert fd._token("_INBOX.x.a1", "_INBOX.x.") == -1
    assert fd._token("_INBOX.x.\u0661", "_INBOX.x.") == -1  # non-ASCII digit


# -- feed accounting -----------------------------------------------------------


def test_first_pull_and_refill_at_threshold() -> None:
    feed, client, _ = _feed(max_messages=10, expires=5.0, heartbeat=1.0)
    assert len(client.pulls) == 1
    subject, reply, req = client.pulls[0]
    assert subject == "$JS.API.CONSUMER.MSG.NEXT.S.C"
    assert reply == f"{feed.prefix}1"
    assert req == {"batch": 10, "expires": 5_000_000_000, "idle_heartbeat": 1_000_000_000}
    for i in range(4):
        assert feed.process(_user(i + 1)) is not None
    assert len(client.pulls) == 1  # pending 6 > threshold 5
    feed.process(_user(5))
    assert len(client.pulls) == 2
    assert client.pulls[1][2]["batch"] == 5  # max - pending
    assert feed.counter.msgs == 10
    assert feed.stats()["delivered"] == 5


def test_max_messages_one_keeps_pulling() -> None:
    feed, client, _ = _feed(max_messages=1)
    for i in range(3):
        feed.process(_user(i + 1))
    assert [p[2]["batch"] for p in client.pulls] == [1, 1, 1, 1]


def test_bytes_mode_requests_bytes() -> None:
    feed, client, _ = _feed(max_bytes=1000)
    assert client.pulls[0][2]["batch"] == pe.BYTES_MODE_BATCH
    assert client.pulls[0][2]["max_bytes"] == 1000
    sizes = []
    for i, n in enumerate((400, 10, 10)):
        msg = _user(i + 1, payload=b"x" * n)
        sizes.append(msg.size)
        feed.process(msg)
        # Pending bytes stay above the threshold (500) until the third message.
        assert len(client.pulls) == (1 if i < 2 else 2)
    assert client.pulls[1][2]["max_bytes"] == sum(sizes)
    assert client.pulls[1][2]["batch"] == pe.BYTES_MODE_BATCH


def test_request_timeout_subtracts_pending_and_repulls() -> None:
    feed, client, _ = _feed(max_messages=10)
    feed.process(_status(feed, 1, "408 Request Timeout", **{"Nats-Pending-Messages": "10"}))
    assert len(client.pulls) == 2
    assert client.pulls[1][2]["batch"] == 10


def test_stale_token_status_does_not_touch_pending() -> None:
    feed, client, _ = _feed(max_messages=10)
    feed.process(_status(feed, 1, "100 Idle Heartbeat"))
    feed._on_control(fd._RECONNECTED)  # pull 1 is gone; pull 2 is fresh
    assert feed.stats()["reconnects"] == 1
    assert [p[1] for p in client.pulls] == [f"{feed.prefix}1", f"{feed.prefix}2"]
    feed.process(_status(feed, 1, "408 Request Timeout", **{"Nats-Pending-Messages": "10"}))
    assert feed.counter.msgs == 10
    assert len(client.pulls) == 2
    feed.process(_status(feed, 2, "408 Request Timeout", **{"Nats-Pending-Messages": "10"}))
    assert len(client.pulls) == 3


def test_warning_is_reported_and_not_terminal() -> None:
    feed, client, reported = _feed(max_messages=10)
    assert feed.process(_status(feed, 1, "409 Exceeded MaxWaiting")) is None
    assert isinstance(reported[0], errors.StatusError)
    assert reported[0].description == "Exceeded MaxWaiting"
    assert feed.counter.msgs == 10  # no pending headers: nothing subtracted
    assert len(client.pulls) == 1


@pytest.mark.parametrize(
    ("line", "exc"),
    [
        ("409 Consumer Deleted", errors.ConsumerDeletedError),
        ("409 Consumer is push based", errors.ConsumerIsPushBasedError),
        ("400 Bad Request", errors.BadPullRequestError),
    ],
)
def test_terminal_statuses_end_the_feed(line: str, exc: type[BaseException]) -> None:
    feed, _, _ = _feed()
    with pytest.raises(pe.Terminal) as info:
        feed.process(_status(feed, 1, line))
    assert type(info.value.error) is exc


def test_leadership_change_and_wrong_pin_reset_pending() -> None:
    feed, client, reported = _feed(max_messages=10, prio=Priority("g"))
    feed.engine.pin_id = "PIN"
    feed.process(_user(1))
    feed.process(_status(feed, 1, "409 Leadership Change"))
    assert len(client.pulls) == 2 and client.pulls[1][2]["batch"] == 10
    assert client.pulls[1][2]["id"] == "PIN" and client.pulls[1][2]["group"] == "g"
    feed.process(_status(feed, 2, "423 Nats-Wrong-Pin-Id"))
    assert feed.engine.pin_id is None
    assert len(client.pulls) == 3 and "id" not in client.pulls[2][2]
    assert client.pulls[2][2]["group"] == "g"
    assert [r.status for r in reported if isinstance(r, errors.StatusError)] == [409, 423]
    assert type(reported[-1]) is errors.PinIdMismatchError


def test_pin_id_from_user_message_is_sent() -> None:
    feed, client, _ = _feed(max_messages=2, prio=Priority("g", min_pending=5))
    feed.process(_user(1, hdr=b"NATS/1.0\r\nNats-Pin-Id: abc\r\n\r\n"))
    assert feed.engine.pin_id == "abc"
    assert client.pulls[-1][2] == {
        "batch": 1,
        "expires": 30_000_000_000,
        "idle_heartbeat": 15_000_000_000,
        "group": "g",
        "min_pending": 5,
        "id": "abc",
    }
    # Later messages carry the same pin: recognised without parsing, and kept.
    feed.process(_user(2, hdr=b"NATS/1.0\r\nNats-Pin-Id: abc\r\n\r\n"))
    feed.process(_user(3, hdr=b"NATS/1.0\r\nNats-Pin-Id: new\r\n\r\n"))
    assert feed.engine.pin_id == "new"


def test_no_pin_id_without_a_group() -> None:
    feed, client, _ = _feed(max_messages=2)
    feed.engine.pin_id = "abc"
    feed.process(_user(1))
    assert all("id" not in p[2] and "group" not in p[2] for p in client.pulls)


def test_user_message_with_headers_and_no_payload_is_not_a_status() -> None:
    feed, _, _ = _feed()
    msg = _user(1, payload=b"", hdr=b"NATS/1.0\r\nX: y\r\n\r\n")
    assert feed.process(msg) is msg


def test_paused_feed_does_not_pull_until_reconnected() -> None:
    feed, client, _ = _feed(max_messages=2)
    feed._on_conn("disconnected")
    feed.process(_user(1))
    feed.process(_user(2))
    assert len(client.pulls) == 1
    feed._on_conn("reconnected")
    item = feed.q.get_nowait()
    feed.process(item)
    assert len(client.pulls) == 2 and client.pulls[1][2]["batch"] == 2


def test_missed_heartbeat_repulls_and_raises_when_asked() -> None:
    feed, client, _ = _feed(max_messages=4)
    feed.process(_user(1))
    assert feed.process((fd._HB_MISSED, feed)) is None
    assert len(client.pulls) == 2 and client.pulls[1][2]["batch"] == 4  # full reset
    feed2, client2, _ = _feed(max_messages=4, err_on_missing_heartbeat=True)
    with pytest.raises(errors.NoHeartbeatError):
        feed2.process((fd._HB_MISSED, feed2))
    assert len(client2.pulls) == 2


def test_watchdog_warns_once_per_outage() -> None:
    feed, client, reported = _feed(max_messages=4, expires=2.0, heartbeat=0.5)
    feed.last -= 5.0
    feed._watch()
    assert [type(r) for r in reported] == [errors.NoHeartbeatError]
    feed.process(feed.q.get_nowait())  # the consuming thread re-pulls
    assert len(client.pulls) == 2
    feed._on_conn("disconnected")
    feed.last -= 5.0
    feed._watch()
    feed.process(feed.q.get_nowait())
    feed.last -= 5.0
    feed._watch()
    assert len(reported) == 2 and feed.q.empty()  # one warning for the outage
    assert len(client.pulls) == 2  # and no pulls while disconnected


def test_closed_connection_is_terminal_and_silent() -> None:
    feed, _, _ = _feed()
    with pytest.raises(pe.Terminal) as info:
        feed.process((fd._CLOSED, feed))
    assert isinstance(info.value.error, errors.ConnectionClosedError)
    assert info.value.report is False


def test_ack_none_marks_messages() -> None:
    feed, _, _ = _feed(ack_none=True)
    msg = feed.process(_user(1))
    assert msg is not None and msg._ackd == ACK_NONE_POLICY


def test_stop_unsubscribes_and_stops_pulling() -> None:
    feed, client, _ = _feed(max_messages=1)
    feed.stop()
    assert client.subs == {} and client.listeners == []
    feed.process(_user(1))
    assert len(client.pulls) == 1
