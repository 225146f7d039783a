"""``python manage.py setup_streams``: create (or update) the ORDERS stream."""

from typing import Any

from django.core.management.base import BaseCommand

from jsclient.contrib.django import get_jetstream


class Command(BaseCommand):
    help = "Create or update the ORDERS stream (subjects orders.>)"

    def handle(self, *args: Any, **options: Any) -> None:
        stream = get_jetstream().create_or_update_stream(name="ORDERS", subjects=["orders.>"])
        self.stdout.write(f"stream {stream.name} ready")
