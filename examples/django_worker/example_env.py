"""What both one-command examples start with: a server, a database and Django set up."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent


@contextmanager
def example_project(prefix: str) -> Iterator[tuple[str, Path]]:
    """An embedded nats-server and a fresh SQLite database in a temporary folder, the
    example project on the path and Django set up and migrated: (server URL, folder)."""
    from jsclient.server import NatsServer

    with tempfile.TemporaryDirectory(prefix=prefix) as tmp, NatsServer() as srv:
        os.environ["NATS_URL"] = srv.url
        os.environ["EXAMPLE_DB"] = str(Path(tmp) / "db.sqlite3")
        os.environ["DJANGO_SETTINGS_MODULE"] = "exampleproject.settings"
        sys.path.insert(0, str(HERE))
        print(f"1. embedded nats-server at {srv.url}")

        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        yield srv.url, Path(tmp)
