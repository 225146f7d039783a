"""Billing: ``manage.py jetstream_worker`` runs this for every ``orders.new`` message."""

import json
import logging

from django.utils import timezone

from jsclient.contrib.django import consumer
from jsclient.msg import Msg
from shop.models import Order

log = logging.getLogger("shop")


@consumer(stream="ORDERS", durable="billing", filter_subject="orders.new", threads=2)
def bill(msg: Msg) -> None:
    order_id = json.loads(msg.data)["id"]
    # One conditional UPDATE: a redelivered message (after a crash) finds the
    # order billed already and changes nothing, so handling it twice is harmless.
    billed = Order.objects.filter(pk=order_id, status="new").update(
        status="billed", billed_at=timezone.now()
    )
    if billed:
        log.info("billed order %s", order_id)
    elif not Order.objects.filter(pk=order_id).exists():
        msg.term("no such order")  # never redelivered; the worker's ack is then ignored
