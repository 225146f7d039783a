"""ADR-40 reconnect options: the user's pick of the next server, and ``force_reconnect``.

``reconnect_to_server_cb(servers, info)`` is user code, so it runs on the
``jsclient-callbacks`` thread like every other callback (after any
``disconnected_cb`` queued before it), never on the reader thread; the
reconnecting thread, which holds no socket then, waits for its answer up to
:data:`PICK_WAIT` seconds. ``servers`` are the URLs of the pool (exhausted
servers dropped), ``info`` the latest server INFO (``None`` before the first
connection). The answer:

- a URL of the pool: that server is dialled next, after the usual wait
  (``reconnect_wait`` since the last attempt on it, plus jitter);
- ``(url, delay_seconds)``: that server after exactly ``delay_seconds`` (0: now),
  instead of ``reconnect_wait``, also after ``force_reconnect``; ``url`` may
  be ``None`` (the pool's choice after the delay);
- ``None``: the pool's own choice;
- a URL not in the pool (ADR-40: the user cannot pick a server outside it),
  a malformed answer, an exception, or no answer within :data:`PICK_WAIT`:
  reported to ``error_cb`` and the pool's own choice is used.

:func:`force` drops a live connection and reconnects at once, through the
usual path: subscriptions are re-sent, ``disconnected_cb`` and
``reconnected_cb`` fire, and whatever is published once it has returned goes
to the reconnect buffer and is sent on the new connection.

It loses nothing it need not. A server drops the JetStream acks of what it
reads after a client closed its side, so cutting the socket at once would
leave every async publish in flight without its ack ("outcome unknown",
although all of them are stored). Instead the writer pauses at a barrier
(:meth:`jsclient._io.writer.Writer.pause`: what was queued before still goes
out, what comes after waits for the next connection), the socket stays open
for reading, and the socket is cut once every publish written to it has its
ack (:meth:`jsclient.jetstream.publish.engine.PublishEngine._written_unacked`,
asked of every engine of the client), or after :data:`FORCE_GRACE` seconds.
With a healthy server a forced reconnect so fails no publish at all.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

from jsclient import errors
from jsclient._io.options import CLOSED, CONNECTED, RECONNECTING, check_open

if TYPE_CHECKING:
    from jsclient._io.servers import ServerAddr

# jsclient.connection.Connection and jsclient.client.Client: both import this
# module, which so names their types without importing them back.
Connection = Any
Client = Any

#: How long a reconnect waits for ``reconnect_to_server_cb`` to answer.
PICK_WAIT = 5.0
#: After ``force_reconnect``, how long the acks of what was written may take to
#: come back before the socket is cut.
FORCE_GRACE = 2.0
#: How often the grace looks whether they have come.
GRACE_POLL = 0.005
_SLICE = 0.1


class _Answer:
    __slots__ = ("done", "error", "value")

    def __init__(self) -> None:
        self.done = threading.Lock()
        self.done.acquire()  # released once the callback returned or raised
        self.value: Any = None
        self.error: BaseException | None = None


def _ask(conn: Connection, urls: list[str], info: dict[str, Any] | None) -> _Answer | None:
    """Run the callback on the callbacks thread; its answer, or None if it never came."""
    cb = conn.opts.reconnect_to_server_cb
    assert cb is not None
    ans = _Answer()

    def run() -> None:
        try:
            ans.value = cb(urls, info)
        except BaseException as exc:  # user code: whatever it raises is reported
            ans.error = exc
        finally:
            ans.done.release()

    conn._owner._run_callback(run)
    deadline = time.monotonic() + PICK_WAIT
    while not ans.done.acquire(timeout=_SLICE):
        if conn.status is CLOSED:
            return None
        if time.monotonic() >= deadline:
            conn.report(
                errors.Error(
                    f"nats: reconnect_to_server_cb did not answer within {PICK_WAIT} s "
                    "(is the callback thread busy?); using the server pool's choice"
                )
            )
            return None
    return ans


def choose(conn: Connection) -> tuple[ServerAddr | None, float | None]:
    """The user's pick for the next attempt: (server or None, delay or None).

    ``(None, None)`` when there is no callback or its answer cannot be used:
    the pool chooses and the usual wait applies.
    """
    if conn.opts.reconnect_to_server_cb is None:
        return None, None
    live = conn.pool.live()
    if not live:
        return None, None  # the pool is exhausted: the caller gives up
    info = dict(conn.server_info) or None
    ans = _ask(conn, [s.url for s in live], info)
    if ans is None:
        return None, None
    if ans.error is not None:
        err = errors.Error(f"nats: reconnect_to_server_cb raised {ans.error!r}")
        err.__cause__ = ans.error
        conn.report(err)
        return None, None
    value = ans.value
    delay: float | None = None
    if isinstance(value, tuple) and len(value) == 2:
        value, raw = value
        if isinstance(raw, (int, float)) and not isinstance(raw, bool) and raw >= 0:
            delay = float(raw)
        else:
            conn.report(errors.Error(f"nats: reconnect_to_server_cb gave a bad delay {raw!r}"))
            return None, None
    if value is None:
        return None, delay
    srv = conn.pool.take(value) if isinstance(value, str) else None
    if srv is None:
        conn.report(
            errors.Error(
                f"nats: reconnect_to_server_cb chose {value!r}, which is not in the "
                "server pool; using the pool's choice"
            )
        )
        return None, None
    return srv, delay


def force(conn: Connection) -> None:
    """Drop the connection now and reconnect (see the module docstring).

    The first attempt skips ``reconnect_wait`` (not a delay the callback gives).
    Reconnecting already (or not yet connected with ``retry_on_failed_connect``):
    the next attempt starts at once.
    """
    check_open(conn)
    if not conn.opts.reconnect:
        raise errors.Error("nats: force_reconnect needs reconnect=True")
    sock = conn._sock

    def cut() -> None:
        if conn._sock is sock and sock is not None:
            conn.abort_socket(sock, None)

    # Armed first: even if an interrupt lands below, the socket is cut and the
    # reconnect happens (the status must never say reconnecting over a live socket).
    timers = conn._owner._timers
    timer = timers.call_later(FORCE_GRACE + 0.5, cut) if sock is not None else None
    with conn._lock:
        live = sock is not None and conn._sock is sock and conn.status is CONNECTED
        if live:
            # From here on a publish goes to the reconnect buffer, and nothing
            # more is written to this socket.
            conn._set_status(RECONNECTING)
            conn.writer.pause(sock)
    conn._retry_now.set()  # the first attempt skips reconnect_wait
    if not live or sock is None:
        if timer is not None:
            timer.cancel()
        return
    conn._connected_event.clear()
    deadline = time.monotonic() + FORCE_GRACE
    engines = conn._owner._engines

    def grace() -> None:
        # Timer thread: cut once what was written has its acks, or at the deadline.
        if conn._sock is not sock:
            return  # lost meanwhile: the reader thread reconnects
        written = conn.writer.written_now()  # None: a write is in progress
        acked = written is not None and not any(
            e._written_unacked(written) for e in engines.snapshot()
        )
        if acked or time.monotonic() >= deadline:
            cut()
        else:
            timers.call_later(GRACE_POLL, grace)

    grace()


def force_reconnect(client: Client) -> None:
    """The body of :meth:`jsclient.Client.force_reconnect`, documented there."""
    force(client._conn)
