"""``python manage.py jetstream_worker [--consumer NAME ...] [--endpoint NAME ...] [--threads N]``.

Imports ``<app>.consumers`` and ``<app>.endpoints`` of every installed app
(where ``@consumer`` and ``@endpoint`` handlers live), then runs the selected
consumers and endpoints until SIGTERM or SIGINT; see
:mod:`jsclient.contrib.django.worker`. With neither option it runs every
registered one; with either, only what is selected.
"""

from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils.module_loading import autodiscover_modules

from jsclient import errors
from jsclient.contrib.django.connection import close_connection
from jsclient.contrib.django.consumers import registered
from jsclient.contrib.django.endpoints import registered_endpoints, select
from jsclient.contrib.django.worker import Worker, WorkerError


class Command(BaseCommand):  # type: ignore[misc]  # Django ships no types
    help = (
        "Run the registered JetStream consumers (@consumer) and service endpoints "
        "(@endpoint) until SIGTERM/SIGINT; "
        "the first signal stops gracefully, a second exits at once."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--consumer",
            action="append",
            dest="consumers",
            metavar="NAME",
            help="run this consumer (repeatable); default: every registered one",
        )
        parser.add_argument(
            "--endpoint",
            action="append",
            dest="endpoints",
            metavar="NAME",
            help="run this endpoint, SERVICE.ENDPOINT, or every endpoint of SERVICE "
            "(repeatable); default: every registered one",
        )
        parser.add_argument(
            "--threads",
            type=int,
            metavar="N",
            help="handler threads per consumer and endpoint (default: each one's threads=...)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        autodiscover_modules("consumers")
        autodiscover_modules("endpoints")
        available = registered()
        available_eps = registered_endpoints()
        if not available and not available_eps:
            raise CommandError(
                "no JetStream consumers or endpoints are registered: decorate handlers with "
                "@jsclient.contrib.django.consumer in <app>/consumers.py or "
                "@jsclient.contrib.django.endpoint in <app>/endpoints.py"
            )
        picked = options.get("consumers")
        picked_eps = options.get("endpoints")
        if picked is None and picked_eps is None:
            names, ep_names = sorted(available), sorted(available_eps)
        else:
            names, ep_names = picked or [], picked_eps or []
        unknown = [n for n in names if n not in available]
        if unknown:
            raise CommandError(
                f"unknown consumer(s) {', '.join(unknown)}; "
                f"registered: {', '.join(sorted(available)) or '(none)'}"
            )
        endpoints, unknown = select(ep_names)
        if unknown:
            raise CommandError(
                f"unknown endpoint(s) {', '.join(unknown)}; "
                f"registered: {', '.join(sorted(available_eps)) or '(none)'}"
            )
        threads = options.get("threads")
        if threads is not None and threads < 1:
            raise CommandError("--threads must be at least 1")
        worker = Worker(
            [available[n] for n in dict.fromkeys(names)], endpoints=endpoints, threads=threads
        )
        try:
            with worker.signal_handlers():
                try:
                    worker.start()
                except (WorkerError, errors.Error) as exc:
                    raise CommandError(str(exc)) from exc
                status = worker.serve()
        finally:
            close_connection()
        if status:
            sys.exit(status)
