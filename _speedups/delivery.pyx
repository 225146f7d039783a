# cython: language_level=3, freethreading_compatible=True, boundscheck=False, wraparound=False
"""Cython twin of :mod:`jsclient.protocol.delivery` (the specification).

Same classes, fields, function and behaviour. What differs is only how: the
counters are C fields, messages are allocated with ``tp_new`` and their fields
set directly, and the frame tuples are read without unpacking. The mux fields
are C-typed too: ``_mux`` takes an exact ``dict`` or None (popped with the C
dict API), ``_mux_skip`` an index-sized int.

What this twin adds to the specification: ``route_safe`` runs no Python code
(only C: dict and list operations, lock releases), so it is atomic with
respect to interrupts raised into the calling thread; the readstate twin's
``ReadState.read`` relies on that.
"""

import queue
import threading
from queue import Empty
from time import monotonic

cimport cython
from collections import deque

from jsclient.errors import ConnectionClosedError, Error, NotJSMessageError

from cpython.object cimport PyObject
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE
from cpython.bytes cimport PyBytes_GET_SIZE

cdef extern from "Python.h":
    ctypedef struct PyTypeObject
    PyTypeObject* Py_TYPE(object o)
    bint PyType_IS_GC(PyTypeObject* t)
    void PyObject_GC_UnTrack(void* o)

cdef extern from "_jsc_compat.h":
    object jsc_dict_get(object d, object k)
    object jsc_dict_pop(object d, object k)
    long long jsc_add(long long* p, long long v) nogil

@cython.no_gc
cdef class MsgBase:
    """Message storage; see jsclient/protocol/delivery.py.

    Not tracked by the cycle collector (what the twin adds): a message holds
    strings, bytes, a header dict of strings and its connection's weak proxy,
    so it closes no reference cycle, and the collector need not walk the
    messages that wait in subscription queues (at ~1M messages a second the
    young-generation collections that walked them cost ~0.3 µs a message).
    """

    cdef public object _client
    cdef public object subject
    cdef public object reply
    cdef public object data
    cdef public object _hdr
    cdef public object _size
    cdef public object sid
    cdef public object _headers
    cdef public object _meta
    cdef public object _ackd

    def __init__(self, client, subject, reply, data, hdr=None, size=-1, sid=0):
        self._client = client
        self.subject = subject
        self.reply = reply
        self.data = data
        self._hdr = hdr
        self._size = size
        self.sid = sid
        self._headers = None
        self._meta = None
        self._ackd = 0

    def ack(self):
        """Acknowledge (terminal). Ignored after another terminal ack or with ack policy none."""
        _send_ack(self, b"+ACK")

    def _send_ack(self, body):
        """Publish a terminal ack once; see jsclient/protocol/delivery.py."""
        _send_ack(self, body)


cdef object _send_ack(MsgBase m, object body):
    if m._ackd != 0:
        return None
    cdef object reply = m.reply
    if not reply or not reply.startswith("$JS.ACK."):
        raise NotJSMessageError()
    cdef object client = m._client
    if client is None:
        raise Error("nats: message is not bound to a connection")
    try:
        rc = client._wq.ack(reply, body)
        if rc != 0:  # the write queue's QUEUED
            client._ack_not_queued(rc, reply, body)
    except ReferenceError:  # its connection's client is gone (closed and dropped)
        raise ConnectionClosedError() from None
    m._ackd = 1
    return None


