"""Celery on JetStream (``pip install jsclient[celery]``): a kombu transport and a result backend.

```python
import jsclient.contrib.celery          # registers the jetstream:// broker and backend
app = Celery("shop", broker="jetstream://127.0.0.1:4222",
             backend="jetstream://127.0.0.1:4222")
```

Importing this package registers the URL scheme ``jetstream`` with kombu
(the transport, :class:`jsclient.contrib.celery.transport.Transport`) and
with Celery (the backend, :class:`jsclient.contrib.celery.backend.Backend`);
it starts nothing and connects nowhere. Without the import,
``broker_transport="jsclient.contrib.celery.transport:Transport"`` and
``result_backend="jsclient.contrib.celery.backend:Backend"`` select them
by class path. The guide is ``docs/celery.md``.
"""

from __future__ import annotations

from celery.app import backends as _celery_backends
from kombu import transport as _kombu_transport

#: The URL scheme of both.
SCHEME = "jetstream"
TRANSPORT = "jsclient.contrib.celery.transport:Transport"
BACKEND = "jsclient.contrib.celery.backend:Backend"

__all__ = ["BACKEND", "SCHEME", "TRANSPORT", "close_connections", "register"]


def register(scheme: str = SCHEME) -> None:
    """Register ``scheme://`` as this transport (kombu) and this result backend (Celery).

    Done on import for ``jetstream``; call it for another scheme name.
    """
    _kombu_transport.TRANSPORT_ALIASES[scheme] = TRANSPORT
    _celery_backends.BACKEND_ALIASES[scheme] = BACKEND


def close_connections() -> None:
    """Close this process's result-backend connections now (they close at exit anyway).

    The broker's connections are kombu's: ``app.close()`` releases them.
    """
    from jsclient.contrib.celery._results import close_clients

    close_clients()


register()
