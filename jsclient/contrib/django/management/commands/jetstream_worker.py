"""``python manage.py jetstream_worker [--consumer NAME ...] [--threads N]``.

Imports ``<app>.consumers`` of every installed app (where ``@consumer``
handlers live), then runs the selected consumers (all by default) until
SIGTERM or SIGINT; see :mod:`jsclient.contrib.django.worker`.
"""

from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils.module_loading import autodiscover_modules

from jsclient import errors
from jsclient.contrib.django.connection import close_connection
from jsclient.contrib.django.consumers import registered
from jsclient.contrib.django.worker import Worker, WorkerError


class Command(BaseCommand):  # type: ignore[misc]  # Django ships no types
    help = (
        "Run the registered JetStream consumers (@consumer) until SIGTERM/SIGINT; "
        "the first signal stops gracefully, a second exits at once."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--consumer",
            action="append",
            dest="consumers",
            metavar="NAME",
            help="run only this consumer (repeatable); default: every registered one",
        )
        parser.add_argument(
            "--threads",
            type=int,
            metavar="N",
            help="handler threads per consumer (default: each consumer's threads=...)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        autodiscover_modules("consumers")
        available = registered()
        if not available:
            raise CommandError(
                "no JetStream consumers are registered: decorate handlers with "
                "@jsclient.contrib.django.consumer in <app>/consumers.py"
            )
        names = options.get("consumers") or sorted(available)
        unknown = [n for n in names if n not in available]
        if unknown:
            raise CommandError(
                f"unknown consumer(s) {', '.join(unknown)}; "
                f"registered: {', '.join(sorted(available))}"
            )
        threads = options.get("threads")
        if threads is not None and threads < 1:
            raise CommandError("--threads must be at least 1")
        worker = Worker([available[n] for n in dict.fromkeys(names)], threads=threads)
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
