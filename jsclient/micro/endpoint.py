"""An endpoint: one subscription, its handler threads, and its statistics.

The subscription (a queue subscription unless the endpoint has no queue
group) is made without a callback: its bounded queue is the endpoint's
queue. Past its pending limits the reader drops requests and reports a
:class:`~jsclient.errors.SlowConsumerError` to the connection's
``error_cb``; the endpoint counts it in ``num_errors`` / ``last_error``.

``threads`` named handler threads take requests from that queue, one at a
time through a take lock (the subscription's consuming side is for one
taker at a time), and run the handler with no lock held, so N threads
serve N requests at once. A handler that raises answers 500 (unless it
answered already) and counts as an error; the thread goes on.

Stats are kept here alone, and a request changes ``num_requests``,
``processing_time`` (so the average) and, with its error, ``num_errors`` /
``last_error`` together, in one step when its handler returns, as nats.go's
request handler does: ``stats()`` never shows a request counted without its
time, nor after ``reset()`` a time without its request. A request still being
handled is not counted yet.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from jsclient import errors
from jsclient._io.reader import LINGER
from jsclient._threads import WAIT_SLICE, log
from jsclient.micro._types import EndpointInfo, EndpointStats
from jsclient.micro.request import Request
from jsclient.subscription import Subscription

if TYPE_CHECKING:
    from jsclient._core import Core
    from jsclient.msg import Msg

__all__ = ["Endpoint", "Handler"]

Handler = Callable[[Request], Any]

_END = object()  # _next: the subscription ended
_QUICK_NS = int(LINGER * 1e9)  # a request handled within this leaves the reading role lingering


class _EndpointSubscription(Subscription):
    """A subscription whose slow-consumer report also goes to its endpoint."""

    def __init__(self, *args: Any, report: Callable[[BaseException], None]) -> None:
        super().__init__(*args)
        self._report = report  # read by the client's _on_slow (reader thread)


class Endpoint:
    """One endpoint of a :class:`~jsclient.micro.Service` (made by ``add_endpoint``)."""

    def __init__(
        self,
        nc: Core,
        service_name: str,
        name: str,
        subject: str,
        queue_group: str | None,
        metadata: dict[str, str],
        handler: Handler,
        threads: int,
    ) -> None:
        self.name = name
        self.subject = subject
        self.queue_group = queue_group
        self._metadata = metadata
        self.threads = threads
        self._nc = nc
        self._handler = handler
        self._lock = threading.Lock()  # the counters below; never held across a call
        self._num_requests = 0
        self._num_errors = 0
        self._last_error = ""
        self._processing_time = 0
        self._take_lock = threading.Lock()
        self._quick = True  # the last request was handled within the role's linger (_next)
        self._sub: Subscription = nc._subscribe_as(
            _EndpointSubscription,
            subject,
            queue_group,
            None,
            0,
            65536,
            64 * 1024 * 1024,
            report=self._on_slow,
        )
        self._workers = [
            threading.Thread(
                target=self._work, name=f"jsclient-svc-{service_name}-{name}-{i}", daemon=True
            )
            for i in range(threads)
        ]
        for t in self._workers:
            t.start()

    def __repr__(self) -> str:
        return f"<Endpoint name={self.name!r} subject={self.subject!r} queue={self.queue_group!r}>"

    @property
    def metadata(self) -> dict[str, str]:
        """A copy: metadata is fixed once set (ADR-32)."""
        return dict(self._metadata)

    # -- statistics ---------------------------------------------------------

    def info(self) -> EndpointInfo:
        """The endpoint's part of ``Service.info()``: name, subject, queue group, metadata."""
        return EndpointInfo(self.name, self.subject, self.queue_group, dict(self._metadata))

    def stats(self) -> EndpointStats:
        """Requests, errors, last error and processing times (ns) so far (see the module doc)."""
        with self._lock:
            n, errs, last, total = (
                self._num_requests,
                self._num_errors,
                self._last_error,
                self._processing_time,
            )
        return EndpointStats(
            self.name, self.subject, self.queue_group, n, errs, last, total, total // n if n else 0
        )

    def reset(self) -> None:
        """Zero the counters (``Service.reset()`` does it for every endpoint)."""
        with self._lock:
            self._num_requests = self._num_errors = self._processing_time = 0
            self._last_error = ""

    def _count(self, elapsed_ns: int, error: str | None) -> None:
        """A handled request: its count, time and error, in one step."""
        with self._lock:
            self._num_requests += 1
            self._processing_time += elapsed_ns
            if error is not None:
                self._num_errors += 1
                self._last_error = error

    def _count_error(self, text: str) -> None:
        """An error outside any request (requests dropped by a full queue)."""
        with self._lock:
            self._num_errors += 1
            self._last_error = text

    def _on_slow(self, exc: BaseException) -> None:
        """Reader thread: the queue is full and requests are being dropped."""
        self._count_error(str(exc))
        self._nc._report_error(exc)

    # -- handler threads ----------------------------------------------------

    def _work(self) -> None:
        if self.threads == 1:  # the only taker: no take lock
            while True:
                msg = self._next()
                if msg is _END:
                    return
                if msg is not None:
                    self._serve(msg)
        take_lock = self._take_lock
        while True:
            if not take_lock.acquire(timeout=WAIT_SLICE):
                continue
            try:
                msg = self._next()
            finally:
                take_lock.release()
            if msg is _END:
                return
            if msg is not None:
                self._serve(msg)

    def _next(self) -> Any:
        """The next request, None when none came within WAIT_SLICE, or _END (stop/drain,
        or the connection closed). Waits as a taker of the reading role
        (``Subscription._await``): alone in its process, the handler thread
        reads its requests itself. It claims the role from the reader thread
        only after a quick request (shorter than the reading role's linger,
        which a quick handler finds still there): after a slow one, taking the
        role back would cost two more wake-ups than leaving the next request
        to the reader thread."""
        try:
            return self._sub.next_as_taker(WAIT_SLICE, self._quick)
        except errors.TimeoutError:
            return None
        except BaseException:
            return _END

    def _serve(self, msg: Msg) -> None:
        req = Request(msg)
        start = time.perf_counter_ns()
        try:
            self._handler(req)
        except BaseException as exc:  # handler threads outlive user code
            log.exception("jsclient: service handler of endpoint %r raised", self.name)
            description = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            if req._responded or not msg.reply:
                if req._error is None:  # (an unsendable reply recorded its own)
                    req._error = f"500:{description}"
            else:
                try:
                    req.respond_error(500, description)
                except BaseException:
                    log.exception("jsclient: could not answer 500 on endpoint %r", self.name)
                    req._error = f"500:{description}"
        elapsed = time.perf_counter_ns() - start
        self._quick = elapsed < _QUICK_NS
        self._count(elapsed, req._error)

    # -- stopping -----------------------------------------------------------

    def _drain(self, deadline: float | None) -> None:
        """Unsubscribe and let the queued requests reach the handlers (no wait for them)."""
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            self._sub.drain(left)
        except errors.Error:
            pass  # the connection closed: the subscription ended with it

    def _join(self, deadline: float | None) -> bool:
        """Wait for the handler threads to finish; True when all did."""
        me = threading.current_thread()
        for t in self._workers:
            if t is not me:
                t.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return not any(t.is_alive() for t in self._workers if t is not me)
