"""NATS header blocks: ``NATS/1.0[ <code>[ <description>]]\\r\\n`` then ``Key: value`` lines.

Decoding is lazy on the message (only when the user reads ``msg.headers``);
the hot-path status check lives in :mod:`jsclient.protocol.status`.
Multi-valued headers keep every value in order; the plain ``dict`` view keeps
the first value of each name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from jsclient.errors import BadHeaderError

HEADER_LINE = b"NATS/1.0"
#: Keys under which a status line's code and description appear in ``msg.headers``.
STATUS_HDR = "Status"
DESCRIPTION_HDR = "Description"

HeadersIn = Mapping[str, "str | Sequence[str]"]

_BAD_KEY_CHARS = frozenset(":\r\n \t")


def encode(headers: HeadersIn | None) -> bytes:
    """Build a header block; a value may be a list for a multi-valued header."""
    parts = [HEADER_LINE, b"\r\n"]
    if headers:
        for key, value in headers.items():
            if not key or not _BAD_KEY_CHARS.isdisjoint(key):
                raise BadHeaderError(f"nats: invalid header name {key!r}")
            values = (value,) if isinstance(value, str) else value
            for v in values:
                if "\r" in v or "\n" in v:
                    raise BadHeaderError(f"nats: invalid value for header {key!r}")
                parts.append(f"{key}: {v}\r\n".encode())
    parts.append(b"\r\n")
    return b"".join(parts)


def decode(block: bytes) -> tuple[int | None, str, dict[str, list[str]]]:
    """Split a raw header block into (status code or None, description, headers).

    Lines without a colon are ignored; keys and values are stripped.
    """
    text = block.decode("utf-8", "surrogateescape")
    lines = text.split("\r\n")
    first = lines[0]
    if not first.startswith("NATS/1.0"):
        raise BadHeaderError(f"nats: header block does not start with NATS/1.0: {first[:40]!r}")
    code: int | None = None
    description = ""
    rest = first[8:].strip()
    if rest:
        head, _, description = rest.partition(" ")
        if head.isascii() and head.isdigit():
            code = int(head)
        description = description.strip()
    out: dict[str, list[str]] = {}
    for line in lines[1:]:
        if not line:
            continue
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key = key.strip()
        if key:
            out.setdefault(key, []).append(value.strip())
    return code, description, out


def to_dict(block: bytes) -> dict[str, str]:
    """The ``msg.headers`` view: first value per name, plus Status/Description."""
    code, description, multi = decode(block)
    out = {k: v[0] for k, v in multi.items()}
    if code is not None:
        out[STATUS_HDR] = str(code)
        if description:
            out[DESCRIPTION_HDR] = description
    return out
