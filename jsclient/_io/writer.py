"""The write side of a connection: the bounded write queue, the flusher, inline writes.

Writers append encoded frames to the write queue (:mod:`jsclient.protocol.writer`
and its Cython twin); whoever holds the *write token* takes what is queued and
writes it. Normally that is the flusher thread (``jsclient-flusher``), woken by
an event when a writer finds it idle, so many publishes share one ``send``. A
thread about to wait for a reply, or one that finds the queue past
``write_at``, writes the queue itself if it gets the token without waiting
(non-blocking sends only; what the socket does not take is left for the
flusher). The token only orders writers; nobody waits for it but the flusher
and :meth:`Writer.recover`, and nobody holds another lock across I/O.

Partial writes: the write queue's ``write`` moves what is queued to its
``out`` buffers, each starting at a command boundary, and advances
``out_sent`` by what each send took, in one call of the Cython twin (so an
interrupt raised into a writing thread never makes it send bytes twice or
skip them). When the socket is lost, :meth:`Writer.recover` puts ``out``
back in front of the queue from the start of the command that was cut, so
the next server gets whole commands, after the resubscriptions, and the
commands written whole before the cut are not sent twice.

Bounds: while connected the queue holds at most ``pending_size`` bytes. A
writer that would go beyond makes room first (:meth:`Writer.make_room`): it
writes the queue itself when no other thread is writing, else it waits until
the flusher has taken the queue (at most ``flush_timeout``, then
``FlushTimeoutError`` and nothing of its message is queued). While
disconnected the reconnect buffer limit applies instead. Library threads that
must never wait (the reader answering a PING, the timer thread) queue with
:meth:`Writer.send_nowait`, which ignores ``pending_size``.

Wake-up protocol (no lost wake-ups): the flusher clears the event (a
:class:`~jsclient._threads.Signal` it waits on with ``take``) and the queue's ``kicked``
flag *before* it looks at the queue; a writer appends *before* it reads
``kicked``. Either the flusher sees the new item, or the writer sees
``kicked`` false and sets the event. Writers waiting for room wait on another
Signal, which whoever takes from the queue notifies.

TLS sockets cannot be read and written from two threads at once, so over TLS
the reader thread writes too (:meth:`Writer.write_tls`) and the flusher is not
started; writers wake the reader thread through the wake-up socket instead.
"""

from __future__ import annotations

import os
import socket
import ssl
import threading
import time
from typing import Protocol

from jsclient import _impl, errors
from jsclient._io.options import CLOSED, CONNECTED, DRAINING, FORKED, Options
from jsclient._threads import Signal, log

_writer = _impl.writer
_LEFT = _writer.LEFT
_BUSY = _writer.BUSY
_DONE = _writer.DONE
_QUEUED = _writer.QUEUED
_KICK = _writer.KICK
_FULL = _writer.FULL
_WRITE = _writer.WRITE
_HAS_SENDMSG = hasattr(socket.socket, "sendmsg")
#: Inline writers need a send that never blocks; where there is none, only the flusher writes.
DONTWAIT: int = getattr(socket, "MSG_DONTWAIT", 0)
#: Only with the Cython twin, whose write calls are interrupt-safe (see module docstring).
INLINE = DONTWAIT != 0 and _impl.IMPL == "c"
try:
    _IOV_MAX = max(16, min(1024, os.sysconf("SC_IOV_MAX")))
except (AttributeError, ValueError, OSError):
    _IOV_MAX = 1024
#: The longest any wait here sleeps before it looks at the state again.
WAIT_SLICE = 1.0
_WOULD_BLOCK = (BlockingIOError, ssl.SSLWantWriteError, ssl.SSLWantReadError)


class Link(Protocol):
    """What the writer needs of its connection."""

    status: str
    _sock: socket.socket | None
    _is_tls: bool

    def abort_socket(self, sock: socket.socket, exc: BaseException | None) -> None: ...

    def wake_reader(self) -> None: ...

    def forked_error(self) -> errors.ForkedConnectionError: ...


