"""The ``@endpoint`` registry: which function answers which service endpoint (ADR-32).

```python
# myapp/endpoints.py (found by ``manage.py jetstream_worker`` in every installed app)
@endpoint(service="billing", version="1.0.0", name="charge", threads=4)
def charge(req):
    req.respond(b"ok")
```

Registering only records the function; nothing connects until a worker runs
it. Endpoints of one service name and version share one service
(``nc.add_service``) in the worker; two versions of a service may each have
an endpoint of the same name (ADR-32), so the registry is keyed by service,
version and endpoint name. The arguments are checked as ``add_service`` and
``add_endpoint`` check them (the same functions), so a mistake fails at import,
not in the worker. The decorated function is returned unchanged, so tests can
call it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import EllipsisType
from typing import Any, TypeVar

from django.core.exceptions import ImproperlyConfigured

from jsclient.micro import Request
from jsclient.micro._types import (
    check_endpoint_subject,
    check_handler,
    check_metadata,
    check_name,
    check_threads,
    check_version,
)

Handler = Callable[[Request], Any]
F = TypeVar("F", bound=Handler)


@dataclass(frozen=True)
class EndpointSpec:
    """One registered endpoint; ``key`` (``<service>.<name>``) is what ``--endpoint`` selects.

    ``queue_group``: ``...`` is the service's default (``q``), None
    subscribes without one. ``description`` is the service's.
    """

    service: str
    version: str
    name: str
    handler: Handler
    subject: str | None = None
    queue_group: str | EllipsisType | None = ...
    metadata: Mapping[str, str] = field(default_factory=dict)
    threads: int = 1
    description: str | None = None

    @property
    def key(self) -> str:
        """``<service>.<name>``: a name ``--endpoint`` selects (every version's)."""
        return f"{self.service}.{self.name}"

    @property
    def ident(self) -> str:
        """``<service>@<version>.<name>``: the registry's key, which ``--endpoint``
        also selects (that version's only)."""
        return f"{self.service}@{self.version}.{self.name}"

    @property
    def handler_path(self) -> str:
        """The handler's ``module.qualname``, for logs and duplicate checks."""
        h = self.handler
        return f"{getattr(h, '__module__', '?')}.{getattr(h, '__qualname__', repr(h))}"


_registry: dict[str, EndpointSpec] = {}
_lock = threading.Lock()


def endpoint(
    *,
    service: str,
    version: str,
    name: str,
    subject: str | None = None,
    queue_group: str | EllipsisType | None = ...,
    metadata: Mapping[str, str] | None = None,
    threads: int = 1,
    description: str | None = None,
) -> Callable[[F], F]:
    """Register the decorated function as the handler of endpoint ``name`` of a service.

    The worker hosts it with ``svc.add_endpoint(name, handler, subject=...,
    queue_group=..., metadata=..., threads=...)`` on the service
    ``add_service(service, version, description=...)``; ``threads`` requests
    are handled at once. A handler that raises answers 500.
    """
    check_name(service, "service name")
    check_version(version)
    check_name(name, "endpoint name")
    if subject is not None:
        check_endpoint_subject(subject, "endpoint subject")
    if queue_group is not ... and queue_group is not None:
        check_endpoint_subject(queue_group, "queue group")
    meta = check_metadata(metadata, "endpoint metadata")
    check_threads(threads)
    if description is not None and not isinstance(description, str):
        raise TypeError("description must be a str")

    def register(fn: F) -> F:
        check_handler(fn)
        spec = EndpointSpec(
            service=service,
            version=version,
            name=name,
            handler=fn,
            subject=subject,
            queue_group=queue_group,
            metadata=meta,
            threads=threads,
            description=description,
        )
        with _lock:
            old = _registry.get(spec.ident)
            # The same function registered again (its module imported twice,
            # or reloaded) replaces itself; another one under the same name
            # is a mistake.
            if old is not None and old.handler_path != spec.handler_path:
                raise ImproperlyConfigured(
                    f"two endpoints are named {spec.ident!r}: {old.handler_path} "
                    f"and {spec.handler_path}"
                )
            other = _other_description(spec)
            if other is not None:
                raise ImproperlyConfigured(
                    f"endpoints of service {service} {version} give two descriptions: "
                    f"{other.handler_path} and {spec.handler_path}"
                )
            _registry[spec.ident] = spec
        return fn

    return register


def registered_endpoints() -> dict[str, EndpointSpec]:
    """The registered endpoints by ``<service>@<version>.<name>`` (a copy)."""
    with _lock:
        return dict(_registry)


def select(names: list[str]) -> tuple[list[EndpointSpec], list[str]]:
    """The endpoints ``names`` select (``<service>.<name>`` in every version,
    ``<service>@<version>.<name>``, or a service: all its endpoints), and the
    names that select nothing."""
    available = registered_endpoints()
    chosen: dict[str, EndpointSpec] = {}
    unknown: list[str] = []
    for n in names:
        hits = [s for s in available.values() if n in (s.key, s.ident, s.service)]
        if not hits:
            unknown.append(n)
        for s in hits:
            chosen[s.ident] = s
    return list(chosen.values()), unknown


def _other_description(spec: EndpointSpec) -> EndpointSpec | None:
    """(Under ``_lock``) another endpoint of ``spec``'s service and version that
    gives it another description. A function of its own: see _matching."""
    for other in _registry.values():
        if (
            other.ident != spec.ident
            and other.service == spec.service
            and other.version == spec.version
            and None not in (other.description, spec.description)
            and other.description != spec.description
        ):
            return other
    return None


def _matching(key: str) -> list[str]:
    """(Under ``_lock``) the idents ``key`` names. The loop is a function of
    its own: on 3.13+ an interrupt on a loop inside a ``with`` may skip the
    ``with``'s exit (tests/unit/test_interrupt_cover.py)."""
    return [ident for ident, spec in _registry.items() if key in (ident, spec.key)]


def unregister(key: str) -> None:
    """Forget registered endpoints: ``<service>@<version>.<name>``, or every version
    of ``<service>.<name>`` (for tests)."""
    with _lock:
        for ident in _matching(key):
            del _registry[ident]
