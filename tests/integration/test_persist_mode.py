"""``persist_mode`` of a stream (ADR-56, server 2.12, API level 2) against a real nats-server.

The field is nats-py's (``StreamConfig.persist_mode``, ``PersistMode``):
``"async"`` flushes writes asynchronously, ``"default"`` (or no value) at once.
It is sent on create and update and read back in the stream's info; the
server keeps it for the stream's life (an update cannot change it) and allows
``async`` only on an R1 file stream. ``async`` needs API level 2: an older
server would drop the field and flush every write, so the client refuses
first (FeatureNotSupportedError) and the request carries
``Nats-Required-Api-Level: 2``.
"""

from __future__ import annotations

import pytest
from nats.js.api import PersistMode

import jsclient
from jsclient import errors
from jsclient.api import StreamConfig
from jsclient.jetstream.context import JetStream


@pytest.fixture
def js(nc: jsclient.Client) -> JetStream:
    return nc.jetstream()


def test_create_update_info_round_trip(js: JetStream) -> None:
    s = js.create_stream(name="A", subjects=["a.>"], persist_mode=PersistMode.ASYNC)
    assert s.cached_info.config.persist_mode == PersistMode.ASYNC
    assert js.stream("A").info().config.persist_mode == "async"
    assert next(iter(js.streams())).config.persist_mode == PersistMode.ASYNC
    cfg = js.stream("A").cached_info.config
    updated = js.update_stream(cfg.evolve(description="updated"))
    assert updated.cached_info.config.description == "updated"
    assert updated.cached_info.config.persist_mode == PersistMode.ASYNC
    js.publish("a.x", b"stored")  # an async stream stores and acks as any other
    assert js.stream("A").get_msg(1).data == b"stored"
    with pytest.raises(errors.APIError, match="persist mode"):
        js.update_stream(cfg.evolve(persist_mode=PersistMode.DEFAULT))


def test_default_mode_and_a_config_object(js: JetStream) -> None:
    s = js.create_stream(StreamConfig(name="D", subjects=["d.>"], persist_mode="default"))
    assert s.cached_info.config.persist_mode in (None, PersistMode.DEFAULT)
    plain = js.create_stream(name="P", subjects=["p.>"])
    assert plain.cached_info.config.persist_mode in (None, PersistMode.DEFAULT)


def test_server_refuses_async_where_it_cannot(js: JetStream) -> None:
    with pytest.raises(errors.APIError, match="file storage"):
        js.create_stream(name="M", subjects=["m.>"], storage="memory", persist_mode="async")


def test_gated_by_api_level(nc: jsclient.Client, js: JetStream) -> None:
    assert js._api_level() >= 2
    old = nc.jetstream()
    old._levels.seen = 1  # as a 2.11 server answers $JS.API.INFO
    with pytest.raises(errors.FeatureNotSupportedError) as info:
        old.create_stream(name="A", subjects=["a.>"], persist_mode="async")
    assert info.value.required_level == 2 and info.value.server_level == 1
    assert "persist_mode" in str(info.value) and "2.12" in str(info.value)
    with pytest.raises(errors.FeatureNotSupportedError):
        old.create_or_update_stream(name="A", subjects=["a.>"], persist_mode="async")
    assert list(js.stream_names()) == []  # nothing was sent
    # The default mode needs no level: an old server flushes every write anyway.
    old._levels.seen = 0
    old.create_stream(name="D", subjects=["d.>"], persist_mode="default")