class Writer:
    """Frames on their way to the socket (see the module docstring)."""

    def __init__(self, link: Link, opts: Options) -> None:
        self.link = link
        self.opts = opts
        self.wq = _writer.WriteQueue(max(1, opts.pending_size))
        self.wq.iov_max = _IOV_MAX
        self.token = threading.Lock()  # held by whoever is writing to the socket
        self.event = Signal()  # wakes the flusher (``take``: each set wakes it once)
        self.room_lock = threading.Lock()  # the room's, and the reconnect buffer count's
        self.room = Signal(self.room_lock)  # writers waiting for room in the queue
        self.held = 0  # bytes queued while disconnected (reconnect buffer limit)
        # A socket a send failed on, or that force_reconnect paused: never written again.
        self.failed: socket.socket | None = None
        self.thread: threading.Thread | None = None

    # -- starting and stopping ------------------------------------------------

    def start(self) -> None:
        """Start the flusher thread (plain sockets only; over TLS the reader writes)."""
        if self.thread is None:
            self.thread = threading.Thread(
                target=self._flush_loop, name="jsclient-flusher", daemon=True
            )
            self.thread.start()

    def set_open(self, open_: bool) -> None:
        """Whether the queue takes frames on its fast path (connected or draining)."""
        self.wq.open = open_

    # -- queueing (any thread) --------------------------------------------------

    def queued(self, rc: int) -> bool:
        """Act on what a write-queue push returned: wake the writer or write now.

        False when the queue refused the frame (full or closed, too big,
        unknown subject): the caller takes its slow path.
        """
        if rc == _QUEUED:
            return True
        if rc == _KICK:
            self.kick()
            return True
        if rc == _WRITE:
            self._write_now()
            return True
        return False

    def send(self, data: bytes, payload_len: int = 0, msgs: int = 0) -> int:
        """Queue ``data`` (``msgs`` publishes of ``payload_len`` payload bytes), bounded.

        Returns the write-stream position just past the frame (see
        :mod:`jsclient.protocol.writer`): with :meth:`withdraw` and the
        connection's ``lost_written``, what the async-publish engine asks.
        """
        v: int = self.wq.push_at(data, payload_len, msgs)
        rc = v & 7
        if rc != _QUEUED and not self.queued(rc):  # the common case needs no call
            return self._send_slow(data, payload_len, msgs)
        return v >> 3

    def send_nowait(self, data: bytes, payload_len: int = 0, msgs: int = 0) -> int:
        """Queue ``data`` without ever waiting for room (library threads, control frames).

        Raises when the connection is closed or forked, or the reconnect
        buffer is full; ``pending_size`` does not apply. Returns the position
        just past the frame.
        """
        status = self.link.status
        if status is not CONNECTED and status is not DRAINING:
            self.check_buffer(status, len(data))
        v: int = self.wq.push_always_at(data, payload_len, msgs)
        self.queued(v & 7)
        return v >> 3

    def send_inline(self, data: bytes, payload_len: int, msgs: int = 1) -> int:
        """``send``, but written from this thread if nobody else is writing.

        For callers about to block on a reply, or writing a batch: saves waking
        the flusher (it is only kicked when the token is busy, over TLS, or
        when bytes are left behind). Returns the position just past the frame.
        """
        wq = self.wq
        v: int = wq.push_at(data, payload_len, msgs)
        rc = v & 7
        if rc == _FULL:
            return self._send_slow(data, payload_len, msgs)
        if self.link._is_tls or not INLINE or self._try_write() == _BUSY:
            if rc == _KICK:
                self.kick()
            elif rc == _WRITE and not wq.kicked:
                wq.kicked = True
                self.kick()
            return v >> 3
        # A KICK was our claim to wake the flusher, and we wrote instead: clear
        # it and look at the queue in one step (see WriteQueue.rekick), so a
        # frame queued meanwhile is seen here or its writer woke the flusher.
        if wq.rekick(rc == _KICK):
            self.kick()
        return v >> 3

    def _send_slow(self, data: bytes, payload_len: int, msgs: int) -> int:
        """The queue refused ``data``: disconnected, closed, or full."""
        status = self.link.status
        if status is not CONNECTED and status is not DRAINING:
            self.check_buffer(status, len(data))
        else:
            self.make_room(len(data))
        v: int = self.wq.push_always_at(data, payload_len, msgs)
        self.queued(v & 7)
        return v >> 3

    def _write_now(self) -> None:
        """The queue passed ``write_at``: write it from this thread unless another is writing.

        A thread publishing in a loop so writes in batches of that size, as one
        thread on a plain socket would, instead of handing each to the flusher.
        """
        if (self.link._is_tls or not INLINE or self._try_write() == _BUSY) and not self.wq.kicked:
            self.wq.kicked = True
            self.kick()

    def make_room(self, n: int) -> None:
        """The queue is full: write it from this thread, or wait until it was taken."""
        wq = self.wq
        link = self.link
        deadline: float | None = None
        while wq.nbytes and wq.nbytes + n > wq.limit:
            status = link.status
            if status is not CONNECTED and status is not DRAINING:
                self.check_buffer(status, n)  # disconnected meanwhile: the reconnect buffer
                return
            if not link._is_tls and INLINE and self._try_write() == _DONE:
                continue
            # The token is busy, or the socket is full: the flusher waits on
            # it; this thread waits for room.
            now = time.monotonic()
            if deadline is None:
                deadline = now + self.opts.flush_timeout
            elif now >= deadline:
                raise errors.FlushTimeoutError(
                    f"nats: the write queue ({wq.nbytes} bytes, pending_size "
                    f"{wq.limit}) was not written within flush_timeout "
                    f"{self.opts.flush_timeout} s; this message was not sent"
                )
            wq.kicked = True
            self.kick()
            # Counted as a waiter before the check, and takers subtract before
            # they look at the count: either they see this waiter or it sees the room.
            self.room.wait_for(
                lambda: not (wq.nbytes and wq.nbytes + n > wq.limit),
                min(deadline - now, WAIT_SLICE),
            )

    def check_buffer(self, status: str, size: int) -> None:
        """Disconnected: count ``size`` against the reconnect buffer, or refuse it."""
        if status is CLOSED:
            raise errors.ConnectionClosedError()
        if status is FORKED:
            raise self.link.forked_error()
        with self.room_lock:  # publishers may check at once: one sum, never overshot
            if self.held + size > self.opts.reconnect_buffer_size:
                raise errors.OutboundBufferLimitError()
            self.held += size

    def hold(self, nbytes: int) -> None:
        """Start the reconnect buffer's count at ``nbytes`` (0 once connected; what the
        write queue holds when the connection drops), under the lock ``check_buffer``
        counts under."""
        with self.room_lock:
            self.held = nbytes

    # -- what reached the socket (the async-publish engine asks) -------------------

    def withdraw(self, ranges: list[tuple[int, int]]) -> list[bool]:
        """Take back the frames at ``ranges`` (write-stream positions) that no writer
        took yet; True for each taken back: it will never be written. Any thread."""
        ok: list[bool] = self.wq.withdraw(ranges)
        removed = sum(e - s for (s, e), w in zip(ranges, ok, strict=True) if w)
        if removed:
            with self.room_lock:
                self.held = max(0, self.held - removed)
            self.room.notify()
        return ok

    def pause(self, sock: socket.socket) -> int:
        """Write nothing more to ``sock``: what is queued from now on waits for the
        next socket (``force_reconnect``'s grace). Returns the barrier's position.

        The queue's barrier makes it exact whatever a writer is doing; the
        failed mark spares the flusher a useless take.
        """
        self.failed = sock
        return int(self.wq.pause())

    def written_now(self) -> int | None:
        """The position up to which whole commands are written to the live socket,
        or None when another thread is writing (ask again)."""
        if not self.token.acquire(False):
            return None
        try:
            return int(self.wq.written_now())
        finally:
            self.token.release()

    def kick(self) -> None:
        """Wake whoever writes: the flusher, or over TLS the reader thread."""
        if self.link._is_tls:
            self.link.wake_reader()
        else:
            self.event.set()

    def push_front(self, data: bytes) -> None:
        """Bytes that go before everything queued (resubscriptions on reconnect)."""
        self.wq.push_front(data)

    def pending_bytes(self) -> int:
        """Bytes queued and not yet taken by a writer (besides the batch being written)."""
        return int(self.wq.nbytes)

    def idle(self) -> bool:
        """Nothing queued and nothing half written."""
        return not len(self.wq) and not self.wq.out

    # -- writing (the token holder) ---------------------------------------------

    def write(self) -> None:
        """The flusher: write what is half written, then the queue, waiting for the socket.

        The caller holds the token. Everyone else writes only what the socket
        takes at once (:meth:`_try_write`), so no caller blocks on a full socket.
        """
        sock = self.link._sock
        if sock is None or sock is self.failed:
            return  # a failed socket: the connection has not noticed yet; recover() re-queues
        try:
            self.wq.write(sock, 0, _HAS_SENDMSG)
        except OSError as exc:
            # ``out`` stays as it is, exact: recover() re-queues it from the
            # cut command once the connection has noticed.
            self.failed = sock
            self.link.abort_socket(sock, exc)
        finally:
            self.room.notify()

    def _try_write(self) -> int:
        """Write from this thread if no other holds the token: DONE, LEFT or BUSY.

        One call of the write queue takes the token, writes without blocking
        and gives the token back (see :meth:`WriteQueue.try_write`).
        """
        sock = self.link._sock
        if sock is None:
            return int(_DONE)
        if sock is self.failed:
            return int(_LEFT)
        wq = self.wq
        try:
            rc: int = wq.try_write(self.token, sock, DONTWAIT, _HAS_SENDMSG)
        except OSError as exc:
            self.failed = sock
            self.link.abort_socket(sock, exc)
            return int(_LEFT)
        self.room.notify()
        if rc == _LEFT and not wq.kicked:
            wq.kicked = True
            self.kick()  # the flusher finishes what the socket did not take
        return rc

    def write_tls(self, sock: socket.socket) -> bool:
        """Reader thread over TLS: write what it can without blocking; True if more is left."""
        wq = self.wq
        if sock is self.failed:
            return False  # paused (force_reconnect): nothing more goes to this socket
        # The token (free over TLS, where only this thread writes) keeps
        # written_now() from reading ``out`` in the middle of a write.
        if not self.token.acquire(False):
            return True  # written_now() is looking: write at the next turn
        try:
            if not wq.out:
                wq.rekick(True)  # cleared as the queue is looked at, as the flusher does
            return bool(wq.write(sock, 0, False) == _LEFT)  # an OSError drops the socket
        except _WOULD_BLOCK:
            return True
        finally:
            self.token.release()
            self.room.notify()

    def recover(self) -> None:
        """The socket is gone: put what was half written back, from the cut command on.

        Called once the connection has dropped the socket (shut down first, so
        a flusher blocked in ``send`` returns at once and gives up the token).
        """
        with self.token:
            self.wq.recover()
        self.room.notify()  # they look at the connection's state again

    def _flush_loop(self) -> None:
        ev = self.event
        wq = self.wq
        link = self.link
        while True:
            try:
                ev.clear()
                # Clears the flag and looks at the queue in one step: a frame
                # queued from now on is written below or wakes us again.
                work = wq.rekick(True)
                sock = link._sock
                # Over TLS the reader thread writes (a reconnect may have moved
                # the connection from a plain server to a TLS one).
                if not work or sock is None or link._is_tls:
                    if link.status is CLOSED:
                        return
                    ev.take(WAIT_SLICE)
                    continue
                with self.token:
                    self.write()
                if link._sock is not sock or sock is self.failed:
                    ev.take(WAIT_SLICE)
            except Exception:  # the flusher must not die: log, wait a slice, go on
                log.exception("jsclient: unexpected error on the flusher thread")
                ev.take(WAIT_SLICE)

    def join(self, timeout: float) -> None:
        t = self.thread
        if t is not None and t is not threading.current_thread():
            self.event.set()
            t.join(timeout)
