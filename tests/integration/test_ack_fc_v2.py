"""Feature flags (ADR-53): servers started with ``js_ack_fc_v2`` and the suite run against them.

``NatsServer(feature_flags={...})`` writes the config's ``feature_flags``
block; without the argument the flags named by ``JSCLIENT_TEST_SERVER_FEATURES``
are written, so every server the suite starts gets them. With
``js_ack_fc_v2: true`` (nats-server 2.14+) the ack and flow-control subjects
carry the domain (``_`` for none) and the account hash after ``$JS.ACK.`` /
``$JS.FC.`` (ADR-15 v2: 11 ack tokens instead of 9). These tests show the
flag reaches the server and the client works with both forms; the rest of the
JetStream suite runs again with the variable set (see the README).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from _js import eventually, publish_stored

import jsclient
from jsclient.jetstream.context import JetStream
from jsclient.msg import Msg
from jsclient.server import NatsServer
from jsclient.server._flags import FEATURE_FLAGS_ENV, feature_flags_from_env

V2 = {"js_ack_fc_v2": True}


@pytest.fixture
def v2_server() -> Iterator[NatsServer]:
    with NatsServer(feature_flags=V2) as srv:
        yield srv


def _fetch_one(js: JetStream, stream: str = "S") -> Msg:
    js.create_stream(name=stream, subjects=[f"{stream.lower()}.>"], storage="memory")
    js.publish(f"{stream.lower()}.a", b"x")
    c = js.create_consumer(stream, durable_name="d", ack_policy="explicit")
    (msg,) = list(c.fetch(1, expires=5.0))
    return msg


def _assert_acked(js: JetStream, stream: str = "S") -> None:
    eventually(
        lambda: js.consumer(stream, "d").info().ack_floor.stream_seq == 1,
        what="the ack to reach the server",
    )


def test_flag_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FEATURE_FLAGS_ENV, "js_ack_fc_v2, other=false")
    assert feature_flags_from_env() == {"js_ack_fc_v2": True, "other": False}
    assert NatsServer().feature_flags == {"js_ack_fc_v2": True, "other": False}
    assert NatsServer(feature_flags={}).feature_flags == {}  # an explicit choice wins
    monkeypatch.setenv(FEATURE_FLAGS_ENV, "js_ack_fc_v2=maybe")
    with pytest.raises(ValueError, match=FEATURE_FLAGS_ENV):
        NatsServer()
    monkeypatch.delenv(FEATURE_FLAGS_ENV)
    assert NatsServer().feature_flags == {}


def test_v2_ack_subject_and_metadata(v2_server: NatsServer) -> None:
    assert "js_ack_fc_v2: true" in v2_server.config_path.read_text()
    with jsclient.connect(v2_server.url) as nc:
        js = nc.jetstream()
        msg = _fetch_one(js)
        tokens = (msg.reply or "").split(".")
        # $JS.ACK.<domain>.<account hash>.<stream>.<consumer>.<5 numbers>
        assert tokens[:3] == ["$JS", "ACK", "_"] and len(tokens) == 11, msg.reply
        md = msg.metadata
        assert (md.stream, md.consumer, md.domain) == ("S", "d", None)
        assert (md.sequence.stream, md.sequence.consumer, md.num_delivered) == (1, 1, 1)
        msg.ack()
        _assert_acked(js)


def test_ack_subject_follows_the_suites_server(
    nats_server: NatsServer, nc: jsclient.Client
) -> None:
    """The lane's proof: v2 subjects when the suite runs with the flag, v1 without."""
    msg = _fetch_one(nc.jetstream())
    tokens = (msg.reply or "").split(".")
    if nats_server.feature_flags.get("js_ack_fc_v2"):
        assert len(tokens) == 11 and tokens[2] == "_", msg.reply
    else:
        assert len(tokens) == 9 and tokens[2] == "S", msg.reply
    assert msg.metadata.stream == "S"


def test_v2_flow_control_is_answered(v2_server: NatsServer) -> None:
    total = 4000
    with jsclient.connect(v2_server.url) as nc, jsclient.connect(v2_server.url) as spy:
        answers = spy.subscribe("$JS.FC.>")
        spy.flush()
        js = nc.jetstream()
        js.create_stream(name="S", subjects=["s.>"], storage="memory")
        sub = js.subscribe("s.a", durable="d", flow_control=True, idle_heartbeat=1.0)
        publish_stored(nc, "s.a", (b"p" * 1024 for _ in range(total)))
        seqs = []
        for _ in range(total):  # acked, or the server stops at max_ack_pending (1000)
            m = sub.next_msg(timeout=10)
            seqs.append(m.metadata.sequence.stream)
            m.ack()
        assert seqs == list(range(1, total + 1))
        assert sub.flow_control_answered > 0
        # Answered on the v2 subject: $JS.FC.<domain>.<hash>.<stream>.<consumer>.<id>
        reply = answers.next_msg(timeout=5).subject.split(".")
        assert reply[:3] == ["$JS", "FC", "_"] and reply[4:6] == ["S", "d"], reply
