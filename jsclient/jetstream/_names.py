"""Client-side checks for stream and consumer names.

A name becomes a token of an API subject (``$JS.API.STREAM.INFO.<name>``), so
one holding ``.``, ``*``, ``>`` or whitespace would address another subject or
none. The server would reject some of these only after a round trip (or answer
for a different stream); checking first gives a typed error and sends nothing.
Path separators are refused as well because the server stores streams and
consumers in directories named after them.
"""

from __future__ import annotations

from typing import Any

from jsclient import errors

_FORBIDDEN = frozenset(".*>/\\")


def _is_valid(name: Any) -> bool:
    if not isinstance(name, str) or not name:
        return False
    return _FORBIDDEN.isdisjoint(name) and not any(c.isspace() for c in name)


def check_stream_name(name: Any) -> str:
    """Return ``name`` if it is a usable stream name, else raise InvalidStreamNameError."""
    if not _is_valid(name):
        raise errors.InvalidStreamNameError(f"nats: invalid stream name {name!r}")
    result: str = name
    return result


def check_consumer_name(name: Any) -> str:
    """Return ``name`` if it is a usable consumer name, else raise InvalidConsumerNameError."""
    if not _is_valid(name):
        raise errors.InvalidConsumerNameError(f"nats: invalid consumer name {name!r}")
    result: str = name
    return result
