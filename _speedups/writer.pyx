# cython: language_level=3, freethreading_compatible=True, boundscheck=False, wraparound=False, cdivision=True
"""Cython twin of :mod:`jsclient.protocol.writer` (the specification).

Same names, codes and behaviour. Frames are built with one allocation and
``memcpy``, a small publish after small frames straight into the chunk
being filled (the specification's coalescing); counters are C integers.
Each call that changes the queue runs in a critical section on it: free
where a GIL exists (a call that runs no Python code is atomic then anyway),
a per-object lock on a free-threaded build; the subject cache is read with
a strong reference. ``Counter`` counts with one atomic add. ``write`` runs
no Python code, so an interrupt raised into the writing thread lands before
or after it.
"""

cimport cython

from jsclient.protocol.commands import frame_start

from cpython.bytearray cimport (
    PyByteArray_AS_STRING, PyByteArray_FromStringAndSize, PyByteArray_GET_SIZE, PyByteArray_Resize,
)
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.list cimport PyList_Append, PyList_GET_ITEM, PyList_GET_SIZE
from cpython.object cimport PyObject, Py_SIZE
from libc.string cimport memcpy

cdef extern from "_jsc_compat.h":
    object jsc_dict_get(object d, object k)
    long long jsc_incr(long long* p) nogil

cdef extern from "Python.h":
    bint PyUnicode_IS_ASCII(object o)
    const char* PyUnicode_AsUTF8AndSize(object o, Py_ssize_t* size) except NULL
    void* PyUnicode_DATA(object o)
    Py_ssize_t PyUnicode_GET_LENGTH(object o)

QUEUED = 0
KICK = 1
FULL = 2
TOO_BIG = 3
UNKNOWN_SUBJECT = 4
WRITE = 5
DONE = 0
LEFT = 1
BUSY = 2
GATHER_MIN = 16 * 1024
WRITE_AT = 256 * 1024

cdef enum:
    C_QUEUED = 0
    C_KICK = 1
    C_FULL = 2
    C_TOO_BIG = 3
    C_UNKNOWN_SUBJECT = 4
    C_WRITE = 5
    C_GATHER_MIN = 16 * 1024


cdef inline Py_ssize_t _digits(Py_ssize_t v, char* out):
    """Write ``v`` (>= 0) in ASCII decimal to ``out``; return its length."""
    cdef char tmp[24]
    cdef Py_ssize_t n = 0, i
    if v == 0:
        out[0] = 48
        return 1
    while v > 0:
        tmp[n] = <char>(48 + v % 10)
        v //= 10
        n += 1
    for i in range(n):
        out[i] = tmp[n - 1 - i]
    return n


cdef inline Py_ssize_t _frame_len(Py_ssize_t slen, Py_ssize_t dlen, Py_ssize_t blen):
    return 4 + slen + 1 + dlen + 2 + blen + 2


cdef bytes _frame(const char* subj, Py_ssize_t slen, const char* body, Py_ssize_t blen):
    """b"PUB " + subject + b" " + len + b"\\r\\n" + body + b"\\r\\n"."""
    cdef char num[24]
    cdef Py_ssize_t dlen = _digits(blen, num)
    cdef bytes frame = PyBytes_FromStringAndSize(NULL, _frame_len(slen, dlen, blen))
    _fill(PyBytes_AS_STRING(frame), subj, slen, num, dlen, body, blen)
    return frame


cdef inline void _fill(char* p, const char* subj, Py_ssize_t slen, const char* num,
                       Py_ssize_t dlen, const char* body, Py_ssize_t blen):
    _fill_pub(p, subj, slen, False, NULL, 0, NULL, 0, num, dlen, body, blen)


