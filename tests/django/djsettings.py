"""Django settings for the jsclient.contrib.django tests (settings.configure, SQLite).

Used by this directory's conftest (in the pytest process) and by
``manage_worker.py`` (the worker subprocess), so both see one database file.
"""

from __future__ import annotations

from typing import Any

import django
from django.conf import settings


def configure(db_path: str, nats_url: str | None = None) -> None:
    jsclient: dict[str, Any] = {"jetstream": {"timeout": 5.0}}
    if nats_url:
        jsclient["servers"] = [nats_url]
    settings.configure(
        DEBUG=False,
        SECRET_KEY="jsclient-tests",
        USE_TZ=True,
        INSTALLED_APPS=["jsclient.contrib.django", "jsclient_testapp"],
        DATABASES={
            "default": {
                "ENGINE": "django.db.backends.sqlite3",
                "NAME": db_path,
                # The worker's threads and the test process share the file.
                "OPTIONS": {"timeout": 30},
            }
        },
        DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
        JSCLIENT=jsclient,
        LOGGING={
            "version": 1,
            "disable_existing_loggers": False,
            "handlers": {"stderr": {"class": "logging.StreamHandler"}},
            "loggers": {"jsclient": {"handlers": ["stderr"], "level": "INFO"}},
        },
    )
    django.setup()
