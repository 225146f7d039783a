"""Client-side checks of stream and consumer names and configs, before any request.

A name becomes a token of an API subject (``$JS.API.STREAM.INFO.<name>``), so
one holding ``.``, ``*``, ``>`` or whitespace would address another subject or
none. The server would reject some of these only after a round trip (or answer
for a different stream); checking first gives a typed error and sends nothing.
Path separators are refused as well because the server stores streams and
consumers in directories named after them.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
from collections.abc import Mapping
from typing import Any

from nats.js.api import ConsumerConfig as _NatsConsumerConfig

from jsclient import errors
from jsclient.api import ConsumerConfig, StreamConfig

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


#: What the create/update calls accept besides keyword fields.
StreamConfigLike = StreamConfig | Mapping[str, Any]
ConsumerConfigLike = ConsumerConfig | Mapping[str, Any]


def stream_config(config: StreamConfigLike | None, fields: dict[str, Any]) -> StreamConfig:
    """A StreamConfig from a config object or mapping plus keyword fields (which win)."""
    if config is None:
        cfg = StreamConfig(**fields)
    elif isinstance(config, StreamConfig):
        cfg = config.evolve(**fields) if fields else config
    elif isinstance(config, Mapping):
        cfg = StreamConfig(**{**config, **fields})
    else:
        raise TypeError(f"config must be a StreamConfig, not {type(config).__name__}")
    check_stream_name(cfg.name)
    return cfg


def consumer_config(config: ConsumerConfigLike | None, fields: dict[str, Any]) -> ConsumerConfig:
    """A ConsumerConfig from a config object or mapping plus keyword fields (which win).

    nats-py's own ConsumerConfig is taken too, and ``pause_until`` may be given
    as a timezone-aware datetime (it is held as RFC 3339 text, as nats-py does).
    """
    if config is None:
        cfg = ConsumerConfig(**fields)
    elif isinstance(config, ConsumerConfig):
        cfg = config.evolve(**fields) if fields else config
    elif isinstance(config, Mapping):
        cfg = ConsumerConfig(**{**config, **fields})
    elif isinstance(config, _NatsConsumerConfig):  # nats-py's, where jsclient's extends it
        values = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
        cfg = ConsumerConfig(**{**values, **fields})
    else:
        raise TypeError(f"config must be a ConsumerConfig, not {type(config).__name__}")
    if isinstance(cfg.pause_until, _dt.datetime):
        cfg = cfg.evolve(pause_until=utc_rfc3339(cfg.pause_until))
    return cfg


def utc_rfc3339(when: _dt.datetime) -> str:
    """An aware datetime as the RFC 3339 UTC text the server reads (microseconds)."""
    if when.tzinfo is None or when.utcoffset() is None:
        raise ValueError(f"a timezone-aware datetime is needed, got the naive {when!r}")
    naive = when.astimezone(_dt.UTC).replace(tzinfo=None)
    return naive.isoformat(timespec="microseconds") + "Z"
