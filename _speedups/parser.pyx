# cython: language_level=3, freethreading_compatible=True, boundscheck=False, wraparound=False, cdivision=True
"""Cython twin of :mod:`jsclient.protocol.parser` (the specification).

Same names, signatures, frames, limits and errors; see the pure module for the
rules. What differs is only how: the control line is found with ``memchr`` and
tokenized by pointer over the buffer, numbers are read in place (no ``bytes``
object per token), and the frame tuple is built directly.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.string cimport memchr, memcmp, memcpy

cdef extern from *:
    """
    #include <stdint.h>
    #include <string.h>
    /* First index in [i, end) of a byte <= 0x20, looking 8 bytes at a time; the
       caller re-checks byte by byte from there (only 6 of those bytes are
       whitespace, so this only skips ahead: it never decides a token end). */
    static inline Py_ssize_t jsc_skip_to_low(const unsigned char *p, Py_ssize_t i,
                                              Py_ssize_t end) {
        while (i + 8 <= end) {
            uint64_t x;
            memcpy(&x, p + i, 8);
            if ((x - 0x2121212121212121ULL) & ~x & 0x8080808080808080ULL)
                break;
            i += 8;
        }
        return i;
    }
    """
    Py_ssize_t jsc_skip_to_low(const unsigned char* p, Py_ssize_t i, Py_ssize_t end) nogil

from jsclient.errors import ProtocolError

OP_MSG = 0
OP_PING = 1
OP_PONG = 2
OP_OK = 3
OP_ERR = 4
OP_INFO = 5

#: Default control-line limit, as the server's own.
MAX_CONTROL_LINE = 4096
#: INFO lines carry cluster URLs and can be long.
MAX_INFO_LINE = 1024 * 1024
#: Default payload limit before the server's INFO says otherwise.
MAX_PAYLOAD = 64 * 1024 * 1024

cdef enum:
    _MAX_DIGITS = 18
    _MAX_TOKENS = 8
    _SUBJ_CACHE = 64

cdef Py_ssize_t _MAX_INFO = 1024 * 1024

_PING = (OP_PING,)
_PONG = (OP_PONG,)
_OK = (OP_OK,)

cdef str _EMPTY = ""


cdef inline bint _ws(unsigned char c) noexcept nogil:
    # bytes.split() whitespace: space, \t, \n, \v, \f, \r.
    return c == 32 or (c >= 9 and c <= 13)


cdef inline unsigned char _up(unsigned char c) noexcept nogil:
    # bytes.upper(): ASCII letters only.
    if c >= 97 and c <= 122:
        return c - 32
    return c


cdef inline bint _is(const unsigned char* s, const char* word, Py_ssize_t n) noexcept nogil:
    # ``s[:n].upper() == word`` for an upper-case ``word`` of length ``n``.
    cdef Py_ssize_t i
    for i in range(n):
        if _up(s[i]) != <unsigned char>word[i]:
            return False
    return True


cdef inline long long _digits(const unsigned char* s, Py_ssize_t n) noexcept nogil:
    # ASCII digits only, at most 18 of them (so no overflow); -1 if not.
    cdef long long v = 0
    cdef Py_ssize_t i
    cdef unsigned char c
    if n == 0 or n > _MAX_DIGITS:
        return -1
    for i in range(n):
        c = s[i]
        if c < 48 or c > 57:
            return -1
        v = v * 10 + (c - 48)
    return v


cdef inline str _text(const unsigned char* s, Py_ssize_t n):
    if n == 0:
        return _EMPTY
    return PyUnicode_DecodeUTF8(<char*>s, n, "surrogateescape")


cdef int _bad_number(bytes data, Py_ssize_t start, Py_ssize_t length, str what) except -1:
    tok = data[start:start + length]
    raise ProtocolError(f"nats: protocol error: invalid {what} {tok[:32]!r}")


cdef class Parser:
    """Turns a byte stream into NATS frames; keeps partial frames between feeds."""

    cdef list _chunks
    cdef Py_ssize_t _have
    cdef Py_ssize_t _need
    cdef public Py_ssize_t max_control_line
    cdef public long long max_payload
    # The last subject decoded, reused while subjects repeat (they usually do).
    cdef str _subj
    cdef Py_ssize_t _subj_len
    cdef unsigned char _subj_raw[_SUBJ_CACHE]

    def __cinit__(self, *args, **kwargs):
        self._subj = None
        self._subj_len = -1
        self._chunks = []
        self._have = 0
        self._need = 0

    def __init__(
        self, Py_ssize_t max_control_line=MAX_CONTROL_LINE, long long max_payload=MAX_PAYLOAD
    ):
        self.max_control_line = max_control_line
        self.max_payload = max_payload
        self._chunks = []
        self._have = 0
        self._need = 0

    @property
    def buffered(self):
        """Bytes held back because they do not finish a frame yet."""
        return self._have

    def reset(self):
        """Forget any partial frame (after a reconnect or an error)."""
        self._chunks = []
        self._have = 0
        self._need = 0

    def feed(self, bytes data not None):
        """Parse ``data`` (appended to what is buffered) into complete frames."""
        cdef list events
        cdef Py_ssize_t pos
        if self._chunks:
            self._chunks.append(data)
            self._have += PyBytes_GET_SIZE(data)
            if self._have < self._need:
                return []
            data = b"".join(self._chunks)
            self._chunks = []
            self._have = 0
            self._need = 0
        events = []
        try:
            pos = self._parse(data, events)
        except ProtocolError as exc:
            self.reset()
            exc.events = events
            raise
        if pos < PyBytes_GET_SIZE(data):
            rest = data[pos:]
            self._chunks = [rest]
            self._have = PyBytes_GET_SIZE(rest)
        return events

    cdef Py_ssize_t _parse(self, bytes data, list events) except -1:
        cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(data)
        cdef Py_ssize_t n = PyBytes_GET_SIZE(data)
        cdef Py_ssize_t pos = 0
        cdef Py_ssize_t end, i, limit, ntok, start, stop, nargs, hdr_i, rs
        cdef Py_ssize_t ts[_MAX_TOKENS]
        cdef Py_ssize_t tl[_MAX_TOKENS]
        cdef const unsigned char* q
        cdef long long sid, total, hdr
        cdef bint hmsg
        cdef Py_ssize_t rep_s, rep_l
        cdef object header
        cdef str subject
        while pos < n:
            # data.find(b"\r\n", pos)
            end = -1
            i = pos
            while i < n:
                q = <const unsigned char*>memchr(p + i, 13, <size_t>(n - i))
                if q == NULL:
                    break
                i = q - p
                if i + 1 < n and p[i + 1] == 10:
                    end = i
                    break
                i += 1
            if end < 0 or end - pos > self.max_control_line:
                limit = self.max_control_line
                # A read may end inside "INFO": judge it by the INFO limit until
                # the name is complete (the bytes split anywhere rule).
                if n - pos >= 4:
                    if _is(p + pos, b"INFO", 4):
                        limit = _MAX_INFO
                elif end < 0 and _is(p + pos, b"INFO", n - pos):
                    limit = _MAX_INFO
                if end < 0:
                    # A trailing CR may be the first half of the line's CRLF.
                    i = n - pos
                    if p[n - 1] == 13:
                        i -= 1
                    if i > limit:
                        raise ProtocolError("nats: protocol error: control line too long")
                    self._need = n - pos + 1
                    return pos
                if end - pos > limit:
                    raise ProtocolError("nats: protocol error: control line too long")
            # First token: the operation.
            i = pos
            while i < end and _ws(p[i]):
                i += 1
            if i >= end:
                raise ProtocolError("nats: protocol error: empty control line")
            ts[0] = i
            while i < end and not _ws(p[i]):
                i += 1
            tl[0] = i - ts[0]
            q = p + ts[0]
            hmsg = False
            if (tl[0] == 3 and _is(q, b"MSG", 3)) or (tl[0] == 4 and _is(q, b"HMSG", 4)):
                hmsg = tl[0] == 4
                ntok = 1
                while True:
                    while i < end and _ws(p[i]):
                        i += 1
                    if i >= end:
                        break
                    start = i
                    i = jsc_skip_to_low(p, i, end)
                    while i < end and not _ws(p[i]):
                        i += 1
                    if ntok < _MAX_TOKENS:
                        ts[ntok] = start
                        tl[ntok] = i - start
                    ntok += 1
                nargs = ntok - 1 - (1 if hmsg else 0)
                if nargs == 3:
                    rep_s = 0
                    rep_l = 0
                elif nargs == 4:
                    rep_s = ts[3]
                    rep_l = tl[3]
                else:
                    line = data[pos:end]
                    raise ProtocolError(
                        f"nats: protocol error: malformed {'HMSG' if hmsg else 'MSG'} line "
                        f"{line[:80]!r}"
                    )
                sid = _digits(p + ts[2], tl[2])
                if sid < 0:
                    _bad_number(data, ts[2], tl[2], "sid")
                total = _digits(p + ts[ntok - 1], tl[ntok - 1])
                if total < 0:
                    _bad_number(data, ts[ntok - 1], tl[ntok - 1], "size")
                hdr = 0
                if hmsg:
                    hdr = _digits(p + ts[ntok - 2], tl[ntok - 2])
                    if hdr < 0:
                        _bad_number(data, ts[ntok - 2], tl[ntok - 2], "header size")
                if hdr > total:
                    raise ProtocolError("nats: protocol error: header size exceeds total size")
                if total > self.max_payload:
                    raise ProtocolError(
                        f"nats: protocol error: payload of {total} bytes exceeds "
                        f"max_payload {self.max_payload}"
                    )
                start = end + 2
                if total > n:
                    # Cannot be complete; also keeps start + total from overflowing.
                    self._need = total + (start - pos) + 2
                    return pos
                stop = start + <Py_ssize_t>total
                if stop + 2 > n:
                    self._need = stop + 2 - pos
                    return pos
                if p[stop] != 13 or p[stop + 1] != 10:
                    raise ProtocolError("nats: protocol error: payload not followed by CRLF")
                q = p + ts[1]
                if (
                    tl[1] == self._subj_len
                    and memcmp(q, self._subj_raw, <size_t>tl[1]) == 0
                ):
                    subject = self._subj
                else:
                    subject = _text(q, tl[1])
                    if tl[1] <= _SUBJ_CACHE:
                        memcpy(self._subj_raw, q, <size_t>tl[1])
                        self._subj_len = tl[1]
                        self._subj = subject
                if hmsg:
                    header = PyBytes_FromStringAndSize(<char*>p + start, <Py_ssize_t>hdr)
                else:
                    header = None
                events.append(
                    (
                        OP_MSG,
                        sid,
                        subject,
                        _text(p + rep_s, rep_l),
                        header,
                        PyBytes_FromStringAndSize(
                            <char*>p + start + hdr, <Py_ssize_t>(total - hdr)
                        ),
                        tl[1] + rep_l + total,
                    )
                )
                pos = stop + 2
                continue
            if tl[0] == 4 and _is(q, b"PING", 4):
                events.append(_PING)
            elif tl[0] == 4 and _is(q, b"PONG", 4):
                events.append(_PONG)
            elif tl[0] == 3 and _is(q, b"+OK", 3):
                events.append(_OK)
            elif tl[0] == 4 and _is(q, b"-ERR", 4):
                rs = i
                while rs < end and _ws(p[rs]):
                    rs += 1
                text = data[rs:end].strip().strip(b"'")
                events.append((OP_ERR, text.decode("utf-8", "replace")))
            elif tl[0] == 4 and _is(q, b"INFO", 4):
                rs = i
                while rs < end and _ws(p[rs]):
                    rs += 1
                events.append((OP_INFO, data[rs:end].decode("utf-8", "replace")))
            else:
                op = data[ts[0]:ts[0] + tl[0]].upper()
                raise ProtocolError(f"nats: protocol error: unknown operation {op[:16]!r}")
            pos = end + 2
        return pos