cdef class SubState:
    """Reader-side state of one subscription; see jsclient/protocol/delivery.py."""

    cdef public object sid
    cdef public long long _pending_msgs_limit
    cdef public long long _pending_bytes_limit
    cdef public long long _max_msgs
    cdef public object _handler
    cdef public dict _mux
    cdef public Py_ssize_t _mux_skip
    cdef public long long _received
    cdef public long long _in_bytes
    cdef public long long _consumed
    cdef public long long _out_bytes
    cdef public long long _dropped
    cdef public bint _slow
    cdef public list _batch
    cdef public long long _batch_bytes
    cdef public object _q
    cdef public object _taker
    cdef public object _local
    cdef public bint _fast_next

    def __init__(self, sid, long long pending_msgs_limit, long long pending_bytes_limit,
                 long long max_msgs, handler=None):
        self.sid = sid
        self._pending_msgs_limit = pending_msgs_limit
        self._pending_bytes_limit = pending_bytes_limit
        self._max_msgs = max_msgs
        self._handler = handler
        self._mux = None
        self._mux_skip = 0
        self._received = 0
        self._in_bytes = 0
        self._consumed = 0
        self._out_bytes = 0
        self._dropped = 0
        self._slow = False
        self._batch = []
        self._batch_bytes = 0
        self._q = queue.SimpleQueue()
        self._taker = None
        self._local = deque()
        self._fast_next = False

    def _pop_local(self):
        """The next message of the taken batch, counted; None when there is none."""
        return _pop_local(self)

    def next_msg(self, timeout=1.0):
        """The next message; TimeoutError if none arrives within ``timeout`` seconds."""
        cdef object msg
        if self._fast_next:
            msg = _pop_local(self)
            if msg is not None:
                return msg
        return self._next_msg(timeout)

    def _flush_batch(self):
        """Hand the collected messages to the consumer in one queue put."""
        _flush(self)

    def _took(self, long long n, long long nbytes):
        """Count what a consumer handed out: two atomic adds (any number of threads)."""
        jsc_add(&self._consumed, n)
        jsc_add(&self._out_bytes, nbytes)


cdef inline object _pop_local(SubState s):
    cdef object local = s._local
    cdef object msg
    if not local:
        return None
    try:
        msg = local.popleft()
    except IndexError:  # another thread took the last one
        return None
    if isinstance(msg, MsgBase):
        data = (<MsgBase>msg).data
    else:
        data = msg.data
    jsc_add(&s._consumed, 1)
    jsc_add(&s._out_bytes, len(data))
    return msg


cdef inline void _flush(SubState s) except *:
    cdef list batch = s._batch
    if batch:
        s._batch = []
        s._q.put((batch, s._batch_bytes))
        s._batch_bytes = 0
        taker = s._taker
        if taker is not None:
            (<Reply?>taker).done = True
            _wake(<Reply?>taker)


cdef inline object _new_msg(object msg_type, bint fast, object owner, object subject,
                            object reply, object payload, object hdr, object size, object sid):
    cdef MsgBase m
    if not fast:
        return msg_type(owner, subject, reply, payload, hdr, size, sid)
    m = <MsgBase>MsgBase.__new__(msg_type)
    m._client = owner
    m.subject = subject
    m.reply = reply
    m.data = payload
    m._hdr = hdr
    m._size = size
    m.sid = sid
    m._headers = None
    m._meta = None
    m._ackd = 0
    if PyType_IS_GC(Py_TYPE(m)):
        # A Python subclass (Msg) is a GC type whatever its base; its traversal
        # sees none of MsgBase's fields (no_gc, above), so leaving it off the
        # collector's lists loses nothing and spares every collection a walk
        # over the messages waiting in queues.
        PyObject_GC_UnTrack(<PyObject*>m)
    return m


