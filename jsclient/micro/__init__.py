"""Services (ADR-32) on a blocking connection, and the discovery client.

``nc.add_service(name, version, ...)`` (or nats-py's form,
``jsclient.micro.add_service(nc, name=..., version=...)``) makes a :class:`Service`; its
endpoints' handlers run on handler threads (``threads=N``), never on the
connection's reader thread. :class:`ServiceClient` pings, infos and stats
services (any client's) over request-many; :meth:`ServiceError.check`
turns an error reply (``Nats-Service-Error`` headers) into an exception.
"""

from __future__ import annotations

from jsclient.micro._types import (
    DEFAULT_API_PREFIX,
    DEFAULT_QUEUE_GROUP,
    ERROR_CODE_HEADER,
    ERROR_HEADER,
    INFO_RESPONSE_TYPE,
    PING_RESPONSE_TYPE,
    STATS_RESPONSE_TYPE,
    EndpointInfo,
    EndpointStats,
    PingResponse,
    ServiceConfigError,
    ServiceInfo,
    ServiceStats,
    control_subject,
)
from jsclient.micro.client import ServiceClient
from jsclient.micro.endpoint import Endpoint
from jsclient.micro.request import Request, ServiceError
from jsclient.micro.service import Group, Service, add_service

__all__ = [
    "DEFAULT_API_PREFIX",
    "DEFAULT_QUEUE_GROUP",
    "ERROR_CODE_HEADER",
    "ERROR_HEADER",
    "INFO_RESPONSE_TYPE",
    "PING_RESPONSE_TYPE",
    "STATS_RESPONSE_TYPE",
    "Endpoint",
    "EndpointInfo",
    "EndpointStats",
    "Group",
    "PingResponse",
    "Request",
    "Service",
    "ServiceClient",
    "ServiceConfigError",
    "ServiceError",
    "ServiceInfo",
    "ServiceStats",
    "add_service",
    "control_subject",
]
