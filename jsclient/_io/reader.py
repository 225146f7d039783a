"""The read side of a connection: the reader thread, and requesters that read their reply.

One thread at a time reads the socket, parses and routes (the *role*, kept by
:class:`jsclient.protocol.readstate.ReadState`):

- READER: the reader thread (``jsclient-reader``) reads; it waits in
  ``poll()`` on the socket and a wake-up socket. It routes every frame, runs
  no user code, and also handles a lost socket and the reconnect.
- LEADER: a thread that has sent a request and waits for its reply
  (:meth:`Reader.await_reply`) may read the socket itself, so the reply wakes
  the waiting thread directly instead of waking the reader thread which then
  wakes it (one thread hop less per round trip). It registers with ``join``;
  the reader thread, after its current read, hands it the role and parks. A
  leader routes what needs no owner code (replies of requests, messages of
  plain subscriptions) and stops at the first frame that does (a control
  frame, a library subscription's message, an async publish ack): that frame
  and the ones after it stay in the backlog and the role goes back to the
  reader thread, which routes them in order. A leader hands the role to the
  next waiting requester when its reply has come, or
- LINGER: nobody reads, for at most ``LINGER`` seconds: the next request
  (a loop of requests from one thread) leads at once, with no wake-up of
  anyone; the parked reader thread takes the role back after that.

A thread waiting for a subscription's queue may lead too (a *taker*,
:meth:`jsclient.subscription.Subscription._await`, used by service handler
threads): it reads until its queue has something, so a service alone in its
process reads its own requests, one wake-up each. Requesters come first (see
:mod:`jsclient.protocol.readstate`), so a requester in the same process keeps
the role and the handler thread is woken by its queue.

Interrupts: a ``KeyboardInterrupt`` (or any exception raised asynchronously
into a requesting thread) can land between any two steps of a requester's
code. Each step that reads, parses or routes is one call of the Cython twin
that runs no Python code, and the role is released in a ``finally`` by one
such call, so an interrupt loses no frame and never leaves the parser half
fed: what was read is routed or in the backlog. A leader that sees the socket
fail only stops reading; the reader thread finds the same failure and does
the reconnect. Requesters read only with the Cython twin (``LEADER_READS``);
with the pure-Python implementation the reader thread does all reading.

Over TLS (no concurrent reads with writes) the reader thread also writes, in
one ``select`` loop, and only it reads.
"""

from __future__ import annotations

import select
import socket
import ssl
import time
from typing import Any, Protocol

from jsclient import _impl, errors
from jsclient._io.options import CLOSED
from jsclient._io.writer import DONTWAIT, INLINE, WAIT_SLICE, Writer
from jsclient._threads import log

_readstate = _impl.readstate
LEAD = _readstate.LEAD
WAKE = _readstate.WAKE
WOULD_BLOCK = _readstate.WOULD_BLOCK
HANDOFF = _readstate.HANDOFF

READ_BUFFER = 256 * 1024
#: How long the reading role waits for the next request before the reader takes it back.
LINGER = 0.001
#: Requesters may read the socket themselves: needs non-blocking receives,
#: poll(), and the Cython twin (whose read and role calls are interrupt-safe).
LEADER_READS = INLINE and hasattr(select, "poll") and _impl.IMPL == "c"


class Link(Protocol):
    """What the reader needs of its connection."""

    status: str
    _sock: socket.socket | None
    _is_tls: bool
    _wake_r: socket.socket | None

    def lost(self, sock: socket.socket, exc: BaseException | None) -> None: ...

    def reconnect(self) -> bool: ...

    def report(self, exc: BaseException) -> None: ...

    def wake_reader(self) -> None: ...


