"""Fork safety: a client belongs to the process that connected it.

After ``os.fork()`` the child holds a copy of every live client, including its
socket (the same kernel socket as the parent's) but none of its threads. A
write from the child would interleave with the parent's frames and a
``shutdown()`` from the child would cut the parent off, so the child must not
touch the socket at all.

Every connected client is tracked in a ``WeakSet``; an
``os.register_at_fork(after_in_child=...)`` hook (installed on the first
connect, not at import) marks each of them forked in the child and closes the
child's copies of their file descriptors (a plain ``close()`` of a descriptor
the parent still holds sends nothing). From then on every use raises
:class:`jsclient.errors.ForkedConnectionError`. The publish hot path pays
nothing for this: a forked connection has a state that is neither connected
nor draining, so publishes already take the slow branch that checks the state.
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Any

from jsclient._threads import log

_live: weakref.WeakSet[Any] = weakref.WeakSet()
_hooked = False
_hook_lock = threading.Lock()


def track(client: Any) -> None:
    """Remember ``client`` (anything with ``_after_fork_in_child()``) for the fork hook."""
    global _hooked
    if not _hooked:
        with _hook_lock:
            if not _hooked:
                # POSIX only; elsewhere the pid check in Connection.check_owner remains.
                register = getattr(os, "register_at_fork", None)
                if register is not None:
                    register(after_in_child=_after_fork_in_child)
                _hooked = True
    _live.add(client)


def forget(client: Any) -> None:
    """``client`` closed: nothing of it is left to protect."""
    _live.discard(client)


def _after_fork_in_child() -> None:
    global _hook_lock
    # Another thread of the parent may have held it at the fork; it has no
    # owner in the child.
    _hook_lock = threading.Lock()
    clients = list(_live)
    _live.clear()
    for client in clients:
        try:
            client._after_fork_in_child()
        except Exception:  # a fork hook must not fail the fork
            log.exception("jsclient: error while detaching a client after fork")
