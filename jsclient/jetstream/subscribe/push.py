"""Push subscriptions (ADR-15): ``js.subscribe(...)``, automatic status management, ordered push.

A :class:`JsSubscription` is a core :class:`~jsclient.subscription.Subscription`
on the consumer's deliver subject: the reader thread fills its bounded queue
in batches as for any subscription, and the consuming side (``next_msg``,
iteration, or the callback's dispatcher thread) runs the automatic status
management on every item it takes, in delivery order:

- **Statuses never reach the user.** ``100 Idle Heartbeat`` feeds the gap
  check and the stalled-consumer check; ``100 FlowControl Request`` is
  answered when the user reaches it (the messages before it have been handed
  out), so flow control paces the server to the reader and a slow reader
  cannot be overrun; 404/408 are ignored; 409, 503 and unknown statuses are
  typed errors, raised from ``next_msg``/iteration, or sent to ``error_cb``
  for a callback subscription.
- **Flow control** subjects are answered once each (a heartbeat's
  ``Nats-Consumer-Stalled`` names the flow-control subject the server still
  waits for; it is answered too, if it was not already).
- **Gaps**: the consumer sequence of each message (from its ``$JS.ACK``
  reply) must follow the previous one, and a heartbeat's
  ``Nats-Last-Consumer`` must not be ahead of the last one delivered. A gap
  is reported once, as :class:`~jsclient.errors.SequenceMismatchError` (with
  the stream sequence to resume from) to ``error_cb``; ``sequence_mismatch``
  shows it until the next message. Queue subscriptions share a consumer, so
  they do not check.
- **Heartbeat alarm**: a timer on the connection's timer thread checks every
  idle-heartbeat interval whether anything (message or status) arrived; after
  ``heartbeat_alarm_factor`` intervals (3, ADR-15's) of silence it sends
  :class:`~jsclient.errors.HeartbeatAlarmError` with the last stream and
  consumer sequences to ``error_cb``, and again after each further such
  period of silence.

An **ordered** subscription (``ordered_consumer=True``) reads a stream in
order with an ephemeral consumer (ack none, flow control and heartbeats on,
memory storage, one replica). On a gap, a heartbeat alarm or a reconnect it
makes a new consumer that starts at the last stream sequence + 1 and drops
whatever the old one still delivers (recognised by the consumer name in each
message's reply subject and, for statuses, by a deliver subject of its own
per consumer). The reset runs on the consuming thread; if it fails it is
retried with backoff (0.5 s doubling to 10 s), each failure reported to
``error_cb``.

Consumers are deleted by ``unsubscribe()`` and, once it has finished, by
``drain()`` according to ``delete_consumer``: ``"if_created"`` (default)
deletes only a consumer this subscription created, ``"never"`` keeps it,
``"always"`` deletes it in any case. A failed delete raises from
``unsubscribe()`` and goes to ``error_cb`` after ``drain()``.

Queue-group hazard (ADR-15): the first member of a queue group to subscribe
creates the durable, so with ``"if_created"`` its ``unsubscribe()``/``drain()``
deletes the consumer the other members still read from, and they stop
receiving. Members of a long-lived queue group should pass
``delete_consumer="never"`` (and delete the durable explicitly when the
group is retired).
"""

from __future__ import annotations

import queue as _queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jsclient import _impl, errors
from jsclient._threads import TimerHandle
from jsclient.api import ConsumerConfig, ConsumerInfo, DeliverPolicy
from jsclient.jetstream.consume.deleter import delete_later
from jsclient.jetstream.consume.engine import (
    FLOW_CONTROL,
    HEARTBEAT,
    NO_MESSAGES,
    REQUEST_TIMEOUT,
    ack_none,
)
from jsclient.msg import ACK_NONE_POLICY, Msg
from jsclient.subscription import Subscription

if TYPE_CHECKING:
    from jsclient._core import Core
    from jsclient.jetstream._ctx import Context

__all__ = ["DELETE_POLICIES", "JsSubscription"]

_mono = time.monotonic
_status = _impl.status
_status_of = _status.status_of
_classify = _status.classify
_js_headers = _impl.jsheaders.js_headers
_parse_jsack = _impl.jsack.parse_jsack

