"""The request multiplexer: every request of a connection over one reply subscription.

One wildcard subscription ``<inbox prefix>.<nuid>.*`` takes every reply; a
request publishes with ``<that prefix><token>`` as its reply subject and
registers a *waiter* (anything with ``deliver(msg)``) under its token. The
reader thread pops the waiter by token and calls ``deliver(msg)`` (in the
Cython twin of ``route`` with no Python frame per reply); ``close()`` calls
``deliver(None)`` on every waiter left.

Whoever pops a token owns the request's outcome: the reader (a reply),
:meth:`RequestMux.cancel` (a caller that gives up, a timeout, a retry) or
:meth:`RequestMux.close_all`. That is the whole concurrency rule: popping a
dict key is atomic, so no lock is needed on the per-request path.

This is the library's internal interface for request/reply: the client's
``request()``, JetStream's API calls and ``publish_async``, the managed
Publisher and the Spark sink all send through it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from jsclient import _impl, errors
from jsclient.protocol import commands

_QUEUED = _impl.writer.QUEUED


class Waiter(Protocol):
    """The one notion of a reply waiter: whatever a token is registered for, and
    the reader thread hands each reply to (``deliver(None)``: the connection
    closed). A request's own waiter (``delivery.Reply``), a request-many's,
    and the async-publish engine's publishes are all this; the two protocols
    below only add what some senders read of it."""

    def deliver(self, msg: Any) -> None: ...


class Positioned(Waiter, Protocol):
    """A waiter that learns where its frame lies in the write stream
    (:mod:`jsclient.protocol.writer`): the async-publish engine's publishes."""

    _wlen: int  # the frame's length
    _wend: int  # the position just past it (0 until the write returned)


class BatchRequest(Positioned, Protocol):
    """A waiter that is also the request :meth:`RequestMux.send_batch` publishes."""

    subject: str
    body: bytes
    _hdr: bytes | None
    _token: str | None


class RequestBatch:
    """Requests registered and encoded by :meth:`RequestMux.prepare`, not yet written."""

    __slots__ = ("data", "failed", "nbytes", "sent")

    def __init__(self) -> None:
        self.data = b""
        self.nbytes = 0
        self.sent: list[Any] = []  # registered, in ``data``
        self.failed: list[tuple[Any, BaseException]] = []  # refused (bad subject, too large)


class Host(Protocol):
    """What the multiplexer needs from its connection (the client provides it)."""

    _subject_cache: dict[str, bytes]
    _subs: dict[int, Any]

    def _check_open(self) -> None: ...
    def _subject_bytes(self, subject: str) -> bytes: ...
    def _too_big(self, size: int) -> errors.MaxPayloadError: ...
    def _subscribe_internal(self, subject: str, handler: Callable[[Any], None]) -> int: ...


