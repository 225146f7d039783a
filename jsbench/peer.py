"""The echo peer for request rows: a raw-socket responder in a process of its own.

Every client's request row and the raw ceiling talk to the same peer, so the
responder's cost is the same for all of them and none of it runs in the
measured process. :class:`EchoPeer` starts it (``main([URL, SUBJECT])`` in a
new interpreter, without importing the client). It prints ``ready`` once its
subscription is in place, answers every message on SUBJECT with the same
payload (REPLIES times with ``main([URL, SUBJECT, REPLIES])``: request-many),
and exits when its standard input closes (the parent ended or died) or the
server goes away.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading

from jsbench._child import module_command
from jsbench.raw import RawConn

ECHO_SUBJECT = "bench.echo"


def serve(url: str, subject: str, replies: int = 1) -> None:
    with RawConn(url, name="jsclient-bench-echo") as c:
        c.sock.settimeout(None)
        c.sock.sendall(b"SUB %s 1\r\n" % subject.encode())
        c.flush()
        print("ready", flush=True)
        sendall = c.sock.sendall
        while True:
            out = bytearray()
            for _subj, reply, payload in c.read_available():
                if reply:
                    out += (b"PUB %s %d\r\n%s\r\n" % (reply, len(payload), payload)) * replies
            if out:
                sendall(out)


def _exit_when_stdin_closes() -> None:
    sys.stdin.buffer.read()
    os._exit(0)


def main(argv: list[str]) -> int:
    """``URL [SUBJECT [REPLIES]]``: serve until stdin closes or the server goes away."""
    url, subject = argv[0], argv[1] if len(argv) > 1 else ECHO_SUBJECT
    replies = int(argv[2]) if len(argv) > 2 else 1
    threading.Thread(target=_exit_when_stdin_closes, name="echo-peer-stdin", daemon=True).start()
    try:
        serve(url, subject, replies)
    except OSError:
        return 0  # the server went away: nothing left to answer
    return 0


class EchoPeer:
    """Starts the peer process and stops it again (a context manager)."""

    what = "the echo peer"

    def __init__(
        self, url: str, subject: str = ECHO_SUBJECT, timeout: float = 30.0, replies: int = 1
    ) -> None:
        self._start(module_command("jsbench.peer", [url, subject, str(replies)]), timeout)

    def _start(self, command: list[str], timeout: float) -> None:
        """Start ``command`` and wait until it prints ``ready`` (a peer of another kind too)."""
        self.proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        ready = threading.Event()
        line: list[str] = []

        def read_ready() -> None:
            assert self.proc.stdout is not None
            line.append(self.proc.stdout.readline())
            ready.set()

        threading.Thread(target=read_ready, name="echo-peer-ready", daemon=True).start()
        if not ready.wait(timeout) or not line[0].startswith("ready"):
            self.stop()
            raise RuntimeError(f"{self.what} did not start")

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()  # the peer exits on EOF
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def __enter__(self) -> EchoPeer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
