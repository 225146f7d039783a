"""Django for the jsclient.contrib.django tests: real settings (SQLite), tables made once.

Django is configured when this conftest is imported, before the test modules
(which import the test app's models). Each test that talks to NATS gets its
own server through ``django_nats``, which points ``JSCLIENT`` at it and closes
the process's connection afterwards.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import djsettings  # noqa: E402

_DB_DIR = tempfile.mkdtemp(prefix="jsclient-django-")
DB_PATH = str(Path(_DB_DIR) / "test.sqlite3")
djsettings.configure(DB_PATH)

from django.core.management import call_command  # noqa: E402
from django.test.utils import override_settings  # noqa: E402

from jsclient.contrib.django import close_connection  # noqa: E402
from jsclient.server import NatsServer  # noqa: E402

call_command("migrate", run_syncdb=True, verbosity=0)


@pytest.fixture(scope="session", autouse=True)
def _remove_db_dir() -> Iterator[None]:
    yield
    shutil.rmtree(_DB_DIR, ignore_errors=True)


@pytest.fixture
def django_nats(nats_server: NatsServer) -> Iterator[NatsServer]:
    """``JSCLIENT`` points at this test's server; the process's connection is closed after."""
    with override_settings(JSCLIENT={"servers": [nats_server.url], "jetstream": {"timeout": 5.0}}):
        try:
            yield nats_server
        finally:
            close_connection()


@pytest.fixture
def db_path() -> str:
    return DB_PATH


@pytest.fixture
def spawn(django_nats: NatsServer, db_path: str, tmp_path: Path) -> Iterator[Any]:
    """Start ``manage.py jetstream_worker`` processes; each is killed at the end."""
    from test_django_worker import WorkerProcess

    procs: list[WorkerProcess] = []

    def start(*args: str, sleep: float = 0.0) -> WorkerProcess:
        p = WorkerProcess(
            django_nats.url, db_path, tmp_path / f"worker{len(procs)}.log", *args, sleep=sleep
        )
        procs.append(p)
        return p

    try:
        yield start
    finally:
        for p in procs:
            p.kill()
