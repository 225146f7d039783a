"""One core request: publish it through the request multiplexer, wait for its reply.

``Client.request`` is :func:`request` on the client's connection and
multiplexer. The waiting thread may read the socket itself while it waits
(the reading role, :class:`jsclient.protocol.readstate.ReadState`), so a
reply wakes it without a hop through the reader thread. Whatever ends the
wait (the reply, a timeout, an interrupt, the connection closing), the
request's token is gone from the multiplexer afterwards, so a late reply
finds no waiter.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from jsclient import _impl, errors
from jsclient._io.options import CLOSED
from jsclient.msg import Msg

if TYPE_CHECKING:
    from jsclient._mux import RequestMux
    from jsclient.connection import Connection

Reply = _impl.delivery.Reply
_status_of = _impl.status.status_of


def request(
    conn: Connection,
    mux: RequestMux,
    subject: str,
    payload: bytes,
    hdr: bytes | None,
    timeout: float | None,
) -> Msg:
    """Send ``payload`` (and the encoded headers ``hdr``) to ``subject``; the reply.

    Raises NoRespondersError for a 503 status, TimeoutError when no reply
    comes within ``timeout``, ConnectionClosedError when the connection closed.
    """
    # No fork check of its own: a forked connection refuses the write below.
    waiter = Reply()
    deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
    token = mux.send(subject, payload, hdr, waiter, inline=True)
    try:
        got = conn.await_reply(waiter, deadline)
    except BaseException:
        # Interrupted (KeyboardInterrupt...): a late reply finds no waiter.
        mux.cancel(token)
        raise
    if not got:
        mux.cancel(token)
        if conn.status is CLOSED:
            # close() may not have reached this waiter yet (a thread that was
            # reading for its reply sees the socket go first).
            raise errors.ConnectionClosedError()
        raise errors.TimeoutError()
    msg: Msg | None = waiter.msg
    if msg is None:
        raise errors.ConnectionClosedError()
    hdr_in = msg._hdr
    if hdr_in is not None and not msg.data:
        st = _status_of(hdr_in)
        if st is not None and st[0] == 503:
            raise errors.NoRespondersError()
    return msg