def route(owner, list events, dict subs, msg_type):
    """Deliver parser frames; see jsclient/protocol/delivery.py."""
    cdef list touched = []
    cdef long long n_in = 0
    cdef long long b_in = 0
    cdef Py_ssize_t plen
    cdef tuple ev
    cdef object found
    cdef SubState sub
    cdef SubState s
    cdef list batch
    cdef bint fast = isinstance(msg_type, type) and issubclass(msg_type, MsgBase)
    for item in events:
        ev = <tuple>item
        if <object>PyTuple_GET_ITEM(ev, 0) != 0:
            for s in touched:
                _flush(s)
            touched.clear()
            owner._control(ev)
            continue
        if PyTuple_GET_SIZE(ev) != 7:
            raise ValueError("too many values to unpack (expected 7)")
        payload = <object>PyTuple_GET_ITEM(ev, 5)
        plen = len(payload)
        n_in += 1
        b_in += plen
        sid = <object>PyTuple_GET_ITEM(ev, 1)
        found = jsc_dict_get(subs, sid)
        if found is None:
            continue
        sub = <SubState>found
        msg = _new_msg(msg_type, fast, owner, <object>PyTuple_GET_ITEM(ev, 2),
                       <object>PyTuple_GET_ITEM(ev, 3), payload,
                       <object>PyTuple_GET_ITEM(ev, 4), <object>PyTuple_GET_ITEM(ev, 6), sid)
        if sub._handler is not None:
            if sub._mux is None:
                sub._handler(msg)
            else:
                subject = <object>PyTuple_GET_ITEM(ev, 2)
                if type(subject) is str:
                    token = (<str>subject)[sub._mux_skip:]
                else:
                    token = subject[sub._mux_skip:]
                waiter = jsc_dict_pop(sub._mux, token)
                if waiter is not None:
                    waiter.deliver(msg)
            continue
        if (sub._received - sub._consumed >= sub._pending_msgs_limit
                or sub._in_bytes - sub._out_bytes + plen > sub._pending_bytes_limit):
            sub._dropped += 1
            if not sub._slow:
                sub._slow = True
                owner._on_slow(sub)
            continue
        sub._slow = False
        sub._in_bytes += plen
        sub._received += 1
        sub._batch_bytes += plen
        batch = sub._batch
        batch.append(msg)
        if len(batch) == 1:
            touched.append(sub)
        if sub._max_msgs and sub._received >= sub._max_msgs:
            owner._on_max_msgs(sub)
    for s in touched:
        _flush(s)
    return n_in, b_in


cdef class Reply:
    """A request waiting for its response; see jsclient/protocol/delivery.py."""

    cdef public bint done
    cdef public bint lead
    cdef public object lock
    cdef public object msg
    cdef public bint taker

    def __init__(self, bint taker=False):
        self.lock = threading.Lock()
        self.lock.acquire()
        self.msg = None
        self.done = False
        self.lead = False
        self.taker = taker

    def deliver(self, msg):
        self.msg = msg
        self.done = True
        _wake(self)

    def wake(self):
        _wake(self)


cdef inline void _wake(Reply r) except *:
    try:
        r.lock.release()
    except RuntimeError:
        pass


