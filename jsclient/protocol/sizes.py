"""ADR-37 message sizes and pull accounting. This pure module is the specification.

``msg_size(subject, reply, header, payload)``
    The size the server charges a message against a pull's ``max_bytes``
    (``consumer.go``: ``len(subj) + len(ackReply) + len(hdr) + len(msg)``): the
    UTF-8 byte length of ``subject`` and of ``reply`` (encoded with
    ``surrogateescape``, the inverse of the parser's decoding, so the result is
    the wire length; an ASCII ``str`` is measured without encoding), plus
    ``len(header)`` (0 when ``header`` is ``None``) and ``len(payload)``.

``PendingCounter(max_messages, max_bytes, threshold_messages, threshold_bytes)``
    What a consumer has asked for and not yet received, summed over all of its
    open pull requests (ADR-37 "Pending messages and bytes"):

    - All four arguments are ``int`` in ``[0, 2**63 - 1]`` and ``max_messages``
      is at least 1, else ``ValueError``. The counter is in *bytes mode* when
      ``max_bytes > 0``. It starts at ``msgs == bytes == 0``.
    - ``on_message(size)``: ``msgs -= 1``; in bytes mode ``bytes -= size``; each
      clamped at 0. ``size`` is an int in ``[0, 2**63 - 1]``: a negative one
      raises ``ValueError``, one outside the int64 range ``OverflowError``.
    - ``on_status(pending_messages, pending_bytes)``: each value that is >= 0 is
      subtracted from ``msgs`` / ``bytes`` respectively, clamped at 0 (-1 means
      the header was absent). Any size of int is accepted.
    - ``reset()``: ``msgs = bytes = 0`` (after a reconnect nothing is pending).
    - ``next_pull()``: if (bytes mode and ``bytes <= threshold_bytes``) or (not
      bytes mode and ``msgs <= threshold_messages``), returns ``(batch,
      max_bytes_for_request)`` = ``(max_messages - msgs, max_bytes - bytes)`` in
      bytes mode or ``(max_messages - msgs, 0)`` otherwise, and sets ``msgs =
      max_messages`` and ``bytes = max_bytes`` (what was asked for is now
      pending); else ``None``. The pull engine calls it after every message
      and status.

    ``msgs``, ``bytes`` and the four settings are read-only attributes.
"""

from __future__ import annotations

_MAX_I64 = 2**63 - 1
_MIN_I64 = -(2**63)


def msg_size(subject: str, reply: str, header: bytes | None, payload: bytes) -> int:
    """The ADR-37 size of a message: subject + reply + header block + payload bytes."""
    n = len(subject) if subject.isascii() else len(subject.encode("utf-8", "surrogateescape"))
    n += len(reply) if reply.isascii() else len(reply.encode("utf-8", "surrogateescape"))
    if header is not None:
        n += len(header)
    return n + len(payload)


def _setting(name: str, value: int, low: int) -> int:
    if not isinstance(value, int) or not low <= value <= _MAX_I64:
        raise ValueError(f"PendingCounter: {name} must be an int in [{low}, 2**63 - 1]: {value!r}")
    return int(value)


class PendingCounter:
    """Messages and bytes requested by open pulls and not yet delivered (ADR-37)."""

    __slots__ = (
        "_bytes",
        "_max_bytes",
        "_max_messages",
        "_msgs",
        "_threshold_bytes",
        "_threshold_messages",
    )

    def __init__(
        self, max_messages: int, max_bytes: int, threshold_messages: int, threshold_bytes: int
    ) -> None:
        self._max_messages = _setting("max_messages", max_messages, 1)
        self._max_bytes = _setting("max_bytes", max_bytes, 0)
        self._threshold_messages = _setting("threshold_messages", threshold_messages, 0)
        self._threshold_bytes = _setting("threshold_bytes", threshold_bytes, 0)
        self._msgs = 0
        self._bytes = 0

    @property
    def msgs(self) -> int:
        """Messages requested and not yet received."""
        return self._msgs

    @property
    def bytes(self) -> int:
        """Bytes requested and not yet received (always 0 unless in bytes mode)."""
        return self._bytes

    @property
    def max_messages(self) -> int:
        return self._max_messages

    @property
    def max_bytes(self) -> int:
        return self._max_bytes

    @property
    def threshold_messages(self) -> int:
        return self._threshold_messages

    @property
    def threshold_bytes(self) -> int:
        return self._threshold_bytes

    def on_message(self, size: int) -> None:
        """A user message of ``size`` bytes arrived."""
        if size < 0 or size > _MAX_I64:
            if size < _MIN_I64 or size > _MAX_I64:
                raise OverflowError(f"PendingCounter.on_message: size {size} out of int64 range")
            raise ValueError(f"PendingCounter.on_message: negative size {size}")
        msgs = self._msgs - 1
        self._msgs = msgs if msgs > 0 else 0
        if self._max_bytes > 0:
            left = self._bytes - size
            self._bytes = left if left > 0 else 0

    def on_status(self, pending_messages: int, pending_bytes: int) -> None:
        """A pull ended with ``Nats-Pending-Messages``/``-Bytes`` (-1: header absent)."""
        if pending_messages >= 0:
            msgs = self._msgs - pending_messages
            self._msgs = msgs if msgs > 0 else 0
        if pending_bytes >= 0:
            left = self._bytes - pending_bytes
            self._bytes = left if left > 0 else 0

    def reset(self) -> None:
        """Nothing is pending any more (reconnect, or the pulls were abandoned)."""
        self._msgs = 0
        self._bytes = 0

    def next_pull(self) -> tuple[int, int] | None:
        """``(batch, max_bytes)`` for the next pull request if a threshold is reached."""
        if self._max_bytes > 0:
            if self._bytes > self._threshold_bytes:
                return None
            request = (self._max_messages - self._msgs, self._max_bytes - self._bytes)
        else:
            if self._msgs > self._threshold_messages:
                return None
            request = (self._max_messages - self._msgs, 0)
        self._msgs = self._max_messages
        self._bytes = self._max_bytes
        return request