class RequestMux:
    """Tokens, the waiter map and the reply subscription of one connection."""

    def __init__(self, host: Host, writer: Any, inbox_prefix: str, new_id: Callable[[], str]):
        self._host = host
        self._w = writer  # the connection's writer (send, send_inline, send_nowait)
        self._wq = writer.wq  # its write queue, for max_payload
        self._inbox_prefix = inbox_prefix
        self._new_id = new_id
        self._map: dict[str, Waiter] = {}
        self._tokens: Iterator[int] = _impl.writer.Counter(1)
        self._lock = threading.Lock()
        self._prefix: str | None = None
        self._prefix_b = b""

    def __len__(self) -> int:
        """The requests still waiting for a reply."""
        return len(self._map)

    # -- the reply subscription ---------------------------------------------

    def ensure_sub(self) -> str:
        """The reply subject prefix, subscribing on first use."""
        prefix = self._prefix
        if prefix is None:
            # Before the lock: in a forked child it may be held forever.
            self._host._check_open()
            with self._lock:
                if self._prefix is None:
                    base = f"{self._inbox_prefix}.{self._new_id()}."
                    commands.check_subject(base + "*", "inbox prefix")
                    sid = self._host._subscribe_internal(base + "*", self.on_response)
                    # route() pops the waiter by token and calls its deliver()
                    # itself (no Python frame per reply); on_response is the
                    # same rule, kept as the handler of record.
                    sub = self._host._subs[sid]
                    sub._mux = self._map
                    sub._mux_skip = len(base)
                    self._prefix_b = base.encode()
                    self._prefix = base
                prefix = self._prefix
        return prefix

    def on_response(self, msg: Any) -> None:
        prefix = self._prefix
        if prefix is None:
            return
        waiter = self._map.pop(msg.subject[len(prefix) :], None)
        if waiter is not None:
            waiter.deliver(msg)

    # -- sending ----------------------------------------------------------------

    def send(
        self,
        subject: str,
        payload: bytes,
        hdr: bytes | None,
        waiter: Waiter,
        *,
        inline: bool = False,
        nowait: bool = False,
    ) -> str:
        """Register ``waiter`` under a fresh token and publish with the muxed reply subject.

        ``inline``: written from this thread when no other thread writes (the
        caller waits for the reply next); ``nowait``: never waits for room in
        the write queue (library threads, such as the timer thread's retries).
        Returns the token (for :meth:`cancel`).
        """
        return self._send(subject, payload, hdr, waiter, None, inline, nowait)

    def send_tracked(
        self,
        subject: str,
        payload: bytes,
        hdr: bytes | None,
        waiter: Positioned,
        *,
        nowait: bool = False,
    ) -> str:
        """:meth:`send` for the async-publish engine's publishes: ``waiter._wlen`` and
        ``waiter._wend`` then say where the frame lies in the write stream."""
        waiter._wend = 0  # unknown until written: a re-send's old place is not its new one
        return self._send(subject, payload, hdr, waiter, waiter, False, nowait)

    def _send(
        self,
        subject: str,
        payload: bytes,
        hdr: bytes | None,
        waiter: Waiter,
        tracked: Positioned | None,
        inline: bool,
        nowait: bool,
    ) -> str:
        if self._prefix is None:
            self.ensure_sub()
        host = self._host
        token = str(next(self._tokens))
        subj = host._subject_cache.get(subject)
        if subj is None:
            subj = host._subject_bytes(subject)
        if type(payload) is not bytes:
            commands.check_payload(payload)
            payload = bytes(payload)
        if hdr is None and tracked is not None and not nowait:
            # publish_async's path: the frame is built in the write queue, which
            # notes where it lies. A frame it refuses (full, closed, too big) was
            # not queued: it takes the general path below.
            self._map[token] = waiter
            try:
                rc = self._wq.pub_reply(subj, self._prefix_b, token, payload, tracked)
                if rc == _QUEUED or self._w.queued(rc):
                    return token
            except BaseException:
                self._map.pop(token, None)
                raise
            self._map.pop(token, None)
        reply = self._prefix_b + token.encode()
        plen = len(payload)
        max_payload = self._wq.max_payload
        if hdr is None:
            if plen > max_payload:
                raise host._too_big(plen)
            data = b"PUB %s %s %d\r\n%s\r\n" % (subj, reply, plen, payload)
        else:
            if len(hdr) + plen > max_payload:
                raise host._too_big(len(hdr) + plen)
            data = commands.hpub(subj, reply, hdr, payload)
        self._map[token] = waiter
        w = self._w
        try:
            if inline:
                end = w.send_inline(data, plen)
            elif nowait:
                end = w.send_nowait(data, plen, 1)
            else:
                end = w.send(data, plen, 1)
        except BaseException:
            self._map.pop(token, None)
            raise
        if tracked is not None:
            tracked._wlen = len(data)
            tracked._wend = end
        return token

    def send_batch(self, reqs: list[Any]) -> list[tuple[Any, BaseException]]:
        """Publish many requests in one write; each gets a fresh reply token.

        Every ``req`` (a :class:`BatchRequest`) is registered under its token
        *before* the write, and ``req._token`` is set first, so whoever later
        pops the token owns the outcome. Returns the requests that could not
        be sent with their errors (bad subject, payload too large, the
        connection's buffer full or closed); their tokens are forgotten.
        """
        batch = self.prepare(reqs)
        failed = batch.failed
        if batch.sent:
            failed += self.write(batch)
        return failed

    def prepare(self, reqs: list[Any]) -> RequestBatch:
        """The first half of :meth:`send_batch`: register and encode, no write.

        A caller may prepare a batch ahead of time (while it waits for room to
        send it) and :meth:`write` it later; the replies cannot come before.
        """
        self.ensure_sub()
        host = self._host
        tokens, cache, waiters = self._tokens, host._subject_cache, self._map
        prefix = self._prefix_b
        max_payload = self._wq.max_payload
        frames: list[bytes] = []
        batch = RequestBatch()
        sent, failed = batch.sent, batch.failed
        nbytes = 0
        for req in reqs:
            body = req.body
            hdr = req._hdr
            size = len(body) if hdr is None else len(hdr) + len(body)
            subj = cache.get(req.subject)
            try:
                if subj is None:
                    subj = host._subject_bytes(req.subject)
                if size > max_payload:
                    raise host._too_big(size)
            except errors.Error as exc:
                req._token = None
                failed.append((req, exc))
                continue
            token = str(next(tokens))
            req._token = (
                token  # (a re-send resets ``_wend`` first: its old place is not its new one)
            )
            waiters[token] = req
            if hdr is None:
                f = b"PUB %s %s%s %d\r\n%s\r\n" % (subj, prefix, token.encode(), size, body)
            else:
                f = commands.hpub(subj, prefix + token.encode(), hdr, body)
            req._wlen = len(f)
            frames.append(f)
            sent.append(req)
            nbytes += len(body)
        batch.data = b"".join(frames)
        batch.nbytes = nbytes
        return batch

    def write(self, batch: RequestBatch) -> list[tuple[Any, BaseException]]:
        """Write a prepared batch; returns its requests that failed (tokens forgotten)."""
        try:
            # Written from this thread when no other writer is active: a batch
            # is worth a syscall, and it saves waking the flusher.
            end = self._w.send_inline(batch.data, batch.nbytes, len(batch.sent))
        except errors.Error as exc:
            waiters = self._map
            return [(req, exc) for req in batch.sent if waiters.pop(req._token, None) is not None]
        # The batch's frames lie back to back, ending at ``end``.
        for req in reversed(batch.sent):
            req._wend = end
            end -= req._wlen
        return []

    # -- giving up ----------------------------------------------------------------

    def rearm(self, token: str, waiter: Waiter) -> None:
        """Wait for one more reply to ``token`` (the reader forgets a token when
        it routes a reply to it): what a request with many replies does after
        each. One dict operation: any thread, no lock."""
        self._map[token] = waiter

    def cancel(self, token: str | None) -> bool:
        """Forget ``token``; True when this call took its waiter (the reply had not
        come), so the caller now owns the request's outcome."""
        return token is not None and self._map.pop(token, None) is not None

    def close_all(self) -> None:
        """The connection closed: every waiter left gets ``deliver(None)``."""
        waiters = self._map
        for token in list(waiters):
            waiter = waiters.pop(token, None)
            if waiter is not None:
                waiter.deliver(None)
