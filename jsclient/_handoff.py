"""Taking from a queue without losing what was taken to an interrupt.

An exception raised into a thread from outside (``KeyboardInterrupt`` in the
main thread, or ``PyThreadState_SetAsyncExc``) is delivered at the first
check the interpreter makes after a call returns. A thread blocked in
``q.get()`` gets it right after the call returns *with an item*: the item
was taken off the queue and is dropped with the frame before any line of
ours can store it. That is how a batch of messages went missing.

The rule, used by every waiting reader of the library: **a blocking wait
moves what it waited for into a container the object owns, in the same C
call**. :func:`wait_into` does that with C iterators only
(``deque.extend(islice(iter(get, never), 1))``), so an interrupt delivered
after the wait finds the item already in ``local``, where the next call takes
it. A non-blocking ``get_nowait`` does not wait, so it stays the fast path
when something is already queued.

Every reader of a queue the socket reader fills takes from it with one loop,
:func:`next_item`: the rest of a routed batch first (``local``), then what an
interrupted wait left (``held``), then the queue, waiting only when all three
are empty; a routed batch (``(messages, nbytes)``, one put per socket read) is
moved into ``local`` on the way. Subscriptions, ``consume``, ``messages``, the
stores' readers (whole batches: no ``local``) and fetches (single messages)
all take through it; a caller on a hot path pops ``local`` itself first, so a
message taken from a batch costs one deque pop.

What the rule cannot cover is an interrupt that lands while the thread runs
rather than waits: that can land between any two lines, in the library as in
the caller's own ``msg = sub.next_msg()``. The guarantee is for threads
blocked in a call, which is where an interrupt finds them.
"""

from __future__ import annotations

import queue
from collections import deque
from functools import partial
from itertools import islice
from time import monotonic
from typing import Any

__all__ = ["next_item", "wait_into"]

_NEVER = object()  # no queue holds it: the iterator ends only by islice or Empty


def wait_into(q: queue.SimpleQueue[Any], into: deque[Any], timeout: float | None) -> None:
    """Wait up to ``timeout`` seconds (None: without a limit) for the next item of
    ``q`` and append it to ``into`` in the same C call; ``queue.Empty`` when none
    came. :func:`next_item` tries ``q.get_nowait()`` first: that does not wait."""
    into.extend(islice(iter(partial(q.get, True, timeout), _NEVER), 1))


def next_item(
    q: queue.SimpleQueue[Any],
    held: deque[Any],
    local: deque[Any] | None,
    timeout: float | None,
) -> Any:
    """The next item of a queue of routed batches: the next of ``local`` (what
    is left of a batch), else what an interrupted wait left in ``held``, else
    the next of ``q`` (``get_nowait`` first, then :func:`wait_into`), waiting up to
    ``timeout`` seconds (None: without a limit, 0 or less: not at all);
    ``queue.Empty`` when none came.

    A routed batch (a tuple whose first element is a list) is moved into
    ``local`` and its first item returned; with ``local`` None it is returned
    whole (a reader that takes batches). ``held`` and ``local`` must be
    different deques: ``held`` may hold a batch not yet moved."""
    deadline = None
    while True:
        # Several threads may take from one queue: between the test and the
        # pop another taker may empty a deque (IndexError), and what this
        # thread waited for may go to one that found it in ``held`` first.
        # Either way the loop looks again, waiting only for what is left of
        # ``timeout``.
        if local:
            try:
                return local.popleft()
            except IndexError:
                continue
        if held:
            try:
                item = held.popleft()
            except IndexError:
                continue
        else:
            try:
                item = q.get_nowait()
            except queue.Empty:
                if timeout is not None:
                    if deadline is None:
                        deadline = monotonic() + timeout
                    else:
                        timeout = deadline - monotonic()
                    if timeout <= 0:
                        raise
                wait_into(q, held, timeout)
                try:
                    item = held.popleft()
                except IndexError:
                    continue
        if local is not None and item.__class__ is tuple and item[0].__class__ is list:
            local.extend(item[0])
            continue
        return item
