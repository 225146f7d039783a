"""ADR-32's wire facts: names, subjects, the three response types and their JSON.

The dataclasses' attribute names are ADR-32's JSON keys (``PingResponse``,
``ServiceInfo`` with ``EndpointInfo``, ``ServiceStats`` with
``EndpointStats``); values are as on the wire except ``started`` (a UTC
``datetime``; an ISO-8601 string ending in ``Z`` on the wire) and
``queue_group`` (None for an endpoint without one; ``""`` on the wire, as
nats.go writes it). Processing times are integer nanoseconds.
``from_dict`` accepts what nats.go, nats.js and nats-py write (metadata
``null``, optional keys missing, 0 to 9 fractional digits in ``started``).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from jsclient import errors

PING_RESPONSE_TYPE = "io.nats.micro.v1.ping_response"
INFO_RESPONSE_TYPE = "io.nats.micro.v1.info_response"
STATS_RESPONSE_TYPE = "io.nats.micro.v1.stats_response"

DEFAULT_API_PREFIX = "$SRV"
DEFAULT_QUEUE_GROUP = "q"
ERROR_HEADER = "Nats-Service-Error"
ERROR_CODE_HEADER = "Nats-Service-Error-Code"
VERBS = ("PING", "INFO", "STATS")

# ADR-32: names are A-Z, a-z, 0-9, dash, underscore; versions match the
# official SemVer regex (semver.org). ASCII and fullmatch: Python's \d takes
# any Unicode digit and its $ a trailing newline, Go's regexp neither.
NAME_RE = re.compile(r"[A-Za-z0-9\-_]+", re.ASCII)
SEMVER_RE = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?",
    re.ASCII,
)
# nats.go's check of endpoint subjects and queue groups: no space, ">" only last.
_SUBJECT_RE = re.compile(r"[^ >]*>?")
_STARTED_RE = re.compile(
    r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)", re.ASCII | re.IGNORECASE
)


class ServiceConfigError(errors.Error, ValueError):
    """An invalid service, group or endpoint setting (name, version, subject, queue group)."""

    default_message = "nats: invalid service configuration"


def check_name(name: object, what: str = "service name") -> str:
    """``name`` if ADR-32 allows it (letters, digits, ``-``, ``_``), else ServiceConfigError."""
    if not isinstance(name, str) or NAME_RE.fullmatch(name) is None:
        raise ServiceConfigError(
            f"nats: invalid {what} {name!r}: use only A-Z, a-z, 0-9, dash and underscore"
        )
    return name


def check_version(version: object) -> str:
    """``version`` if it is SemVer (the official regex), else ServiceConfigError."""
    if not isinstance(version, str) or SEMVER_RE.fullmatch(version) is None:
        raise ServiceConfigError(f"nats: invalid service version {version!r}: must be SemVer")
    return version


def check_endpoint_subject(subject: str, what: str) -> str:
    """An endpoint subject, group prefix or queue group as nats.go accepts them."""
    if not isinstance(subject, str) or not subject or _SUBJECT_RE.fullmatch(subject) is None:
        raise ServiceConfigError(f"nats: invalid {what} {subject!r}")
    if (
        any(c in subject for c in "\r\n\t")
        or ".." in subject
        or subject[0] == "."
        or subject[-1] == "."
    ):
        raise ServiceConfigError(f"nats: invalid {what} {subject!r}")
    return subject


def check_metadata(metadata: Mapping[str, str] | None, what: str = "metadata") -> dict[str, str]:
    """A private copy of ``metadata`` (ADR-32: immutable once set); str to str only."""
    if metadata is None:
        return {}
    out = dict(metadata)
    for k, v in out.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise TypeError(f"nats: {what} must map str to str, got {k!r}: {v!r}")
    return out


def check_threads(threads: object) -> int:
    """A handler thread count: an int of at least 1."""
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ServiceConfigError(f"nats: threads must be an int >= 1, got {threads!r}")
    return threads


def check_handler(handler: object) -> None:
    """An endpoint handler: a plain callable. A coroutine function (``async def``, what a
    nats-py service has) is refused: handlers run on threads and nothing would await it."""
    if not callable(handler):
        raise TypeError("nats: an endpoint handler must be callable")
    call = getattr(handler, "__call__", None)  # noqa: B004 - a callable object's own method
    if inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(call):
        raise TypeError(
            "nats: an endpoint handler must be a plain function: handlers run on handler "
            "threads, so an async def handler would never be awaited (drop async/await)"
        )


def control_subject(prefix: str, verb: str, name: str | None = None, id: str | None = None) -> str:
    """``<prefix>.<VERB>[.<name>[.<id>]]`` (an id needs a name)."""
    if verb not in VERBS:
        raise ServiceConfigError(f"nats: unsupported service verb {verb!r}")
    if id is not None and name is None:
        raise ServiceConfigError("nats: a service id needs the service name")
    parts = [prefix, verb]
    if name is not None:
        parts.append(check_name(name))
        if id is not None:
            parts.append(id)
    return ".".join(parts)


def format_started(when: datetime) -> str:
    """A UTC time as ADR-32 writes ``started``: ``2026-11-27T22:35:32.123456Z``."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_started(text: str) -> datetime:
    """``started`` as any client writes it (RFC 3339, 0 to 9 fractional digits) -> UTC."""
    m = _STARTED_RE.fullmatch(text.strip())
    if m is None:
        raise ValueError(f"nats: invalid started time {text!r}")
    base, frac, zone = m.groups()
    micros = (frac or "").ljust(6, "0")[:6]
    offset = "+00:00" if zone.upper() == "Z" else zone
    return datetime.fromisoformat(f"{base}.{micros}{offset}").astimezone(UTC)


