# cython: language_level=3, freethreading_compatible=True, boundscheck=False, wraparound=False
"""Cython twin of :mod:`jsclient.protocol.readstate` (the specification).

Same class, fields and behaviour. What this twin adds to the specification:
``ReadState.read`` with ``full=False`` and the role methods run no Python code
(only C: socket and lock methods, the parser twin, the routing functions of
the delivery twin, dict and list operations), so each is atomic with respect
to interrupts raised into the calling thread. The role lock is a raw PyThread
lock taken without ever running signal handlers, so even ``leave`` in a
``finally`` block cannot be cut short.
"""

from time import monotonic

from jsclient._speedups.delivery import route, route_safe
from jsclient.errors import ProtocolError

from cpython.tuple cimport PyTuple_GET_ITEM

from cpython.pythread cimport (
    NOWAIT_LOCK,
    WAIT_LOCK,
    PyThread_acquire_lock,
    PyThread_allocate_lock,
    PyThread_free_lock,
    PyThread_release_lock,
    PyThread_type_lock,
)

READER = 0
LEADER = 1
LINGER = 2
LEAD = 0
WAKE = 1
WAIT = 2
WOULD_BLOCK = -1
HANDOFF = -2
DEEP_AFTER = 0.01


cdef inline void _acquire(PyThread_type_lock lock) noexcept:
    # Never interrupted: no signal handler runs while waiting for this lock.
    if not PyThread_acquire_lock(lock, NOWAIT_LOCK):
        with nogil:
            PyThread_acquire_lock(lock, WAIT_LOCK)


cdef class ReadState:
    """The read side of one connection; see jsclient/protocol/readstate.py."""

    cdef public object owner
    cdef public dict subs
    cdef public object msg_type
    cdef public object parser
    cdef public double linger
    cdef public list backlog
    cdef public object broken
    cdef public long long in_msgs
    cdef public long long in_bytes
    cdef public int role
    cdef public object leader
    cdef public list waiters
    cdef public double linger_since
    cdef public bint linger_taker
    cdef public double lead_since
    cdef public bint deep
    cdef PyThread_type_lock _lock

    def __cinit__(self, *args, **kwargs):
        self._lock = PyThread_allocate_lock()
        if self._lock is NULL:
            raise MemoryError()

    def __dealloc__(self):
        if self._lock is not NULL:
            PyThread_free_lock(self._lock)

    def __init__(self, owner, dict subs, msg_type, parser, double linger):
        self.owner = owner
        self.subs = subs
        self.msg_type = msg_type
        self.parser = parser
        self.linger = linger
        self.backlog = []
        self.broken = None
        self.in_msgs = 0
        self.in_bytes = 0
        self.role = READER
        self.leader = None
        self.waiters = []
        self.linger_since = 0.0
        self.linger_taker = False
        self.lead_since = 0.0
        self.deep = False

    # -- reading (role holder) -------------------------------------------------

    def read(self, sock, view, int flags, bint full):
        cdef Py_ssize_t n
        cdef Py_ssize_t i
        cdef tuple res
        if self.broken is not None:
            raise self.broken
        if self.backlog:
            if not full:
                return HANDOFF
            self.flush_backlog()
        try:
            n = sock.recv_into(view, 0, flags)
        except BlockingIOError:
            return WOULD_BLOCK
        if n == 0:
            return 0
        try:
            events = self.parser.feed(view[:n].tobytes())
        except ProtocolError as exc:
            self.backlog = list(getattr(exc, "events", None) or [])
            self._count(self.backlog)
            self.broken = exc
            raise
        if full:
            self.route_all(events)
            return n
        self._count(<list>events)
        # A C call into the delivery twin: no Python code runs (see the docstring).
        res = route_safe(self.owner, <list>events, 0, self.subs, self.msg_type)
        i = <Py_ssize_t>res[0]
        if i < len(<list>events):
            self.backlog = (<list>events)[i:]
            return HANDOFF
        return n

    def route_all(self, list events):
        if self.backlog:
            self.flush_backlog()
        self._count(events)
        route(self.owner, events, self.subs, self.msg_type)

    def flush_backlog(self):
        cdef list events = self.backlog
        self.backlog = []
        route(self.owner, events, self.subs, self.msg_type)

    def count(self, list events):
        self._count(events)

    cdef void _count(self, list events) except *:
        cdef long long n = 0
        cdef long long b = 0
        cdef tuple ev
        for item in events:
            ev = <tuple>item
            if <object>PyTuple_GET_ITEM(ev, 0) == 0:
                n += 1
                b += len(<object>PyTuple_GET_ITEM(ev, 5))
        self.in_msgs += n
        self.in_bytes += b

    def reset(self, parser):
        self.parser = parser
        self.broken = None

    # -- the role (any thread) -------------------------------------------------

    def join(self, waiter):
        _acquire(self._lock)
        try:
            if (self.role == LINGER and not self.backlog and self.broken is None
                    and (self.linger_taker or not waiter.taker)):
                self._grant(waiter)
                return LEAD
            self.waiters.append(waiter)
            return WAKE if self.role == READER else WAIT
        finally:
            PyThread_release_lock(self._lock)

    def leave(self, waiter, bint keep):
        _acquire(self._lock)
        try:
            try:
                self.waiters.remove(waiter)
            except ValueError:
                pass
            if self.leader is not waiter:
                return False
            self.leader = None
            if not self.backlog and self.broken is None:
                if self._give(False):
                    return False
                if keep:
                    self.role = LINGER
                    self.linger_since = monotonic()
                    self.linger_taker = bool(waiter.taker)
                    if self.deep:
                        self.deep = False
                        return True
                    return False
            self.role = READER
            return True
        finally:
            PyThread_release_lock(self._lock)

    def reclaim(self):
        _acquire(self._lock)
        try:
            if self.role == LINGER and monotonic() - self.linger_since >= self.linger:
                self.role = READER
            return self.role == READER
        finally:
            PyThread_release_lock(self._lock)

    def park_time(self, double deep):
        _acquire(self._lock)
        try:
            if self.role == LEADER and monotonic() - self.lead_since >= DEEP_AFTER:
                self.deep = True
                return deep
            self.deep = False
            return self.linger
        finally:
            PyThread_release_lock(self._lock)

    def hand_over(self):
        _acquire(self._lock)
        try:
            if self.role != READER or self.backlog or self.broken is not None:
                return False
            return self._give(True)
        finally:
            PyThread_release_lock(self._lock)

    cdef bint _give(self, bint takers) except -1:
        cdef list waiters = self.waiters
        cdef Py_ssize_t i = 0
        pick = None
        while i < len(waiters):
            w = waiters[i]
            if w.done:
                del waiters[i]
                continue
            if not w.taker:
                pick = w
                break
            if pick is None and takers:
                pick = w
            i += 1
        if pick is None:
            return False
        waiters.remove(pick)
        self._grant(pick)
        pick.wake()
        return True

    cdef int _grant(self, waiter) except -1:
        self.role = LEADER
        self.leader = waiter
        self.lead_since = monotonic()
        waiter.lead = True
        return 0
