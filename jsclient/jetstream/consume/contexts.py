"""The running pulls of ``consume()`` and ``messages()``: :class:`ConsumeContext`
and :class:`MessagesContext`, fed by a :class:`Source` (a pull feed, or an
ordered one)."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from jsclient import _impl, errors
from jsclient._core import Core
from jsclient._handoff import next_item
from jsclient._threads import Signal, log
from jsclient.jetstream.consume.engine import (
    STOP,
    WAIT_SLICE,
    Inbox,
    Terminal,
)
from jsclient.jetstream.consume.fetch import ErrorCallback, wait_read
from jsclient.msg import Msg

_mono = time.monotonic


class Source(Protocol):
    """What a consume/messages context pulls from (a :class:`Feed`, or an ordered one)."""

    def start(self) -> None: ...

    def process(self, item: Any) -> Msg | None: ...

    def stop(self) -> None: ...


SourceFactory = Callable[[Inbox, Callable[[BaseException], None]], Source]


class _Reporter:
    """Sends warnings to the consume/messages ``error_cb``, else the connection's."""

    __slots__ = ("client", "error_cb")

    def __init__(self, client: Core, error_cb: ErrorCallback | None) -> None:
        self.client = client
        self.error_cb = error_cb

    def __call__(self, exc: BaseException) -> None:
        """From the library's threads: on the client's callback thread."""
        if self.error_cb is not None:
            self.client._run_callback(self.error_cb, exc)
        else:
            self.client._report_error(exc)

    def here(self, exc: BaseException) -> None:
        """From the consume's own thread (where user code runs anyway): at once, so
        that the error_cb of a consume's end has run when ``wait()`` returns."""
        if self.error_cb is None:
            self.client._report_error(exc)
            return
        try:
            self.error_cb(exc)
        except BaseException:  # the dispatcher outlives user code
            log.exception("jsclient: consume error_cb raised")


#: Numbers the consume threads of this process (any thread may start one).
_CONSUMES = _impl.writer.Counter(1)


