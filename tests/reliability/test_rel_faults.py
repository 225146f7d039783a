"""Hard kills, cluster failover and network faults (short form of the reliability scenarios).

Each scenario returns figures and a ``problems`` list; a test asserts that
list is empty (the scenario's own checks: nothing acked lost, nothing
acked stored twice, every message consumed and acked, order kept) and the
figures that matter for it.
"""

from __future__ import annotations

from typing import Any

import pytest

from jsbench import reliability as rel
from jsclient.server import NatsCluster

pytestmark = pytest.mark.timeout(120)


def ok(figs: dict[str, Any]) -> dict[str, Any]:
    assert figs["problems"] == [], figs
    return figs


# -- kill -9 of the only server ----------------------------------------------------


def test_kill9_during_publish_async() -> None:
    figs = ok(rel.kill9_publish("publish_async", 4000, kills=1))
    assert figs["kills"] == 1 and figs["acked"] > 0 and figs["acked_lost"] == 0


def test_kill9_during_managed_publisher_with_retries() -> None:
    figs = ok(rel.kill9_publish("publisher", 4000, kills=2))
    assert figs["kills"] == 2
    assert (figs["acked"], figs["acked_lost"], figs["duplicates"], figs["failed"]) == (
        4000,
        0,
        0,
        0,
    )


@pytest.mark.parametrize("mode", ["consume", "messages", "ordered", "pull_subscribe"])
def test_kill9_during_consuming(mode: str) -> None:
    figs = ok(rel.kill9_consume(mode, 3000, kills=1))
    assert figs["kills"] == 1
    if mode == "ordered":
        assert figs["in_order"] and figs["consumed"] == 3000
    else:
        assert figs["distinct"] == 3000  # at least once; acked in the end


# -- the 3-node cluster --------------------------------------------------------------


def test_cluster_starts_with_routes_and_distinct_stores() -> None:
    with NatsCluster(3) as cluster:
        servers = cluster.servers
        assert len({s.port for s in servers}) == 3 and len({s.store_dir for s in servers}) == 3
        assert all(cluster.is_healthy(i) for i in range(3))
        assert cluster.index_of(servers[1].url) == 1 and cluster.index_of("nope") == -1
        assert cluster.index_of(servers[2].server_name) == 2
        servers[0].kill()
        assert not cluster.is_healthy(0)
        servers[0].start()
        cluster.wait_healthy(30)
        assert cluster.is_healthy(0)
    assert not any(s.is_running for s in servers)


def test_cluster_stepdown_during_publish() -> None:
    figs = ok(rel.cluster_publish("stepdown", 6000))
    assert (figs["acked_lost"], figs["duplicates"], figs["failed"]) == (0, 0, 0)
    assert figs["outage_s"] < 3.0, figs  # a stall is probed, not waited out (wait_timeout 5 s)


def test_cluster_kill_connected_node_during_publish() -> None:
    figs = ok(rel.cluster_publish("kill_connected", 6000))
    assert (figs["acked_lost"], figs["duplicates"], figs["failed"]) == (0, 0, 0)


@pytest.mark.once
def test_cluster_kill_stream_leader_during_publish() -> None:
    figs = ok(rel.cluster_publish("kill_leader", 6000))
    assert (figs["acked_lost"], figs["duplicates"], figs["failed"]) == (0, 0, 0)
    # resumed within a second of the stream taking writes again
    assert figs["resume_after_writable_s"] <= 1.0, figs


@pytest.mark.once
@pytest.mark.parametrize("fault", ["stepdown", "kill_connected"])
def test_cluster_fault_during_consume(fault: str) -> None:
    figs = ok(rel.cluster_consume(fault, 4000))
    assert figs["distinct"] == 4000


# -- network faults through a proxy ----------------------------------------------------


@pytest.mark.parametrize("mode", ["stall", "half_open"])
def test_stale_connection_detected_and_reconnected(mode: str) -> None:
    figs = ok(rel.stale_detection(mode, ping_interval=0.3, max_pings=2))
    # declared stale when a third ping would go out: (max_pings + 1) intervals at most
    assert figs["detected_s"] <= figs["limit_s"] + 0.5
    assert figs["flush_error"] == "FlushTimeoutError" and figs["reader_alive"]
