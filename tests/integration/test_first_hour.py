"""What a newcomer meets first: a consumer that is not there, and wrong input.

Each is reported at once, by a typed error that says what is wrong: never a
silent empty batch, a stall until a heartbeat timeout, or an AttributeError
from deep inside the library.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

import jsclient
from jsclient import errors
from jsclient.jetstream.context import JetStream

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def js(nc: jsclient.Client) -> JetStream:
    js = nc.jetstream()
    js.create_stream(name="JOBS", subjects=["jobs.>"])
    js.publish("jobs.a", b"1")
    return js


READS: dict[str, Callable[[Any], Any]] = {
    "fetch": lambda c: list(c.fetch(1, expires=5)),
    "fetch_bytes": lambda c: list(c.fetch_bytes(1024, expires=5)),
    "fetch_no_wait": lambda c: list(c.fetch_no_wait(1)),
    "next": lambda c: c.next(timeout=5),
    "messages": lambda c: c.messages().next(timeout=10),
    "messages-loop": lambda c: [m for m in c.messages()],
}


@pytest.mark.parametrize("read", sorted(READS))
def test_reading_a_deleted_consumer_says_it_is_not_found(js: JetStream, read: str) -> None:
    c = js.create_consumer("JOBS", durable_name="workers", ack_policy="explicit")
    js.delete_consumer("JOBS", "workers")
    t0 = time.monotonic()
    with pytest.raises(errors.ConsumerNotFoundError) as ei:
        READS[read](c)
    assert time.monotonic() - t0 < 3.0
    assert isinstance(ei.value, errors.NoRespondersError)  # what nats.go's users catch
    assert ei.value.err_code == 10014 and "'workers'" in str(ei.value)


def test_consume_of_a_deleted_consumer_reports_it_and_stops(js: JetStream) -> None:
    c = js.create_consumer("JOBS", durable_name="workers", ack_policy="explicit")
    js.delete_consumer("JOBS", "workers")
    seen: list[BaseException] = []
    cc = c.consume(lambda m: None, error_cb=seen.append)
    assert cc.wait(3.0), "consume kept running over a consumer that is gone"
    assert isinstance(cc.error, errors.ConsumerNotFoundError)
    assert [type(e) for e in seen] == [errors.ConsumerNotFoundError]


def test_a_consumer_deleted_while_consumed_ends_the_consume(js: JetStream) -> None:
    c = js.create_consumer("JOBS", durable_name="workers", ack_policy="explicit")
    got = threading.Event()
    cc = c.consume(lambda m: (m.ack(), got.set()), error_cb=lambda e: None)
    assert got.wait(5)
    js.delete_consumer("JOBS", "workers")
    assert cc.wait(3.0)
    assert isinstance(cc.error, errors.ConsumerDeletedError | errors.ConsumerNotFoundError)


def test_a_stream_that_is_gone_is_a_consumer_not_found(js: JetStream) -> None:
    c = js.create_consumer("JOBS", durable_name="workers")
    js.delete_stream("JOBS")
    with pytest.raises(errors.ConsumerNotFoundError, match="stream does not exist"):
        c.next(timeout=5)


def test_the_legacy_fetch_of_a_missing_consumer(js: JetStream) -> None:
    psub = js.pull_subscribe_bind(stream="JOBS", consumer="missing")
    with pytest.raises(errors.ConsumerNotFoundError):
        psub.fetch(1, timeout=3)


def test_a_transient_no_responders_is_not_a_missing_consumer(js: JetStream) -> None:
    # The consumer exists: a 503 (JetStream answering nothing for a moment) is
    # reported as such and the consume goes on pulling.
    c = js.create_consumer("JOBS", durable_name="workers", ack_policy="explicit")
    feed_errors: list[BaseException] = []
    got = threading.Event()
    cc = c.consume(lambda m: (m.ack(), got.set()), error_cb=feed_errors.append)
    try:
        assert got.wait(5)
        feed = c._pull_engine().feed
        feed.on_no_responders()  # as after a 503: the server says the consumer exists
        deadline = time.monotonic() + 5  # error_cb runs on the callbacks thread
        while not feed_errors and time.monotonic() < deadline:
            time.sleep(0.01)
        assert any(isinstance(e, errors.NoRespondersError) for e in feed_errors)
        assert not any(isinstance(e, errors.ConsumerNotFoundError) for e in feed_errors)
        got.clear()
        js.publish("jobs.a", b"2")
        assert got.wait(5), "the consume stopped pulling after a transient 503"
        assert not cc.closed
    finally:
        cc.stop()


# -- wrong input: typed errors that name what is wrong --------------------------------


def test_a_bytes_subject_is_a_type_error_everywhere(nc: jsclient.Client, js: JetStream) -> None:
    for call in (
        lambda: nc.publish(b"t.x", b"1"),  # type: ignore[arg-type]
        lambda: nc.publish(b"t.x", b"1", headers={"a": "b"}),  # type: ignore[arg-type]
        lambda: nc.request(b"t.x", b"1", timeout=0.5),  # type: ignore[arg-type]
        lambda: nc.subscribe(b"t.x"),  # type: ignore[arg-type]
        lambda: js.publish(b"jobs.a", b"1"),  # type: ignore[arg-type]
        lambda: js.publish_async(b"jobs.a", b"1"),  # type: ignore[arg-type]
    ):
        with pytest.raises(TypeError, match=r"subject must be a str, not bytes"):
            call()


def test_a_str_payload_is_a_type_error_that_says_so(nc: jsclient.Client, js: JetStream) -> None:
    nc.publish("t.cached", b"")  # the subject in the cache: the fast path
    for call in (
        lambda: nc.publish("t.cached", "hello"),  # type: ignore[arg-type]
        lambda: nc.publish("t.new", "hello"),  # type: ignore[arg-type]
        lambda: nc.publish("t.x", "hello", headers={"a": "b"}),  # type: ignore[arg-type]
        lambda: nc.request("t.x", "hello", timeout=0.5),  # type: ignore[arg-type]
        lambda: js.publish("jobs.a", "hello"),  # type: ignore[arg-type]
        lambda: js.publish_async("jobs.a", "hello"),  # type: ignore[arg-type]
    ):
        with pytest.raises(TypeError, match=r"payload must be bytes-like .* not str"):
            call()


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("http://127.0.0.1:4222", "scheme 'http'"),
        ("ws://127.0.0.1:80", "scheme 'ws'"),
        ("wss://h:443", "scheme 'wss'"),
        ("nats:/127.0.0.1:4222", "is not a server URL"),
        ("nats://h:99999", "invalid port"),
    ],
)
def test_server_urls_are_checked_before_dialling(url: str, says: str) -> None:
    t0 = time.monotonic()
    with pytest.raises(errors.InvalidURLError, match=says) as ei:
        jsclient.connect(url, connect_timeout=5)
    assert isinstance(ei.value, ValueError) and time.monotonic() - t0 < 1.0
    assert url in str(ei.value)


def test_an_unreachable_server_is_named(nats_server: Any) -> None:
    with pytest.raises(errors.NoServersError, match=r"nats://no-such-host\.invalid:4222"):
        jsclient.connect("nats://no-such-host.invalid:4222", connect_timeout=2)
