"""Raw-socket ceilings: what one Python thread on a plain blocking socket can do.

No client library: each frame is built in Python with ``%`` formatting, and a
tiny parser reads the server's replies. These rows put a client's numbers next
to what the interpreter and the server allow on the same machine in the same
run:

- publish builds every frame and writes about 256 KiB per ``sendall``, then
  waits for a PING's PONG (so the server has everything);
- round trips (request, JetStream sync publish) send one frame and read the
  reply on the same thread; the JetStream one decodes the PubAck JSON;
- pipelined JetStream publish keeps a window of publishes outstanding,
  reading acks on the same thread whenever the window is full;
- Key-Value round trips: a direct get (``$JS.API.DIRECT.GET.KV_<bucket>.<subject>``)
  whose reply's status, ``Nats-Sequence`` header and payload are picked out
  of the HMSG, and a put (a JetStream publish to ``$KV.<bucket>.<key>``) whose
  PubAck is decoded.

:class:`RawConn` is also the echo peer's connection (:mod:`jsbench.peer`).
"""

from __future__ import annotations

import itertools
import json
import os
import socket
import time
from typing import Any
from urllib.parse import unquote, urlsplit

from jsbench.result import Result, percentiles

SEND_CHUNK = 256 * 1024

_inbox_ids = itertools.count()


