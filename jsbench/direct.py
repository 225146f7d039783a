"""Batched direct get (ADR-31): read a range of a stream without a consumer.

One row, ``direct-get-batch``: read ``n`` messages, sequences 1..n, of a file
stream that allows direct gets, by batched direct get in both columns.
jsclient reads them with ``Stream.get_batch(seq=1, batch=n)``, which asks the
server for pages of at most 10,000 messages (8 MiB) and sends the next request
once the page's last message is taken. nats-py has no batched get of its own:
its column is nats-py with orbit.py's ``jetstreamext.get_batch`` (PyPI
``jetstreamext``, on ``natsext.request_many``), asked for the same pages.

``jetstreamext.get_batch(js, stream, batch=k, seq=s)`` sends one request and
does not page: the server sends up to ``k`` messages, fewer if it reaches the
request's byte limit first (without ``max_bytes``, the server's max_pending,
64 MiB by default), then a ``204 EOB`` status, which ends the iteration;
``404`` (nothing from ``s`` on) raises ``NoMessagesError``. The iteration
also ends without an error after ``request_many``'s overall timeout (30 s)
or if the connection closes. So the nats-py column continues after the last
sequence read until it has ``n`` messages, and both columns check that they
read exactly ``n`` messages ending at sequence ``n``.

nats-py's read of the same range through a consumer (a pull consumer, ack
policy none, ``fetch`` of :data:`jsbench.js.BATCH`) is the nats-py column of
the ``js-fetch-noack`` row, as jsclient's is. natsio 1.0.1 has the
multi-subject form (``get_last_msgs_for``) but no batched get of a range: n/a.
nats.js's ``jsm.direct.getBatch`` runs this row in ``benchmarks/natsjs`` (node,
by hand). The stream is prepared by the parent, as in :mod:`jsbench.js`, and
reused while its count and size are the same.
"""

from __future__ import annotations

import time

from jsbench.js import create_stream_anew
from jsbench.result import Result

DIR_STREAM, DIR_FILTER = "BDIR", "bdir.>"
#: Messages per request in the nats-py column: jsclient's page
#: (``jsclient.jetstream.manage.direct.PAGE_MSGS``), so both send the same requests.
PAGE = 10_000


def setup_direct(url: str, n: int, size: int) -> None:
    """A file stream allowing direct gets, holding exactly ``n`` messages of ``size`` bytes."""
    import jsclient

    tag = f"jsclient bench: {n} x {size} B"
    with jsclient.connect(url, name="jsclient-bench-setup") as nc:
        js = nc.jetstream()
        try:
            stream = js.stream(DIR_STREAM)
            info = stream.info()
            if info.config.description == tag and info.state.messages == n:
                for name in list(stream.consumer_names()):
                    stream.delete_consumer(name)
                return
            js.delete_stream(DIR_STREAM)
        except jsclient.errors.NotFoundError:
            pass
        create_stream_anew(
            js,
            name=DIR_STREAM,
            subjects=[DIR_FILTER],
            storage="file",
            allow_direct=True,
            description=tag,
        )
        js = nc.jetstream(publish_async_max_pending=4000, publish_async_stall_wait=60.0)
        payload = b"x" * size
        for _ in range(n):
            js.publish_async("bdir.fill", payload)
        js.publish_async_complete(timeout=300)
        have = js.stream(DIR_STREAM).info().state.messages
        if have != n:
            raise RuntimeError(f"stream pre-fill stored {have} of {n} messages")


def js_get_batch(url: str, n: int, size: int) -> Result:
    """jsclient ``stream.get_batch(seq=1, batch=n)``: pages of 10,000, one buffered."""
    import jsclient

    with jsclient.connect(url) as nc:
        stream = nc.jetstream().stream(DIR_STREAM)
        got = 0
        t0 = time.perf_counter()
        for m in stream.get_batch(seq=1, batch=n):  # noqa: B007 (the last m is checked)
            got += 1
        dt = time.perf_counter() - t0
    _check_range(got, m.seq if got else None, n)
    return Result(n / dt)


def py_get_batch(url: str, n: int, size: int, page: int = PAGE) -> Result:
    """nats-py + orbit.py: ``jetstreamext.get_batch`` from sequence 1, ``page`` a request."""
    import asyncio

    import nats
    from jetstreamext import NoMessagesError, get_batch

    async def run() -> tuple[float, int, int]:
        nc = await nats.connect(url)
        js = nc.jetstream()
        got = last = 0
        t0 = time.perf_counter()
        while got < n:
            k = 0
            batch = min(page, n - got)
            try:
                async for m in get_batch(js, DIR_STREAM, batch=batch, seq=last + 1):  # noqa: B007
                    k += 1
            except NoMessagesError:
                pass  # a 404: nothing from seq on
            if not k:
                break  # nothing more came: the check below says so
            got += k
            last = m.seq or 0  # the page's last message: the next page starts after it
        dt = time.perf_counter() - t0
        await nc.close()
        return dt, got, last

    dt, got, last = asyncio.run(run())
    _check_range(got, last, n)
    return Result(n / dt)


def _check_range(got: int, last: int | None, n: int) -> None:
    """A run must have read sequences 1..n: ``n`` messages, the last one ``n``."""
    if got != n or last != n:
        raise RuntimeError(f"read {got} of {n} messages, the last at sequence {last}")
