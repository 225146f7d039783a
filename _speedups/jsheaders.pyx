# cython: language_level=3, freethreading_compatible=True, boundscheck=False, wraparound=False, cdivision=True
"""Cython twin of :mod:`jsclient.protocol.jsheaders` (the specification).

Same names, rules and results; the header block is scanned in place
(``memchr`` for CRLF and ``:``), names are compared without building a
lower-cased copy, and numbers are read from the bytes. An argument that is not
exactly ``bytes`` goes to the pure function, so odd inputs behave exactly as
the specification says.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.long cimport PyLong_FromUnsignedLongLong
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.string cimport memchr

from _scan cimport _crlf, _low, _ws

from jsclient.protocol import jsheaders as _spec

PENDING_MESSAGES_HDR = "Nats-Pending-Messages"
PENDING_BYTES_HDR = "Nats-Pending-Bytes"
LAST_CONSUMER_HDR = "Nats-Last-Consumer"
LAST_STREAM_HDR = "Nats-Last-Stream"
CONSUMER_STALLED_HDR = "Nats-Consumer-Stalled"
PIN_ID_HDR = "Nats-Pin-Id"

cdef str _EMPTY = ""


cdef object _u64_or_minus_one(const unsigned char* p, Py_ssize_t s, Py_ssize_t e):
    cdef unsigned long long v = 0
    cdef unsigned int digit
    cdef bint over = False
    cdef Py_ssize_t i
    if s >= e:
        return -1
    for i in range(s, e):
        if p[i] < 48 or p[i] > 57:
            return -1
        digit = p[i] - 48
        if not over:
            # v * 10 + digit > 18446744073709551615 without a division
            if v > 1844674407370955161ULL or (v == 1844674407370955161ULL and digit > 5):
                over = True
            else:
                v = v * 10 + digit
    if over:
        return -1
    return PyLong_FromUnsignedLongLong(v)


cdef inline str _text(const unsigned char* p, Py_ssize_t s, Py_ssize_t e):
    if s == e:
        return _EMPTY
    return PyUnicode_DecodeUTF8(<char*>p + s, e - s, "surrogateescape")


cdef inline bint _name_is(
    const unsigned char* p, Py_ssize_t s, Py_ssize_t e, const unsigned char* want, Py_ssize_t wn
) noexcept nogil:
    # ``p[s:e].lower() == want`` where ``want`` is already lower-cased.
    cdef Py_ssize_t i
    if e - s != wn:
        return False
    for i in range(wn):
        if _low(p[s + i]) != want[i]:
            return False
    return True


cdef inline Py_ssize_t _next_line(
    const unsigned char* p, Py_ssize_t n, Py_ssize_t ls, Py_ssize_t* le,
    Py_ssize_t* ks, Py_ssize_t* ke, Py_ssize_t* vs, Py_ssize_t* ve,
) noexcept nogil:
    # One header line starting at ``ls``: sets its end and, if it has a ':', the
    # stripped key and value spans; returns 1 if it has a ':', else 0.
    cdef Py_ssize_t end = _crlf(p, ls, n)
    cdef const unsigned char* colon
    cdef Py_ssize_t c, a, b
    if end < 0:
        end = n
    le[0] = end
    colon = <const unsigned char*>memchr(p + ls, 58, <size_t>(end - ls))
    if colon == NULL:
        return 0
    c = colon - p
    a = ls
    b = c
    while a < b and _ws(p[a]):
        a += 1
    while b > a and _ws(p[b - 1]):
        b -= 1
    ks[0] = a
    ke[0] = b
    a = c + 1
    b = end
    while a < b and _ws(p[a]):
        a += 1
    while b > a and _ws(p[b - 1]):
        b -= 1
    vs[0] = a
    ve[0] = b
    return 1


ctypedef int (*_slot_fn)(const unsigned char* p, Py_ssize_t s, Py_ssize_t e) noexcept nogil


cdef inline long _slots(
    const unsigned char* p, Py_ssize_t n, _slot_fn slot_of, Py_ssize_t* vs_, Py_ssize_t* ve_,
    bint stop_when_all,
) noexcept nogil:
    # The value spans of the first line of each of six names into vs_/ve_ (-1
    # when absent; ``slot_of`` maps a key span to its slot, or -1); returns how
    # many lines with a ':' had no slot. With ``stop_when_all`` the scan ends
    # once all six were found (the count is then not complete).
    cdef Py_ssize_t ls, le, ks, ke, vs, ve
    cdef int slot, k
    cdef int found = 0
    cdef long others = 0
    for k in range(6):
        vs_[k] = -1
        ve_[k] = -1
    ls = _crlf(p, 0, n)
    if ls < 0:
        return 0
    ls += 2
    while True:
        if _next_line(p, n, ls, &le, &ks, &ke, &vs, &ve):
            slot = slot_of(p, ks, ke)
            if slot < 0:
                others += 1
            elif vs_[slot] < 0:
                vs_[slot] = vs
                ve_[slot] = ve
                found += 1
                if stop_when_all and found == 6:
                    break
        if le >= n:
            break
        ls = le + 2
    return others


def header_value(header, name):
    """The first value of header ``name`` (ASCII case-insensitive), or ``None``."""
    want = name.encode("utf-8", "surrogateescape").lower()
    if type(header) is not bytes or type(want) is not bytes:
        return _spec.header_value(header, name)
    cdef bytes w = <bytes>want
    cdef const unsigned char* wp = <const unsigned char*>PyBytes_AS_STRING(w)
    cdef Py_ssize_t wn = PyBytes_GET_SIZE(w)
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(header)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(header)
    cdef Py_ssize_t ls, le, ks, ke, vs, ve
    ls = _crlf(p, 0, n)
    if ls < 0:
        return None
    ls += 2
    while True:
        if _next_line(p, n, ls, &le, &ks, &ke, &vs, &ve) and _name_is(p, ks, ke, wp, wn):
            return _text(p, vs, ve)
        if le >= n:
            return None
        ls = le + 2


# Lower-cased names, in the order of js_headers' result.
cdef const char* _JS0 = b"nats-pending-messages"
cdef const char* _JS1 = b"nats-pending-bytes"
cdef const char* _JS2 = b"nats-last-consumer"
cdef const char* _JS3 = b"nats-last-stream"
cdef const char* _JS4 = b"nats-consumer-stalled"
cdef const char* _JS5 = b"nats-pin-id"


cdef inline int _js_slot(const unsigned char* p, Py_ssize_t s, Py_ssize_t e) noexcept nogil:
    cdef Py_ssize_t n = e - s
    if n < 11 or not (
        _low(p[s]) == 110 and _low(p[s + 1]) == 97 and _low(p[s + 2]) == 116
        and _low(p[s + 3]) == 115 and p[s + 4] == 45
    ):  # "nats-"
        return -1
    if n == 21:
        if _name_is(p, s, e, <const unsigned char*>_JS0, 21):
            return 0
        if _name_is(p, s, e, <const unsigned char*>_JS4, 21):
            return 4
    elif n == 18:
        if _name_is(p, s, e, <const unsigned char*>_JS1, 18):
            return 1
        if _name_is(p, s, e, <const unsigned char*>_JS2, 18):
            return 2
    elif n == 16:
        if _name_is(p, s, e, <const unsigned char*>_JS3, 16):
            return 3
    elif n == 11:
        if _name_is(p, s, e, <const unsigned char*>_JS5, 11):
            return 5
    return -1


def js_headers(header):
    """``(pending_messages, pending_bytes, last_consumer, last_stream, consumer_stalled,
    pin_id)``; -1 / ``None`` for what is absent (or, for numbers, not a uint64)."""
    if type(header) is not bytes:
        return _spec.js_headers(header)
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(header)
    cdef Py_ssize_t vs_[6]
    cdef Py_ssize_t ve_[6]
    _slots(p, PyBytes_GET_SIZE(header), _js_slot, vs_, ve_, True)
    return (
        -1 if vs_[0] < 0 else _u64_or_minus_one(p, vs_[0], ve_[0]),
        -1 if vs_[1] < 0 else _u64_or_minus_one(p, vs_[1], ve_[1]),
        -1 if vs_[2] < 0 else _u64_or_minus_one(p, vs_[2], ve_[2]),
        -1 if vs_[3] < 0 else _u64_or_minus_one(p, vs_[3], ve_[3]),
        None if vs_[4] < 0 else _text(p, vs_[4], ve_[4]),
        None if vs_[5] < 0 else _text(p, vs_[5], ve_[5]),
    )


# Lower-cased names, in the order of direct_headers' slots (5: Nats-Stream, not returned).
cdef const char* _DG0 = b"nats-subject"
cdef const char* _DG1 = b"nats-sequence"
cdef const char* _DG2 = b"nats-time-stamp"
cdef const char* _DG3 = b"nats-num-pending"
cdef const char* _DG4 = b"nats-last-sequence"
cdef const char* _DG5 = b"nats-stream"
cdef int[13] _DAYS_BEFORE = [0, 0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334]
cdef int[13] _DAYS_IN = [0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
cdef long long[10] _SCALE = [
    1000000000, 100000000, 10000000, 1000000, 100000, 10000, 1000, 100, 10, 1
]


cdef inline int _dg_slot(const unsigned char* p, Py_ssize_t s, Py_ssize_t e) noexcept nogil:
    cdef Py_ssize_t n = e - s
    if n < 11 or not (
        _low(p[s]) == 110 and _low(p[s + 1]) == 97 and _low(p[s + 2]) == 116
        and _low(p[s + 3]) == 115 and p[s + 4] == 45
    ):  # "nats-"
        return -1
    if n == 12:
        if _name_is(p, s, e, <const unsigned char*>_DG0, 12):
            return 0
    elif n == 13:
        if _name_is(p, s, e, <const unsigned char*>_DG1, 13):
            return 1
    elif n == 15:
        if _name_is(p, s, e, <const unsigned char*>_DG2, 15):
            return 2
    elif n == 16:
        if _name_is(p, s, e, <const unsigned char*>_DG3, 16):
            return 3
    elif n == 18:
        if _name_is(p, s, e, <const unsigned char*>_DG4, 18):
            return 4
    elif n == 11:
        if _name_is(p, s, e, <const unsigned char*>_DG5, 11):
            return 5
    return -1


cdef inline int _num(const unsigned char* p, Py_ssize_t a, Py_ssize_t b) noexcept nogil:
    # The ASCII digits p[a:b] (at most 4 here) as an int, -1 if any is not one.
    cdef int v = 0
    cdef Py_ssize_t i
    for i in range(a, b):
        if p[i] < 48 or p[i] > 57:
            return -1
        v = v * 10 + (p[i] - 48)
    return v


cdef inline bint _leap(int y) noexcept nogil:
    return y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)


cdef object _stamp_ns(const unsigned char* p, Py_ssize_t s, Py_ssize_t e):
    cdef Py_ssize_t n = e - s
    cdef int y, mo, d, h, mi, sec, dim, fd
    cdef long long days, yy, secs, frac = 0
    cdef Py_ssize_t i
    if n < 20 or p[e - 1] != 90:  # "Z"
        return None
    p = p + s
    if p[4] != 45 or p[7] != 45 or p[10] != 84 or p[13] != 58 or p[16] != 58:
        return None
    y = _num(p, 0, 4)
    mo = _num(p, 5, 7)
    d = _num(p, 8, 10)
    h = _num(p, 11, 13)
    mi = _num(p, 14, 16)
    sec = _num(p, 17, 19)
    if y < 1 or mo < 1 or mo > 12 or d < 1 or h < 0 or h > 23 or mi < 0 or mi > 59:
        return None
    if sec < 0 or sec > 59:
        return None
    dim = 29 if mo == 2 and _leap(y) else _DAYS_IN[mo]
    if d > dim:
        return None
    if n > 20:
        fd = <int>(n - 21)
        if p[19] != 46 or fd < 1 or fd > 9:
            return None
        for i in range(20, n - 1):
            if p[i] < 48 or p[i] > 57:
                return None
            frac = frac * 10 + (p[i] - 48)
        frac *= _SCALE[fd]
    yy = y - 1
    days = yy * 365 + yy // 4 - yy // 100 + yy // 400 - 719162
    days += _DAYS_BEFORE[mo] + (1 if mo > 2 and _leap(y) else 0) + d - 1
    secs = ((days * 24 + h) * 60 + mi) * 60 + sec
    if -9000000000 < secs < 9000000000:
        return secs * 1000000000 + frac
    # Nanoseconds fit in 64 bits only from 1677 to 2262: beyond, Python ints.
    return <object>secs * 1000000000 + frac


def stamp_ns(raw):
    """``YYYY-MM-DDTHH:MM:SS[.F]Z`` as nanoseconds since the epoch (see the spec)."""
    if type(raw) is not bytes:
        return _spec.stamp_ns(raw)
    return _stamp_ns(<const unsigned char*>PyBytes_AS_STRING(raw), 0, PyBytes_GET_SIZE(raw))


def direct_headers(header):
    """``(subject, sequence, time_ns, num_pending, last_sequence, others)`` of a
    direct-get answer (see the spec)."""
    if type(header) is not bytes:
        return _spec.direct_headers(header)
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(header)
    cdef Py_ssize_t vs_[6]
    cdef Py_ssize_t ve_[6]
    cdef long others = _slots(p, PyBytes_GET_SIZE(header), _dg_slot, vs_, ve_, False)
    return (
        None if vs_[0] < 0 else _text(p, vs_[0], ve_[0]),
        -1 if vs_[1] < 0 else _u64_or_minus_one(p, vs_[1], ve_[1]),
        None if vs_[2] < 0 else _stamp_ns(p, vs_[2], ve_[2]),
        -1 if vs_[3] < 0 else _u64_or_minus_one(p, vs_[3], ve_[3]),
        -1 if vs_[4] < 0 else _u64_or_minus_one(p, vs_[4], ve_[4]),
        others,
    )
