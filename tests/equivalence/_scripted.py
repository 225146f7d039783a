"""Scripted sockets for the write queue's tests: no server, every send decided.

``ScriptedSocket(script)`` takes at most ``script[i]`` bytes on the i-th send
(None: everything; -1: would block; an exception instance: raised) and
records what it took; :func:`whole_commands` is what a server makes of the
bytes one socket took.
"""

from __future__ import annotations

from typing import Any


class ScriptedSocket:
    """Accepts at most ``script[i]`` bytes on the i-th send (None: everything;
    -1: would block; an exception instance: raised). Records what it took."""

    def __init__(self, script: list[Any] | None = None) -> None:
        self.script = list(script or [])
        self.taken = bytearray()

    def _take(self, data: bytes) -> int:
        step = self.script.pop(0) if self.script else None
        if isinstance(step, BaseException):
            raise step
        if step == -1:
            raise BlockingIOError()
        n = len(data) if step is None else min(step, len(data))
        self.taken += data[:n]
        return n

    def send(self, data: Any, flags: int = 0) -> int:
        return self._take(bytes(data))

    def sendmsg(self, bufs: list[Any], anc: Any = (), flags: int = 0) -> int:
        return self._take(b"".join(bytes(b) for b in bufs))


def whole_commands(data: bytes) -> list[bytes]:
    """The complete commands at the start of ``data`` (a trailing half one is dropped)."""
    out = []
    pos = 0
    while pos < len(data):
        eol = data.find(b"\r\n", pos)
        if eol < 0:
            break
        words = data[pos:eol].split()
        end = eol + 2 + (int(words[-1]) + 2 if words[0] in (b"PUB", b"HPUB") else 0)
        if end > len(data):
            break
        out.append(data[pos:end])
        pos = end
    return out
