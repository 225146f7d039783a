"""The reader's poll objects when another thread has just closed the socket."""

from __future__ import annotations

import socket

import pytest

from jsclient._io.reader import _poller_for


def test_a_socket_closed_meanwhile_is_an_os_error_not_a_value_error() -> None:
    # close() on another thread leaves fileno -1: poll.register raises
    # ValueError, which the reader and a leading requester handle as a lost
    # socket (OSError), never as an unexpected error or a user-facing one.
    a, b = socket.socketpair()
    try:
        assert _poller_for(a, b).poll(0) == []
        a.close()
        with pytest.raises(OSError, match="socket closed"):
            _poller_for(a)
    finally:
        a.close()
        b.close()
