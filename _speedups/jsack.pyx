# cython: language_level=3, freethreading_compatible=True, boundscheck=False, wraparound=False, cdivision=True
"""Cython twin of :mod:`jsclient.protocol.jsack` (the specification).

Same rules, results and errors; the subject is scanned in place for dots and
the numbers are read from the characters, so no token list and no ``int()``.
An argument that is not exactly a ``str`` goes to the pure function, so odd
inputs fail (or not) exactly as the specification does.

``pub_ack_fields`` reads the publish ack in place: one pass over the bytes for
the fixed text, the name and the digits, the number accumulated as it is read,
the name decoded by CPython's strict UTF-8 decoder (or, when it is the same
bytes as the last name, the last str reused). An argument that is not
exactly ``bytes`` goes to the pure function.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.long cimport PyLong_FromUnsignedLongLong
from cpython.unicode cimport (
    PyUnicode_DATA,
    PyUnicode_DecodeUTF8,
    PyUnicode_GET_LENGTH,
    PyUnicode_KIND,
    PyUnicode_READ,
)
from libc.string cimport memcmp, memcpy

from jsclient.errors import InvalidJSAckError
from jsclient.protocol import jsack as _spec

#: Largest value a numeric token may hold (the server's uint64).
MAX_UINT64 = 18446744073709551615

JSAck = tuple[str, str, int, int, int, int, int, str | None]

cdef enum:
    _MAX_DOTS = 11
    _OK = 0
    _BAD = 1
    _OVERFLOW = 2



cdef inline int _u64(int kind, void* d, Py_ssize_t s, Py_ssize_t e,
                     unsigned long long* out) noexcept:
    # ASCII digits only (non-empty); leading zeros allowed; overflow beyond uint64.
    cdef unsigned long long v = 0
    cdef unsigned int c
    cdef unsigned int digit
    cdef bint over = False
    cdef Py_ssize_t i
    cdef const unsigned char* b = <const unsigned char*>d
    if s >= e:
        return _BAD
    for i in range(s, e):
        if kind == 1:  # Latin-1 / ASCII: read the byte directly
            c = b[i]
        else:
            c = PyUnicode_READ(kind, d, i)
        if c < 48 or c > 57:
            return _BAD
        digit = c - 48
        if not over:
            # v * 10 + digit > 18446744073709551615 without a division
            if v > 1844674407370955161ULL or (v == 1844674407370955161ULL and digit > 5):
                over = True
            else:
                v = v * 10 + digit
    out[0] = v
    return _OVERFLOW if over else _OK


cdef object _number(str reply, int kind, void* d, Py_ssize_t s, Py_ssize_t e, str what):
    cdef unsigned long long v = 0
    cdef int r = _u64(kind, d, s, e, &v)
    if r == _OK:
        return PyLong_FromUnsignedLongLong(v)
    tok = reply[s:e]
    if r == _OVERFLOW:
        raise InvalidJSAckError(
            f"nats: {what} {tok[:32]!r} overflows uint64 in ack subject {reply[:120]!r}"
        )
    raise InvalidJSAckError(f"nats: invalid {what} {tok[:32]!r} in ack subject {reply[:120]!r}")


cdef inline object _token(str r, int kind, void* d, Py_ssize_t s, Py_ssize_t e, object hint):
    # r[s:e], or hint itself when it holds the same characters (no new str)
    cdef str h
    cdef Py_ssize_t n = e - s
    if type(hint) is str:
        h = <str>hint
        if (
            PyUnicode_GET_LENGTH(h) == n
            and PyUnicode_KIND(h) == kind
            and memcmp(PyUnicode_DATA(h), <char*>d + s * kind, <size_t>(n * kind)) == 0
        ):
            return h
    return r[s:e]


def parse_jsack(reply, stream_hint=None, consumer_hint=None):
    """Parse a ``$JS.ACK`` reply subject (v1 or v2) into its delivery metadata.

    ``stream_hint``/``consumer_hint``: the names expected, returned in place of
    equal tokens."""
    if type(reply) is not str:
        return _spec.parse_jsack(reply, stream_hint, consumer_hint)
    cdef str r = <str>reply
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(r)
    cdef int kind = PyUnicode_KIND(r)
    cdef void* d = PyUnicode_DATA(r)
    cdef Py_ssize_t dots[_MAX_DOTS]
    cdef Py_ssize_t ndots = 0
    cdef Py_ssize_t i = 0
    cdef const unsigned char* b
    cdef Py_ssize_t ntoks, base, s0, e0, s1, e1
    # Find up to 11 dots: enough to delimit 11 tokens and tell 9, 10 and 11+ apart.
    if kind == 1:
        b = <const unsigned char*>d
        while i < n:
            if b[i] == 46:
                dots[ndots] = i
                ndots += 1
                if ndots == _MAX_DOTS:
                    break
            i += 1
    else:
        while i < n:
            if PyUnicode_READ(kind, d, i) == 46:
                dots[ndots] = i
                ndots += 1
                if ndots == _MAX_DOTS:
                    break
            i += 1
    ntoks = ndots + 1  # exact when ndots < 11; "12 or more" otherwise
    if (
        ntoks < 2
        or dots[0] != 3
        or PyUnicode_READ(kind, d, 0) != 36  # $
        or PyUnicode_READ(kind, d, 1) != 74  # J
        or PyUnicode_READ(kind, d, 2) != 83  # S
        or (dots[1] if ntoks > 2 else n) != 7
        or PyUnicode_READ(kind, d, 4) != 65  # A
        or PyUnicode_READ(kind, d, 5) != 67  # C
        or PyUnicode_READ(kind, d, 6) != 75  # K
    ):
        raise InvalidJSAckError(f"nats: ack subject does not start with $JS.ACK: {reply[:120]!r}")
    if ntoks == 9:
        base = 2
        domain = None
    elif ntoks >= 11:
        base = 4
        s0 = dots[1] + 1
        e0 = dots[2]
        if e0 == s0 or (e0 == s0 + 1 and PyUnicode_READ(kind, d, s0) == 95):  # "" or "_"
            domain = None
        else:
            domain = r[s0:e0]
    else:
        raise InvalidJSAckError(
            f"nats: ack subject has {ntoks} tokens (expected 9 or at least 11): {reply[:120]!r}"
        )
    # token k spans dots[k-1]+1 .. dots[k] (or the end of the subject)
    s0 = dots[base - 1] + 1
    e0 = dots[base]
    s1 = e0 + 1
    e1 = dots[base + 1]
    if e0 == s0:
        raise InvalidJSAckError(f"nats: empty stream name in ack subject {reply[:120]!r}")
    if e1 == s1:
        raise InvalidJSAckError(f"nats: empty consumer name in ack subject {reply[:120]!r}")
    stream = _token(r, kind, d, s0, e0, stream_hint)
    consumer = _token(r, kind, d, s1, e1, consumer_hint)
    delivered = _number(r, kind, d, dots[base + 1] + 1, dots[base + 2], "num delivered")
    sseq = _number(r, kind, d, dots[base + 2] + 1, dots[base + 3], "stream sequence")
    cseq = _number(r, kind, d, dots[base + 3] + 1, dots[base + 4], "consumer sequence")
    ts = _number(r, kind, d, dots[base + 4] + 1, dots[base + 5], "timestamp")
    pending = _number(
        r, kind, d, dots[base + 5] + 1, dots[base + 6] if ndots > base + 6 else n, "num pending"
    )
    return (stream, consumer, delivered, sseq, cseq, ts, pending, domain)


# {"stream":"<name>","seq":<digits>}
cdef const char* _HEAD = b'{"stream":"'  # 11 bytes
cdef const char* _SEQ = b'","seq":'  # 8 bytes
cdef enum:
    _HEAD_LEN = 11
    _SEQ_LEN = 8
    _MAX_SEQ_DIGITS = 20
    _MIN_PUB_ACK = 22  # head, one name byte, seq key, one digit, "}"

# The last stream name decoded (when it is at most _NAME_CACHE bytes): a
# publisher's acks name one stream again and again, and reusing the str skips a
# decode and an allocation. Same bytes, same strict UTF-8 decoding, so the
# result is the same. The three are updated together, with no Python code in
# between, which only a GIL makes atomic: a free-threaded build does without
# the cache (JSC_NAME_CACHE 0).
cdef extern from *:
    """
    #ifdef Py_GIL_DISABLED
    #define JSC_NAME_CACHE 0
    #else
    #define JSC_NAME_CACHE 1
    #endif
    """
    const bint JSC_NAME_CACHE
cdef enum:
    _NAME_CACHE = 256
cdef char _last_name[_NAME_CACHE]
cdef Py_ssize_t _last_len = -1
cdef str _last_stream = None


def pub_ack_fields(data):
    """``(stream, seq)`` of a plain ``{"stream":"<name>","seq":<n>}`` publish ack, else ``None``."""
    global _last_len, _last_stream
    if type(data) is not bytes:
        return _spec.pub_ack_fields(data)
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(data)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(data)
    cdef Py_ssize_t i = _HEAD_LEN
    cdef Py_ssize_t name_end, name_len, last
    cdef str stream
    cdef unsigned char c
    cdef unsigned int digit
    cdef unsigned long long v
    if n < _MIN_PUB_ACK or p[n - 1] != 125 or memcmp(p, _HEAD, _HEAD_LEN) != 0:  # }
        return None
    last = n - 1  # the "}"
    # name: up to the first '"'; no backslash, no control byte
    while i < last:
        c = p[i]
        if c == 34:  # "
            break
        if c == 92 or c < 32:  # backslash or a control byte
            return None
        i += 1
    name_end = i
    if name_end == _HEAD_LEN or last - name_end < _SEQ_LEN + 1:
        return None
    if memcmp(p + name_end, _SEQ, _SEQ_LEN) != 0:
        return None
    i = name_end + _SEQ_LEN  # first digit; last > i
    if last - i > _MAX_SEQ_DIGITS or (p[i] == 48 and last - i > 1):  # leading zero
        return None
    v = 0
    while i < last:
        c = p[i]
        if c < 48 or c > 57:  # not an ASCII digit
            return None
        digit = c - 48
        # v * 10 + digit > 18446744073709551615 without a division
        if v > 1844674407370955161ULL or (v == 1844674407370955161ULL and digit > 5):
            return None
        v = v * 10 + digit
        i += 1
    name_len = name_end - _HEAD_LEN
    if (
        JSC_NAME_CACHE
        and name_len == _last_len
        and memcmp(_last_name, p + _HEAD_LEN, name_len) == 0
    ):
        return (_last_stream, PyLong_FromUnsignedLongLong(v))
    try:
        stream = PyUnicode_DecodeUTF8(<const char*>p + _HEAD_LEN, name_len, NULL)
    except UnicodeDecodeError:
        return None
    if JSC_NAME_CACHE and name_len <= _NAME_CACHE:
        memcpy(_last_name, p + _HEAD_LEN, name_len)
        _last_len = name_len
        _last_stream = stream
    return (stream, PyLong_FromUnsignedLongLong(v))
