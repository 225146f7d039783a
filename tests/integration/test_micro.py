"""Services (ADR-32): endpoints on handler threads, discovery, errors, stats, stop.

Discovery replies are checked against the published JSON schemas of
``io.nats.micro.v1.ping_response`` / ``info_response`` / ``stats_response``
(copied from nats-io/jsm.go into ``data/micro/``, see its README).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest

import jsclient
from jsclient import errors
from jsclient.client import Client
from jsclient.micro import (
    EndpointStats,
    PingResponse,
    Request,
    Service,
    ServiceClient,
    ServiceError,
    ServiceInfo,
    ServiceStats,
)
from jsclient.server import NatsServer

_SCHEMAS = Path(__file__).parent / "data" / "micro"


def _schema(kind: str) -> dict[str, Any]:
    schema: dict[str, Any] = json.loads((_SCHEMAS / f"{kind}_response.json").read_text())
    return schema


def _validate(kind: str, body: bytes) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(body)
    jsonschema.validate(
        doc, _schema(kind), format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER
    )
    assert doc["type"] == f"io.nats.micro.v1.{kind}_response"
    return doc


@pytest.fixture
def peer(nats_server: NatsServer) -> Iterator[Client]:
    """A second connection: the requester / discovery side."""
    with jsclient.connect(nats_server.url) as other:
        yield other


def _echo(req: Request) -> None:
    req.respond(req.data)


def _wait_for(cond: Any, timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(0.01)


def test_endpoint_answers_on_a_handler_thread(nc: Client, peer: Client) -> None:
    seen: list[str] = []

    def handler(req: Request) -> None:
        seen.append(threading.current_thread().name)
        assert req.subject == "echo" and req.reply
        req.respond(b"re:" + req.data, headers={"X-Echo": "1"})

    svc = nc.add_service("echo-svc", "1.0.0")
    assert isinstance(svc, Service)
    ep = svc.add_endpoint("echo", handler)
    assert (ep.name, ep.subject, ep.queue_group, ep.threads) == ("echo", "echo", "q", 1)
    # add_endpoint returned after a flush: a request right now reaches it.
    msg = peer.request("echo", b"hi", timeout=5.0)
    assert msg.data == b"re:hi"
    assert (msg.headers or {}).get("X-Echo") == "1"
    assert ServiceError.check(msg) is msg
    assert seen and seen[0].startswith("jsclient-svc-echo-svc-echo-")
    assert all(not n.startswith("jsclient-reader") for n in seen)


def test_discovery_subjects_and_schemas(nc: Client, peer: Client) -> None:
    svc = nc.add_service(
        "disco", "2.1.0-rc.1+b5", description="finds things", metadata={"team": "x"}
    )
    svc.add_endpoint("find", _echo, metadata={"path": "/find"})
    other = nc.add_service("other", "0.0.1")
    sid = svc.id
    for verb, kind in (("PING", "ping"), ("INFO", "info"), ("STATS", "stats")):
        one = peer.request(f"$SRV.{verb}.disco.{sid}", timeout=5.0)
        doc = _validate(kind, one.data)
        assert (doc["name"], doc["id"], doc["version"]) == ("disco", sid, "2.1.0-rc.1+b5")
        assert doc["metadata"] == {"team": "x"}
        by_name = list(peer.request_many(f"$SRV.{verb}.disco", timeout=0.5, sentinel=None))
        assert [json.loads(m.data)["id"] for m in by_name] == [sid]
        everyone = list(peer.request_many(f"$SRV.{verb}", timeout=0.5, sentinel=None))
        ids = set()
        for m in everyone:
            ids.add(_validate(kind, m.data)["id"])
        assert ids == {sid, other.id}
    info = _validate("info", peer.request(f"$SRV.INFO.disco.{sid}", timeout=5.0).data)
    assert info["description"] == "finds things"
    assert info["endpoints"] == [
        {"name": "find", "subject": "find", "queue_group": "q", "metadata": {"path": "/find"}}
    ]
    stats = _validate("stats", peer.request(f"$SRV.STATS.disco.{sid}", timeout=5.0).data)
    assert stats["started"].endswith("Z")


def test_service_client_typed_results(nc: Client, peer: Client) -> None:
    svc = nc.add_service("typed", "1.0.0", metadata={"k": "v"})
    svc.add_endpoint("a", _echo)
    assert peer.request("a", b"x", timeout=5.0).data == b"x"
    sc = ServiceClient(peer)
    pings = sc.ping("typed", timeout=0.5)
    assert pings == [
        PingResponse("io.nats.micro.v1.ping_response", "typed", svc.id, "1.0.0", {"k": "v"})
    ]
    t0 = time.monotonic()
    infos = sc.info("typed", svc.id, timeout=5.0)  # one instance: ends at its reply
    assert time.monotonic() - t0 < 2.5
    assert len(infos) == 1 and isinstance(infos[0], ServiceInfo)
    assert infos[0] == svc.info()
    stats = sc.stats(timeout=0.5)
    assert len(stats) == 1 and isinstance(stats[0], ServiceStats)
    st = stats[0]
    assert st.started.tzinfo is not None and st.started.utcoffset() == timedelta(0)
    assert abs(datetime.now(UTC) - st.started) < timedelta(minutes=1)
    assert st.endpoints[0].num_requests == 1
    assert sc.ping("nobody", timeout=0.3) == []
    assert ServiceClient(peer, api_prefix="elsewhere").ping(timeout=0.3) == []
    with pytest.raises(ValueError):
        sc.ping(None, svc.id)


def test_api_prefix_override(nc: Client, peer: Client) -> None:
    svc = nc.add_service("prefixed", "1.0.0", api_prefix="acct.SRV")
    assert svc.api_prefix == "acct.SRV"
    assert [p.id for p in ServiceClient(peer, api_prefix="acct.SRV").ping(timeout=0.3)] == [svc.id]
    assert ServiceClient(peer).ping("prefixed", timeout=0.3) == []
    _validate("ping", peer.request(f"acct.SRV.PING.prefixed.{svc.id}", timeout=5.0).data)


def test_groups_subjects_and_queue_groups(nc: Client) -> None:
    svc = nc.add_service("grouped", "1.0.0", queue_group="svcq")
    svc.add_endpoint("top", _echo)
    v1 = svc.add_group("v1")
    v1.add_endpoint("a", _echo)
    v1.add_endpoint("b", _echo, subject="bee.*", queue_group="own")
    admin = v1.add_group("admin", queue_group=None)
    admin.add_endpoint("c", _echo)
    admin.add_endpoint("d", _echo, queue_group="back")
    svc.add_group("").add_endpoint("e", _echo, queue_group=None)
    got = {(e.name, e.subject, e.queue_group) for e in svc.info().endpoints}
    assert got == {
        ("top", "top", "svcq"),
        ("a", "v1.a", "svcq"),
        ("b", "v1.bee.*", "own"),
        ("c", "v1.admin.c", None),
        ("d", "v1.admin.d", "back"),
        ("e", "e", None),
    }
    info = svc.info().to_dict()
    jsonschema.validate(info, _schema("info"))
    assert {e["name"]: e["queue_group"] for e in info["endpoints"]}["c"] == ""


def test_queue_group_none_means_every_instance_answers(nc: Client, peer: Client) -> None:
    shared = [nc.add_service("qs", "1.0.0") for _ in range(2)]
    for s in shared:
        s.add_endpoint("work", _echo)
    assert len(list(peer.request_many("work", b"1", timeout=0.5))) == 1  # one of the "q" group
    plain = [nc.add_service("ps", "1.0.0", queue_group=None) for _ in range(2)]
    for s in plain:
        s.add_endpoint("all", _echo)
    assert len(list(peer.request_many("all", b"1", timeout=0.5))) == 2


def test_errors_headers_and_stats(nc: Client, peer: Client) -> None:
    def charge(req: Request) -> None:
        if req.data == b"bad":
            req.respond_error(400, "bad amount", data=b"{}", headers={"X-Why": "neg"})
        elif req.data == b"boom":
            raise ValueError("exploded")
        elif req.data == b"exit":
            raise SystemExit(3)
        else:
            time.sleep(0.02)
            req.respond(b"ok")

    svc = nc.add_service("billing", "1.2.0")
    svc.add_endpoint("charge", charge)
    assert peer.request("charge", b"10", timeout=5.0).data == b"ok"

    bad = peer.request("charge", b"bad", timeout=5.0)
    assert bad.data == b"{}"
    assert (bad.headers or {})["X-Why"] == "neg"
    with pytest.raises(ServiceError) as ei:
        ServiceError.check(bad)
    assert (ei.value.code, ei.value.description) == (400, "bad amount")
    # Counted when the handler returns (a moment after its reply left), the
    # count, time and error in one step, as nats.go does.
    assert _wait_for(lambda: svc.stats().endpoints[0].num_requests == 2)
    st = svc.stats().endpoints[0]
    assert (st.num_requests, st.num_errors, st.last_error) == (2, 1, "400:bad amount")

    boom = peer.request("charge", b"boom", timeout=5.0)
    hdrs = boom.headers or {}
    assert hdrs["Nats-Service-Error-Code"] == "500"
    assert "exploded" in hdrs["Nats-Service-Error"]
    # A BaseException from a handler: answered too, and the thread goes on.
    ex = peer.request("charge", b"exit", timeout=5.0)
    assert (ex.headers or {})["Nats-Service-Error-Code"] == "500"
    assert peer.request("charge", b"1", timeout=5.0).data == b"ok"

    assert _wait_for(lambda: svc.stats().endpoints[0].num_requests == 5)
    st = svc.stats().endpoints[0]
    assert (st.num_requests, st.num_errors) == (5, 3)
    assert st.last_error.startswith("500:SystemExit")
    # Nanoseconds: two 20 ms requests at least, counted with their requests.
    assert st.processing_time >= 2 * 20_000_000
    assert st.average_processing_time == st.processing_time // st.num_requests
    doc = _validate("stats", peer.request(f"$SRV.STATS.billing.{svc.id}", timeout=5.0).data)
    wire = doc["endpoints"][0]
    assert wire["num_errors"] == 3 and isinstance(wire["processing_time"], int)
    assert wire["last_error"].startswith("500:")


def test_stats_handler_and_reset(nc: Client, peer: Client) -> None:
    calls: list[EndpointStats] = []

    def data(es: EndpointStats) -> Any:
        calls.append(es)
        return {"seen": es.num_requests, "name": es.name}

    svc = nc.add_service("withdata", "1.0.0", stats_handler=data)
    svc.add_endpoint("x", _echo)
    peer.request("x", b"1", timeout=5.0)
    # The count changes at handler return, which may come after the reply arrived.
    assert _wait_for(lambda: svc.stats().endpoints[0].num_requests == 1)
    assert svc.stats().endpoints[0].data == {"seen": 1, "name": "x"}
    doc = _validate("stats", peer.request(f"$SRV.STATS.withdata.{svc.id}", timeout=5.0).data)
    assert doc["endpoints"][0]["data"] == {"seen": 1, "name": "x"}
    before = svc.stats().started
    time.sleep(0.01)
    svc.reset()
    after = svc.stats()
    assert after.started > before
    ep = after.endpoints[0]
    assert (ep.num_requests, ep.num_errors, ep.processing_time, ep.last_error) == (0, 0, 0, "")


def test_threads_serve_blocking_requests_at_once(nc: Client, peer: Client) -> None:
    def slow(req: Request) -> None:
        time.sleep(0.2)  # a blocking call, as a database query would be
        req.respond(b"done")

    svc = nc.add_service("io", "1.0.0", threads=8)
    ep = svc.add_endpoint("slow", slow)
    assert ep.threads == 8
    names = {t.name for t in threading.enumerate() if t.name.startswith("jsclient-svc-io-slow-")}
    assert len(names) == 8
    answers: list[bytes] = []
    lock = threading.Lock()

    def ask() -> None:
        data = peer.request("slow", b"", timeout=10.0).data
        with lock:
            answers.append(data)

    askers = [threading.Thread(target=ask) for _ in range(8)]
    t0 = time.monotonic()
    for t in askers:
        t.start()
    for t in askers:
        t.join(15)
    elapsed = time.monotonic() - t0
    assert answers == [b"done"] * 8
    assert elapsed < 1.2, f"8 x 0.2 s requests on 8 threads took {elapsed:.2f} s"


def test_endpoint_threads_override_the_service(nc: Client) -> None:
    svc = nc.add_service("mixed", "1.0.0", threads=3)
    assert svc.add_endpoint("a", _echo).threads == 3
    assert svc.add_endpoint("b", _echo, threads=2).threads == 2
    assert svc.add_group("g").add_endpoint("c", _echo, threads=None).threads == 3


def test_discovery_answers_while_handlers_are_busy(nc: Client, peer: Client) -> None:
    release = threading.Event()
    started = threading.Event()

    def busy(req: Request) -> None:
        started.set()
        release.wait(10)
        req.respond(b"finally")

    svc = nc.add_service("busy", "1.0.0", threads=1)
    svc.add_endpoint("work", busy)
    result: list[bytes] = []
    asker = threading.Thread(target=lambda: result.append(peer.request("work", timeout=10).data))
    asker.start()
    try:
        assert started.wait(5)
        sc = ServiceClient(peer)
        assert [p.id for p in sc.ping("busy", timeout=0.5)] == [svc.id]
        assert sc.stats("busy", svc.id, timeout=5.0)[0].endpoints[0].num_requests == 0
        assert sc.info("busy", svc.id, timeout=5.0)[0].endpoints[0].name == "work"
    finally:
        release.set()
        asker.join(10)
    assert result == [b"finally"]


def test_stop_drains_and_answers_queued_requests(nc: Client, peer: Client) -> None:
    def slow(req: Request) -> None:
        time.sleep(0.2)
        req.respond(b"ok:" + req.data)

    svc = nc.add_service("stopper", "1.0.0")
    svc.add_endpoint("s", slow)
    answers: list[bytes] = []
    lock = threading.Lock()

    def ask(i: int) -> None:
        data = peer.request("s", str(i).encode(), timeout=10).data
        with lock:
            answers.append(data)

    askers = [threading.Thread(target=ask, args=(i,)) for i in range(3)]
    for t in askers:
        t.start()
    assert _wait_for(lambda: svc.endpoints[0]._sub.delivered == 3)
    svc.stop(timeout=10)
    assert svc.stopped
    for t in askers:
        t.join(10)
    assert sorted(answers) == [b"ok:0", b"ok:1", b"ok:2"]  # all answered, none lost
    assert not [t for t in threading.enumerate() if t.name.startswith("jsclient-svc-stopper")]
    with pytest.raises(errors.NoRespondersError):
        peer.request("s", timeout=2)
    assert ServiceClient(peer).ping("stopper", timeout=0.3) == []
    svc.stop()  # again: harmless
    with pytest.raises(errors.Error):
        svc.add_endpoint("late", _echo)


def test_context_manager_stops(nc: Client, peer: Client) -> None:
    with nc.add_service("ctx", "1.0.0") as svc:
        svc.add_endpoint("c", _echo)
        assert peer.request("c", b"1", timeout=5).data == b"1"
    assert svc.stopped
    with pytest.raises(errors.NoRespondersError):
        peer.request("c", timeout=2)


def test_connection_drain_waits_for_handlers(nats_server: NatsServer, peer: Client) -> None:
    nc = jsclient.connect(nats_server.url)
    started = threading.Event()

    def slow(req: Request) -> None:
        started.set()
        time.sleep(0.3)
        req.respond(b"drained")

    svc = nc.add_service("draining", "1.0.0")
    svc.add_endpoint("d", slow)
    result: list[bytes] = []
    asker = threading.Thread(target=lambda: result.append(peer.request("d", timeout=10).data))
    asker.start()
    assert started.wait(5)
    nc.drain(timeout=10)
    asker.join(10)
    assert result == [b"drained"]
    assert svc.stopped


def test_slow_consumer_is_reported_and_counted(nats_server: NatsServer, peer: Client) -> None:
    seen: list[BaseException] = []
    nc = jsclient.connect(nats_server.url, error_cb=seen.append)
    release = threading.Event()

    def blocked(req: Request) -> None:
        release.wait(10)

    try:
        svc = nc.add_service("slowc", "1.0.0")
        ep = svc.add_endpoint("b", blocked)
        ep._sub._pending_msgs_limit = 2  # the default (65536) is the subscription's
        for _ in range(10):
            peer.publish("b", b"x")
        peer.flush()
        assert _wait_for(lambda: [e for e in seen if isinstance(e, errors.SlowConsumerError)])
        st = svc.stats().endpoints[0]
        assert st.num_errors >= 1 and "slow consumer" in st.last_error
    finally:
        release.set()
        nc.close()


def test_validation(nc: Client) -> None:
    with pytest.raises(ValueError):
        nc.add_service("bad name", "1.0.0")
    with pytest.raises(ValueError):
        nc.add_service("good", "1.0")
    with pytest.raises(ValueError):
        nc.add_service("good", "1.0.0", threads=0)
    with pytest.raises(TypeError):
        nc.add_service("good", "1.0.0", metadata={"a": 1})  # type: ignore[dict-item]
    svc = nc.add_service("good", "1.0.0")
    with pytest.raises(ValueError):
        svc.add_endpoint("bad.name", _echo)
    with pytest.raises(ValueError):
        svc.add_endpoint("ok", _echo, subject="a b")
    with pytest.raises(ValueError):
        svc.add_group("a.>")
    with pytest.raises(TypeError):
        svc.add_endpoint("ok", b"not callable")  # type: ignore[arg-type]
    meta = {"k": "v"}
    ep = svc.add_endpoint("ok", _echo, metadata=meta)
    meta["k"] = "changed"  # ADR-32: immutable once set
    ep.metadata["x"] = "y"
    svc.metadata["sneaky"] = "no"
    assert svc.info().metadata == {}
    assert svc.info().endpoints[0].metadata == {"k": "v"}


def test_respond_error_arguments(nc: Client, peer: Client) -> None:
    problems: list[str] = []

    def handler(req: Request) -> None:
        args: tuple[Any, str]
        for args in ((0.5, "x"), (400, "")):
            try:
                req.respond_error(*args)
            except (TypeError, ValueError) as exc:
                problems.append(type(exc).__name__)
        req.respond_error(422, "line one\nline two")

    nc.add_service("args", "1.0.0").add_endpoint("args", handler)
    msg = peer.request("args", timeout=5)
    assert problems == ["TypeError", "ValueError"]
    with pytest.raises(ServiceError) as ei:
        ServiceError.check(msg)
    assert (ei.value.code, ei.value.description) == (422, "line one line two")


def test_closing_the_connection_stops_the_service(nats_server: NatsServer) -> None:
    nc = jsclient.connect(nats_server.url)
    svc = nc.add_service("closing", "1.0.0", threads=2)
    svc.add_endpoint("c", _echo)
    nc.close()
    assert _wait_for(lambda: svc.stopped)
    assert _wait_for(
        lambda: not [t for t in threading.enumerate() if t.name.startswith("jsclient-svc-closing")]
    )
    svc.stop()  # after the close: quiet
