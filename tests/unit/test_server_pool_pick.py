"""ServerPool.live/take: what reconnect_to_server_cb may pick from (ADR-40)."""

from __future__ import annotations

from jsclient._io.servers import ServerPool


def test_take_finds_the_entry_and_rotates_it_to_the_back() -> None:
    pool = ServerPool(["nats://a:1", "nats://b:2", "nats://c:3"], randomize=False)
    srv = pool.take("nats://b:2")
    assert srv is not None and srv.url == "nats://b:2"
    assert [s.url for s in pool] == ["nats://a:1", "nats://c:3", "nats://b:2"]
    assert pool.take("b:2") is srv  # same host and port, scheme optional


def test_take_refuses_what_is_not_in_the_pool() -> None:
    pool = ServerPool(["nats://a:1"], randomize=False)
    assert pool.take("nats://a:9") is None
    assert pool.take("nats://z:1") is None
    assert pool.take("http://a:1") is None  # malformed for NATS
    assert [s.url for s in pool] == ["nats://a:1"]


def test_live_drops_exhausted_servers_and_take_skips_them() -> None:
    pool = ServerPool(["nats://a:1", "nats://b:2"], randomize=False, max_attempts=2)
    a = pool.take("nats://a:1")
    assert a is not None
    a.attempts = 2
    assert pool.take("nats://a:1") is None
    assert [s.url for s in pool.live()] == ["nats://b:2"]
    unlimited = ServerPool(["nats://a:1"], randomize=False, max_attempts=-1)
    first = next(iter(unlimited))
    first.attempts = 1000
    assert [s.url for s in unlimited.live()] == ["nats://a:1"]
