"""Options and server-side names: what a kombu queue, exchange or key is called on NATS.

``broker_transport_options`` (and kombu's ``transport_options``) are read once
per connection into :class:`TransportOptions`; unknown keys are left to kombu
(it has options of its own, ``polling_interval`` and the like). Time values
are seconds, as everywhere in jsclient.

Names:

- a queue ``Q`` is the stream ``<prefix>_<Q>`` (characters a stream name may
  not hold become ``_``, with a short hash of ``Q`` added so that two queues
  never share a stream) with the one subject ``<prefix>.q.<Q>``;
- its dead letters go to ``<prefix>.dlq.<Q>``, kept by the stream
  ``<prefix>_dlq``;
- a fanout exchange ``E`` is the core subject ``<prefix>.fanout.<E>``; a
  transient queue bound to a direct or topic exchange listens on
  ``<prefix>.x.<E>.<routing key>`` (core NATS, see :mod:`.channel`);
- exchange tables shared by every process live in the KV bucket
  ``<prefix>_bindings``, one key per exchange.

Queue names keep their dots in subjects (``reports.daily`` is
``celery.q.reports.daily``); a token that a subject cannot carry (empty, a
wildcard, with spaces) and exchange names, which must stay one token, are
percent-escaped.
"""

from __future__ import annotations

import base64
import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

from jsclient import errors

#: Characters a stream or bucket name may hold (nats-server: no ``.``, ``*``,
#: ``>``, path separators or whitespace; buckets are stricter still).
_NAME_OK = re.compile(r"[A-Za-z0-9_-]+")
_NAME_BAD = re.compile(r"[^A-Za-z0-9_-]")
#: A subject token needs no escaping when it is non-empty, not a wildcard and
#: holds none of these.
_TOKEN_BAD = re.compile(r"[\s%*>\x00-\x1f\x7f]")
#: KV keys (ADR-8): ``[-/_=.a-zA-Z0-9]+``, no leading or trailing dot.
_KEY_OK = re.compile(r"[A-Za-z0-9_=/-]+(?:\.[A-Za-z0-9_=/-]+)*")
#: Longest stream name made from a queue name (file-store directories).
_MAX_NAME = 200

DEFAULT_PREFIX = "celery"
DEFAULT_ACK_WAIT = 30.0
DEFAULT_PULL_EXPIRES = 5.0
DEFAULT_DUPLICATE_WINDOW = 120.0
DEFAULT_BINDING_CACHE = 5.0
#: Messages one pull asks for when kombu sets no prefetch limit.
DEFAULT_UNLIMITED_BATCH = 256


def name_part(text: str) -> str:
    """``text`` as part of a stream or bucket name; unchanged when it already fits."""
    if _NAME_OK.fullmatch(text) and len(text) <= _MAX_NAME:
        return text
    digest = hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{_NAME_BAD.sub('_', text)[:_MAX_NAME]}_{digest}"


