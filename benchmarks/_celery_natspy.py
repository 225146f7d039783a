"""The asyncio-wrapping approach, for comparison only: nats-py in a private event-loop thread.

This is how the kombu NATS transports proposed so far work (kombu issue
#2103): a kombu ``virtual`` transport whose every call hands a coroutine of
nats-py to an event loop running in a thread of its own and blocks on the
result (``asyncio.run_coroutine_threadsafe(...).result()``). It has what a
benchmark needs and no more: one work-queue stream and durable pull consumer
per queue, ``js.publish`` with a message id for ``_put``, ``fetch(1)`` for
``_get`` (kombu's virtual transports read one message per ``_get``), acks and
naks through the loop. No fanout (so Celery runs without remote control), no
keep-alive, no shared exchange tables. Not part of jsclient.

Select it with ``broker_transport="_celery_natspy:Transport"`` (this folder on
``sys.path``) and a ``nats://`` broker URL.
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from queue import Empty
from typing import Any

import nats
import nats.errors
import nats.js.errors
from kombu.transport import virtual

#: How long one ``_get`` waits for a message (kombu polls the queues in turn).
FETCH_TIMEOUT = 0.5
CALL_TIMEOUT = 10.0


class _Loop:
    """An asyncio loop on a thread of its own; ``run(coro)`` blocks for its result."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(
            target=self.loop.run_forever, name="natspy-loop", daemon=True
        )
        self.thread.start()

    def run(self, coro: Any, timeout: float = CALL_TIMEOUT) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


async def _quiet(exc: Exception) -> None:
    """nats-py prints every connection error by default; the bench stops servers under it."""


class QoS(virtual.QoS):
    """Acks and naks go to nats-py through the loop."""

    def ack(self, delivery_tag: Any) -> None:
        msg = self.channel._held.pop(delivery_tag, None)
        if msg is not None:
            self.channel._call(msg.ack())
        super().ack(delivery_tag)

    def reject(self, delivery_tag: Any, requeue: bool = False) -> None:
        msg = self.channel._held.pop(delivery_tag, None)
        if msg is not None:
            self.channel._call(msg.nak() if requeue else msg.term())
        self._quick_ack(delivery_tag)

    def restore_unacked(self) -> list[Any]:
        self._flush()
        self._delivered.clear()
        for msg in list(self.channel._held.values()):
            try:
                self.channel._call(msg.nak())
            except Exception:
                pass
        self.channel._held.clear()
        return []


class Channel(virtual.Channel):
    QoS = QoS

    def __init__(self, connection: Any, **kwargs: Any) -> None:
        super().__init__(connection, **kwargs)
        self._held: dict[str, Any] = {}
        self._subs: dict[str, Any] = {}
        self._streams: set[str] = set()

    def _call(self, coro: Any, timeout: float = CALL_TIMEOUT) -> Any:
        return self.connection.loop.run(coro, timeout)

    @property
    def js(self) -> Any:
        return self.connection.js

    @staticmethod
    def _stream(queue: str) -> str:
        return "NATSPY_" + "".join(c if c.isalnum() or c in "-_" else "_" for c in queue)

    def _new_queue(self, queue: str, **kwargs: Any) -> None:
        if queue in self._streams:
            return
        from nats.js.api import RetentionPolicy, StorageType, StreamConfig

        cfg = StreamConfig(
            name=self._stream(queue),
            subjects=[f"natspy.q.{queue}"],
            retention=RetentionPolicy.WORK_QUEUE,
            storage=StorageType.FILE,
        )
        try:
            self._call(self.js.add_stream(cfg))
        except nats.js.errors.BadRequestError:
            self._call(self.js.update_stream(cfg))
        self._streams.add(queue)

    def _put(self, queue: str, message: dict[str, Any], **kwargs: Any) -> None:
        self._new_queue(queue)
        msg_id = message["properties"].setdefault("natspy_msg_id", uuid.uuid4().hex)
        self._call(
            self.js.publish(
                f"natspy.q.{queue}", json.dumps(message).encode(), headers={"Nats-Msg-Id": msg_id}
            )
        )

    def _sub(self, queue: str) -> Any:
        sub = self._subs.get(queue)
        if sub is None:
            self._new_queue(queue)
            sub = self._subs[queue] = self._call(
                self.js.pull_subscribe(
                    f"natspy.q.{queue}", durable="workers", stream=self._stream(queue)
                )
            )
        return sub

    def _get(self, queue: str, timeout: float | None = None) -> dict[str, Any]:
        sub = self._sub(queue)
        try:
            msgs = self._call(sub.fetch(1, timeout=FETCH_TIMEOUT), FETCH_TIMEOUT + CALL_TIMEOUT)
        except nats.errors.TimeoutError:
            raise Empty() from None
        msg = msgs[0]
        payload = json.loads(msg.data)
        payload["properties"]["delivery_tag"] = msg.reply
        self._held[msg.reply] = msg
        return payload

    def _size(self, queue: str) -> int:
        try:
            info = self._call(self.js.stream_info(self._stream(queue)))
        except nats.js.errors.NotFoundError:
            return 0
        return int(info.state.messages)

    def _purge(self, queue: str) -> int:
        n = self._size(queue)
        try:
            self._call(self.js.purge_stream(self._stream(queue)))
        except nats.js.errors.NotFoundError:
            return 0
        return n


class Transport(virtual.Transport):
    Channel = Channel
    default_port = 4222
    driver_type = "natspy"
    driver_name = "nats-py"
    polling_interval = 0  # _get waits in fetch; no sleep between polls
    connection_errors = (
        ConnectionError,
        nats.errors.ConnectionClosedError,
        nats.errors.TimeoutError,
    )
    channel_errors = (nats.js.errors.APIError,)
    implements = virtual.Transport.implements.extend(
        asynchronous=False, exchange_type=frozenset(["direct", "topic"])
    )

    def __init__(self, client: Any, **kwargs: Any) -> None:
        super().__init__(client, **kwargs)
        self.loop: _Loop | None = None
        self.nc: Any = None
        self.js: Any = None

    def establish_connection(self) -> Any:
        if self.nc is None:
            self.loop = _Loop()
            url = f"nats://{self.client.hostname or '127.0.0.1'}:{self.client.port or 4222}"
            self.nc = self.loop.run(nats.connect(url, error_cb=_quiet, max_reconnect_attempts=3))
            self.js = self.nc.jetstream()
        return super().establish_connection()

    def close_connection(self, connection: Any) -> None:
        super().close_connection(connection)
        if self.nc is not None and self.loop is not None:
            try:
                self.loop.run(self.nc.drain())
            except Exception:
                pass
            self.loop.stop()
            self.nc = None
