"""``WeakRegistry``: a weak set that other threads change while one lists it.

A client's drainable contexts and async-publish engines are added and
discarded by many threads (consume threads discard themselves as they end)
while ``drain()`` or a forced reconnect lists them; a bare ``WeakSet`` then
raised "Set changed size during iteration" (seen on free-threaded 3.13).
"""

from __future__ import annotations

import gc
import sys
import threading

from jsclient._threads import WeakRegistry


class _Item:
    pass


def test_listing_while_threads_add_and_discard() -> None:
    reg = WeakRegistry()
    keep = [_Item() for _ in range(64)]
    stop = threading.Event()
    errors: list[BaseException] = []

    def churn(mine: list[_Item]) -> None:
        try:
            while not stop.is_set():
                for x in mine:
                    reg.add(x)
                for x in mine:
                    reg.discard(x)
        except BaseException as exc:
            errors.append(exc)

    workers = [
        threading.Thread(target=churn, args=(keep[i::4],), name=f"churn-{i}") for i in range(4)
    ]
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for t in workers:
            t.start()
        for _ in range(3_000):
            snap = reg.snapshot()
            assert all(type(x) is _Item for x in snap)
    finally:
        sys.setswitchinterval(switch)
        stop.set()
        for t in workers:
            t.join(10)
    assert not errors, errors
    assert not any(t.is_alive() for t in workers)


def test_members_leave_when_their_object_dies() -> None:
    reg = WeakRegistry()
    a, b = _Item(), _Item()
    reg.add(a)
    reg.add(b)
    assert len(reg) == 2 and set(map(id, reg.snapshot())) == {id(a), id(b)}
    del a
    gc.collect()
    assert reg.snapshot() == [b]
    reg.discard(b)
    reg.discard(b)  # twice: no error
    assert len(reg) == 0
