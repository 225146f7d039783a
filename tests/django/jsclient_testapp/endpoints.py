"""Endpoints that ``manage.py jetstream_worker`` finds (autodiscovery of ``<app>.endpoints``).

``billing.charge``: saves an ``Order`` for the request's payload on the
handler thread and answers ``charged <pk>``; sleeps
``JSCLIENT_TEST_HANDLER_SLEEP`` seconds first, so a stop lands while
requests are in hand; ``fail`` raises (the service answers 500).
"""

from __future__ import annotations

import os
import time

from jsclient.contrib.django import endpoint
from jsclient.micro import Request
from jsclient_testapp.models import Order

SLEEP = float(os.environ.get("JSCLIENT_TEST_HANDLER_SLEEP", "0"))


@endpoint(
    service="billing",
    version="1.0.0",
    name="charge",
    threads=4,
    metadata={"unit": "cents"},
    description="test billing",
)
def charge(req: Request) -> None:
    if SLEEP:
        time.sleep(SLEEP)
    item = req.data.decode()
    if item == "fail":
        raise RuntimeError("charge failed")
    order = Order.objects.create(item=item, status="charged")
    req.respond(b"charged %d" % order.pk)
