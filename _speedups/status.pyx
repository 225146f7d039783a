# cython: language_level=3, freethreading_compatible=True, boundscheck=False, wraparound=False, cdivision=True
"""Cython twin of :mod:`jsclient.protocol.status` (the specification).

Same names, rules, results and errors; the status line is read in place
(``memchr`` for its CRLF) and descriptions are compared without building a
lower-cased copy. An argument that is not exactly ``bytes`` (or ``int``/``str``
for :func:`classify`) goes to the pure function, so odd inputs behave exactly
as the specification says.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.unicode cimport (
    PyUnicode_DATA,
    PyUnicode_DecodeUTF8,
    PyUnicode_GET_LENGTH,
    PyUnicode_KIND,
    PyUnicode_READ,
)
from libc.string cimport memcmp

from _scan cimport _blank, _crlf, _ws

from jsclient.errors import BadHeaderError
from jsclient.protocol import status as _spec

USER = 0
HEARTBEAT = 1
FLOW_CONTROL = 2
NO_MESSAGES = 3
REQUEST_TIMEOUT = 4
PULL_ENDED = 5
WARNING = 6
RESET = 7
TERMINAL = 8
NO_RESPONDERS = 9
UNKNOWN = 10

#: Kind -> name, for logs and error messages.
KIND_NAMES = (
    "USER",
    "HEARTBEAT",
    "FLOW_CONTROL",
    "NO_MESSAGES",
    "REQUEST_TIMEOUT",
    "PULL_ENDED",
    "WARNING",
    "RESET",
    "TERMINAL",
    "NO_RESPONDERS",
    "UNKNOWN",
)

cdef enum:
    _USER = 0
    _HEARTBEAT = 1
    _FLOW_CONTROL = 2
    _NO_MESSAGES = 3
    _REQUEST_TIMEOUT = 4
    _PULL_ENDED = 5
    _WARNING = 6
    _RESET = 7
    _TERMINAL = 8
    _NO_RESPONDERS = 9
    _UNKNOWN = 10

cdef str _EMPTY = ""
# Status codes as Python ints, made once: 404, 408... are above the small-int cache.
cdef tuple _CODES = tuple(range(1000))


def status_of(header):
    """``(code, description)`` if the block's first line is a status line, else ``None``."""
    if header is None:
        return None
    if type(header) is not bytes:
        return _spec.status_of(header)
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(header)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(header)
    cdef Py_ssize_t end, i, s, e
    cdef int code
    if n < 8 or memcmp(p, b"NATS/1.0", 8) != 0:
        raise BadHeaderError(
            f"nats: header block does not start with NATS/1.0: {header[:40]!r}"
        )
    # Ordinary user headers: "NATS/1.0\r\n..." -- decided by one byte.
    if n < 12 or not _blank(p[8]):
        return None
    end = _crlf(p, 8, n)
    if end < 0:
        end = n
    i = 9
    while i < end and _blank(p[i]):
        i += 1
    if i + 3 > end:
        return None
    if not (48 <= p[i] <= 57 and 48 <= p[i + 1] <= 57 and 48 <= p[i + 2] <= 57):
        return None
    if i + 3 < end and not _blank(p[i + 3]):
        return None
    code = (p[i] - 48) * 100 + (p[i + 1] - 48) * 10 + (p[i + 2] - 48)
    s = i + 3
    e = end
    while s < e and _ws(p[s]):
        s += 1
    while e > s and _ws(p[e - 1]):
        e -= 1
    if s == e:
        return (_CODES[code], _EMPTY)
    return (_CODES[code], PyUnicode_DecodeUTF8(<char*>p + s, e - s, "replace"))


cdef bint _ieq(str text, const char* word, Py_ssize_t wn, bint prefix):
    # ASCII case-insensitive ``text == word`` (or ``text.startswith(word)``);
    # ``word`` is lower case ASCII. A non-ASCII character never matches one.
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text)
    cdef int kind
    cdef void* d
    cdef Py_ssize_t i
    cdef unsigned int c
    if n < wn or (n != wn and not prefix):
        return False
    kind = PyUnicode_KIND(text)
    d = PyUnicode_DATA(text)
    for i in range(wn):
        c = PyUnicode_READ(kind, d, i)
        if 65 <= c <= 90:
            c += 32
        if c != <unsigned char>word[i]:
            return False
    return True


def classify(code, description):
    """The kind of a status (see the pure module's docstring for the table)."""
    cdef long c
    if type(code) is not int or type(description) is not str:
        return _spec.classify(code, description)
    try:
        c = code
    except OverflowError:
        return UNKNOWN
    cdef str d = <str>description
    if c == 100:
        if _ieq(d, b"idle heartbeat", 14, False):
            return HEARTBEAT
        if _ieq(d, b"flowcontrol request", 19, False):
            return FLOW_CONTROL
        return UNKNOWN
    if c == 404:
        return NO_MESSAGES
    if c == 408:
        return REQUEST_TIMEOUT
    if c == 409:
        if _ieq(d, b"message size exceeds maxbytes", 29, False):
            return PULL_ENDED
        if _ieq(d, b"batch completed", 15, False):
            return PULL_ENDED
        if _ieq(d, b"leadership change", 17, False):
            return RESET
        if _ieq(d, b"consumer deleted", 16, False):
            return TERMINAL
        if _ieq(d, b"consumer is push based", 22, False):
            return TERMINAL
        if (
            _ieq(d, b"exceeded maxrequestbatch", 24, True)
            or _ieq(d, b"exceeded maxrequestexpires", 26, True)
            or _ieq(d, b"exceeded maxrequestmaxbytes", 27, True)
            or _ieq(d, b"exceeded maxwaiting", 19, True)
        ):
            return WARNING
        return UNKNOWN
    if c == 400:
        return TERMINAL
    if c == 423:
        return RESET
    if c == 503:
        return NO_RESPONDERS
    return UNKNOWN