cdef inline void _fill_pub(char* p, const char* subj, Py_ssize_t slen, bint with_reply,
                           const char* reply, Py_ssize_t rlen, const char* token,
                           Py_ssize_t tlen, const char* num, Py_ssize_t dlen,
                           const char* body, Py_ssize_t blen):
    # b"PUB subj [reply+token ]len\r\nbody\r\n" (the reply part if with_reply).
    memcpy(p, b"PUB ", 4)
    p += 4
    memcpy(p, subj, slen)
    p += slen
    p[0] = 32
    p += 1
    if with_reply:
        memcpy(p, reply, rlen)
        p += rlen
        memcpy(p, token, tlen)
        p += tlen
        p[0] = 32
        p += 1
    memcpy(p, num, dlen)
    p += dlen
    p[0] = 13
    p[1] = 10
    p += 2
    memcpy(p, body, blen)
    p += blen
    p[0] = 13
    p[1] = 10


cdef class WriteQueue:
    """Frames waiting for the socket; see jsclient/protocol/writer.py."""

    cdef list _chunks
    cdef public long long limit
    cdef public long long nbytes
    cdef public bint open
    cdef public bint big
    cdef public bint kicked
    cdef public long long out_msgs
    cdef public long long out_bytes
    cdef public long long max_payload
    cdef public long long write_at
    cdef public dict subjects
    cdef public list out
    cdef public Py_ssize_t out_sent
    cdef public Py_ssize_t iov_max
    # Positions (see the specification's module docstring).
    cdef public long long appended
    cdef public long long written
    cdef long long _from
    cdef Py_ssize_t _lead
    cdef list _holes
    cdef long long _barrier
    cdef long long _out_from
    cdef long long _out_end
    cdef Py_ssize_t _out_lead
    cdef Py_ssize_t _out_len
    cdef list _out_holes
    cdef long long _write_mark
    cdef bint _open  # the last chunk takes more small frames (see _push)
    # The last chunk as a bytearray with room to spare: the bytes of it in use
    # (-1: no such chunk, every chunk's size is its length). _seal() trims it
    # before anything reads the chunks' sizes or appends another chunk; the
    # next such chunk starts with room for what the last one held (_tail_cap),
    # so a batch of small frames grows its buffer once, if at all.
    cdef Py_ssize_t _tail_fill
    cdef Py_ssize_t _tail_cap

    def __init__(self, limit):
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise ValueError(f"WriteQueue: limit must be a positive int, got {limit!r}")
        self._chunks = []
        self.limit = limit
        self.nbytes = 0
        self.open = False
        self.big = False
        self.kicked = False
        self.out_msgs = 0
        self.out_bytes = 0
        self.max_payload = 1024 * 1024
        self.write_at = 256 * 1024
        self.subjects = {}
        self.out = []
        self.out_sent = 0
        self.iov_max = 1024
        self.appended = 0
        self.written = 0
        self._from = 0
        self._lead = 0
        self._holes = []
        self._barrier = -1
        self._out_from = 0
        self._out_end = 0
        self._out_lead = 0
        self._out_len = 0
        self._out_holes = []
        self._write_mark = 0
        self._open = False
        self._tail_fill = -1
        self._tail_cap = 0

    def __len__(self):
        return PyList_GET_SIZE(self._chunks)

    def pub(self, bytes subject not None, payload, long long max_payload):
        return self._pub(subject, payload, max_payload)

    def pub_str(self, subject, payload):
        cdef object subj
        cdef dict subjects = self.subjects
        if type(subject) is not str or subjects is None:
            return C_UNKNOWN_SUBJECT
        subj = jsc_dict_get(subjects, subject)
        if type(subj) is not bytes:
            return C_UNKNOWN_SUBJECT
        return self._pub(<bytes>subj, payload, self.max_payload)

    cdef int _pub(self, bytes subject, payload, long long max_payload) except -1:
        cdef Py_ssize_t plen
        cdef bytes frame
        cdef bytes data
        if type(payload) is bytes:
            data = <bytes>payload
        else:
            data = memoryview(payload).tobytes()  # any bytes-like object, by its bytes
        plen = PyBytes_GET_SIZE(data)
        if plen > max_payload:
            return C_TOO_BIG
        return self._pub_frame(
            PyBytes_AS_STRING(subject), PyBytes_GET_SIZE(subject), PyBytes_AS_STRING(data), plen
        )

    cdef int _pub_frame(self, const char* subj, Py_ssize_t slen, const char* body,
                        Py_ssize_t blen) except -1:
        # A small frame after small frames is written straight into the open
        # chunk (no bytes object of its own); else as _add would.
        cdef char num[24]
        cdef Py_ssize_t dlen = _digits(blen, num)
        cdef Py_ssize_t total = _frame_len(slen, dlen, blen)
        if total < C_GATHER_MIN:
            with cython.critical_section(self):
                if self._open:
                    if not self.open or (self.nbytes and self.nbytes + total > self.limit):
                        return C_FULL
                    _fill(self._tail_room(total), subj, slen, num, dlen, body, blen)
                    return self._counted(total, blen, 1)
        return self._add(_frame(subj, slen, body, blen), blen, 1)

    cdef char* _tail_room(self, Py_ssize_t n) except NULL:
        # In a critical section on self, with _open set: ``n`` more bytes of
        # the last chunk, made a bytearray with room; returns where they go.
        cdef Py_ssize_t i = PyList_GET_SIZE(self._chunks) - 1
        cdef object last = <object>PyList_GET_ITEM(self._chunks, i)
        cdef Py_ssize_t fill = self._tail_fill
        cdef Py_ssize_t cap
        cdef object room
        if fill < 0:
            fill = Py_SIZE(last)
            if type(last) is bytes:
                cap = max(self._tail_cap, 2 * (fill + n))
                room = PyByteArray_FromStringAndSize(NULL, cap)
                memcpy(PyByteArray_AS_STRING(room), PyBytes_AS_STRING(last), fill)
                self._chunks[i] = last = room
        if fill + n > PyByteArray_GET_SIZE(last):
            PyByteArray_Resize(last, 2 * (fill + n))
        self._tail_fill = fill + n
        return PyByteArray_AS_STRING(last) + fill

    cdef int _seal(self) except -1:
        # In a critical section on self: trim the last chunk to the bytes in use.
        cdef Py_ssize_t fill = self._tail_fill
        cdef object last
        if fill >= 0:
            last = <object>PyList_GET_ITEM(self._chunks, PyList_GET_SIZE(self._chunks) - 1)
            PyByteArray_Resize(last, fill)
            self._tail_fill = -1
            self._tail_cap = fill + fill // 4
        return 0

    def pub_reply(self, bytes subject not None, bytes reply not None, str token not None,
                  bytes payload not None, tracked):
        cdef Py_ssize_t slen = PyBytes_GET_SIZE(subject)
        cdef Py_ssize_t rlen = PyBytes_GET_SIZE(reply)
        cdef Py_ssize_t plen = PyBytes_GET_SIZE(payload)
        cdef Py_ssize_t tlen, dlen, n
        cdef const char* t
        cdef bytes encoded
        cdef bytes frame = None
        cdef char num[24]
        cdef char* p
        cdef long long end
        cdef int rc
        if plen > self.max_payload:
            return C_TOO_BIG
        if PyUnicode_IS_ASCII(token):
            t = <const char*>PyUnicode_DATA(token)
            tlen = PyUnicode_GET_LENGTH(token)
        else:
            encoded = token.encode("utf-8", "surrogateescape")
            t = PyBytes_AS_STRING(encoded)
            tlen = PyBytes_GET_SIZE(encoded)
        dlen = _digits(plen, num)
        n = 4 + slen + 1 + rlen + tlen + 1 + dlen + 2 + plen + 2
        with cython.critical_section(self):
            if not self.open or (self.nbytes and self.nbytes + n > self.limit):
                return C_FULL
            if n < C_GATHER_MIN and self._open:  # as _push places a frame
                p = self._tail_room(n)
            else:
                frame = PyBytes_FromStringAndSize(NULL, n)
                p = PyBytes_AS_STRING(frame)
            _fill_pub(p, PyBytes_AS_STRING(subject), slen, True, PyBytes_AS_STRING(reply), rlen,
                      t, tlen, num, dlen, PyBytes_AS_STRING(payload), plen)
            if frame is not None:
                self._append_chunk(frame)
            rc = self._counted(n, plen, 1)
            end = self.appended
        tracked._wlen = n
        tracked._wend = end
        return rc

    def ack(self, str subject not None, bytes body not None):
        cdef Py_ssize_t slen
        cdef const char* s
        cdef bytes encoded
        if PyUnicode_IS_ASCII(subject):
            s = <const char*>PyUnicode_DATA(subject)
            slen = PyUnicode_GET_LENGTH(subject)
            return self._pub_frame(s, slen, PyBytes_AS_STRING(body), PyBytes_GET_SIZE(body))
        encoded = subject.encode("utf-8", "surrogateescape")
        return self._pub_frame(
            PyBytes_AS_STRING(encoded), PyBytes_GET_SIZE(encoded),
            PyBytes_AS_STRING(body), PyBytes_GET_SIZE(body),
        )

    def push(self, bytes data not None, long long payload_len=0, long long msgs=0):
        return self._add(data, payload_len, msgs)

    def push_at(self, bytes data not None, long long payload_len=0, long long msgs=0):
        cdef Py_ssize_t n = PyBytes_GET_SIZE(data)
        cdef int rc
        with cython.critical_section(self):
            if not self.open or (self.nbytes and self.nbytes + n > self.limit):
                return self.appended << 3 | C_FULL
            rc = self._push(data, payload_len, msgs)
            return self.appended << 3 | rc

    def push_always_at(self, bytes data not None, long long payload_len=0, long long msgs=0):
        cdef int rc
        with cython.critical_section(self):
            rc = self._push(data, payload_len, msgs)
            return self.appended << 3 | rc

    cdef int _add(self, bytes data, long long payload_len, long long msgs) except -1:
        cdef Py_ssize_t n = PyBytes_GET_SIZE(data)
        with cython.critical_section(self):
            if not self.open or (self.nbytes and self.nbytes + n > self.limit):
                return C_FULL
            return self._push(data, payload_len, msgs)

    cdef int _push(self, bytes data, long long payload_len, long long msgs) except -1:
        # In a critical section on self (coalescing: see the specification).
        cdef Py_ssize_t n = PyBytes_GET_SIZE(data)
        if n < C_GATHER_MIN and self._open:
            memcpy(self._tail_room(n), PyBytes_AS_STRING(data), n)
        else:
            self._append_chunk(data)
        return self._counted(n, payload_len, msgs)

    cdef int _append_chunk(self, bytes data) except -1:
        # In a critical section on self: ``data`` as a chunk of its own, after
        # the last one is trimmed; a small one takes the small frames after it.
        self._seal()
        PyList_Append(self._chunks, data)
        self._open = PyBytes_GET_SIZE(data) < C_GATHER_MIN
        return 0

    cdef int _counted(self, Py_ssize_t n, long long payload_len, long long msgs) except -1:
        # In a critical section on self: ``n`` bytes were appended.
        self.nbytes += n
        self.appended += n
        if msgs:
            self.out_msgs += msgs
            self.out_bytes += payload_len
            if payload_len >= C_GATHER_MIN:
                self.big = True
        if self.nbytes >= self.write_at + self._write_mark:
            self._write_mark = self.nbytes
            return C_WRITE
        if self.kicked:
            return C_QUEUED
        self.kicked = True
        return C_KICK

    def push_always(self, bytes data not None, long long payload_len=0, long long msgs=0):
        with cython.critical_section(self):
            return self._push(data, payload_len, msgs)

    def push_front(self, bytes data not None):
        with cython.critical_section(self):
            self._chunks.insert(0, data)
            self.nbytes += PyBytes_GET_SIZE(data)
            self._lead += PyBytes_GET_SIZE(data)

    def take(self):
        cdef list chunks
        cdef list keep = []
        cdef Py_ssize_t size = 0
        cdef long long end
        cdef object c
        with cython.critical_section(self):
            self._seal()
            chunks = self._chunks
            if PyList_GET_SIZE(chunks) == 0:
                return [], 0
            end = self.appended
            if self._barrier >= 0:
                end = self._barrier
                chunks, keep = self._split_at(chunks, end)
                if PyList_GET_SIZE(chunks) == 0:
                    return [], 0
            else:
                self.big = False
            self._chunks = keep
            self._open = False
            for c in chunks:
                size += Py_SIZE(c)
            self.nbytes -= size
            self._out_from = self._from
            self._out_end = end
            self._out_lead = self._lead
            self._out_len = size
            if self._holes:
                self._out_holes = [h for h in self._holes if h[0] < end]
                self._holes = [h for h in self._holes if h[0] >= end]
            elif self._out_holes:
                self._out_holes = []
            self._from = end
            self._lead = 0
            self._write_mark = 0
        return chunks, size

    cdef tuple _split_at(self, list chunks, long long pos):
        # In a critical section on self (see the specification).
        cdef long long after = self.appended - pos
        cdef Py_ssize_t i = PyList_GET_SIZE(chunks)
        for h in self._holes:
            if h[0] >= pos:
                after -= h[1] - h[0]
        while after > 0 and i > 0:
            i -= 1
            after -= Py_SIZE(chunks[i])
        return chunks[:i], chunks[i:]

    def pause(self):
        with cython.critical_section(self):
            self._seal()
            self._open = False  # the barrier falls between chunks
            self._barrier = self.appended
            return self._barrier

    def written_now(self):
        with cython.critical_section(self):
            return self._written_now()

    cdef long long _written_now(self) except -1:
        cdef list out = self.out
        cdef Py_ssize_t rest = 0
        if not out:
            return self._from
        for b in out:
            rest += len(b)
        return self._position(self._out_len - rest + frame_start(out[0], self.out_sent))

    cdef long long _position(self, long long cut) except -1:
        cdef long long c = cut - self._out_lead
        cdef long long pos = self._out_from
        cdef long long s, e
        if c <= 0:
            return pos
        for h in self._out_holes:
            s = h[0]
            e = h[1]
            if c <= s - pos:
                return pos + c
            c -= s - pos
            pos = e
        return pos + c

    def withdraw(self, list ranges not None):
        cdef list ok = [False] * len(ranges)
        cdef list merged = []
        cdef list cuts = []
        cdef list holes
        cdef Py_ssize_t hi = 0
        cdef long long start, gone = 0, last, s, e, ps
        cdef long long removed = 0
        with cython.critical_section(self):
            start = self._from
            holes = self._holes
            last = start
            for i in sorted(range(len(ranges)), key=lambda k: ranges[k][0]):
                r = ranges[i]
                if not (type(r[0]) is int and type(r[1]) is int):
                    raise TypeError("withdraw: ranges are (start, end) pairs of ints")
                s = r[0]
                e = r[1]
                while hi < len(holes) and holes[hi][1] <= s:
                    h = holes[hi]
                    merged.append(h)
                    gone += h[1] - h[0]
                    last = h[1]
                    hi += 1
                if s < last or e <= s or e > self.appended:
                    continue
                if hi < len(holes) and holes[hi][0] < e:
                    continue
                ps = s - start - gone
                cuts.append((ps, ps + e - s))
                merged.append((s, e))
                removed += e - s
                last = e
                ok[i] = True
            if not cuts:
                return ok
            merged.extend(holes[hi:])
            self._holes = merged
            self._seal()
            self._chunks = _cut(self._chunks, cuts, self._lead)
            self._open = False
            self.nbytes -= removed
        return ok

    def rekick(self, bint clear):
        with cython.critical_section(self):
            if clear:
                self.kicked = False
            if (PyList_GET_SIZE(self._chunks) or self.out) and not self.kicked:
                self.kicked = True
                return True
            return False

    def write(self, sock, int flags, bint gather):
        cdef list chunks
        cdef list out
        cdef list bufs
        cdef Py_ssize_t sent
        cdef Py_ssize_t left
        cdef bint big
        if not self.out:
            big = self.big
            chunks = self.take()[0]
            if not chunks:
                return 0
            if PyList_GET_SIZE(chunks) == 1:
                self.out = chunks
            elif big and gather:
                self.out = _gather(chunks)
            else:
                self.out = [b"".join(chunks)]
            self.out_sent = 0
        out = self.out
        while out:
            try:
                if PyList_GET_SIZE(out) > 1:
                    bufs = out[:self.iov_max]
                    if self.out_sent:
                        bufs[0] = memoryview(out[0])[self.out_sent:]
                    sent = sock.sendmsg(bufs, (), flags)
                elif self.out_sent:
                    sent = sock.send(memoryview(out[0])[self.out_sent:], flags)
                else:
                    sent = sock.send(out[0], flags)
            except BlockingIOError:
                return 1
            while sent:
                left = len(out[0]) - self.out_sent
                if sent < left:
                    self.out_sent += sent
                    break
                sent -= left
                del out[0]
                self.out_sent = 0
        return 0

    def try_write(self, token, sock, int flags, bint gather):
        if not token.acquire(False):
            return 2
        try:
            return self.write(sock, flags, gather)
        finally:
            token.release()

    def recover(self):
        cdef list out
        cdef list back
        cdef long long w, cut
        cdef Py_ssize_t start, rest = 0, nback = 0
        with cython.critical_section(self):
            out = self.out
            if out:
                w = self._written_now()
                first = out[0]
                start = frame_start(first, self.out_sent)
                for b in out:
                    rest += len(b)
                cut = self._out_len - rest + start
                back = [bytes(b) for b in [first[start:]] + out[1:] if len(b)]
                for b in back:
                    nback += PyBytes_GET_SIZE(b)
                self._chunks[0:0] = back
                self.nbytes += nback
                if self._out_lead > cut:
                    self._lead += self._out_lead - cut
                self._holes = [h for h in self._out_holes if h[0] >= w] + self._holes
                self._from = w
            else:
                w = self._from
            if w > self.written:
                self.written = w
            self._barrier = -1
            self.out = []
            self.out_sent = 0
            self._out_holes = []


