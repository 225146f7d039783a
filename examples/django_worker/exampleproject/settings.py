"""Settings of the example project (SQLite, a local nats-server)."""

import os
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent

SECRET_KEY = "example-only-not-secret"
DEBUG = True
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]

INSTALLED_APPS = [
    "jsclient.contrib.django",  # the jetstream_worker command
    "shop",
]
MIDDLEWARE = ["django.middleware.common.CommonMiddleware"]
ROOT_URLCONF = "exampleproject.urls"

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("EXAMPLE_DB", str(BASE_DIR / "db.sqlite3")),
        # The web process and the worker's threads share the file.
        "OPTIONS": {"timeout": 20},
    }
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True

JSCLIENT = {
    "servers": [os.environ.get("NATS_URL", "nats://127.0.0.1:4222")],
    "options": {"name": "django-example"},
    "jetstream": {"domain": None, "timeout": 5.0},
}

# Celery on the same server (exampleproject/celery.py, shop/tasks.py): queues
# are JetStream streams, results a KV bucket (docs/celery.md).
CELERY_BROKER_URL = os.environ.get("NATS_URL", "nats://127.0.0.1:4222").replace(
    "nats://", "jetstream://"
)
CELERY_RESULT_BACKEND = CELERY_BROKER_URL
CELERY_BROKER_TRANSPORT_OPTIONS = {"ack_wait": 60, "max_deliver": 5}
CELERY_RESULT_EXPIRES = 3600
CELERY_WORKER_HIJACK_ROOT_LOGGER = False

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(name)s %(levelname)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "loggers": {
        "jsclient": {"handlers": ["console"], "level": "INFO"},
        "shop": {"handlers": ["console"], "level": "INFO"},
    },
}
