"""Exchange tables shared by every process: one KV key per exchange.

kombu's virtual transports route in the publishing process: a message for
exchange ``E`` with routing key ``K`` goes to the queues whose bindings to
``E`` match ``K``. A Celery worker replying to ``celery inspect`` publishes to
an exchange whose queue another process declared, so the tables must be
shared. Each exchange is one key of the bucket ``<prefix>_bindings``::

    {"type": "direct", "transient": false, "table": [[routing_key, pattern, queue], ...]}

``table`` lists the durable queues (each a stream). ``transient`` says that
transient queues (auto-delete, not durable: reply queues, event receivers)
are bound too; they are core NATS subscriptions, so a publisher sends such an
exchange's messages to ``<prefix>.x.<E>.<K>`` as well, and keeps no per-queue
entry for them (nothing to clean up when such a process dies).

Changes are compare-and-set updates (``kv.update(last=...)``), retried on a
conflict. Reads are cached for ``binding_cache`` seconds, and read again at
once when a lookup finds no queue, so a queue bound a moment ago elsewhere is
seen on its first message; a second queue bound elsewhere to a key that
already routes is seen within ``binding_cache``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from jsclient import errors
from jsclient.contrib.celery._config import TransportOptions, kv_key
from jsclient.jetstream.context import JetStream
from jsclient.jetstream.kv.store import KeyValue

#: Compare-and-set attempts before giving up on a contended update.
CAS_ATTEMPTS = 20

Binding = tuple[str, str | None, str]


@dataclass(frozen=True)
class Record:
    """One exchange's shared table."""

    type: str = "direct"
    transient: bool = False
    table: tuple[Binding, ...] = ()

    def encode(self) -> bytes:
        """The record as stored."""
        doc = {"type": self.type, "transient": self.transient, "table": list(self.table)}
        return json.dumps(doc, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, data: bytes) -> Record:
        """A stored record (a malformed one reads as empty, so routing goes on)."""
        try:
            doc = json.loads(data)
            table = tuple((str(r[0]), r[1], str(r[2])) for r in doc.get("table", ()))
            return cls(str(doc.get("type", "direct")), bool(doc.get("transient")), table)
        except (ValueError, TypeError, IndexError, AttributeError):
            return cls()


class Bindings:
    """Reads and changes the shared exchange tables of one connection."""

    def __init__(self, js: JetStream, opts: TransportOptions) -> None:
        self._js = js
        self._opts = opts
        self._kv: KeyValue | None = None
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[float, Record]] = {}

    def _bucket(self) -> KeyValue:
        kv = self._kv
        if kv is None:
            try:
                kv = self._js.key_value(self._opts.bindings_bucket)
            except errors.BucketNotFoundError:
                try:
                    kv = self._js.create_key_value(
                        bucket=self._opts.bindings_bucket,
                        history=1,
                        storage="file",
                        replicas=self._opts.replicas,
                        description="kombu exchange tables (jsclient.contrib.celery)",
                    )
                except errors.StreamNameAlreadyInUseError:  # made meanwhile by another process
                    kv = self._js.key_value(self._opts.bindings_bucket)
            self._kv = kv
        return kv

    def get(self, exchange: str, *, fresh: bool = False) -> Record:
        """The table of ``exchange`` (cached for ``binding_cache`` s unless ``fresh``)."""
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(exchange)
        if hit is not None and not fresh and now - hit[0] < self._opts.binding_cache:
            return hit[1]
        try:
            rec = Record.decode(self._bucket().get(kv_key(exchange)).value)
        except errors.KeyNotFoundError:
            rec = Record()
        with self._lock:
            self._cache[exchange] = (time.monotonic(), rec)
        return rec

    def cached_age(self, exchange: str) -> float | None:
        """Seconds since ``exchange`` was read, None if it never was."""
        with self._lock:
            hit = self._cache.get(exchange)
        return None if hit is None else time.monotonic() - hit[0]

    def add(self, exchange: str, type_: str, binding: Binding) -> None:
        """Bind a durable queue (idempotent)."""

        def change(rec: Record) -> Record:
            if binding in rec.table:
                return rec
            return Record(type_, rec.transient, (*rec.table, binding))

        self._update(exchange, change)

    def remove(self, exchange: str, binding: Binding) -> None:
        """Unbind a durable queue (idempotent)."""

        def change(rec: Record) -> Record:
            if binding not in rec.table:
                return rec
            return Record(rec.type, rec.transient, tuple(b for b in rec.table if b != binding))

        self._update(exchange, change)

    def mark_transient(self, exchange: str, type_: str) -> None:
        """Say that transient queues listen to ``exchange`` (never undone: cheap for the
        publishers, and a process that dies cannot say when the last one left)."""
        if self.get(exchange).transient:
            return

        def change(rec: Record) -> Record:
            return rec if rec.transient else Record(rec.type or type_, True, rec.table)

        self._update(exchange, change)

    def _update(self, exchange: str, change: Callable[[Record], Record]) -> None:
        kv = self._bucket()
        key = kv_key(exchange)
        for _ in range(CAS_ATTEMPTS):
            last: int | None
            try:
                entry = kv.get(key)
                rec, last = Record.decode(entry.value), entry.revision
            except errors.KeyNotFoundError:
                rec, last = Record(), None
            new = change(rec)
            if new == rec and last is not None:
                self._remember(exchange, rec)
                return
            try:
                if last is None:
                    kv.create(key, new.encode())
                else:
                    kv.update(key, new.encode(), last)
            except errors.KeyWrongLastSequenceError:
                continue  # another process changed it first: read again
            self._remember(exchange, new)
            return
        raise errors.Error(f"could not update the bindings of exchange {exchange!r}: contended")

    def _remember(self, exchange: str, rec: Record) -> None:
        with self._lock:
            self._cache[exchange] = (time.monotonic(), rec)

    def forget(self, exchange: str | None = None) -> None:
        """Drop cached tables (all of them by default)."""
        with self._lock:
            if exchange is None:
                self._cache.clear()
            else:
                self._cache.pop(exchange, None)

    def tables(self) -> dict[str, Any]:
        """Every cached table (for ``list_bindings``)."""
        with self._lock:
            return {ex: rec for ex, (_, rec) in self._cache.items()}
