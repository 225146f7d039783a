"""The core client as the rest of the library uses it: an internal interface.

Messages, subscriptions, JetStream, the managed publisher and the Spark data
source hold a :class:`~jsclient.client.Client` typed as :class:`Core`, so none
of them imports ``client.py`` (which imports them): the package has no import
circle, and this page lists everything the layers above the core rely on.
``Client`` satisfies it structurally (mypy checks that where a client is
handed over). Messages and subscriptions appear as ``Any`` here: their
modules sit above this one.
"""

from __future__ import annotations

import queue
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from jsclient._mux import RequestMux
    from jsclient._threads import CallbackRunner, Scheduler, WeakRegistry
    from jsclient.connection import Connection
    from jsclient.errors import MaxPayloadError
    from jsclient.protocol.headers import HeadersIn


class _Replies(Protocol):
    """The client's outbound side as ``Msg.respond`` uses it."""

    def respond(self, subject: str, payload: bytes, headers: HeadersIn | None) -> None: ...


class Core(Protocol):
    """What the layers above use of a connection (see the module docstring)."""

    _mux: RequestMux
    _conn: Connection
    _callbacks: CallbackRunner
    _drainables: WeakRegistry
    _engines: WeakRegistry
    _subs: dict[int, Any]
    _subject_cache: dict[str, bytes]

    @property
    def _out(self) -> _Replies: ...

    @property
    def is_connected(self) -> bool: ...
    @property
    def is_closed(self) -> bool: ...
    @property
    def stats(self) -> dict[str, int]: ...
    @property
    def _scheduler(self) -> Scheduler: ...
    @property
    def _lost_written(self) -> int: ...

    def new_inbox(self) -> str: ...
    def publish(
        self,
        subject: str,
        payload: bytes = b"",
        reply: str | None = None,
        headers: HeadersIn | None = None,
    ) -> None: ...
    def request(
        self,
        subject: str,
        payload: bytes = b"",
        timeout: float | None = 1.0,
        *,
        headers: HeadersIn | None = None,
    ) -> Any: ...
    def flush(self, timeout: float | None = 2.0) -> None: ...
    def subscribe(
        self,
        subject: str,
        queue: str | None = None,
        cb: Callable[[Any], Any] | None = None,
        *,
        max_msgs: int = 0,
        pending_msgs_limit: int = 65536,
        pending_bytes_limit: int = 64 * 1024 * 1024,
    ) -> Any: ...

    # subscriptions the library manages
    def _check_open(self) -> None: ...
    def _subject_bytes(self, subject: str) -> bytes: ...
    def _too_big(self, size: int) -> MaxPayloadError: ...
    def _subscribe_as(
        self,
        cls: Callable[..., Any],
        subject: str,
        queue: str | None,
        cb: Callable[[Any], Any] | None,
        max_msgs: int,
        pending_msgs_limit: int,
        pending_bytes_limit: int,
        **extra: Any,
    ) -> Any: ...
    def _subscribe_internal(self, subject: str, handler: Callable[[Any], None]) -> int: ...
    def _subscribe_batched(self, subject: str, q: queue.SimpleQueue[Any]) -> Any: ...
    def _move_subscription(self, sub: Any, subject: str) -> None: ...
    def _unsubscribe_internal(self, sid: int) -> None: ...
    def _release_internal_later(self, sids: list[int]) -> None: ...
    def _reap_internal(self) -> None: ...
    def _send_unsub(self, sid: int, max_msgs: int) -> None: ...
    def _remove_sub(self, sid: int) -> None: ...

    # writes on the hot paths
    def _publish_ack(self, subject: str, body: bytes) -> None: ...
    def _ack_not_queued(self, rc: int, subject: str, body: bytes) -> None: ...
    def _publish_raw(self, data: bytes, payload_len: int) -> None: ...
    def _publish_nowait(self, data: bytes, payload_len: int, msgs: int) -> None: ...
    def _watch_sub(self, subject: str) -> None: ...
    def _sub_refusal(self, subject: str) -> BaseException | None: ...

    # threads and events
    def _run_callback(self, fn: Callable[..., Any], *args: Any) -> None: ...
    def _report_error(self, exc: BaseException) -> None: ...
    def _add_listener(self, fn: Callable[[str], None]) -> None: ...
    def _remove_listener(self, fn: Callable[[str], None]) -> None: ...
