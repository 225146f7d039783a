"""What the queue readers use of their link, and the result consumer of its backend.

The link (:mod:`._link`) makes the pullers and core queues that read for it,
and the backend (:mod:`.backend`) makes the result consumer that wakes
``get()``: these protocols are what those readers see of their maker, so that
neither module imports the other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from jsclient.client import Client
    from jsclient.contrib.celery._config import TransportOptions
    from jsclient.contrib.celery._flow import Ready
    from jsclient.jetstream.consume.consumer import Consumer
    from jsclient.jetstream.consume.keepalive import KeepAlive
    from jsclient.msg import Msg


class LinkPort(Protocol):
    """A :class:`~._link.Link` as its pullers and core queues use it."""

    nc: Client
    opts: TransportOptions
    ready: Ready
    keepalive: KeepAlive

    def consumer(self, queue: str) -> Consumer: ...

    def forget_queue(self, queue: str) -> None: ...

    def settle(self, msg: Msg, how: str, delay: float | None = None) -> None: ...

    def dead_letter(self, queue: str, msg: Msg) -> None: ...


class BackendPort(Protocol):
    """A :class:`~.backend.Backend` as its result consumer uses it."""

    @property
    def client(self) -> Client: ...

    def key_subject(self, key: bytes | str) -> str: ...

    def get(self, key: bytes | str) -> bytes | None: ...

    def mget(self, keys: list[bytes | str]) -> list[bytes | None]: ...

    # Celery's (KeyValueStoreBackend), untyped there.
    def get_key_for_task(self, task_id: str, key: str = "") -> Any: ...

    def decode_result(self, payload: Any) -> Any: ...
