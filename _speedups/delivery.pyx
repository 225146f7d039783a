# cython: language_level=3, boundscheck=False, wraparound=False
"""Cython twin of :mod:`jsclient.protocol.delivery` (the specification).

Same classes, fields, function and behaviour. What differs is only how: the
counters are C fields, messages are allocated with ``tp_new`` and their fields
set directly, and the frame tuples are read without unpacking. The mux fields
are C-typed too: ``_mux`` takes an exact ``dict`` or None (popped with the C
dict API), ``_mux_skip`` an index-sized int.
"""

import queue

from cpython.object cimport PyObject
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE
from cpython.dict cimport PyDict_GetItem
from cpython.bytes cimport PyBytes_GET_SIZE


cdef class MsgBase:
    """Message storage; see jsclient/protocol/delivery.py."""

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

    def _flush_batch(self):
        """Hand the collected messages to the consumer in one queue put."""
        _flush(self)


cdef inline void _flush(SubState s) except *:
    cdef list batch = s._batch
    if batch:
        s._batch = []
        s._q.put((batch, s._batch_bytes))
        s._batch_bytes = 0


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
    return m


def route(owner, list events, dict subs, msg_type):
    """Deliver parser frames; see jsclient/protocol/delivery.py."""
    cdef list touched = []
    cdef long long n_in = 0
    cdef long long b_in = 0
    cdef Py_ssize_t plen
    cdef tuple ev
    cdef PyObject* found
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
        found = PyDict_GetItem(subs, sid)
        if found is NULL:
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
                waiter = sub._mux.pop(token, None)
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
