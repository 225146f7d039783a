"""One connection per process: made on first use, made anew after a fork, closed at exit.

gunicorn (with ``--preload``), uWSGI and celery's prefork pool import the
project and then fork their workers. A connection the parent made must not be
used by a child (a :class:`jsclient.errors.ForkedConnectionError`), so the
connection is keyed by process id: the first ``get_connection()`` in a child
connects again, and the child's copy of the parent's connection is dropped
without writing to the parent's socket.

Thread safety: the first use connects under a lock, so concurrent first calls
from several request threads share one connection.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from dataclasses import dataclass
from typing import Any, TypeGuard

from django.core.signals import setting_changed

import jsclient
from jsclient.client import Client
from jsclient.contrib.django import conf
from jsclient.jetstream.context import JetStream

log = logging.getLogger("jsclient.contrib.django")


@dataclass(frozen=True)
class _State:
    pid: int
    client: Client
    js: JetStream


_lock = threading.Lock()
_state: _State | None = None
_atexit_registered = False


def _usable(st: _State | None) -> TypeGuard[_State]:
    """True if ``st`` is this process's own connection and still open."""
    return st is not None and st.pid == os.getpid() and not st.client.is_closed


def _current() -> _State:
    st = _state
    if _usable(st):
        return st
    return _connect()


def _connect() -> _State:
    global _state, _atexit_registered
    with _lock:
        st = _state
        if _usable(st):
            return st  # another thread connected while this one waited
        pid = os.getpid()
        cfg = conf.load()
        client = jsclient.connect(cfg.servers, **cfg.options)
        try:
            js = client.jetstream(**cfg.jetstream)
        except BaseException:
            client.close()
            raise
        st = _State(pid, client, js)
        _state = st
        if not _atexit_registered:
            # Registered with the first connection, so that it runs before exit
            # hooks registered earlier (an embedded server made before it).
            atexit.register(_close_at_exit)
            _atexit_registered = True
    log.info("connected to %s (pid %d)", client.connected_url, pid)
    return st


def get_connection() -> Client:
    """This process's :class:`jsclient.Client`, connected on first use from ``JSCLIENT``."""
    return _current().client


def get_jetstream() -> JetStream:
    """The JetStream context on this process's connection (``JSCLIENT['jetstream']``)."""
    return _current().js


def close_connection() -> None:
    """Close this process's connection (if any); the next ``get_connection()`` reconnects.

    A connection inherited from a parent process is only forgotten, never closed.
    """
    global _state
    with _lock:
        st, _state = _state, None
    if _usable(st):
        try:
            st.client.close()
        except jsclient.errors.Error:
            log.warning("error while closing the NATS connection", exc_info=True)


def _close_at_exit() -> None:
    # A no-op without an open connection of this process's own (none made,
    # or one inherited from a parent, which only the parent may close).
    if _usable(_state):
        close_connection()


def _after_fork_in_child() -> None:
    # The parent's lock may have been held by one of its threads at the fork;
    # the parent's connection (marked forked by jsclient itself) is forgotten.
    global _lock, _state
    _lock = threading.Lock()
    _state = None


def _on_setting_changed(*, setting: str, **kwargs: Any) -> None:
    # override_settings(JSCLIENT=...) in tests: the next use connects with the new settings.
    if setting == "JSCLIENT":
        close_connection()


os.register_at_fork(after_in_child=_after_fork_in_child)
setting_changed.connect(_on_setting_changed, dispatch_uid="jsclient.contrib.django.connection")