def _escape(text: str, extra: str = "") -> str:
    out: list[str] = []
    for ch in text:
        if ch in extra or _TOKEN_BAD.match(ch):
            out.extend(f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass"))
        else:
            out.append(ch)
    return "".join(out)


def token(text: str) -> str:
    """``text`` as exactly one subject token (dots escaped too)."""
    return _escape(text, ".") or "%"


def tokens(text: str) -> str:
    """``text`` as subject tokens, one per dot-separated word (routing keys, queue names)."""
    return ".".join(_escape(word) or "%" for word in text.split("."))


def kv_key(name: str) -> str:
    """A KV key for an exchange or result name; names a key cannot hold are base64url-encoded."""
    if _KEY_OK.fullmatch(name) and not name.startswith("b64."):
        return name
    raw = base64.urlsafe_b64encode(name.encode("utf-8", "surrogatepass")).rstrip(b"=")
    return "b64." + raw.decode("ascii")


def _seconds(opts: dict[str, Any], key: str, default: float | None) -> float | None:
    value = opts.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise errors.Error(f"broker_transport_options[{key!r}]: positive seconds, not {value!r}")
    return float(value)


def _count(opts: dict[str, Any], key: str, default: int | None) -> int | None:
    value = opts.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise errors.Error(f"broker_transport_options[{key!r}]: a positive int, not {value!r}")
    return value


def check_prefix(prefix: Any) -> str:
    """A ``stream_prefix`` that can start subjects (its dots become ``_`` in stream names)."""
    if (
        not isinstance(prefix, str)
        or not prefix
        or any(not word or _TOKEN_BAD.search(word) for word in prefix.split("."))
    ):
        raise errors.Error(f"stream_prefix must be subject tokens like 'celery', not {prefix!r}")
    return prefix


@dataclass(frozen=True)
class TransportOptions:
    """The transport's ``broker_transport_options``, checked, with their defaults.

    ``stream_prefix`` ("celery"): prefix of stream names and subjects.
    ``ack_wait`` (30 s): the visibility timeout; held messages are kept alive
    every third of it. ``max_deliver`` (None: no limit): deliveries before a
    message goes to ``<stream_prefix>.dlq.<queue>``. ``replicas`` (1): stream
    replicas. ``pull_expires`` (5 s): how long one pull waits on an idle
    queue. ``requeue_delay`` (None): the ``NAK`` delay of a requeued message.
    ``duplicate_window`` (120 s): how long a message id is remembered.
    ``max_ack_pending`` (-1: no limit; each worker's prefetch bounds what it
    holds): messages delivered and not yet settled, per queue, for all workers.
    ``binding_cache`` (5 s): how long a process trusts its copy of an exchange
    table. ``connect_options``: keyword arguments for ``jsclient.connect``.
    """

    stream_prefix: str = DEFAULT_PREFIX
    ack_wait: float = DEFAULT_ACK_WAIT
    max_deliver: int | None = None
    replicas: int = 1
    pull_expires: float = DEFAULT_PULL_EXPIRES
    requeue_delay: float | None = None
    duplicate_window: float = DEFAULT_DUPLICATE_WINDOW
    max_ack_pending: int = -1
    binding_cache: float = DEFAULT_BINDING_CACHE
    connect_options: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_kombu(cls, opts: dict[str, Any] | None) -> TransportOptions:
        """Read the options kombu hands the transport (``client.transport_options``)."""
        o = dict(opts or {})
        connect = o.get("connect_options") or {}
        if not isinstance(connect, dict):
            raise errors.Error("broker_transport_options['connect_options'] must be a dict")
        return cls(
            stream_prefix=check_prefix(o.get("stream_prefix", DEFAULT_PREFIX)),
            ack_wait=_seconds(o, "ack_wait", DEFAULT_ACK_WAIT) or DEFAULT_ACK_WAIT,
            max_deliver=_count(o, "max_deliver", None),
            replicas=_count(o, "replicas", 1) or 1,
            pull_expires=_seconds(o, "pull_expires", DEFAULT_PULL_EXPIRES) or DEFAULT_PULL_EXPIRES,
            requeue_delay=_seconds(o, "requeue_delay", None),
            duplicate_window=_seconds(o, "duplicate_window", DEFAULT_DUPLICATE_WINDOW)
            or DEFAULT_DUPLICATE_WINDOW,
            max_ack_pending=-1
            if o.get("max_ack_pending", -1) == -1
            else _count(o, "max_ack_pending", None) or -1,
            binding_cache=_seconds(o, "binding_cache", DEFAULT_BINDING_CACHE)
            or DEFAULT_BINDING_CACHE,
            connect_options=dict(connect),
        )

    # -- names ---------------------------------------------------------------

    def stream(self, queue: str) -> str:
        """The stream of ``queue``."""
        return f"{name_part(self.stream_prefix.replace('.', '_'))}_{name_part(queue)}"

    def subject(self, queue: str) -> str:
        """The subject messages of ``queue`` are published to."""
        return f"{self.stream_prefix}.q.{tokens(queue)}"

    def dlq_subject(self, queue: str) -> str:
        """Where the dead letters of ``queue`` go: ``<stream_prefix>.dlq.<queue>``."""
        return f"{self.stream_prefix}.dlq.{tokens(queue)}"

    @property
    def dlq_stream(self) -> str:
        """The stream that keeps every queue's dead letters."""
        return f"{name_part(self.stream_prefix.replace('.', '_'))}_dlq"

    @property
    def bindings_bucket(self) -> str:
        """The KV bucket of the shared exchange tables."""
        return f"{name_part(self.stream_prefix.replace('.', '_'))}_bindings"

    def fanout_subject(self, exchange: str) -> str:
        """The core subject of a fanout exchange (broadcast: remote control, events)."""
        return f"{self.stream_prefix}.fanout.{token(exchange)}"

    def route_subject(self, exchange: str, routing_key: str) -> str:
        """The core subject transient queues bound to ``exchange`` listen on."""
        return f"{self.stream_prefix}.x.{token(exchange)}.{tokens(routing_key)}"

    def transient_subject(self, queue: str) -> str:
        """The core subject of a transient queue itself (kombu's default exchange)."""
        return f"{self.stream_prefix}.t.{tokens(queue)}"

    def route_filters(self, exchange: str, routing_key: str, topic: bool) -> list[str]:
        """The subjects a transient queue bound with ``routing_key`` subscribes to.

        Direct: the one subject. Topic: ``*`` stays ``*``; a trailing ``#``
        (zero or more words) is the prefix itself and ``prefix.>``; a ``#``
        elsewhere cannot be said as a subject, so the whole exchange is
        subscribed and the binding's pattern filters what arrives.
        """
        base = f"{self.stream_prefix}.x.{token(exchange)}"
        if not topic:
            return [f"{base}.{tokens(routing_key)}"]
        words = routing_key.split(".")
        if "#" in words[:-1]:
            return [f"{base}.>"]
        mapped = ["*" if w == "*" else (_escape(w) or "%") for w in words[:-1]]
        last = words[-1]
        if last == "#":
            head = ".".join([base, *mapped])
            return [head, f"{head}.>"] if mapped else [f"{base}.>"]
        mapped.append("*" if last == "*" else (_escape(last) or "%"))
        return [".".join([base, *mapped])]
