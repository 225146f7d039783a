"""An order's status as a NATS service (ADR-32), hosted by ``manage.py jetstream_worker``.

``nats request shop.order.status 1`` (or any client) gets the order as JSON;
``nats micro ls`` sees the service ``shop``.
"""

import json

from jsclient.contrib.django import endpoint
from jsclient.micro import Request
from shop.models import Order


@endpoint(service="shop", version="1.0.0", name="status", subject="shop.order.status", threads=2)
def order_status(req: Request) -> None:
    try:
        order = Order.objects.get(pk=int(req.data))
    except (ValueError, Order.DoesNotExist):
        req.respond_error(404, "no such order")
        return
    req.respond(json.dumps(order.as_dict()).encode())
