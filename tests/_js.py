"""Test helpers: publish to streams and wait until JetStream has stored every
message; wait for a condition (``wait_for``) or fail the test (``eventually``).

A core publish followed by ``flush()`` only proves the server received the
messages; JetStream stores them asynchronously, so a test that reads right
after could see fewer. Acked publishes remove that race.
"""

from __future__ import annotations

import ctypes
import fcntl
import threading
import time
from collections.abc import Callable, Iterable
from typing import IO, Any

import pytest

import jsclient


def publish_stored(nc: jsclient.Client, subject: str, payloads: Iterable[bytes]) -> None:
    """Publish every payload with an ack and raise if any publish failed."""
    js = nc.jetstream(publish_async_stall_wait=30.0)
    futures = [js.publish_async(subject, p) for p in payloads]
    js.publish_async_complete(timeout=60)
    for f in futures:
        f.result(timeout=0)


def _poll(cond: Callable[[], Any], timeout: float, interval: float) -> Any:
    """The first true value ``cond`` gives, or None once ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            return None
        time.sleep(interval)


def flock_within(lock: IO[Any], timeout: float) -> None:
    """Take an exclusive ``flock`` on the open file ``lock`` (another pytest run
    may hold it while it installs something), or fail the test after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                pytest.fail(f"another process held {lock.name} for {timeout} s")
            time.sleep(0.2)


def wait_for(cond: Callable[[], object], timeout: float = 5.0) -> bool:
    """Poll ``cond`` until it is true (True) or ``timeout`` seconds pass (False)."""
    return _poll(cond, timeout, 0.01) is not None


def eventually(cond: Callable[[], Any], timeout: float = 10.0, what: str = "the condition") -> Any:
    """Poll ``cond`` until it gives a true value and return that value; fail the
    test (naming ``what`` it waited for) when ``timeout`` seconds pass first."""
    value = _poll(cond, timeout, 0.02)
    if value is None:
        pytest.fail(f"timed out after {timeout} s waiting for {what}")
    return value


def raise_in(thread: threading.Thread, exc: type[BaseException]) -> None:
    """Raise ``exc`` in ``thread`` from outside, as a KeyboardInterrupt reaches
    the main thread (delivered as the thread next runs Python code)."""
    assert thread.ident is not None
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), ctypes.py_object(exc))
