# cython: language_level=3
"""Byte-scanning helpers shared by the header twins (status, jsheaders).

Inline C only: cimported, compiled into each module that uses them, no
module of their own at run time.
"""

from libc.string cimport memchr


cdef inline bint _blank(unsigned char c) noexcept nogil:
    return c == 32 or c == 9


cdef inline bint _ws(unsigned char c) noexcept nogil:
    # bytes.strip() whitespace: space, \t, \n, \v, \f, \r.
    return c == 32 or (c >= 9 and c <= 13)


cdef inline unsigned char _low(unsigned char c) noexcept nogil:
    if c >= 65 and c <= 90:
        return c + 32
    return c


cdef inline Py_ssize_t _crlf(const unsigned char* p, Py_ssize_t i, Py_ssize_t n) noexcept nogil:
    # data.find(b"\r\n", i), or -1
    cdef const unsigned char* q
    while i < n:
        q = <const unsigned char*>memchr(p + i, 13, <size_t>(n - i))
        if q == NULL:
            return -1
        i = q - p
        if i + 1 < n and p[i + 1] == 10:
            return i
        i += 1
    return -1
