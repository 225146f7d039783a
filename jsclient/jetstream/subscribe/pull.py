"""Legacy pull subscriptions (ADR-13): ``js.pull_subscribe(...)`` and ``psub.fetch(...)``.

A :class:`PullSubscription` owns one wildcard inbox subscription
(``<inbox>.*``) and sends its pull requests through the one pull engine
(:mod:`jsclient.jetstream.consume.engine`): each request has its own reply
token, and statuses are read through the engine's status table.

``fetch(batch, timeout)``:

1. hands out user messages already buffered from an earlier pull (for
   example ones that arrived after an earlier fetch timed out) without a new
   request;
2. asks for what is still needed with a ``no_wait`` pull; it returns as soon
   as the batch is full, or when the pull ends (``404``/``408``) with messages
   collected;
3. only when that pull ended with nothing collected does a long pull follow,
   whose ``expires`` stays below the client timeout: the margin is 10 % of the
   time left, at least 10 ms and at most 1 s, so the server ends the pull (its
   ``408`` arrives) before the caller gives up and no request outlives the
   fetch that made it;
4. raises :class:`~jsclient.errors.TimeoutError` when nothing came.

``Pull(1)`` and ``Pull(n)`` share this one path: the seed's "Pull
Optimization" (the ``no_wait`` request of ``Pull(1)`` on a wildcard
request/response handler) is what every pull does here.

Deviation from the seed: instead of a fresh inbox per request with ``UNSUB
batch+1``, the subscription keeps one wildcard inbox and puts a new token in
each request's reply subject. A status ends a fetch only when it carries that
fetch's current token, so a late ``404``/``408`` of an earlier, timed-out
fetch can never end or skew a later one (the orphan-pull stalls of clients
that reuse one plain inbox); user messages a late pull still delivers are
buffered and handed out first by the next fetch, so nothing is lost.

Status messages never reach the user: ``404``/``408`` end a pull quietly;
``409`` (consumer deleted, consumer is push based, exceeded max waiting /
batch / expires / bytes) and ``400`` are typed errors; ``503`` is
``NoRespondersError``; unknown codes are ``StatusError``. ``409 Leadership
Change`` and ``423`` make the fetch pull again within its time, and so does
a reconnect while it waits (its pull went with the old connection; it notices
within a second). When a pull
ends with an error after some messages were collected, the fetch returns the
messages and the next fetch raises the error (after any buffered messages).

Only one fetch may run at a time on a subscription (the batches of two would
mix): a second raises :class:`~jsclient.errors.ConcurrentFetchError`.

Priority groups (ADR-42): ``fetch`` takes ``group``, ``min_pending``,
``min_ack_pending`` and ``priority`` as ``Consumer.fetch`` does, checked
against the consumer's info from the subscribe (a subscription made by
``pull_subscribe_bind`` has none: the server checks). A ``423`` (the pin was
lost) makes the fetch pull again as an unpinned client.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import TYPE_CHECKING

from jsclient import errors
from jsclient.api import ConsumerInfo
from jsclient.jetstream.consume.engine import (
    FLOW_CONTROL,
    HEARTBEAT,
    RESET,
    WAIT_SLICE,
    Engine,
    ack_none,
    positive_int,
    pull_status,
)
from jsclient.jetstream.consume.priority import Priority, priority_options
from jsclient.jetstream.subscribe import workflow as wf
from jsclient.msg import Msg
from jsclient.subscription import Subscription, _Ended

if TYPE_CHECKING:
    from jsclient.jetstream._ctx import Context
    from jsclient.jetstream.manage.names import ConsumerConfigLike

__all__ = ["PullSubscription", "expires_for", "pull_subscribe"]

_mono = time.monotonic

#: Long pull expiry margin below the time the caller has left.
MARGIN_FRACTION = 0.1
MARGIN_MIN = 0.010
MARGIN_MAX = 1.0
#: Long pulls of a fetch with ``timeout=None`` each last this long.
UNBOUNDED_PULL = 30.0

# How a pull ended.
_FULL = 0
_ENDED = 1
_RESET = 2
_TIMEOUT = 3


def expires_for(left: float) -> float:
    """The ``expires`` of a long pull when the caller has ``left`` seconds."""
    return left - min(MARGIN_MAX, max(MARGIN_MIN, left * MARGIN_FRACTION))


class PullSubscription:
    """A pull subscription to one consumer; make it with ``js.pull_subscribe(...)``.

    Attributes: ``stream_name``, ``consumer_name``. Use it from one thread at a
    time (a concurrent ``fetch`` is refused); ``unsubscribe``/``drain`` delete
    the consumer when this subscription made it as an ephemeral one.
    """

    def __init__(
        self,
        js: Context,
        sub: Subscription,
        prefix: str,
        stream: str,
        consumer: str,
        *,
        ack_none: bool = False,
        delete_consumer: bool = False,
        info: ConsumerInfo | None = None,
    ) -> None:
        self._js = js
        self._sub = sub
        self._prefix = prefix
        self.stream_name = stream
        self.consumer_name = consumer
        self._engine = Engine(js, stream, consumer, ack_none)
        self._info = info  # for the priority-group checks; None when bound blindly
        self._delete_consumer = delete_consumer
        self._fetching = threading.Lock()
        self._error: BaseException | None = None
        self._closed = False

    def __repr__(self) -> str:
        return f"<PullSubscription {self.stream_name!r}/{self.consumer_name!r}>"

    def __enter__(self) -> PullSubscription:
        return self

    def __exit__(self, *exc: object) -> None:
        if not self._closed:
            self.unsubscribe()

    # -- fetch ---------------------------------------------------------------

    def fetch(
        self,
        batch: int = 1,
        timeout: float | None = 5.0,
        *,
        group: str | None = None,
        min_pending: int | None = None,
        min_ack_pending: int | None = None,
        priority: int | None = None,
    ) -> list[Msg]:
        """Up to ``batch`` messages; at least one, or ``TimeoutError`` after ``timeout`` s.

        Returns as soon as ``batch`` messages are in, or with fewer when the
        server ends the pull after some came. ``timeout=None`` waits until at
        least one message comes. ``group`` (required on a consumer with priority
        groups), ``min_pending``, ``min_ack_pending`` and ``priority`` are the
        priority-group options of ``Consumer.fetch``.
        """
        positive_int("batch", batch)
        if timeout is not None and not timeout > 0:
            raise errors.BadTimeoutError(f"nats: fetch timeout must be positive, got {timeout!r}")
        prio = priority_options(self._info, group, min_pending, min_ack_pending, priority)
        if not self._fetching.acquire(blocking=False):
            raise errors.ConcurrentFetchError()
        msgs: list[Msg] = []
        try:
            return self._fetch(msgs, batch, None if timeout is None else _mono() + timeout, prio)
        except BaseException:
            # An interrupt (KeyboardInterrupt...) while the pull waited: what
            # came so far goes back to the front, for the next fetch.
            if msgs:
                self._sub._give_back(msgs)
            raise
        finally:
            self._fetching.release()

    def _fetch(
        self, msgs: list[Msg], batch: int, deadline: float | None, prio: Priority | None
    ) -> list[Msg]:
        self._take_buffered(msgs, batch)
        if len(msgs) == batch:
            return msgs
        error = self._error
        if error is not None:
            if msgs:
                return msgs
            self._error = None
            raise error
        if self._closed:
            if msgs:
                return msgs
            raise errors.BadSubscriptionError("nats: pull subscription closed")
        # The no_wait pull gets an answer at once; without a deadline it is
        # still bounded, by the context's API timeout.
        ended = self._pull(msgs, batch, deadline or _mono() + self._js._timeout, prio, no_wait=True)
        if msgs:
            return msgs
        while True:
            if ended == _TIMEOUT:
                raise errors.TimeoutError("nats: fetch timed out with no messages")
            if deadline is None:
                expires = UNBOUNDED_PULL
            else:
                expires = expires_for(deadline - _mono())
                if expires < MARGIN_MIN:
                    raise errors.TimeoutError("nats: fetch timed out with no messages")
            ended = self._pull(msgs, batch, deadline, prio, expires=expires)
            if msgs:
                return msgs
            if ended == _ENDED and deadline is not None:
                raise errors.TimeoutError("nats: fetch timed out with no messages")

    def _take_buffered(self, msgs: list[Msg], batch: int) -> None:
        """Move buffered user messages into ``msgs``; statuses found here are stale."""
        take = self._sub._take
        while len(msgs) < batch:
            try:
                msg = take(0)
            except queue.Empty:
                return
            except _Ended as end:
                self._on_ended(end)
                return
            if self._is_user(msg):
                msgs.append(msg)

    def _is_user(self, msg: Msg) -> bool:
        return self._engine.read(msg) is None

    def _pull(
        self,
        msgs: list[Msg],
        batch: int,
        deadline: float | None,
        prio: Priority | None,
        *,
        no_wait: bool = False,
        expires: float = 0.0,
    ) -> int:
        """One pull request for what ``msgs`` still lacks; collect until it ends."""
        engine = self._engine
        reply = self._prefix + str(next(engine.tokens))
        client = self._js._client
        reconnects = client.stats["reconnects"]
        engine.publish_pull(reply, batch - len(msgs), 0, expires, 0.0, no_wait, prio)
        take = self._sub._take
        read = engine.read
        while True:
            wait = WAIT_SLICE
            if deadline is not None:
                left = deadline - _mono()
                if left <= 0:
                    return _TIMEOUT
                wait = min(wait, left)
            try:
                msg = take(wait)
            except queue.Empty:
                if client.stats["reconnects"] != reconnects:
                    return _RESET  # the pull went with the old connection: pull again
                continue
            except _Ended as end:
                self._on_ended(end)
                raise self._error or errors.BadSubscriptionError() from None
            st = read(msg)
            if st is not None:
                if msg.subject != reply:
                    continue  # a late status of an earlier pull
                kind, error = pull_status(engine, st[0], st[1])
                if kind in (HEARTBEAT, FLOW_CONTROL):
                    continue
                if error is None:
                    return _ENDED
                if kind == RESET:
                    return _RESET
                if type(error) is errors.NoRespondersError:
                    error = engine.missing() or error  # a 503: is the consumer gone?
                if not msgs:
                    raise error
                self._error = error  # raised by the next fetch
                return _ENDED
            msgs.append(msg)
            if len(msgs) >= batch:
                return _FULL

    def _on_ended(self, end: _Ended) -> None:
        """The inbox subscription ended (unsubscribed, drained, connection closed)."""
        self._closed = True
        if end.error is not None and self._error is None:
            self._error = end.error

    # -- info and lifecycle --------------------------------------------------

    def consumer_info(self) -> ConsumerInfo:
        """The consumer's current info from the server."""
        return self._js._consumer_info(self.stream_name, self.consumer_name)

    @property
    def pending_msgs(self) -> int:
        """Messages received and not yet handed out by a fetch (statuses included)."""
        return self._sub.pending_msgs

    def unsubscribe(self) -> None:
        """Stop receiving; buffered messages are dropped (the server redelivers them).

        An ephemeral consumer this subscription created is deleted; a failed
        delete raises.
        """
        if self._closed and not self._delete_consumer:
            raise errors.BadSubscriptionError("nats: pull subscription already closed")
        self._closed = True
        if not self._sub.is_closed:
            self._sub.unsubscribe()
        self._engine.close()
        self._delete()

    def drain(self, timeout: float | None = 30.0) -> None:
        """Stop receiving once what the server already sent has arrived.

        Messages buffered by then are still handed out by ``fetch``; an
        ephemeral consumer this subscription created is deleted (a failed
        delete goes to the connection's error callback).
        """
        if not self._sub.is_closed:
            self._sub.drain(timeout)
        self._closed = True
        self._engine.close()
        try:
            self._delete()
        except errors.Error as exc:
            self._js._client._report_error(exc)

    def _delete(self) -> None:
        if not self._delete_consumer:
            return
        self._delete_consumer = False
        if self._js._client.is_closed:
            return  # an ephemeral consumer goes away with its inactivity threshold
        try:
            self._js.delete_consumer(self.stream_name, self.consumer_name)
        except errors.NotFoundError:
            pass


