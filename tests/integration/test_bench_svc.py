"""The service and request-many rows end to end, with tiny counts, against a real server.

Timings are not asserted (the machine is shared): each row runs in fresh
processes and reports a rate for every client that has it, ``svc-echo``'s
service runs in a process of its own (the service peer), and the io rows'
handlers run the way the rows' descriptions say (side by side or one at a time).
"""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

import jsbench as bench
import jsclient
from jsbench import report, svc
from jsbench.interp import natsio_status
from jsbench.peer import EchoPeer
from jsbench.svc_peer import INFO_SUBJECT, PID, ServicePeer
from jsbench.workloads import JSCLIENT, NATS_PY, NATSIO, by_name
from jsclient import _impl
from jsclient.server import NatsServer

NATSIO_OK, NATSIO_WHY = natsio_status()
ROWS = [
    "svc-echo",
    "svc-echo-local",
    "svc-io-8",
    "svc-io-8-default",
    "svc-io-8-executor",
    "request-many-100",
]
SERVICE_CLIENTS = [JSCLIENT, NATS_PY, NATSIO]


@pytest.mark.parametrize("name", ROWS)
def test_row_reports_a_rate_for_every_client(nats_server: NatsServer, name: str) -> None:
    clients = [JSCLIENT, NATS_PY, NATSIO]
    (o,) = bench.run(
        nats_server.url, [by_name(name)], n=200, clients=clients, impl=_impl.IMPL, timeout=60
    )
    for c in clients:
        st = o.clients[c]
        if c == NATSIO and not NATSIO_OK:
            assert st.status == report.NA and st.reason == NATSIO_WHY
            continue
        assert st.status == report.OK, (name, c, st.error)
        assert st.rate and st.rate > 0
        if name == "svc-echo":  # the service process's CPU, beside the requester's
            assert st.peer_cpu_us is not None and st.peer_cpu_us >= 0, (c, st)
        else:
            assert st.peer_cpu_us is None, (name, c, st)
    assert o.ratio(NATS_PY) is not None


@pytest.mark.parametrize("client", SERVICE_CLIENTS)
def test_svc_echo_service_runs_in_a_process_of_its_own(
    nats_server: NatsServer, client: str
) -> None:
    """The service peer hosts the service with the row's client; its ``$SRV.INFO`` names
    the peer's pid, not this process's. The row itself checks the same (``check_info``)
    before it measures, so a row that reported a rate above was answered from there."""
    if client == NATSIO and not NATSIO_OK:
        pytest.skip(NATSIO_WHY)
    subject = "bench.svc.peer"
    with ServicePeer(client, nats_server.url, subject) as peer:
        assert peer.pid != os.getpid()
        with jsclient.connect(nats_server.url) as nc:
            assert nc.request(subject, b"hi", timeout=10).data == b"hi"
            infos = list(nc.request_many(INFO_SUBJECT, b"", timeout=5, max_count=2, stall=0.5))
            assert len(infos) == 1  # one service instance, and not in this process
            info = json.loads(infos[0].data)
            assert info["metadata"][PID] == str(peer.pid)
            assert [e["subject"] for e in info["endpoints"]] == [subject]
            peer.check_info(infos[0].data)
            mine = json.dumps({"metadata": {PID: str(os.getpid())}}).encode()
            with pytest.raises(RuntimeError, match="not from its peer process"):
                peer.check_info(mine)  # what a service in the measured process would say
    assert peer.proc.returncode == 0  # it exited on stdin's EOF, not killed


@pytest.mark.parametrize("client", SERVICE_CLIENTS)
def test_service_peer_exits_when_the_server_goes_away(nats_server: NatsServer, client: str) -> None:
    if client == NATSIO and not NATSIO_OK:
        pytest.skip(NATSIO_WHY)
    with ServicePeer(client, nats_server.url, "bench.svc.gone") as peer:
        nats_server.stop()
        assert peer.proc.wait(20) == 0


class _Sleeps:
    """Stands in for :mod:`time` in :mod:`jsbench.svc`: records how many handlers block at once."""

    def __init__(self) -> None:
        self.perf_counter = time.perf_counter
        self._lock = threading.Lock()
        self.active = self.peak = self.calls = 0
        self.threads: set[str] = set()

    def sleep(self, seconds: float) -> None:
        assert seconds == svc.IO_WAIT
        with self._lock:
            self.active += 1
            self.calls += 1
            self.peak = max(self.peak, self.active)
            self.threads.add(threading.current_thread().name)
        try:
            time.sleep(0.005)  # long enough for the other requesters' requests to arrive
        finally:
            with self._lock:
                self.active -= 1


@pytest.mark.parametrize(
    ("client", "mode", "side_by_side"),
    [
        (JSCLIENT, None, True),
        (NATS_PY, "task", True),
        (NATS_PY, "executor", False),
        (NATS_PY, "blocking", False),
        (NATSIO, "task", True),
        (NATSIO, "blocking", False),
    ],
)
def test_io_handlers_run_as_described(
    nats_server: NatsServer,
    monkeypatch: pytest.MonkeyPatch,
    client: str,
    mode: str | None,
    side_by_side: bool,
) -> None:
    if client == NATSIO and not NATSIO_OK:
        pytest.skip(NATSIO_WHY)
    sleeps = _Sleeps()
    monkeypatch.setattr(svc, "time", sleeps)
    n = 80
    if client == JSCLIENT:
        res = svc.js_service(nats_server.url, n, 16, io=True, requesters=8, threads=8)
        assert all(t.startswith("jsclient-svc-bench-ep-") for t in sleeps.threads), sleeps.threads
    else:
        fn = svc.py_service if client == NATS_PY else svc.nio_service
        res = fn(nats_server.url, n, 16, io=True, requesters=8, mode=mode or "")
    assert res.rate > 0
    assert sleeps.calls == n + 1  # the warm-up request too
    if side_by_side:
        assert sleeps.peak > 1
    else:
        assert sleeps.peak == 1


def test_echo_peer_sends_as_many_replies_as_asked(nats_server: NatsServer) -> None:
    with (
        EchoPeer(nats_server.url, "bench.peer.many", replies=3),
        jsclient.connect(nats_server.url) as nc,
    ):
        got = nc.request_many("bench.peer.many", b"hi", timeout=10, max_count=3)
        assert [m.data for m in got] == [b"hi"] * 3
    assert svc.js_request_many(nats_server.url, 200, 16).rate > 0  # two requests of 100
    assert svc.py_request_many(nats_server.url, 200, 16).rate > 0
