"""Celery's result backend on a JetStream KV bucket: ``backend="jetstream://host:4222"``.

Results, states, groups and chord counters are keys of one bucket
(``celery_results`` by default; ``result_backend_transport_options``:
``bucket``, ``replicas``, ``connect_options``), one key per task id
(``celery-task-meta-<id>``, Celery's key names), history 1, file storage.
The bucket's max age is ``result_expires`` (Celery's default: one day;
``None`` or 0: kept until deleted), so results expire without a cleanup task.

- ``AsyncResult.get()`` does not poll: it waits on the key's subject, what a
  KV watch reads (:class:`._results.ResultConsumer`), and wakes when the
  worker stores the result;
- groups and chords: ``GroupResult.get()`` joins natively, chord parts count
  with an atomic ``incr`` (compare-and-set on the counter's key), so the
  chord body runs once, after the last part;
- a result that is already ``SUCCESS`` is never overwritten (Celery's rule
  for a task that ran twice).

Without ``import jsclient.contrib.celery``,
``result_backend="jsclient.contrib.celery.backend:Backend"`` selects it (the
servers then come from ``result_backend_transport_options["servers"]``, else
from a ``jetstream://`` or ``nats://`` broker URL, else ``127.0.0.1:4222``).
"""

from __future__ import annotations

import os
import threading
from typing import Any
from urllib.parse import unquote, urlsplit

from celery.backends.asynchronous import AsyncBackendMixin
from celery.backends.base import BaseKeyValueStoreBackend

from jsclient import errors
from jsclient.client import Client
from jsclient.contrib.celery._config import kv_key, name_part
from jsclient.contrib.celery._results import ResultConsumer, shared_client
from jsclient.contrib.celery.transport import CONNECTION_ERRORS
from jsclient.jetstream.kv.store import KeyValue

__all__ = ["Backend", "ResultConsumer"]

DEFAULT_BUCKET = "celery_results"
#: Compare-and-set attempts of ``incr`` before giving up.
INCR_ATTEMPTS = 100
_SCHEMES = ("jetstream", "nats", "tls")