class ConsumeContext:
    """A running ``consume()``: the callback gets each message on a dispatcher thread.

    ``stop()`` stops pulling and returns at once; the callback runs no more
    after the call in progress. ``drain()`` stops pulling and lets the callback
    have what is already buffered. ``closed`` turns true, and ``wait()``
    returns, once the dispatcher has finished -- also when the consume ended on
    its own (consumer deleted, push-based consumer, bad request, connection
    closed); ``error`` then holds the reason.
    """

    def __init__(
        self,
        client: Core,
        make_source: SourceFactory,
        callback: Callable[[Msg], Any],
        error_cb: ErrorCallback | None,
        name: str,
        inbox: Inbox | None = None,
        on_end: Callable[[], None] | None = None,
    ) -> None:
        self._q = Inbox() if inbox is None else inbox  # a keep-alive's own (see _keepalive)
        self._report = _Reporter(client, error_cb)
        self._callback = callback
        # Called once nothing more is delivered (stop(), or the dispatcher's
        # end): a keep-alive's close, which must not wait for its next tick.
        self._on_end = on_end
        self._stopped = False
        self._done = Signal()
        self._error: BaseException | None = None
        self._client = client
        self._source = make_source(self._q, self._report)
        self._source.start()
        client._drainables.add(self)
        # Named after the consumer and numbered: N consumes of one consumer
        # (an N-thread worker) tell apart in a thread dump.
        self._thread = threading.Thread(
            target=self._run, name=f"jsclient-consume-{name}-{next(_CONSUMES)}", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        inbox = self._q
        local = inbox.local
        held = inbox.held
        process = self._source.process
        callback = self._callback
        try:
            while True:  # not `while not self._stopped`: see test_interrupt_cover
                if self._stopped:
                    break
                if local:
                    try:
                        item = local.popleft()
                    except IndexError:  # another thread took the last one
                        continue
                else:
                    try:
                        item = next_item(inbox, held, local, WAIT_SLICE)  # see _handoff
                    except queue.Empty:
                        continue
                if item is STOP:
                    break
                try:
                    msg = process(item)
                except Terminal as t:
                    self._error = t.error
                    if t.report:
                        self._report.here(t.error)
                    break
                except Exception as exc:
                    self._report.here(exc)
                    continue
                if msg is None or self._stopped:
                    continue
                try:
                    callback(msg)
                except BaseException as exc:  # the dispatcher outlives user code (issue 32)
                    log.exception("jsclient: consume callback raised")
                    self._report.here(exc)
        finally:
            self._source.stop()
            self._client._drainables.discard(self)
            self._end()
            self._done.set()

    def _end(self) -> None:
        on_end, self._on_end = self._on_end, None
        if on_end is not None:
            on_end()

    def _drain_begin(self) -> None:
        """The connection drains: stop pulling; the callback gets what is buffered."""
        self.drain()

    def _drain_wait(self, deadline: float | None) -> bool:
        """Wait until the callback has had every buffered message."""
        if self._thread is threading.current_thread():
            return True  # drained from inside the callback: it cannot wait for itself
        return self.wait(None if deadline is None else max(0.0, deadline - _mono()))

    def stop(self) -> None:
        """Stop pulling and delivering; buffered messages are dropped (redelivered later)."""
        self._stopped = True
        self._source.stop()
        self._q.put(STOP)
        self._end()  # nothing buffered is kept alive any more

    def drain(self) -> None:
        """Stop pulling; the callback still gets what is buffered, then the consume ends."""
        self._source.stop()
        self._q.put(STOP)

    @property
    def closed(self) -> bool:
        """True once no more callbacks will run."""
        return self._done.is_set()

    @property
    def error(self) -> BaseException | None:
        """Why the consume ended by itself (a terminal status, connection closed), or None."""
        return self._error

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the consume has ended; True if it has."""
        if self._thread is threading.current_thread():
            return self._done.is_set()
        return self._done.wait(timeout)  # in slices (see Signal)


class MessagesContext:
    """A blocking iterator over a continuous pull; also a context manager (stops on exit).

    ``next(timeout)`` returns a message or raises ``TimeoutError``; a terminal
    status (``ConsumerDeletedError`` ...) and, with ``err_on_missing_heartbeat``
    (the default), ``NoHeartbeatError`` are raised from it -- the iterator keeps
    going after a missed heartbeat. ``stop()`` and ``drain()`` may be called from
    any thread and wake a blocked ``next`` at once; after ``stop`` (or when
    ``drain`` has delivered the buffered messages) ``next`` raises
    ``MsgIteratorClosedError`` and a ``for`` loop ends.
    """

    def __init__(
        self,
        client: Core,
        make_source: SourceFactory,
        error_cb: ErrorCallback | None,
        inbox: Inbox | None = None,
    ) -> None:
        self._q = Inbox() if inbox is None else inbox  # a keep-alive's own (see _keepalive)
        self._report = _Reporter(client, error_cb)
        self._stopped = False
        self._closed = False
        self._error: BaseException | None = None
        self._client = client
        self._taken_at = _mono()
        self._reading = 0  # threads blocked in next() (see _drain_wait)
        self._source = make_source(self._q, self._report)
        self._source.start()
        client._drainables.add(self)

    def __enter__(self) -> MessagesContext:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __iter__(self) -> MessagesContext:
        return self

    def __next__(self) -> Msg:
        try:
            return self.next(None)
        except errors.MsgIteratorClosedError:
            raise StopIteration from None

    def next(self, timeout: float | None = None) -> Msg:
        """The next message; ``TimeoutError`` when none comes within ``timeout`` seconds."""
        if self._closed:
            raise errors.MsgIteratorClosedError()
        inbox = self._q
        local = inbox.local
        held = inbox.held
        process = self._source.process
        deadline = None if timeout is None else _mono() + timeout
        wait = WAIT_SLICE
        self._reading += 1
        try:
            while True:
                if local:
                    try:
                        item = local.popleft()
                    except IndexError:  # another thread took the last one
                        continue
                else:
                    if deadline is not None:
                        wait = min(WAIT_SLICE, deadline - _mono())
                    try:
                        item = next_item(inbox, held, local, wait)  # interrupt-safe: see _handoff
                    except queue.Empty:
                        if deadline is not None and wait <= 0:
                            raise errors.TimeoutError() from None
                        continue
                if item is STOP or self._stopped:
                    self._close()
                    raise errors.MsgIteratorClosedError()
                try:
                    msg = process(item)
                except Terminal as t:
                    self._error = t.error
                    self._close()
                    raise t.error from None
                if msg is None:
                    continue  # a status: see test_interrupt_cover for why not `if msg is not None`
                self._taken_at = _mono()
                return msg
        finally:
            self._reading -= 1

    def _next_batch(self, timeout: float, out: list[Any]) -> None:
        """For library readers of an ordered consumer (KV scans and watchers),
        which take a whole routed batch at a time: wait up to ``timeout`` for the
        next item and append what it delivers to ``out`` (see
        ``_OrderedSource.process_batch``). TimeoutError when nothing came,
        MsgIteratorClosedError once stopped; a terminal error is raised with
        ``out`` holding what came before it. Not to be mixed with ``next``."""
        if self._closed:
            raise errors.MsgIteratorClosedError()
        self._reading += 1
        try:
            inbox = self._q
            try:
                item = next_item(inbox, inbox.held, None, timeout)  # a whole batch
            except queue.Empty:
                raise errors.TimeoutError() from None
            if item is STOP or self._stopped:
                self._close()
                raise errors.MsgIteratorClosedError()
            source: Any = self._source
            try:
                if item.__class__ is tuple and item[0].__class__ is list:
                    source.process_batch(item[0], out)
                else:
                    source.process(item)  # a control item: it delivers nothing
            except Terminal as t:
                self._error = t.error
                self._close()
                raise t.error from None
            self._taken_at = _mono()
        finally:
            self._reading -= 1

    def _close(self) -> None:
        self._closed = True
        self._q.clear_taken()
        self._source.stop()
        self._client._drainables.discard(self)

    # -- nc.drain() ----------------------------------------------------------

    def _drain_begin(self) -> None:
        """The connection drains: stop pulling; ``next`` returns what is buffered."""
        self.drain()

    def _drain_wait(self, deadline: float | None) -> bool:
        """Wait while a thread reads what is buffered; see :func:`wait_read`."""
        return wait_read(self, deadline)

    def _finished(self) -> bool:
        return self._closed  # the stop marker was read

    def stop(self) -> None:
        """Stop pulling; a blocked or later ``next`` raises ``MsgIteratorClosedError``."""
        self._stopped = True
        self._closed = True
        self._source.stop()
        self._client._drainables.discard(self)
        self._q.put(STOP)

    def drain(self) -> None:
        """Stop pulling; ``next`` returns what is buffered, then the iterator is closed."""
        self._source.stop()
        self._q.put(STOP)

    @property
    def closed(self) -> bool:
        """True once ``next`` can return no more messages."""
        return self._closed

    @property
    def error(self) -> BaseException | None:
        """The terminal error that ended the iterator, if any."""
        return self._error