def _meta(value: Any) -> dict[str, str]:
    return dict(value) if value else {}


def _queue(value: Any) -> str | None:
    return value if value else None


@dataclass(frozen=True)
class PingResponse:
    """``io.nats.micro.v1.ping_response``."""

    type: str
    name: str
    id: str
    version: str
    metadata: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The ADR-32 JSON object (a dict with the wire's keys)."""
        return {
            "type": self.type,
            "name": self.name,
            "id": self.id,
            "version": self.version,
            "metadata": dict(self.metadata),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PingResponse:
        """Parse the ADR-32 JSON object (extra keys are ignored)."""
        return cls(d["type"], d["name"], d["id"], d["version"], _meta(d.get("metadata")))


@dataclass(frozen=True)
class EndpointInfo:
    """One endpoint of a :class:`ServiceInfo`."""

    name: str
    subject: str
    queue_group: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The ADR-32 JSON object (a dict with the wire's keys)."""
        return {
            "name": self.name,
            "subject": self.subject,
            "queue_group": self.queue_group or "",
            "metadata": dict(self.metadata),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> EndpointInfo:
        """Parse the ADR-32 JSON object (extra keys are ignored)."""
        return cls(d["name"], d["subject"], _queue(d.get("queue_group")), _meta(d.get("metadata")))


@dataclass(frozen=True)
class ServiceInfo:
    """``io.nats.micro.v1.info_response``."""

    type: str
    name: str
    id: str
    version: str
    metadata: dict[str, str] = field(default_factory=dict)
    description: str = ""
    endpoints: list[EndpointInfo] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The ADR-32 JSON object (a dict with the wire's keys)."""
        return {
            "type": self.type,
            "name": self.name,
            "id": self.id,
            "version": self.version,
            "metadata": dict(self.metadata),
            "description": self.description,
            "endpoints": [e.to_dict() for e in self.endpoints],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ServiceInfo:
        """Parse the ADR-32 JSON object (extra keys are ignored)."""
        return cls(
            d["type"],
            d["name"],
            d["id"],
            d["version"],
            _meta(d.get("metadata")),
            d.get("description") or "",
            [EndpointInfo.from_dict(e) for e in d.get("endpoints") or ()],
        )


@dataclass(frozen=True)
class EndpointStats:
    """One endpoint of a :class:`ServiceStats`; times in nanoseconds."""

    name: str
    subject: str
    queue_group: str | None = None
    num_requests: int = 0
    num_errors: int = 0
    last_error: str = ""
    processing_time: int = 0
    average_processing_time: int = 0
    data: Any = None

    def to_dict(self) -> dict[str, Any]:
        """The ADR-32 JSON object (a dict with the wire's keys)."""
        return {
            "name": self.name,
            "subject": self.subject,
            "queue_group": self.queue_group or "",
            "num_requests": self.num_requests,
            "num_errors": self.num_errors,
            "last_error": self.last_error,
            "processing_time": self.processing_time,
            "average_processing_time": self.average_processing_time,
            # Always written (null without a stats handler): nats-py's reader needs the key.
            "data": self.data,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> EndpointStats:
        """Parse the ADR-32 JSON object (extra keys are ignored)."""
        return cls(
            d["name"],
            d["subject"],
            _queue(d.get("queue_group")),
            int(d.get("num_requests") or 0),
            int(d.get("num_errors") or 0),
            d.get("last_error") or "",
            int(d.get("processing_time") or 0),
            int(d.get("average_processing_time") or 0),
            d.get("data"),
        )


@dataclass(frozen=True)
class ServiceStats:
    """``io.nats.micro.v1.stats_response``; ``started`` is a UTC datetime."""

    type: str
    name: str
    id: str
    version: str
    started: datetime
    metadata: dict[str, str] = field(default_factory=dict)
    endpoints: list[EndpointStats] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The ADR-32 JSON object (a dict with the wire's keys)."""
        return {
            "type": self.type,
            "name": self.name,
            "id": self.id,
            "version": self.version,
            "metadata": dict(self.metadata),
            "started": format_started(self.started),
            "endpoints": [e.to_dict() for e in self.endpoints],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ServiceStats:
        """Parse the ADR-32 JSON object (extra keys are ignored)."""
        return cls(
            d["type"],
            d["name"],
            d["id"],
            d["version"],
            parse_started(d["started"]),
            _meta(d.get("metadata")),
            [EndpointStats.from_dict(e) for e in d.get("endpoints") or ()],
        )