class RawConn:
    """A NATS connection on a blocking socket, with just enough protocol for the ceilings."""

    def __init__(self, url: str, *, name: str = "jsclient-bench-raw", timeout: float = 60.0):
        u = urlsplit(url if "://" in url else f"nats://{url}")
        self.sock = socket.create_connection((u.hostname or "127.0.0.1", u.port or 4222), timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()
        self.pos = 0
        self.headers = b""  # the header block of the last HMSG read
        line = self._line()
        if not line.startswith(b"INFO "):
            raise ConnectionError(f"expected INFO from the server, got {bytes(line[:40])!r}")
        self.info: dict[str, Any] = json.loads(bytes(line[5:]))
        opts: dict[str, Any] = {
            "verbose": False,
            "pedantic": False,
            "lang": "python-raw",
            "version": "0",
            "protocol": 1,
            "headers": True,
            "no_responders": True,
            "name": name,
        }
        if u.username:
            opts["user"] = unquote(u.username)
            opts["pass"] = unquote(u.password or "")
        self.sock.sendall(b"CONNECT " + json.dumps(opts).encode() + b"\r\nPING\r\n")
        self.wait_pong()

    def new_inbox(self) -> bytes:
        return b"_INBOX.raw%d_%d" % (os.getpid(), next(_inbox_ids))

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawConn:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- reading -----------------------------------------------------------------

    def _fill(self) -> None:
        """Read more bytes; parsed bytes are dropped first (no frame spans them)."""
        if self.pos:
            del self.buf[: self.pos]
            self.pos = 0
        data = self.sock.recv(SEND_CHUNK)
        if not data:
            raise ConnectionError("server closed the connection")
        self.buf += data

    def _line(self) -> bytearray:
        while True:
            end = self.buf.find(b"\r\n", self.pos)
            if end >= 0:
                line = self.buf[self.pos : end]
                self.pos = end + 2
                return line
            self._fill()

    def _parse(self) -> tuple[bytes, bytes, bytes] | bool | None:
        """One frame from the buffer without reading the socket.

        Returns (subject, reply, payload) for MSG/HMSG (an HMSG's header block
        goes to ``self.headers``), True for a PONG, False
        for a frame handled here (PING, +OK, INFO), None when incomplete.
        """
        buf = self.buf
        end = buf.find(b"\r\n", self.pos)
        if end < 0:
            return None
        head = buf[self.pos : self.pos + 4]
        if head == b"MSG " or head == b"HMSG":
            parts = buf[self.pos : end].split(b" ")
            if head == b"MSG ":
                hdr, total = 0, int(parts[-1])
                reply = parts[3] if len(parts) == 5 else b""
            else:
                hdr, total = int(parts[-2]), int(parts[-1])
                reply = parts[3] if len(parts) == 6 else b""
            stop = end + 2 + total
            if len(buf) < stop + 2:
                return None
            if hdr:
                self.headers = bytes(buf[end + 2 : end + 2 + hdr])
            payload = bytes(buf[end + 2 + hdr : stop])
            self.pos = stop + 2
            return bytes(parts[1]), bytes(reply), payload
        line = bytes(buf[self.pos : end])
        self.pos = end + 2
        if line == b"PONG":
            return True
        if line == b"PING":
            self.sock.sendall(b"PONG\r\n")
        elif line.startswith(b"-ERR"):
            raise ConnectionError(f"server error: {line.decode(errors='replace')}")
        return False

    def read_msg(self) -> tuple[bytes, bytes, bytes]:
        """Block until the next message: (subject, reply, payload)."""
        while True:
            frame = self._parse()
            if frame is None:
                self._fill()
            elif frame is not True and frame is not False:
                return frame

    def read_available(self) -> list[tuple[bytes, bytes, bytes]]:
        """Block until at least one message is here, then take every complete one."""
        out = [self.read_msg()]
        while True:
            frame = self._parse()
            if frame is None:
                return out
            if frame is not True and frame is not False:
                out.append(frame)

    def wait_pong(self) -> None:
        """Block until a PONG (messages arriving meanwhile are dropped)."""
        while True:
            frame = self._parse()
            if frame is None:
                self._fill()
            elif frame is True:
                return

    def flush(self) -> None:
        self.sock.sendall(b"PING\r\n")
        self.wait_pong()


# -- ceilings ------------------------------------------------------------------------


def publish(url: str, n: int, size: int, subject: bytes = b"bench.core") -> Result:
    """Core publish: frames built in Python, ~256 KiB per sendall, then PING/PONG."""
    payload = b"x" * size
    flen = len(b"PUB %s %d\r\n%s\r\n" % (subject, size, payload))
    view = _batch_buffer(flen)
    with RawConn(url) as c:
        sendall = c.sock.sendall
        pos = 0
        t0 = time.perf_counter()
        for _ in range(n):
            view[pos : pos + flen] = b"PUB %s %d\r\n%s\r\n" % (subject, size, payload)
            pos += flen
            if pos >= SEND_CHUNK:
                sendall(view[:pos])
                pos = 0
        if pos:
            sendall(view[:pos])
        c.flush()
        dt = time.perf_counter() - t0
    return Result(n / dt)


def _batch_buffer(max_frame: int) -> memoryview:
    """One reused buffer of ~256 KiB that frames are copied into until it is sent.

    Not a growing ``bytearray`` cleared after each send: that frees and
    reallocates 256 KiB per batch, and whether glibc then serves it from fresh
    mmap pages (a page fault per 4 KiB) depends on what the process allocated
    before, which made the ceiling differ 2-3x from one process to another.
    """
    return memoryview(bytearray(SEND_CHUNK + max_frame))


def _round_trips(url: str, n: int, size: int, subject: bytes, decode: bool) -> Result:
    payload = b"x" * size
    with RawConn(url) as c:
        inbox = c.new_inbox()
        c.sock.sendall(b"SUB %s.* 1\r\n" % inbox)
        c.flush()
        sendall = c.sock.sendall
        read_msg = c.read_msg
        lat: list[float] = []
        append = lat.append
        perf = time.perf_counter
        t0 = perf()
        for i in range(n + 1):  # the first is a warm-up, not counted
            if i == 1:
                t0 = perf()
            t = perf()
            sendall(b"PUB %s %s.%d %d\r\n%s\r\n" % (subject, inbox, i, size, payload))
            _subj, _reply, data = read_msg()
            if decode:
                ack = json.loads(data)
                if "error" in ack:
                    raise RuntimeError(f"publish failed: {ack['error']}")
            if i:
                append(perf() - t)
        dt = perf() - t0
    return Result(n / dt, *percentiles(lat))


def request(url: str, n: int, size: int, subject: bytes = b"bench.echo") -> Result:
    """Sequential request/reply against the echo peer: one frame out, one reply read."""
    return _round_trips(url, n, size, subject, decode=False)


def js_publish_sync(url: str, n: int, size: int, subject: bytes = b"bpub.x") -> Result:
    """JetStream publish one at a time, the PubAck JSON decoded."""
    return _round_trips(url, n, size, subject, decode=True)


def kv_get(url: str, n: int, size: int, bucket: bytes = b"BENCH_KVGET", keys: int = 1000) -> Result:
    """Key-Value get, one at a time: a direct get of key ``k<i % keys>``, its reply parsed.

    The request is the subject-appended form (``$JS.API.DIRECT.GET.KV_<bucket>.
    $KV.<bucket>.<key>``, empty payload), answered by the last message on that
    subject as an HMSG: its status line checked, the ``Nats-Sequence`` header
    (the revision) read as an int, the payload taken.
    """
    with RawConn(url) as c:
        inbox = c.new_inbox()
        c.sock.sendall(b"SUB %s.* 1\r\n" % inbox)
        c.flush()
        prefix = b"$JS.API.DIRECT.GET.KV_%s.$KV.%s.k" % (bucket, bucket)
        sendall = c.sock.sendall
        read_msg = c.read_msg
        lat: list[float] = []
        append = lat.append
        perf = time.perf_counter
        t0 = perf()
        rev = 0
        data = b""
        for i in range(n + 1):  # the first is a warm-up, not counted
            if i == 1:
                t0 = perf()
            t = perf()
            sendall(b"PUB %s%d %s.%d 0\r\n\r\n" % (prefix, i % keys, inbox, i))
            _subj, _reply, data = read_msg()
            hdrs = c.headers
            if not hdrs.startswith(b"NATS/1.0\r\n"):
                status = hdrs.split(b"\r\n", 1)[0].decode(errors="replace")
                raise RuntimeError(f"direct get of key k{i % keys}: {status}")
            at = hdrs.index(b"Nats-Sequence: ") + 15
            rev = int(hdrs[at : hdrs.index(b"\r", at)])
            if i:
                append(perf() - t)
        dt = perf() - t0
    if rev < 1 or len(data) != size:
        raise RuntimeError(f"direct get returned revision {rev} with {len(data)} bytes")
    return Result(n / dt, *percentiles(lat))


def kv_put(url: str, n: int, size: int, bucket: bytes = b"BENCH_KVPUT", keys: int = 1000) -> Result:
    """Key-Value put, one at a time: a JetStream publish to ``$KV.<bucket>.k<i % keys>``.

    The PubAck JSON is decoded and its sequence (the new revision) read.
    """
    payload = b"v" * size
    with RawConn(url) as c:
        inbox = c.new_inbox()
        c.sock.sendall(b"SUB %s.* 1\r\n" % inbox)
        c.flush()
        prefix = b"$KV.%s.k" % bucket
        sendall = c.sock.sendall
        read_msg = c.read_msg
        lat: list[float] = []
        append = lat.append
        perf = time.perf_counter
        t0 = perf()
        for i in range(n + 1):  # the first is a warm-up, not counted
            if i == 1:
                t0 = perf()
            t = perf()
            sendall(b"PUB %s%d %s.%d %d\r\n%s\r\n" % (prefix, i % keys, inbox, i, size, payload))
            _subj, _reply, data = read_msg()
            ack = json.loads(data)
            if "error" in ack:
                raise RuntimeError(f"put failed: {ack['error']}")
            _rev = ack["seq"]
            if i:
                append(perf() - t)
        dt = perf() - t0
    return Result(n / dt, *percentiles(lat))


def js_publish_pipelined(
    url: str,
    n: int,
    size: int,
    window: int = 4000,
    decode: bool = True,
    subject: bytes = b"bpub.x",
) -> Result:
    """JetStream publish with ``window`` outstanding; acks read (and decoded) on the same thread."""
    payload = b"x" * size
    with RawConn(url) as c:
        inbox = c.new_inbox()
        c.sock.sendall(b"SUB %s.* 1\r\n" % inbox)
        c.flush()
        sendall = c.sock.sendall
        view = _batch_buffer(len(b"PUB %s %s.%d %d\r\n" % (subject, inbox, n, size)) + size + 2)
        sent = acked = 0
        t0 = time.perf_counter()
        while acked < n:
            room = min(window - (sent - acked), n - sent)
            if room > 0:
                pos = 0
                for i in range(sent, sent + room):
                    frame = b"PUB %s %s.%d %d\r\n%s\r\n" % (subject, inbox, i, size, payload)
                    end = pos + len(frame)
                    view[pos:end] = frame
                    pos = end
                    if pos >= SEND_CHUNK:
                        sendall(view[:pos])
                        pos = 0
                if pos:
                    sendall(view[:pos])
                sent += room
            for _subj, _reply, data in c.read_available():
                if decode:
                    ack = json.loads(data)
                    if "error" in ack:
                        raise RuntimeError(f"publish failed: {ack['error']}")
                acked += 1
        dt = time.perf_counter() - t0
    return Result(n / dt)


def server_version(url: str) -> str | None:
    """The version a server announces in its INFO."""
    try:
        with RawConn(url, name="jsclient-bench-info", timeout=5.0) as c:
            return str(c.info.get("version")) if c.info.get("version") else None
    except (OSError, ValueError):
        return None