def pull_subscribe(
    js: Context,
    subject: str,
    durable: str | None = None,
    *,
    stream: str | None = None,
    config: ConsumerConfigLike | None = None,
    inbox_prefix: str | bytes | None = None,
    pending_msgs_limit: int | None = None,
    pending_bytes_limit: int | None = None,
) -> PullSubscription:
    """A pull subscription (ADR-13): ``psub.fetch(batch, timeout)`` returns messages.

    The stream is looked up by ``subject`` unless given. ``durable`` names a
    consumer that is used when it exists (after checking it is a pull
    consumer whose filter and config agree) and created otherwise, with
    ``subject`` as its filter and ack policy explicit. Without a durable an
    ephemeral consumer is made, and deleted again by ``unsubscribe()`` or
    ``drain()``. A refusal raises a :class:`~jsclient.errors.SubscribeError`.

    ``pending_msgs_limit`` and ``pending_bytes_limit`` are nats-py's, accepted
    so that its calls run unchanged; they limit nothing: the inbox only ever
    holds what this subscription's own fetches asked for, so it has no limit
    and never drops a message as a slow consumer.
    """
    _check_limits(pending_msgs_limit, pending_bytes_limit)
    user = wf.user_config(config)
    wf.check_target(subject, stream)
    name = wf.consumer_name(durable, user)
    wf.check_pull_config(user)
    if stream is None:
        assert subject
        stream = wf.find_stream(js, subject)
    info = wf.lookup(js, stream, name) if name else None
    if info is not None:
        wf.check_existing(info, subject=subject, pull=True, user=user)
        sub, prefix = _inbox(js, inbox_prefix)
        return PullSubscription(
            js, sub, prefix, stream, info.name, ack_none=ack_none(info), info=info
        )
    cfg = wf.creation_config(user, name=name, subject=subject)
    sub, prefix = _inbox(js, inbox_prefix)
    try:
        info, created = wf.create_or_bind(js, stream, cfg, subject=subject, pull=True, user=user)
    except BaseException:
        sub.unsubscribe()
        raise
    ephemeral = created and not (info.config.durable_name)
    return PullSubscription(
        js,
        sub,
        prefix,
        stream,
        info.name,
        ack_none=ack_none(info),
        delete_consumer=ephemeral,
        info=info,
    )


