"""Client-side checks of stream and consumer names and configs, before any request.

A name becomes a token of an API subject (``$JS.API.STREAM.INFO.<name>``), so
one holding ``.``, ``*``, ``>`` or whitespace would address another subject or
none. The server would reject some of these only after a round trip (or answer
for a different stream); checking first gives a typed error and sends nothing.
Path separators are refused as well because the server stores streams and
consumers in directories named after them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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
    """A ConsumerConfig from a config object or mapping plus keyword fields (which win)."""
    if config is None:
        return ConsumerConfig(**fields)
    if isinstance(config, ConsumerConfig):
        return config.evolve(**fields) if fields else config
    if isinstance(config, Mapping):
        return ConsumerConfig(**{**config, **fields})
    raise TypeError(f"config must be a ConsumerConfig, not {type(config).__name__}")