cdef class Counter:
    """``start``, ``start + 1``, ... to any number of threads; see jsclient/protocol/writer.py."""

    cdef long long _n

    def __init__(self, long long start=1):
        self._n = start - 1

    def __iter__(self):
        return self

    def __next__(self):
        return jsc_incr(&self._n)


cdef list _gather(list chunks):
    cdef list bufs = []
    cdef list small = []
    for c in chunks:
        if Py_SIZE(c) >= C_GATHER_MIN:
            if small:
                bufs.append(small[0] if len(small) == 1 else b"".join(small))
                small = []
            bufs.append(c)
        else:
            small.append(c)
    if small:
        bufs.append(small[0] if len(small) == 1 else b"".join(small))
    return bufs


cdef list _cut(list chunks, list cuts, Py_ssize_t lead):
    """``chunks`` without the byte ranges ``cuts`` (see the specification)."""
    cdef list kept = []
    cdef long long off = -lead, end, at, ps, pe
    cdef Py_ssize_t ci = 0, ncuts = len(cuts), n
    for chunk in chunks:
        n = Py_SIZE(chunk)
        end = off + n
        if ci >= ncuts or cuts[ci][0] >= end:
            kept.append(chunk)
            off = end
            continue
        at = off
        while ci < ncuts and cuts[ci][0] < end:
            ps = cuts[ci][0]
            pe = cuts[ci][1]
            if ps > at:
                kept.append(chunk[at - off:ps - off])
            if pe > end:
                at = end
                break
            at = pe
            ci += 1
        if at < end:
            kept.append(chunk[at - off:])
        off = end
    return kept
