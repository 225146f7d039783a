"""The project's Celery app, on the same nats-server: ``celery -A exampleproject worker``.

Celery finds this module by its name (``-A exampleproject`` looks for
``exampleproject.celery``), so the web process, which does not use Celery,
does not import it. The settings are the ``CELERY_*`` names of
``settings.py``; ``import jsclient.contrib.celery`` registers the
``jetstream://`` broker and result backend.
"""

import os

from celery import Celery

import jsclient.contrib.celery  # noqa: F401  registers jetstream://

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "exampleproject.settings")

app = Celery("exampleproject")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()  # shop/tasks.py
