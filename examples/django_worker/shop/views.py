"""Placing an order saves it and publishes ``orders.new`` once the transaction commits."""

import json

from django.db import transaction
from django.http import HttpRequest, HttpResponseBadRequest, JsonResponse
from django.shortcuts import get_object_or_404
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from jsclient.contrib.django import publish_on_commit
from shop.models import Order


@csrf_exempt  # an API endpoint for the example; keep CSRF on for browser forms
@require_POST
def place_order(request: HttpRequest) -> JsonResponse | HttpResponseBadRequest:
    item = request.POST.get("item", "").strip()
    try:
        quantity = int(request.POST.get("quantity", "1"))
    except ValueError:
        quantity = 0
    if not item or quantity < 1:
        return HttpResponseBadRequest("give an item and a positive quantity")
    with transaction.atomic():
        order = Order.objects.create(item=item, quantity=quantity)
        # Sent after COMMIT (never for a rolled-back order); the id makes a
        # retried publish harmless.
        publish_on_commit(
            "orders.new", json.dumps({"id": order.pk}).encode(), msg_id=f"order-{order.pk}"
        )
    return JsonResponse(order.as_dict(), status=201)


@require_GET
def order_detail(request: HttpRequest, pk: int) -> JsonResponse:
    return JsonResponse(get_object_or_404(Order, pk=pk).as_dict())