class Reader:
    """The reader thread and the requesters' reads (see the module docstring)."""

    def __init__(self, link: Link, state: Any, writer: Writer, closing: Any) -> None:
        self.link = link
        self.rs = state  # ReadState: parser, backlog, role, counters
        self.writer = writer
        self.closing = closing  # threading.Event set by close()
        self.buf = bytearray(READ_BUFFER)
        self.view = memoryview(self.buf)
        self.thread: Any = None
        self._poller: Any = None  # poll on (socket, wake) for the reader thread
        self._poll_sock: socket.socket | None = None
        self._lead_poller: Any = None  # poll on the socket, for leading requesters
        self._lead_sock: socket.socket | None = None
        self._park_poller: Any = None  # poll on the wake socket while a requester reads

    # -- the reader thread -----------------------------------------------------

    def run(self) -> None:
        link = self.link
        rs = self.rs
        while link.status is not CLOSED:
            sock = link._sock
            try:
                if sock is None:
                    if not link.reconnect():
                        return
                    continue
                if link._is_tls:
                    self._tls_round(sock)
                    continue
                if rs.backlog:
                    rs.flush_backlog()
                if not rs.reclaim():
                    self._park(sock)
                    continue
                if rs.waiters and rs.hand_over():
                    # Back from a linger with a thread waiting for the role (a
                    # taker does not wake this thread while a requester lingers).
                    continue
                n = self._read(sock)
                if n == 0:
                    link.lost(sock, errors.UnexpectedEOF())
                    continue
                if rs.waiters:
                    rs.hand_over()
            except (errors.ProtocolError, OSError) as exc:
                if sock is not None:
                    link.lost(sock, exc)
            except BaseException as exc:
                # A bug in delivery (or an exception raised into this thread):
                # report it, drop the socket, reconnect.
                log.exception("jsclient: unexpected error on the reader thread")
                link.report(exc)
                if sock is not None:
                    link.lost(sock, exc)
                elif self.closing.wait(0.1):
                    return

    def _read(self, sock: socket.socket) -> int:
        """One read and route; -1 when woken with nothing to read, 0 at end of stream."""
        rs = self.rs
        n: int = rs.read(sock, self.view, DONTWAIT, True)
        if n != WOULD_BLOCK:
            return n
        poller = self._poller
        if poller is None or self._poll_sock is not sock:
            wake = self.link._wake_r
            poller = self._poller = _poller_for(sock, *([wake] if wake is not None else []))
            self._poll_sock = sock
        for fd, _ in poller.poll(WAIT_SLICE * 1000):
            if fd != sock.fileno():
                self.drain_wake()
        n = rs.read(sock, self.view, DONTWAIT, True)
        return -1 if n == WOULD_BLOCK else n

    def _park(self, sock: socket.socket) -> None:
        """A requester reads: wait on the wake-up socket for up to LINGER, or up to
        WAIT_SLICE once the lead has lasted (its end wakes this thread), then look again."""
        wake = self.link._wake_r
        if wake is None:
            time.sleep(LINGER)
            return
        poller = self._park_poller
        if poller is None:
            poller = self._park_poller = _poller_for(wake)
        if poller.poll(self.rs.park_time(WAIT_SLICE) * 1000):
            self.drain_wake()

    def drain_wake(self) -> None:
        wake = self.link._wake_r
        if wake is not None:
            try:
                while wake.recv(4096):
                    pass
            except (BlockingIOError, InterruptedError, OSError):
                pass

    # -- requesters ------------------------------------------------------------

    def await_reply(self, waiter: Any, deadline: float | None, claim: bool = True) -> bool:
        """Wait for ``waiter`` (a request's :class:`Reply`, or a taker's); True when it
        was delivered (the taker's queue has something).

        Reads the socket on this thread when allowed (see the module docstring).
        ``claim`` False: do not wake the reader thread to get the role from it
        (it may still hand the role over after its next read).
        """
        link = self.link
        sock = link._sock
        if not LEADER_READS or link._is_tls or sock is None:
            return acquire(waiter.lock, deadline)
        rs = self.rs
        try:
            how = rs.join(waiter)
            if how != LEAD:
                if how == WAKE and claim:
                    link.wake_reader()
                if not acquire(waiter.lock, deadline):
                    return bool(waiter.done)
                if not waiter.lead:
                    return True  # the reply came; another thread read it
            if self._lead(sock, waiter, deadline) and not waiter.done:
                # Stopped at frames for the reader thread: give the role back
                # and wait for the reply like any other requester.
                if rs.leave(waiter, False):
                    link.wake_reader()
                acquire(waiter.lock, deadline)
            elif not waiter.done and link.status is not CLOSED and link._sock is not sock:
                # The socket failed under this thread: the reader thread takes
                # over (and reconnects); wait out the deadline as any waiter would.
                if rs.leave(waiter, False):
                    link.wake_reader()
                acquire(waiter.lock, deadline)
            return bool(waiter.done)
        finally:
            if rs.leave(waiter, link._sock is sock and link.status is not CLOSED):
                link.wake_reader()

    def _lead(self, sock: socket.socket, waiter: Any, deadline: float | None) -> bool:
        """Read, parse and route on this thread until ``waiter`` has its reply.

        True when stopped at frames that only the reader thread may route.
        """
        link = self.link
        rs = self.rs
        view = self.view
        poller = self._lead_poller
        if poller is None or self._lead_sock is not sock:
            try:
                poller = self._lead_poller = _poller_for(sock)
            except OSError:
                return False  # closed under this thread: close() releases the waiter
            self._lead_sock = sock
        # The request was just sent: wait for readability first (a receive now
        # would almost always find nothing).
        while not waiter.done:
            if link._sock is not sock or link.status is CLOSED:
                return False
            if deadline is None:
                wait = WAIT_SLICE
            else:
                wait = min(deadline - time.monotonic(), WAIT_SLICE)
                if wait <= 0:
                    return False
            if not poller.poll(wait * 1000):
                continue
            try:
                n = rs.read(sock, view, DONTWAIT, False)
            except (OSError, errors.ProtocolError):
                # The reader thread meets the same failure and handles it.
                return True
            if n == HANDOFF or n == 0:
                return True
        return False

    # -- TLS: the reader thread reads and writes -----------------------------------

    def _tls_round(self, sock: socket.socket) -> None:
        """The TLS reader+writer loop until the socket changes or fails."""
        link = self.link
        rs = self.rs
        writer = self.writer
        wake = link._wake_r
        assert wake is not None
        sock.setblocking(False)
        pending_out = False
        try:
            while link._sock is sock and link.status is not CLOSED:
                if rs.backlog:
                    rs.flush_backlog()
                if not pending_out:
                    pending_out = writer.write_tls(sock)
                wlist = [sock] if pending_out else []
                r: list[Any]
                w: list[Any]
                if isinstance(sock, ssl.SSLSocket) and sock.pending():
                    r, w = [sock], []
                else:
                    r, w, _ = select.select([sock, wake], wlist, [], WAIT_SLICE)
                if wake in r:
                    self.drain_wake()
                if pending_out and sock in w:
                    pending_out = writer.write_tls(sock)
                if sock in r:
                    while True:
                        try:
                            n = rs.read(sock, self.view, 0, True)
                        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
                            break
                        if n == 0:
                            raise errors.UnexpectedEOF()
                        if n == WOULD_BLOCK or link._sock is not sock:
                            break
                        if not (isinstance(sock, ssl.SSLSocket) and sock.pending()):
                            break
        except (OSError, errors.Error) as exc:
            link.lost(sock, exc)


def _poller_for(*socks: Any) -> Any:
    """A ``poll`` object waiting for ``socks`` to be readable.

    OSError when one was closed meanwhile (another thread's ``close()``):
    ``register`` then sees file descriptor -1 and raises ValueError.
    """
    poller = select.poll()
    try:
        for s in socks:
            poller.register(s, select.POLLIN)
    except ValueError as exc:
        raise OSError(f"socket closed: {exc}") from exc
    return poller


def acquire(lock: Any, deadline: float | None) -> bool:
    """Acquire ``lock`` until ``deadline`` (monotonic; None: no limit)."""
    if deadline is None:
        return bool(lock.acquire())
    return bool(lock.acquire(timeout=max(0.0, deadline - time.monotonic())))
