"""The discovery client: ping, info and stats of services, on request-many (ADR-47).

Each call sends one request to ``<prefix>.<VERB>[.<name>[.<id>]]`` and
collects the replies until ``timeout`` (or ``max_count``; one instance
answers an id, so ``max_count`` defaults to 1 there). Replies that are not
the expected JSON type are skipped. Nothing answering gives ``[]``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from jsclient._request_many import request_many
from jsclient._threads import log
from jsclient.micro._types import (
    DEFAULT_API_PREFIX,
    INFO_RESPONSE_TYPE,
    PING_RESPONSE_TYPE,
    STATS_RESPONSE_TYPE,
    PingResponse,
    ServiceInfo,
    ServiceStats,
    control_subject,
)

if TYPE_CHECKING:
    from jsclient._core import Core

__all__ = ["ServiceClient"]

T = TypeVar("T")


class ServiceClient:
    """Discover services on a connection: ``ping()``, ``info()``, ``stats()``."""

    def __init__(self, nc: Core, api_prefix: str = DEFAULT_API_PREFIX) -> None:
        self._nc = nc
        self.api_prefix = api_prefix

    def _collect(
        self,
        verb: str,
        kind: str,
        parse: Callable[[dict[str, Any]], T],
        name: str | None,
        id: str | None,
        timeout: float,
        max_count: int | None,
    ) -> list[T]:
        subject = control_subject(self.api_prefix, verb, name, id)
        if max_count is None and id is not None:
            max_count = 1
        out: list[T] = []
        limits = (65536, 64 * 1024 * 1024)  # a subscription's defaults
        for msg in request_many(
            self._nc, subject, b"", None, timeout, max_count, None, None, limits
        ):
            try:
                d = json.loads(msg.data)
                if d.get("type") != kind:
                    continue
                out.append(parse(d))
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                log.warning("jsclient: skipped a malformed %s reply: %s", verb, exc)
        return out

    def ping(
        self,
        name: str | None = None,
        id: str | None = None,
        *,
        timeout: float = 1.0,
        max_count: int | None = None,
    ) -> list[PingResponse]:
        """Every service that answers (of ``name``; the instance ``id``) within ``timeout``."""
        return self._collect(
            "PING", PING_RESPONSE_TYPE, PingResponse.from_dict, name, id, timeout, max_count
        )

    def info(
        self,
        name: str | None = None,
        id: str | None = None,
        *,
        timeout: float = 1.0,
        max_count: int | None = None,
    ) -> list[ServiceInfo]:
        """As :meth:`ping`, with each service's description and endpoints."""
        return self._collect(
            "INFO", INFO_RESPONSE_TYPE, ServiceInfo.from_dict, name, id, timeout, max_count
        )

    def stats(
        self,
        name: str | None = None,
        id: str | None = None,
        *,
        timeout: float = 1.0,
        max_count: int | None = None,
    ) -> list[ServiceStats]:
        """As :meth:`ping`, with each endpoint's statistics."""
        return self._collect(
            "STATS", STATS_RESPONSE_TYPE, ServiceStats.from_dict, name, id, timeout, max_count
        )
