# cython: language_level=3, freethreading_compatible=True, boundscheck=False, wraparound=False, cdivision=True
"""Cython twin of :mod:`jsclient.protocol.sizes` (the specification).

Same names, rules, results and errors. ``msg_size`` measures an ASCII ``str``
by its length and only encodes other strings; ``PendingCounter`` keeps its
counts as C integers (the settings are limited to int64 by the specification).
"""

from cpython.bytes cimport PyBytes_GET_SIZE

cdef extern from "Python.h":
    bint PyUnicode_IS_ASCII(object o)
    Py_ssize_t PyUnicode_GET_LENGTH(object o)

cdef long long _MAX_I64 = 9223372036854775807LL
_MAX_I64_PY = 2**63 - 1


cdef inline Py_ssize_t _utf8_len(object s) except -1:
    if type(s) is str and PyUnicode_IS_ASCII(s):
        return PyUnicode_GET_LENGTH(s)
    return len(s) if s.isascii() else len(s.encode("utf-8", "surrogateescape"))


def msg_size(subject, reply, header, payload):
    """The ADR-37 size of a message: subject + reply + header block + payload bytes."""
    cdef Py_ssize_t n = _utf8_len(subject)
    n += _utf8_len(reply)
    if header is not None:
        n += PyBytes_GET_SIZE(header) if type(header) is bytes else len(header)
    return n + (PyBytes_GET_SIZE(payload) if type(payload) is bytes else len(payload))


cdef long long _setting(str name, object value, long long low) except? -1:
    if not isinstance(value, int) or not low <= value <= _MAX_I64_PY:
        raise ValueError(f"PendingCounter: {name} must be an int in [{low}, 2**63 - 1]: {value!r}")
    return int(value)


cdef class PendingCounter:
    """Messages and bytes requested by open pulls and not yet delivered (ADR-37)."""

    cdef long long _msgs
    cdef long long _bytes
    cdef long long _max_messages
    cdef long long _max_bytes
    cdef long long _threshold_messages
    cdef long long _threshold_bytes

    def __init__(self, max_messages, max_bytes, threshold_messages, threshold_bytes):
        self._max_messages = _setting("max_messages", max_messages, 1)
        self._max_bytes = _setting("max_bytes", max_bytes, 0)
        self._threshold_messages = _setting("threshold_messages", threshold_messages, 0)
        self._threshold_bytes = _setting("threshold_bytes", threshold_bytes, 0)
        self._msgs = 0
        self._bytes = 0

    @property
    def msgs(self):
        """Messages requested and not yet received."""
        return self._msgs

    @property
    def bytes(self):
        """Bytes requested and not yet received (always 0 unless in bytes mode)."""
        return self._bytes

    @property
    def max_messages(self):
        return self._max_messages

    @property
    def max_bytes(self):
        return self._max_bytes

    @property
    def threshold_messages(self):
        return self._threshold_messages

    @property
    def threshold_bytes(self):
        return self._threshold_bytes

    def on_message(self, long long size):
        """A user message of ``size`` bytes arrived."""
        if size < 0:
            raise ValueError(f"PendingCounter.on_message: negative size {size}")
        if self._msgs > 1:
            self._msgs -= 1
        else:
            self._msgs = 0
        if self._max_bytes > 0:
            if self._bytes > size:
                self._bytes -= size
            else:
                self._bytes = 0

    def on_status(self, pending_messages, pending_bytes):
        """A pull ended with ``Nats-Pending-Messages``/``-Bytes`` (-1: header absent)."""
        # Compared as Python ints: the header values may exceed int64.
        if pending_messages >= 0:
            if pending_messages >= self._msgs:
                self._msgs = 0
            else:
                self._msgs -= <long long>pending_messages
        if pending_bytes >= 0:
            if pending_bytes >= self._bytes:
                self._bytes = 0
            else:
                self._bytes -= <long long>pending_bytes

    def reset(self):
        """Nothing is pending any more (reconnect, or the pulls were abandoned)."""
        self._msgs = 0
        self._bytes = 0

    def next_pull(self):
        """``(batch, max_bytes)`` for the next pull request if a threshold is reached."""
        cdef long long batch, nbytes
        if self._max_bytes > 0:
            if self._bytes > self._threshold_bytes:
                return None
            batch = self._max_messages - self._msgs
            nbytes = self._max_bytes - self._bytes
        else:
            if self._msgs > self._threshold_messages:
                return None
            batch = self._max_messages - self._msgs
            nbytes = 0
        self._msgs = self._max_messages
        self._bytes = self._max_bytes
        return (batch, nbytes)
