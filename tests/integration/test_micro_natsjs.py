"""nats.js's services client discovers and calls a jsclient service (ADR-32).

``tests/natsjs/svc_client.mjs`` requests the service's endpoints, an error
reply and a raising handler included, then pings, infos and stats it; the test
checks what nats.js saw. Both nats.js services clients: v3's
``new Svcm(nc).client()`` (``@nats-io/services``; npm has only its 3.0.0-25
prerelease) and v2's ``nc.services.client()`` (the npm ``nats`` package,
2.29.3). nats.js is installed and run by ``tests/_natsjs.py`` (skipped without
node).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest
from _natsjs import (
    natsjs_fixture,  # noqa: F401 (the natsjs fixture)
    node,
)

from jsclient.client import Client
from jsclient.micro import Request
from jsclient.server import NatsServer


@pytest.mark.parametrize("lib", ["services", "nats"])
def test_nats_js_discovers_and_calls_a_jsclient_service(
    natsjs: Path, nats_server: NatsServer, nc: Client, lib: str
) -> None:
    def charge(req: Request) -> None:
        if req.data == b"neg":
            req.respond_error(400, "bad amount", data=b'{"why":"neg"}')
        elif req.data == b"boom":
            raise RuntimeError("db down")
        else:
            req.respond(b"charged:" + req.data)

    def refund(req: Request) -> None:
        req.respond(b"refunded:" + req.data)

    with nc.add_service(
        "js-billing",
        "1.2.3-rc.1+b5",
        description="jsclient side",
        metadata={"impl": "jsclient"},
    ) as svc:
        svc.add_group("billing").add_endpoint("charge", charge, metadata={"unit": "cent"})
        svc.add_endpoint("refund", refund, subject="refunds.do", queue_group=None)
        out = node(
            natsjs,
            "svc_client.mjs",
            lib,
            nats_server.url,
            "js-billing",
            "billing.charge=10",
            "billing.charge=neg",
            "billing.charge=boom",
            "refunds.do=5 ü",
        )
        ours = svc.stats()

    # The endpoints' replies, as nats.js's ServiceError reads them.
    ok, bad, boom, refunded = out["calls"]
    assert ok == {
        "subject": "billing.charge",
        "data": "charged:10",
        "error_header": None,
        "code_header": None,
        "service_error": None,
        "is_service_error": False,
    }
    assert bad == {
        "subject": "billing.charge",
        "data": '{"why":"neg"}',
        "error_header": "bad amount",
        "code_header": "400",
        "service_error": {"code": 400, "message": "bad amount"},
        "is_service_error": True,
    }
    assert boom == {  # a handler that raises answers 500
        "subject": "billing.charge",
        "data": "",
        "error_header": "RuntimeError: db down",
        "code_header": "500",
        "service_error": {"code": 500, "message": "RuntimeError: db down"},
        "is_service_error": True,
    }
    assert refunded["data"] == "refunded:5 ü" and refunded["service_error"] is None

    # Discovery: every field nats.js's client yields.
    identity = {
        "name": "js-billing",
        "id": svc.id,
        "version": "1.2.3-rc.1+b5",
        "metadata": {"impl": "jsclient"},
    }
    assert {**identity, "type": "io.nats.micro.v1.ping_response"} in out["ping_all"]
    assert out["ping"] == [{**identity, "type": "io.nats.micro.v1.ping_response"}]

    assert len(out["info"]) == 1
    info = out["info"][0]
    assert info == {
        **identity,
        "type": "io.nats.micro.v1.info_response",
        "description": "jsclient side",
        "endpoints": info["endpoints"],
    }
    by_subject = {e["subject"]: e for e in info["endpoints"]}
    assert by_subject["billing.charge"] == {
        "name": "charge",
        "subject": "billing.charge",
        "queue_group": "q",
        "metadata": {"unit": "cent"},
    }
    assert by_subject["refunds.do"] == {
        "name": "refund",
        "subject": "refunds.do",
        "queue_group": "",  # none, as nats.go writes it
        "metadata": {},
    }
    assert len(by_subject) == 2

    assert len(out["stats"]) == 1
    stats = out["stats"][0]
    assert {k: stats[k] for k in ("type", *identity)} == {
        **identity,
        "type": "io.nats.micro.v1.stats_response",
    }
    started = datetime.fromisoformat(stats["started"].replace("Z", "+00:00"))
    assert started == ours.started
    eps = {e["name"]: e for e in stats["endpoints"]}
    assert set(eps) == {"charge", "refund"}
    assert (eps["charge"]["subject"], eps["charge"]["queue_group"]) == ("billing.charge", "q")
    assert (eps["charge"]["num_requests"], eps["charge"]["num_errors"]) == (3, 2)
    assert (
        eps["charge"]["last_error"].startswith("500:") and "db down" in eps["charge"]["last_error"]
    )
    assert (eps["refund"]["num_requests"], eps["refund"]["num_errors"]) == (1, 0)
    assert not eps["refund"].get("last_error")
    for e in eps.values():
        assert isinstance(e["processing_time"], int) and e["processing_time"] > 0
        assert isinstance(e["average_processing_time"], int)
        assert 0 < e["average_processing_time"] <= e["processing_time"]
