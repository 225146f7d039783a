"""The ``@consumer`` registry: which function handles which durable pull consumer.

```python
# myapp/consumers.py (found by ``manage.py jetstream_worker`` in every installed app)
@consumer(stream="ORDERS", durable="billing", filter_subject="orders.new",
          max_messages=500, threads=1, keepalive=True, deadline=None)
def bill(msg): ...
```

Registering only records the function; nothing connects until a worker runs
it. The decorated function is returned unchanged, so tests can call it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from django.core.exceptions import ImproperlyConfigured

from jsclient.jetstream.manage.names import check_consumer_name, check_stream_name
from jsclient.msg import Msg
from jsclient.protocol import commands

Handler = Callable[[Msg], Any]
F = TypeVar("F", bound=Handler)

DEFAULT_NAK_DELAY = 5.0


@dataclass(frozen=True)
class ConsumerSpec:
    """One registered consumer.

    ``name`` is what ``--consumer`` selects (the durable name unless given).
    ``config`` holds further ``ConsumerConfig`` fields (``ack_wait``,
    ``max_deliver``, ``max_ack_pending``, ...). With ``bind`` the durable
    must exist already and is used as it is; otherwise the worker creates it,
    or updates it to this configuration.
    """

    name: str
    handler: Handler
    stream: str
    durable: str
    filter_subject: str | None = None
    max_messages: int = 500
    threads: int = 1
    nak_delay: float = DEFAULT_NAK_DELAY
    bind: bool = False
    config: Mapping[str, Any] = field(default_factory=dict)
    keepalive: bool | float = True
    deadline: float | None = None

    @property
    def handler_path(self) -> str:
        """The handler's ``module.qualname``, for logs and duplicate checks."""
        h = self.handler
        return f"{getattr(h, '__module__', '?')}.{getattr(h, '__qualname__', repr(h))}"


_registry: dict[str, ConsumerSpec] = {}
_lock = threading.Lock()

# Fields @consumer sets itself; config may not override them.
_RESERVED = frozenset({"durable_name", "name", "filter_subject", "ack_policy", "deliver_subject"})


def consumer(
    *,
    stream: str,
    durable: str,
    filter_subject: str | None = None,
    max_messages: int = 500,
    threads: int = 1,
    name: str | None = None,
    nak_delay: float = DEFAULT_NAK_DELAY,
    bind: bool = False,
    config: Mapping[str, Any] | None = None,
    keepalive: bool | float = True,
    deadline: float | None = None,
) -> Callable[[F], F]:
    """Register the decorated function as the handler of a durable pull consumer.

    The worker acks a message when the function returns and naks it with a
    ``nak_delay`` (seconds) when it raises. ``max_messages`` is the consume
    buffer (ADR-37), ``threads`` how many messages are handled at once.

    ``keepalive`` (default True) sends ``+WPI`` for every message the worker
    holds (buffered, queued or in a handler) every third of the consumer's
    ``ack_wait``, so a slow handler's message is not redelivered meanwhile; a
    number sets the interval in seconds, False turns it off. ``deadline``
    (seconds, default none) bounds how long a handler is kept alive: past it
    the keep-alive stops for that message, a warning is logged and the server
    redelivers it after ``ack_wait`` (the handler is not interrupted).
    """
    check_stream_name(stream)
    check_consumer_name(durable)
    if filter_subject is not None:
        commands.check_subject(filter_subject, "filter subject")
    if not isinstance(max_messages, int) or max_messages < 1:
        raise ValueError(f"max_messages must be a positive int, got {max_messages!r}")
    if not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be a positive int, got {threads!r}")
    if nak_delay < 0:
        raise ValueError(f"nak_delay must not be negative, got {nak_delay!r}")
    if not (isinstance(keepalive, bool) or (isinstance(keepalive, int | float) and keepalive > 0)):
        raise ValueError(f"keepalive must be True, False or positive seconds, got {keepalive!r}")
    if deadline is not None and not (isinstance(deadline, int | float) and deadline > 0):
        raise ValueError(f"deadline must be positive seconds or None, got {deadline!r}")
    extra = dict(config or {})
    clash = set(extra) & _RESERVED
    if clash:
        raise ValueError(f"config may not set {sorted(clash)}: @consumer sets them")

    def register(fn: F) -> F:
        if not callable(fn):
            raise TypeError("@consumer decorates a function taking one message")
        spec = ConsumerSpec(
            name=name or durable,
            handler=fn,
            stream=stream,
            durable=durable,
            filter_subject=filter_subject,
            max_messages=max_messages,
            threads=threads,
            nak_delay=float(nak_delay),
            bind=bind,
            config=extra,
            keepalive=keepalive,
            deadline=None if deadline is None else float(deadline),
        )
        with _lock:
            old = _registry.get(spec.name)
            # The same function registered again (its module imported twice,
            # or reloaded) replaces itself; another one under the same name
            # is a mistake.
            if old is not None and old.handler_path != spec.handler_path:
                raise ImproperlyConfigured(
                    f"two JetStream consumers are named {spec.name!r}: {old.handler_path} "
                    f"and {spec.handler_path}; give one of them name=..."
                )
            _registry[spec.name] = spec
        return fn

    return register


def registered() -> dict[str, ConsumerSpec]:
    """The registered consumers by name (a copy)."""
    with _lock:
        return dict(_registry)


def unregister(name: str) -> None:
    """Forget a registered consumer (for tests)."""
    with _lock:
        _registry.pop(name, None)