def pull_subscribe_bind(
    js: Context,
    consumer: str | None = None,
    stream: str | None = None,
    *,
    durable: str | None = None,
    name: str | None = None,
    inbox_prefix: str | bytes | None = None,
    pending_msgs_limit: int | None = None,
    pending_bytes_limit: int | None = None,
) -> PullSubscription:
    """A pull subscription to the existing pull consumer ``consumer`` of ``stream``,
    with no lookups (nothing is asked of the server until the first fetch).

    The arguments are nats-py's, in its order: ``js.pull_subscribe_bind("workers",
    "JOBS")`` binds consumer "workers" of stream "JOBS". ``durable`` and ``name``
    are other names for ``consumer``: giving two that differ raises TypeError,
    and a missing stream or consumer name ValueError. ``pending_msgs_limit`` and
    ``pending_bytes_limit`` are accepted for nats-py's calls and limit nothing
    (see :func:`pull_subscribe`).
    """
    names = {n for n in (consumer, durable, name) if n}
    if len(names) > 1:
        given = ", ".join(
            f"{k}={v!r}"
            for k, v in (("consumer", consumer), ("durable", durable), ("name", name))
            if v
        )
        raise TypeError(f"pull_subscribe_bind: {given} name different consumers; give one")
    if not stream:
        raise ValueError("pull_subscribe_bind needs the stream's name (stream=)")
    if not names:
        raise ValueError("pull_subscribe_bind needs the consumer's name (consumer=)")
    bound = names.pop()
    _check_limits(pending_msgs_limit, pending_bytes_limit)
    wf.check_target(None, stream)
    wf.consumer_name(bound, wf.user_config(None))
    sub, prefix = _inbox(js, inbox_prefix)
    return PullSubscription(js, sub, prefix, stream, bound)


def _check_limits(msgs: int | None, size: int | None) -> None:
    # nats-py's pending limits: checked as it would use them, then not needed.
    for label, value in (("pending_msgs_limit", msgs), ("pending_bytes_limit", size)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            raise TypeError(f"{label} must be an int, not {type(value).__name__}")


def _inbox(js: Context, inbox_prefix: str | bytes | None) -> tuple[Subscription, str]:
    client = js._client
    if isinstance(inbox_prefix, bytes):  # nats-py's type for it
        inbox_prefix = inbox_prefix.decode()
    if inbox_prefix:
        prefix = f"{inbox_prefix.rstrip('.')}.{js._new_name()}."
    else:
        prefix = client.new_inbox() + "."
    # Unlimited pending: the inbox only ever holds what this subscription's own
    # pulls asked for (a fetch's batch, plus what a timed-out pull still sends).
    sub = client.subscribe(prefix + "*", pending_msgs_limit=0, pending_bytes_limit=0)
    return sub, prefix
