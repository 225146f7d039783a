"""The guard of an embedded ``nats-server``: the server dies with the process that started it.

A process that started a :class:`~jsclient.server.NatsServer` and is then
killed (SIGKILL, ``os._exit``, a crash) runs no ``atexit`` hook, so its server
would run on, holding its port and its store. Next to every server runs a
guard: a tiny Python process that reads its standard input, a pipe whose other
end only the starting process holds. The kernel closes that end when the
starting process dies, however it dies; the guard then reads end-of-file and
kills the server. On a normal stop the starting process writes ``stop`` first
and the guard just exits.

A pipe, not Linux's parent-death signal: that signal follows the *thread*
that started the child, so a server started from a worker thread would die
with the thread; and the pipe works on every POSIX system. On Linux the guard
also checks, through ``/proc``, that the process it is about to kill is still
a ``nats-server`` (a pid the kernel gave to another process meanwhile is left
alone). The guard ignores SIGINT: a Ctrl-C meant for its parent's program is
the parent's to act on.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys

__all__ = ["Guard"]

_PROGRAM = r"""
import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
pid = int(sys.argv[1])
try:
    word = sys.stdin.buffer.read()
except OSError:
    word = b""
if word != b"stop":
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            mine = b"nats-server" in f.read()
    except FileNotFoundError:
        mine = not os.path.isdir("/proc")  # no /proc here: trust the pid; else it is gone
    except OSError:
        mine = True
    if mine:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
"""


class Guard:
    """Kills process ``pid`` when this process dies without calling :meth:`release`."""

    def __init__(self, pid: int) -> None:
        # -I -S: no site packages, no environment: a bare interpreter starts fast.
        self._proc: subprocess.Popen[bytes] | None = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _PROGRAM, str(pid)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            close_fds=True,
        )

    @property
    def pid(self) -> int | None:
        """The guard's own process id (None once released)."""
        return None if self._proc is None else self._proc.pid

    def release(self) -> None:
        """The server was stopped (and reaped): let the guard go without killing."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        with contextlib.suppress(OSError):
            assert proc.stdin is not None
            proc.stdin.write(b"stop")
            proc.stdin.close()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
