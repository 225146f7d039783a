# cython: language_level=3
"""Cython twin of jsclient.protocol.msgtype: message storage built in one C call."""


cdef class MsgBase:
    """Plain message storage; see jsclient/protocol/msgtype.py."""

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