cdef tuple _route_safe(owner, list events, Py_ssize_t start, dict subs, msg_type):
    cdef list touched = []
    cdef long long n_in = 0
    cdef long long b_in = 0
    cdef Py_ssize_t plen
    cdef Py_ssize_t i = start
    cdef Py_ssize_t end = len(events)
    cdef tuple ev
    cdef object found
    cdef SubState sub
    cdef SubState s
    cdef Reply r
    cdef list batch
    cdef bint fast = isinstance(msg_type, type) and issubclass(msg_type, MsgBase)
    while i < end:
        ev = <tuple>events[i]
        if <object>PyTuple_GET_ITEM(ev, 0) != 0:
            break
        if PyTuple_GET_SIZE(ev) != 7:
            raise ValueError("too many values to unpack (expected 7)")
        payload = <object>PyTuple_GET_ITEM(ev, 5)
        plen = len(payload)
        sid = <object>PyTuple_GET_ITEM(ev, 1)
        found = jsc_dict_get(subs, sid)
        if found is None:
            n_in += 1
            b_in += plen
            i += 1
            continue
        sub = <SubState>found
        if sub._handler is not None:
            if sub._mux is None:
                break
            subject = <object>PyTuple_GET_ITEM(ev, 2)
            if type(subject) is str:
                token = (<str>subject)[sub._mux_skip:]
            else:
                token = subject[sub._mux_skip:]
            found = jsc_dict_get(sub._mux, token)
            if found is not None:
                if type(found) is not Reply:
                    break
                # Taken by one atomic pop: a requester that gave up meanwhile
                # (cancel) took it instead, and then this reply is dropped.
                if jsc_dict_pop(sub._mux, token) is not found:
                    n_in += 1
                    b_in += plen
                    i += 1
                    continue
                r = <Reply>found
                r.msg = _new_msg(msg_type, fast, owner, subject,
                                 <object>PyTuple_GET_ITEM(ev, 3), payload,
                                 <object>PyTuple_GET_ITEM(ev, 4),
                                 <object>PyTuple_GET_ITEM(ev, 6), sid)
                r.done = True
                _wake(r)
            n_in += 1
            b_in += plen
            i += 1
            continue
        if (sub._received - sub._consumed >= sub._pending_msgs_limit
                or sub._in_bytes - sub._out_bytes + plen > sub._pending_bytes_limit):
            if not sub._slow:
                break
            sub._dropped += 1
            n_in += 1
            b_in += plen
            i += 1
            continue
        if sub._max_msgs and sub._received + 1 >= sub._max_msgs:
            break
        sub._slow = False
        sub._in_bytes += plen
        sub._received += 1
        sub._batch_bytes += plen
        batch = sub._batch
        batch.append(_new_msg(msg_type, fast, owner, <object>PyTuple_GET_ITEM(ev, 2),
                              <object>PyTuple_GET_ITEM(ev, 3), payload,
                              <object>PyTuple_GET_ITEM(ev, 4), <object>PyTuple_GET_ITEM(ev, 6),
                              sid))
        if len(batch) == 1:
            touched.append(sub)
        n_in += 1
        b_in += plen
        i += 1
    for s in touched:
        _flush(s)
    return i, n_in, b_in


def route_safe(owner, list events, Py_ssize_t start, dict subs, msg_type):
    """Deliver events[start:] up to the first frame that needs owner code."""
    return _route_safe(owner, events, start, subs, msg_type)


cdef class FetchBase:
    """One pull's messages; see jsclient/protocol/delivery.py.

    What differs is only how: the counters and flags are C fields, and a
    message of the common case (no headers, ack policy not none) goes from
    the reader's route to the queue, and from the queue to the caller, with
    no Python frame."""

    cdef public bint _ack_none
    cdef public bint _ended
    cdef public bint _done
    cdef public double _heartbeat
    cdef public double _last
    cdef public double _taken_at
    cdef public object _put
    cdef public object _q
    cdef public object _held
    cdef public long long _count
    cdef public long long _batch
    cdef public long long _max_bytes
    cdef public long long _bytes

    def _special(self, msg):
        raise NotImplementedError

    def _end(self, error):
        raise NotImplementedError

    def _next_slow(self):
        raise NotImplementedError

    def _on_msg(self, msg):
        cdef bint special
        cdef long long n
        if isinstance(msg, MsgBase):
            special = (<MsgBase>msg)._hdr is not None or self._ack_none
        else:
            special = msg._hdr is not None or self._ack_none
        if special and self._special(msg):
            return
        if self._ended:
            return
        if self._heartbeat:
            self._last = monotonic()
        self._put(msg)
        n = self._count + 1
        self._count = n
        if n >= self._batch:
            self._end(None)
        elif self._max_bytes:
            self._bytes += msg.size
            if self._bytes >= self._max_bytes:
                self._end(None)

    def __iter__(self):
        return self

    def __next__(self):
        if self._done:
            raise StopIteration
        held = self._held
        if not held:
            try:
                item = self._q.get_nowait()
            except Empty:
                pass
            else:
                if isinstance(item, MsgBase):
                    self._taken_at = monotonic()
                    return item
                held.appendleft(item)
        return self._next_slow()