def _servers(url: str | None, app: Any, opts: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(servers, credentials) from the backend URL, the options or the broker URL."""
    if opts.get("servers"):
        return opts["servers"], {}
    candidates = [url]
    broker = app.conf.broker_url
    if isinstance(broker, str):
        candidates.append(broker.split(";")[0])
    for cand in candidates:
        if not cand or "://" not in cand:
            continue
        parts = urlsplit(cand)
        scheme = parts.scheme.rsplit("+", 1)[-1]
        if scheme not in _SCHEMES:
            continue
        creds: dict[str, Any] = {}
        if parts.username and parts.password:
            creds = {"user": unquote(parts.username), "password": unquote(parts.password)}
        elif parts.username:
            creds = {"token": unquote(parts.username)}
        wire = "tls" if scheme == "tls" else "nats"
        return f"{wire}://{parts.hostname or '127.0.0.1'}:{parts.port or 4222}", creds
    return "nats://127.0.0.1:4222", {}


class Backend(AsyncBackendMixin, BaseKeyValueStoreBackend):  # type: ignore[misc]
    """Celery result backend: a JetStream KV bucket (see the module)."""

    ResultConsumer = ResultConsumer

    supports_autoexpire = True
    supports_native_join = True
    implements_incr = True

    def __init__(self, app: Any = None, url: str | None = None, **kwargs: Any) -> None:
        super().__init__(app=app, expires_type=int, **kwargs)
        self.url = url
        opts = dict(self.app.conf.get("result_backend_transport_options") or {})
        servers, creds = _servers(url, self.app, opts)
        connect: dict[str, Any] = {"servers": servers, "name": "celery-results", **creds}
        connect.update(opts.get("connect_options") or {})
        self._connect = connect
        self.bucket = name_part(str(opts.get("bucket", DEFAULT_BUCKET)))
        self._replicas = int(opts.get("replicas", 1))
        self._kv: KeyValue | None = None
        self._kv_pid = 0
        self._kv_lock = threading.Lock()
        self.connection_errors = CONNECTION_ERRORS
        self.result_consumer = self.ResultConsumer(
            self, self.app, self.accept, self._pending_results, self._pending_messages
        )

    # -- the bucket --------------------------------------------------------------

    @property
    def client(self) -> Client:
        """This process's connection for these servers."""
        return shared_client(self._connect)

    @property
    def kv(self) -> KeyValue:
        """The results bucket (made, or its max age set, on first use in a process)."""
        kv = self._kv
        if kv is not None and self._kv_pid == os.getpid() and not self.client.is_closed:
            return kv
        with self._kv_lock:
            js = self.client.jetstream()
            fields: dict[str, Any] = {
                "bucket": self.bucket,
                "history": 1,
                "storage": "file",
                "replicas": self._replicas,
                "description": "Celery results (jsclient.contrib.celery)",
            }
            if self.expires:
                fields["ttl"] = float(self.expires)
            try:
                kv = js.create_or_update_key_value(**fields)
            except errors.APIError:  # no right to change it: use it as it is
                kv = js.key_value(self.bucket)
            self._kv, self._kv_pid = kv, os.getpid()
        return kv

    def key_subject(self, key: bytes | str) -> str:
        """The subject a KV write of ``key`` is published on (``>``: the whole bucket)."""
        name = key if isinstance(key, str) else key.decode("utf-8")
        return f"$KV.{self.bucket}.{name if name == '>' else kv_key(name)}"

    @staticmethod
    def _key(key: bytes | str) -> str:
        return kv_key(key if isinstance(key, str) else key.decode("utf-8"))

    # -- the key-value interface Celery's base class uses -------------------------

    def get(self, key: bytes | str) -> bytes | None:
        """The stored value of ``key``, None when there is none."""
        try:
            value: bytes = self.kv.get(self._key(key)).value
        except errors.KeyNotFoundError:
            return None
        return value

    def mget(self, keys: list[bytes | str]) -> list[bytes | None]:
        """The values of ``keys``, in order (None for the missing)."""
        return [self.get(k) for k in keys]

    def set(self, key: bytes | str, value: bytes | str) -> None:
        """Store ``value``: it wakes whoever waits for ``key``."""
        self.kv.put(self._key(key), value)

    def delete(self, key: bytes | str) -> None:
        """Delete ``key`` (``forget()``)."""
        try:
            self.kv.delete(self._key(key))
        except errors.KeyNotFoundError:
            pass

    def incr(self, key: bytes | str) -> int:
        """Add one to the counter at ``key`` atomically (compare-and-set); the new value."""
        kv, k = self.kv, self._key(key)
        for _ in range(INCR_ATTEMPTS):
            try:
                entry = kv.get(k)
            except errors.KeyNotFoundError:
                try:
                    kv.create(k, b"1")
                    return 1
                except errors.KeyExistsError:
                    continue
            value = int(entry.value or b"0") + 1
            try:
                kv.update(k, str(value).encode(), entry.revision)
            except errors.KeyWrongLastSequenceError:
                continue  # another part counted first
            return value
        raise errors.Error(f"incr {k!r}: too contended")

    def expire(self, key: bytes | str, value: int) -> None:
        """Per-key expiry: the bucket's max age (``result_expires``) applies to every key."""

    # -- Celery plumbing ---------------------------------------------------------

    def as_uri(self, include_password: bool = False) -> str:
        """The backend URL for banners (no password)."""
        servers = self._connect["servers"]
        first = servers if isinstance(servers, str) else servers[0]
        return "jetstream://" + first.split("://", 1)[-1]

    def __reduce__(self, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None) -> Any:
        return super().__reduce__(args, dict(kwargs or {}, url=self.url, expires=self.expires))
