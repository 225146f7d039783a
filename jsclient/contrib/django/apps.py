"""Django app config: add ``"jsclient.contrib.django"`` to ``INSTALLED_APPS``.

That makes the ``jetstream_worker`` management command available. The app
has no models; it connects nothing until the first ``get_connection()``.
"""

from __future__ import annotations

from django.apps import AppConfig


class JsclientConfig(AppConfig):  # type: ignore[misc]  # Django ships no types
    name = "jsclient.contrib.django"
    # The default label would be "django", which reads like Django itself.
    label = "jsclient"
    verbose_name = "jsclient (NATS JetStream)"
