"""Message schedules (ADR-51, server 2.12; cron time zones 2.14): the headers of a schedule.

A schedule is a message on its own subject of a stream with
``allow_msg_schedules``; the server publishes its body to ``target`` (a subject
of the same stream) once at a time (``@at <RFC 3339>``), on an interval
(``@every <Go duration>``) or on a 6-field cron spec. A later schedule on the
same subject replaces it. Everything is checked here before anything is sent;
what only the server can judge (the target being in the stream, a time zone it
knows) comes back as a typed ``MessageSchedules*Error``.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from jsclient.jetstream._wire import ttl_value

SCHEDULE = "Nats-Schedule"
SCHEDULE_TARGET = "Nats-Schedule-Target"
SCHEDULE_SOURCE = "Nats-Schedule-Source"
SCHEDULE_TTL = "Nats-Schedule-TTL"
SCHEDULE_TIME_ZONE = "Nats-Schedule-Time-Zone"

#: The cron shorthands the server knows (ADR-51 "Predefined Schedules").
PREDEFINED = frozenset(
    {"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}
)
# One cron field: numbers, names (jan, mon), ranges, lists, steps, '*' and '?'.
_CRON_FIELD = re.compile(r"[0-9A-Za-z*?/,\-]+")
_BAD_SUBJECT = re.compile(r"[\s*>]")


def _check_subject(what: str, subject: Any) -> str:
    if not isinstance(subject, str) or not subject:
        raise ValueError(f"a schedule's {what} must be a non-empty subject, got {subject!r}")
    tokens = subject.split(".")
    if _BAD_SUBJECT.search(subject) or "" in tokens:
        raise ValueError(f"a schedule's {what} must be a subject, no wildcards: {subject!r}")
    return subject


def at_value(at: datetime) -> str:
    """``@at`` with the time in RFC 3339, UTC, whole seconds (a naive time is UTC).

    A fraction of a second rounds up: the message never fires before ``at``.
    """
    if not isinstance(at, datetime):
        raise TypeError(f"at must be a datetime, not {type(at).__name__}")
    t = at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)
    if t.microsecond:
        t = t.replace(microsecond=0) + timedelta(seconds=1)
    return "@at " + t.strftime("%Y-%m-%dT%H:%M:%SZ")


def every_value(every: float | timedelta) -> str:
    """``@every`` with the interval as a Go duration (at least one second)."""
    if isinstance(every, timedelta):
        every = every.total_seconds()
    if isinstance(every, bool) or not isinstance(every, int | float) or not every >= 1:
        raise ValueError(f"every must be at least 1 second, got {every!r}")
    if every == int(every):
        return f"@every {int(every)}s"
    return f"@every {round(every * 1000)}ms"


def cron_value(cron: str) -> str:
    """A 6-field cron spec (seconds first) or one of the ``@hourly``-style shorthands."""
    if not isinstance(cron, str):
        raise TypeError(f"cron must be a string, not {type(cron).__name__}")
    spec = " ".join(cron.split())
    if spec in PREDEFINED:
        return spec
    fields = spec.split(" ")
    if len(fields) != 6 or not all(_CRON_FIELD.fullmatch(f) for f in fields):
        raise ValueError(
            "cron must have 6 fields (seconds minutes hours day-of-month month "
            f"day-of-week) or be one of {sorted(PREDEFINED)}, got {cron!r}"
        )
    return spec


def schedule_headers(
    subject: str,
    *,
    target: str,
    at: datetime | None,
    every: float | timedelta | None,
    cron: str | None,
    time_zone: str | None,
    ttl: float | str | None,
    source: str | None,
    headers: Any = None,
) -> dict[str, Any]:
    """The headers of a schedule on ``subject`` (user ``headers`` kept, ours win)."""
    given = [name for name, v in (("at", at), ("every", every), ("cron", cron)) if v is not None]
    if len(given) != 1:
        raise ValueError(f"give exactly one of at, every or cron (got {given or 'none'})")
    _check_subject("target", target)
    if target == subject:
        raise ValueError("a schedule's target must differ from its own subject")
    if at is not None:
        pattern = at_value(at)
    elif every is not None:
        pattern = every_value(every)
    else:
        pattern = cron_value(cron or "")
    h: dict[str, Any] = dict(headers) if headers else {}
    h[SCHEDULE] = pattern
    h[SCHEDULE_TARGET] = target
    if time_zone is not None:
        if cron is None:
            raise ValueError("time_zone applies to cron schedules only")
        if not isinstance(time_zone, str) or not time_zone.strip():
            raise ValueError(f"time_zone must be a time zone name, got {time_zone!r}")
        h[SCHEDULE_TIME_ZONE] = time_zone.strip()
    if ttl is not None:
        h[SCHEDULE_TTL] = ttl_value(ttl)
    if source is not None:
        _check_subject("source", source)
        if source in (subject, target):
            raise ValueError("a schedule's source must differ from its subject and target")
        h[SCHEDULE_SOURCE] = source
    return h
