"""The ``JSCLIENT`` setting, read and checked.

```python
JSCLIENT = {
    "servers": ["nats://127.0.0.1:4222"],        # a URL, a comma-separated string or a list
    "options": {"name": "web"},                  # keyword arguments of jsclient.connect()
    "jetstream": {"domain": None, "timeout": 5.0},  # keyword arguments of nc.jetstream()
}
```

Every key is optional. A mistake (an unknown key, an option ``connect()`` does
not take) is reported as ``ImproperlyConfigured`` naming the setting.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from jsclient.connection import Options
from jsclient.jetstream.context import JetStream

DEFAULT_SERVERS = "nats://127.0.0.1:4222"
_TOP_KEYS = frozenset({"servers", "options", "jetstream"})
_JETSTREAM_KEYS = frozenset(
    name
    for name, p in inspect.signature(JetStream.__init__).parameters.items()
    if p.kind is inspect.Parameter.KEYWORD_ONLY
)
_CONNECT_KEYS = frozenset(Options.__dataclass_fields__) - {"servers", "extra"}


@dataclass(frozen=True)
class Config:
    """What ``JSCLIENT`` says, with defaults filled in."""

    servers: list[str]
    options: dict[str, Any] = field(default_factory=dict)
    jetstream: dict[str, Any] = field(default_factory=dict)


def load() -> Config:
    """Read ``settings.JSCLIENT`` (absent means a local server on the default port)."""
    raw = getattr(settings, "JSCLIENT", None)
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise ImproperlyConfigured("JSCLIENT must be a dict")
    unknown = set(raw) - _TOP_KEYS
    if unknown:
        raise ImproperlyConfigured(
            f"JSCLIENT has unknown keys {sorted(unknown)}; expected {sorted(_TOP_KEYS)}"
        )
    servers = _servers(raw.get("servers", DEFAULT_SERVERS))
    options = _mapping(raw.get("options"), "options")
    bad = set(options) - _CONNECT_KEYS
    if bad:
        raise ImproperlyConfigured(
            f"JSCLIENT['options'] has keys jsclient.connect() does not take: {sorted(bad)}"
        )
    jetstream = _mapping(raw.get("jetstream"), "jetstream")
    bad = set(jetstream) - _JETSTREAM_KEYS
    if bad:
        raise ImproperlyConfigured(
            f"JSCLIENT['jetstream'] has unknown keys {sorted(bad)}; "
            f"expected some of {sorted(_JETSTREAM_KEYS)}"
        )
    return Config(servers=servers, options=options, jetstream=jetstream)


def _servers(value: Any) -> list[str]:
    if isinstance(value, str):
        urls = [u.strip() for u in value.split(",") if u.strip()]
    elif isinstance(value, list | tuple) and all(isinstance(u, str) for u in value):
        urls = [u.strip() for u in value if u.strip()]
    else:
        raise ImproperlyConfigured(
            f"JSCLIENT['servers'] must be a URL or a list of URLs, not {value!r}"
        )
    if not urls:
        raise ImproperlyConfigured("JSCLIENT['servers'] is empty")
    return urls


def _mapping(value: Any, key: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ImproperlyConfigured(f"JSCLIENT[{key!r}] must be a dict, not {value!r}")
    return dict(value)