DELETE_POLICIES = ("if_created", "never", "always")
#: Idle heartbeat used when flow control or an ordered consumer needs one and none is given.
DEFAULT_HEARTBEAT = 5.0
#: Ordered consumers: ack wait far beyond any use (acks are never sent), as other clients.
ORDERED_ACK_WAIT = 22 * 3600.0
RESET_BACKOFF_FIRST = 0.5
RESET_BACKOFF_MAX = 10.0

_IGNORED_STATUSES = frozenset((NO_MESSAGES, REQUEST_TIMEOUT))
_ASM_STATUSES = frozenset((HEARTBEAT, FLOW_CONTROL))


class _Control:
    """An item the timer or callback thread puts on the queue for the consuming thread."""

    __slots__ = ("data", "kind")

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.data = b""  # the core queue counts len(data) per item it hands out


@dataclass(kw_only=True)
class _State:
    """What the subscribe workflow decided, handed to the subscription."""

    js: Context
    stream: str
    info: ConsumerInfo
    created: bool
    delete_consumer: str
    manual_ack: bool
    track_gaps: bool
    alarm_factor: float
    error_cb: Callable[[BaseException], Any] | None
    ordered: ConsumerConfig | None = None
    prefix: str = ""


class JsSubscription(Subscription):
    """A push subscription to a JetStream consumer; make it with ``js.subscribe(...)``.

    It is a core Subscription (``next_msg``, iteration, ``pending_msgs``,
    ``drain``...) whose consuming side runs automatic status management.
    Attributes: ``stream_name``, ``consumer_name``; ``sequence_mismatch`` is
    None or the open gap; ``delivered`` counts user messages handed out.
    """

    def __init__(
        self,
        client: Core,
        sid: int,
        subject: str,
        queue: str | None,
        cb: Callable[[Msg], Any] | None,
        max_msgs: int,
        pending_msgs_limit: int,
        pending_bytes_limit: int,
    ) -> None:
        # The NATS subscription exists before the consumer (ADR-15); whatever
        # the consumer sends meanwhile waits in the queue until _bind() has
        # configured the status management (the callback's dispatcher thread
        # only starts there).
        super().__init__(
            client, sid, subject, queue, None, max_msgs, pending_msgs_limit, pending_bytes_limit
        )
        self._ended = False
        self._timer: TimerHandle | None = None
        self._ordered: ConsumerConfig | None = None
        self.stream_name = ""
        self.consumer_name = ""

    def _bind(self, state: _State, cb: Callable[[Msg], Any] | None) -> None:
        """Configure for the consumer the workflow settled on; start the callback and timer."""
        info = state.info
        self._js = state.js
        self.stream_name = state.stream
        self.consumer_name = info.name
        self._created = state.created
        self._delete_policy = state.delete_consumer
        self._report_cb = state.error_cb
        self._ordered = state.ordered
        self._prefix = state.prefix
        self._deliver = str(info.config.deliver_subject or self.subject)
        self._track = state.track_gaps or state.ordered is not None
        self._ack_none = ack_none(info)
        self._cseq = int(getattr(info.delivered, "consumer_seq", 0) or 0)
        self._sseq = int(getattr(info.delivered, "stream_seq", 0) or 0)
        self._gap: errors.SequenceMismatchError | None = None
        self._fc_answered: str | None = None
        self._fc_count = 0
        self._user_delivered = 0
        self._serial = 1
        self._resets = 0
        self._reset_wait = RESET_BACKOFF_FIRST
        self._hb = float(info.config.idle_heartbeat or 0.0)
        self._alarm_after = self._hb * state.alarm_factor
        self._hb_seen = -1
        self._hb_last = _mono()
        client = self._client
        if self._hb > 0:
            self._timer = client._scheduler.call_later(self._hb, self._watch)
        if self._ordered is not None:
            client._add_listener(self._on_conn)
        if cb is not None:
            if not state.manual_ack and not self._ack_none:
                user_cb = cb

                def cb(msg: Msg) -> None:
                    user_cb(msg)
                    msg.ack()  # after the callback returned without raising

            self._cb = cb
            self._dispatcher = threading.Thread(
                target=self._dispatch_loop, name=f"jsclient-jssub-{self.sid}", daemon=True
            )
            self._dispatcher.start()

    def __repr__(self) -> str:
        return (
            f"<JsSubscription {self.stream_name!r}/{self.consumer_name!r} "
            f"subject={self.subject!r} queue={self.queue!r}>"
        )

    # -- consuming side ----------------------------------------------------

    def _take(self, timeout: float | None) -> Msg:
        """The next user message; statuses and control items are handled on the way."""
        local = self._local
        deadline = _mono() + timeout if timeout is not None and timeout > 0 else None
        while True:
            if local and not self._discard:
                # The base class's fast path, inlined: this runs per message.
                try:
                    msg: Any = local.popleft()
                except IndexError:  # another thread took the last one
                    continue
                self._took(1, len(msg.data))
            else:
                msg = Subscription._take(self, timeout)
            if msg.__class__ is _Control:
                self._took(-1, 0)  # not a message the reader counted
                self._on_control(msg.kind)
            else:
                hdr = msg._hdr
                if hdr is not None and not msg.data and (st := _status_of(hdr)) is not None:
                    self._on_status(msg, st[0], st[1], hdr)
                elif not self._track or self._in_order(msg):
                    if self._ack_none:
                        msg._ackd = ACK_NONE_POLICY
                    self._user_delivered += 1
                    return msg  # type: ignore[no-any-return]
            if deadline is not None:
                timeout = deadline - _mono()
                if timeout <= 0:
                    raise _queue.Empty

    def _in_order(self, msg: Msg) -> bool:
        """Gap bookkeeping of one user message; False drops it (ordered resets)."""
        _, consumer, _, sseq, cseq, _, _, _ = _parse_jsack(msg.reply)
        if self._ordered is not None:
            if consumer != self.consumer_name:
                return False  # from a consumer an ordered reset replaced
            if cseq != self._cseq + 1:
                self._reset()
                return False
        elif cseq > self._cseq + 1:
            # Only a jump ahead is a gap; a sequence at or below the last one
            # follows a resynchronisation on a heartbeat.
            self._on_gap(self._cseq, cseq - 1)
        self._cseq = cseq
        self._sseq = sseq
        self._gap = None
        return True

    def _on_status(self, msg: Msg, code: int, description: str, hdr: bytes) -> None:
        kind = _classify(code, description)
        if kind in _ASM_STATUSES:
            if self._ordered is not None and msg.subject != self._deliver:
                return  # a status of a consumer an ordered reset replaced
            if kind == FLOW_CONTROL:
                self._answer_flow_control(msg.reply)
                return
            _, _, last_consumer, _, stalled, _ = _js_headers(hdr)
            if stalled:
                self._answer_flow_control(stalled)
            if self._track and last_consumer > self._cseq:
                if self._ordered is not None:
                    self._reset()
                else:
                    self._on_gap(self._cseq, last_consumer)
                    self._cseq = last_consumer  # reported once: resynchronised
            return
        if kind in _IGNORED_STATUSES:
            return
        if kind == _status.NO_RESPONDERS:
            err: errors.Error = errors.NoRespondersError()
        else:
            err = errors.StatusError(code, description)
        if self._cb is not None:
            self._report(err)
        else:
            raise err

    def _answer_flow_control(self, subject: str) -> None:
        if not subject or subject == self._fc_answered:
            return
        self._fc_answered = subject
        self._fc_count += 1
        try:
            # Like an ack: a server-made subject, sent as is (not cached, not re-checked).
            self._client._publish_ack(subject, b"")
        except errors.Error as exc:
            self._report(exc)

    def _on_gap(self, delivered: int, server_last: int) -> None:
        gap = errors.SequenceMismatchError(
            stream_resume_sequence=self._sseq + 1,
            consumer_sequence=delivered,
            last_consumer_sequence=server_last,
        )
        self._gap = gap
        self._report(gap)

    def _on_control(self, kind: str) -> None:
        if kind == "reset" and not self._ended:
            self._reset()

    def _report(self, exc: BaseException) -> None:
        cb = self._report_cb
        if cb is not None:
            self._client._run_callback(cb, exc)
        else:
            self._client._report_error(exc)

    # -- ordered consumer ----------------------------------------------------

    def _reset(self) -> None:
        """Replace the ordered consumer with one starting after the last message seen."""
        base = self._ordered
        if base is None or self._ended:
            return
        old = self.consumer_name
        serial = self._serial + 1
        deliver = f"{self._prefix}{serial}"
        fields: dict[str, Any] = {
            "deliver_subject": deliver,
            "name": f"{old.rsplit('_', 1)[0]}_{serial}",
        }
        if self._sseq > 0:
            fields.update(
                deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
                opt_start_seq=self._sseq + 1,
                opt_start_time=None,
            )
        # Interest moves first: the old consumer stops delivering, and the new
        # one finds its subscriber when it is made (ADR-15's order).
        self._client._move_subscription(self, deliver)
        self._deliver = deliver
        try:
            consumer = self._js._upsert_consumer(
                self.stream_name, base.evolve(**fields), {}, "create"
            )
        except errors.Error as exc:
            self._report(exc)
            wait, self._reset_wait = self._reset_wait, min(RESET_BACKOFF_MAX, self._reset_wait * 2)
            self._client._scheduler.call_later(wait, self._enqueue, "reset")
            return
        self._reset_wait = RESET_BACKOFF_FIRST
        self._serial = serial
        self.consumer_name = consumer.name
        self._cseq = 0
        self._resets += 1
        self._fc_answered = None
        self._hb_last = _mono()
        # The replaced consumer is deleted by the connection's consumer deleter
        # (not waited for): it has no subscriber any more, and would also go by
        # itself once its inactivity threshold passes.
        delete_later(self._js, self.stream_name, old)

    def _enqueue(self, kind: str) -> None:
        if not self._ended:
            self._q.put(([_Control(kind)], 0))

    def _on_conn(self, event: str) -> None:
        if event == "reconnected":
            self._enqueue("reset")  # an ephemeral consumer may not have survived
        elif event == "closed":
            self._client._remove_listener(self._on_conn)

    # -- heartbeat alarm (timer thread) --------------------------------------

    def _watch(self) -> None:
        if self._ended or self._closed:
            self._ended = True
            return
        now = _mono()
        seen = self._received + self._dropped
        if seen != self._hb_seen:
            self._hb_seen = seen
            self._hb_last = now
        elif now - self._hb_last >= self._alarm_after:
            silent = now - self._hb_last
            self._hb_last = now
            if self._ordered is not None:
                self._enqueue("reset")
            else:
                self._report(
                    errors.HeartbeatAlarmError(
                        f"nats: no message or heartbeat for {silent:.1f} s "
                        f"on consumer {self.stream_name}/{self.consumer_name} (idle heartbeat "
                        f"{self._hb:g} s)",
                        last_stream_seq=self._sseq,
                        last_consumer_seq=self._cseq,
                    )
                )
        self._timer = self._client._scheduler.call_later(self._hb, self._watch)

    # -- public -----------------------------------------------------------------

    @property
    def sequence_mismatch(self) -> errors.SequenceMismatchError | None:
        """The open gap (reported, and no message delivered since), or None."""
        return self._gap

    @property
    def delivered(self) -> int:
        """User messages handed out (statuses are not counted)."""
        return self._user_delivered

    @property
    def flow_control_answered(self) -> int:
        """How many flow-control requests (or stalled notices) this subscription answered."""
        return self._fc_count

    @property
    def resets(self) -> int:
        """How many times an ordered subscription replaced its consumer."""
        return self._resets

    def consumer_info(self) -> ConsumerInfo:
        """The consumer's current info from the server."""
        return self._js._consumer_info(self.stream_name, self.consumer_name)

    def unsubscribe(self, limit: int = 0) -> None:
        """Stop receiving; the consumer is deleted per ``delete_consumer`` (errors raise)."""
        super().unsubscribe(limit)
        if limit > 0 and self._received < limit:
            return
        self._stop()
        self._delete()

    def drain(self, timeout: float | None = 30.0) -> None:
        """Let what was sent arrive and be processed, then delete per ``delete_consumer``.

        A failed delete goes to ``error_cb``.
        """
        super().drain(timeout)
        self._stop()
        try:
            self._delete()
        except errors.Error as exc:
            self._report(exc)

    def _stop(self) -> None:
        self._ended = True
        timer = self._timer
        if timer is not None:
            timer.cancel()
        if self._ordered is not None:
            self._client._remove_listener(self._on_conn)

    def _delete(self) -> None:
        policy = self._delete_policy
        if policy == "never" or (policy == "if_created" and not self._created):
            return
        self._delete_policy = "never"  # once
        if self._client.is_closed:
            return
        try:
            self._js.delete_consumer(self.stream_name, self.consumer_name)
        except errors.NotFoundError:
            pass
