"""Django integration (``pip install jsclient[django]``).

```python
# settings.py
INSTALLED_APPS = [..., "jsclient.contrib.django"]
JSCLIENT = {"servers": ["nats://127.0.0.1:4222"], "options": {"name": "web"},
            "jetstream": {"domain": None, "timeout": 5.0}}
```

- :func:`get_connection` / :func:`get_jetstream`: one connection per process,
  made on first use, made anew after a fork, closed at exit;
- :func:`publish_on_commit`: publish once the database transaction commits;
- :func:`consumer`: register a handler that ``manage.py jetstream_worker`` runs;
- :func:`endpoint`: register a service endpoint (ADR-32) handler that it hosts;
- :data:`publish_failed` (in :mod:`.signals`): a message of a committed
  transaction that could not be published.

Log records go to loggers under ``jsclient.contrib.django``, so Django's
``LOGGING`` setting applies.
"""

from __future__ import annotations

from jsclient.contrib.django.connection import close_connection, get_connection, get_jetstream
from jsclient.contrib.django.consumers import ConsumerSpec, consumer, registered
from jsclient.contrib.django.endpoints import EndpointSpec, endpoint, registered_endpoints
from jsclient.contrib.django.publish import publish_on_commit
from jsclient.contrib.django.signals import publish_failed

__all__ = [
    "ConsumerSpec",
    "EndpointSpec",
    "close_connection",
    "consumer",
    "endpoint",
    "get_connection",
    "get_jetstream",
    "publish_failed",
    "publish_on_commit",
    "registered",
    "registered_endpoints",
]
