"""jsclient services and nats-py's ``nats.micro`` on one server, both directions.

The nats-py side runs in a thread of its own with its own asyncio loop, as a
separate process would: jsclient's ServiceClient discovers and calls a
nats-py service (error headers included), and nats-py requests reach a
jsclient service and read its discovery replies with nats-py's own parsers.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import jsonschema  # type: ignore[import-untyped]
import nats
import nats.micro
import pytest
from nats.micro.service import ServiceInfo as NpServiceInfo
from nats.micro.service import ServicePing as NpServicePing
from nats.micro.service import ServiceStats as NpServiceStats

from jsclient.client import Client
from jsclient.micro import Request, ServiceClient, ServiceError
from jsclient.server import NatsServer

T = TypeVar("T")
_SCHEMAS = Path(__file__).parent / "data" / "micro"


class AsyncSide:
    """An asyncio loop on a thread of its own, with a nats-py connection."""

    def __init__(self, url: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(
            target=self.loop.run_forever, name="test-nats-py-loop", daemon=True
        )
        self.thread.start()
        self.nc: Any = self.run(nats.connect(url))

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 10.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        try:
            self.run(self.nc.close())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.loop.close()


@pytest.fixture
def aside(nats_server: NatsServer) -> Iterator[AsyncSide]:
    side = AsyncSide(nats_server.url)
    try:
        yield side
    finally:
        side.close()


def _valid(kind: str, body: bytes) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(body)
    schema = json.loads((_SCHEMAS / f"{kind}_response.json").read_text())
    jsonschema.validate(doc, schema)
    return doc


def test_jsclient_discovers_and_calls_a_nats_py_service(nc: Client, aside: AsyncSide) -> None:
    async def echo(req: Any) -> None:
        await req.respond(b"np:" + req.data)

    async def conflict(req: Any) -> None:
        await req.respond_error("409", "already charged", data=b"{}")

    async def start() -> Any:
        svc = await nats.micro.add_service(
            aside.nc,
            name="np-billing",
            version="3.2.1",
            description="nats-py side",
            metadata={"impl": "nats-py"},
        )
        await svc.add_endpoint(name="echo", handler=echo, subject="np.echo")
        grp = svc.add_group(name="np")
        await grp.add_endpoint(name="conflict", handler=conflict)
        await aside.nc.flush()
        return svc

    svc = aside.run(start())
    try:
        sc = ServiceClient(nc)
        pings = sc.ping("np-billing", timeout=0.5)
        assert len(pings) == 1
        sid = pings[0].id
        assert (pings[0].name, pings[0].version, pings[0].metadata) == (
            "np-billing",
            "3.2.1",
            {"impl": "nats-py"},
        )
        info = sc.info("np-billing", sid, timeout=5.0)[0]
        assert info.description == "nats-py side"
        assert {(e.name, e.subject, e.queue_group) for e in info.endpoints} == {
            ("echo", "np.echo", "q"),
            ("conflict", "np.conflict", "q"),
        }

        assert nc.request("np.echo", b"hi", timeout=5.0).data == b"np:hi"
        err = nc.request("np.conflict", b"x", timeout=5.0)
        assert err.data == b"{}"
        with pytest.raises(ServiceError) as ei:
            ServiceError.check(err)
        assert (ei.value.code, ei.value.description) == (409, "already charged")

        stats = sc.stats("np-billing", sid, timeout=5.0)[0]
        by_name = {e.name: e for e in stats.endpoints}
        assert by_name["echo"].num_requests == 1
        assert by_name["conflict"].num_requests == 1
        assert stats.started.utcoffset() is not None
        # nats-py's replies match the published schemas too.
        for verb, kind in (("PING", "ping"), ("INFO", "info"), ("STATS", "stats")):
            _valid(kind, nc.request(f"$SRV.{verb}.np-billing.{sid}", timeout=5.0).data)
    finally:
        aside.run(svc.stop())


def test_nats_py_calls_and_discovers_a_jsclient_service(nc: Client, aside: AsyncSide) -> None:
    def charge(req: Request) -> None:
        if req.data == b"neg":
            req.respond_error(400, "bad amount")
        elif req.data == b"boom":
            raise RuntimeError("db down")
        else:
            req.respond(b"charged:" + req.data)

    svc = nc.add_service("js-billing", "1.0.0", metadata={"impl": "jsclient"})
    svc.add_group("billing").add_endpoint("charge", charge)
    anc = aside.nc

    ok = aside.run(anc.request("billing.charge", b"10", timeout=5))
    assert ok.data == b"charged:10"
    bad = aside.run(anc.request("billing.charge", b"neg", timeout=5))
    assert bad.headers["Nats-Service-Error"] == "bad amount"
    assert bad.headers["Nats-Service-Error-Code"] == "400"
    boom = aside.run(anc.request("billing.charge", b"boom", timeout=5))
    assert boom.headers["Nats-Service-Error-Code"] == "500"
    assert "db down" in boom.headers["Nats-Service-Error"]

    # nats-py's own parsers read jsclient's discovery replies.
    sid = svc.id
    ping = NpServicePing.from_dict(
        json.loads(aside.run(anc.request(f"$SRV.PING.js-billing.{sid}", timeout=5)).data)
    )
    assert (ping.name, ping.id, ping.metadata) == ("js-billing", sid, {"impl": "jsclient"})
    info = NpServiceInfo.from_dict(
        json.loads(aside.run(anc.request(f"$SRV.INFO.js-billing.{sid}", timeout=5)).data)
    )
    assert [(e.name, e.subject, e.queue_group) for e in info.endpoints] == [
        ("charge", "billing.charge", "q")
    ]
    stats = NpServiceStats.from_dict(
        json.loads(aside.run(anc.request(f"$SRV.STATS.js-billing.{sid}", timeout=5)).data)
    )
    ep = stats.endpoints[0]
    assert (ep.num_requests, ep.num_errors) == (3, 2)
    assert ep.last_error is not None and ep.last_error.startswith("500:")
    assert stats.started.replace(microsecond=0) == svc.stats().started.replace(
        microsecond=0, tzinfo=None
    )
