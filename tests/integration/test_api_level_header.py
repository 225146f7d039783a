"""``Nats-Required-Api-Level`` (ADR-44) against a real nats-server.

A JetStream API request that needs an API level (a stream or consumer config
with level-gated fields, pause, unpin, reset) carries it in the header, from
the same computation as the client-side check
(:func:`jsclient.jetstream.manage.api_level.request_level`); a request that
needs none carries no header. A second connection subscribed to
``$JS.API.>`` sees the requests as the server gets them. The server refuses
a request whose header names a level above its own (err_code 10185): the
context raises FeatureNotSupportedError naming the feature and the level.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from _js import eventually

import jsclient
from jsclient import errors
from jsclient.jetstream.context import JetStream
from jsclient.jetstream.manage.api_level import REQUIRED_API_LEVEL, request_level
from jsclient.msg import Msg
from jsclient.server import NatsServer


class Spy:
    """The JetStream API requests a second connection sees: (subject, header value)."""

    def __init__(self, url: str) -> None:
        self.lock = threading.Lock()
        self.seen: list[tuple[str, str | None]] = []
        self.nc = jsclient.connect(url)
        self.nc.subscribe("$JS.API.>", cb=self._on_msg)
        self.nc.flush()

    def _on_msg(self, msg: Msg) -> None:
        level = (msg.headers or {}).get(REQUIRED_API_LEVEL)
        with self.lock:
            self.seen.append((msg.subject, level))

    def level_of(self, subject: str) -> str | None:
        """The header value of the request on ``subject`` (waits for it)."""

        def found() -> list[tuple[str, str | None]]:
            with self.lock:
                return [s for s in self.seen if s[0] == subject]

        return eventually(found, what=f"a request on {subject}")[-1][1]


@pytest.fixture
def spy(nats_server: NatsServer) -> Iterator[Spy]:
    s = Spy(nats_server.url)
    try:
        yield s
    finally:
        s.nc.close()


@pytest.fixture
def js(nc: jsclient.Client) -> JetStream:
    return nc.jetstream()


def test_gated_requests_carry_their_level(js: JetStream, spy: Spy) -> None:
    js.create_stream(name="PLAIN", subjects=["plain.>"])
    assert spy.level_of("$JS.API.STREAM.CREATE.PLAIN") is None
    js.create_stream(name="TTL", subjects=["ttl.>"], allow_msg_ttl=True)
    assert spy.level_of("$JS.API.STREAM.CREATE.TTL") == "1"
    js.create_stream(name="CNT", subjects=["cnt.>"], allow_msg_counter=True)
    assert spy.level_of("$JS.API.STREAM.CREATE.CNT") == "2"
    js.update_stream(name="CNT", subjects=["cnt.>", "cnt2.>"], allow_msg_counter=True)
    assert spy.level_of("$JS.API.STREAM.UPDATE.CNT") == "2"
    js.create_stream(name="FAST", subjects=["fast.>"], allow_batched=True)
    assert spy.level_of("$JS.API.STREAM.CREATE.FAST") == "4"
    js.create_stream(name="ASYNC", subjects=["async.>"], persist_mode="async")
    assert spy.level_of("$JS.API.STREAM.CREATE.ASYNC") == "2"

    js.create_consumer("PLAIN", durable_name="plain")
    assert spy.level_of("$JS.API.CONSUMER.CREATE.PLAIN.plain") is None
    js.create_consumer(
        "PLAIN", durable_name="grp", priority_groups=["g"], priority_policy="overflow"
    )
    assert spy.level_of("$JS.API.CONSUMER.CREATE.PLAIN.grp") == "1"
    js.create_consumer(
        "PLAIN", durable_name="prio", priority_groups=["g"], priority_policy="prioritized"
    )
    assert spy.level_of("$JS.API.CONSUMER.CREATE.PLAIN.prio") == "2"
    js.pause_consumer("PLAIN", "plain", 60.0)
    assert spy.level_of("$JS.API.CONSUMER.PAUSE.PLAIN.plain") == "1"
    js.reset_consumer("PLAIN", "plain")
    assert spy.level_of("$JS.API.CONSUMER.RESET.PLAIN.plain") == "4"
    js.stream("PLAIN")
    assert spy.level_of("$JS.API.STREAM.INFO.PLAIN") is None
    # A KV bucket's stream goes through the same path: limit markers need level 1.
    js.create_key_value(bucket="lm", limit_marker_ttl=2.0, storage="memory")
    assert spy.level_of("$JS.API.STREAM.CREATE.KV_lm") == "1"


def test_one_computation_for_check_and_header() -> None:
    assert request_level("STREAM.CREATE.S", {"name": "S"}) == (0, "")
    assert request_level("STREAM.UPDATE.S", {"persist_mode": "async"})[0] == 2
    assert request_level("STREAM.CREATE.S", {"persist_mode": "default"})[0] == 0
    assert request_level("STREAM.CREATE.S", {"allow_msg_ttl": True, "allow_batched": True})[0] == 4
    assert request_level("CONSUMER.CREATE.S.c", {"config": {"ack_policy": "flow_control"}})[0] == 4
    assert request_level("CONSUMER.UNPIN.S.c", {"group": "g"}) == (1, "consumer unpin")
    assert request_level("STREAM.INFO.S", None) == (0, "")


def test_refusal_maps_to_feature_not_supported(js: JetStream, spy: Spy) -> None:
    js.create_stream(name="S", subjects=["s.>"])
    server_level = js._api_level()
    # Stands in for a cluster whose $JS.API.INFO came from a newer server than
    # the one that answers: the client-side check passes, the server refuses.
    js._levels.seen = 100
    with pytest.raises(errors.FeatureNotSupportedError) as info:
        js._api_request("STREAM.INFO.S", required=(99, "a future feature"))
    assert spy.level_of("$JS.API.STREAM.INFO.S") == "99"
    e = info.value
    assert (e.feature, e.required_level) == ("a future feature", 99)
    assert "a future feature" in str(e) and "level 99" in str(e) and "10185" in str(e)
    assert isinstance(e.__cause__, errors.RequiredApiLevelError)
    assert e.__cause__.err_code == 10185
    # A level the server has is accepted with the header.
    js._api_request("STREAM.INFO.S", required=(server_level, "a current feature"))


def test_an_old_level_is_refused_before_sending(js: JetStream, spy: Spy) -> None:
    js._levels.seen = 1  # as a 2.11 server answers $JS.API.INFO
    with pytest.raises(errors.FeatureNotSupportedError) as info:
        js.create_stream(name="CNT", subjects=["cnt.>"], allow_msg_counter=True)
    assert info.value.required_level == 2 and "2.12" in str(info.value)
    js.create_stream(name="TTL", subjects=["ttl.>"], allow_msg_ttl=True)
    assert spy.level_of("$JS.API.STREAM.CREATE.TTL") == "1"
    with spy.lock:
        assert not [s for s in spy.seen if s[0].endswith(".CNT")]
