"""Celery tasks of the shop (``celery -A exampleproject worker`` runs them).

Beside the JetStream consumer that bills orders (``consumers.py``), Celery
does the jobs a caller waits for or schedules: a receipt, a reminder later.
Database connections are Celery's and Django's business as in any Celery
project (the worker closes stale ones around each task).
"""

from celery import shared_task

from shop.models import Order


@shared_task(acks_late=True)
def receipt(order_id: int) -> str:
    """The receipt line of an order (acked after it ran: a crash runs it again)."""
    order = Order.objects.get(pk=order_id)
    return f"order {order.pk}: {order.quantity} x {order.item} ({order.status})"


@shared_task
def billed_count() -> int:
    """How many orders are billed."""
    return Order.objects.filter(status="billed").count()
