"""``publish_async`` is bounded in time and memory (issue 32).

- Every pending publish has an ack deadline that fires: a publish that waited
  for room in a window full of lost acks joins the window after the sweep
  timer ran out of entries, and used to be left without any timer.
- A publish with an ack timeout of its own has a timer; once acked, that
  timer leaves the scheduler's heap (it used to stay there, with the publish,
  until its deadline).
"""

from __future__ import annotations

from concurrent.futures import wait

from _js import eventually

from jsclient import errors
from jsclient._threads import _COMPACT_MIN
from jsclient.client import Client


def test_publish_that_waited_for_room_still_times_out(nc: Client) -> None:
    # A core subscriber swallows the publishes: no ack ever comes.
    nc.subscribe("lost.>")
    nc.flush()
    js = nc.jetstream(
        publish_async_max_pending=5,
        publish_async_stall_wait=5.0,  # longer than the ack timeout: publishes wait for room
        publish_async_timeout=0.5,
    )
    # The sixth waits for room, and joins the window after the sweep timer
    # failed the first five and found nothing left to re-arm for. (A seventh
    # would arm a new sweep and hide the defect: the sixth must be the last.)
    futs = [js.publish_async(f"lost.{i}", b"x") for i in range(6)]
    js.publish_async_complete(timeout=8.0)
    assert not wait(futs, timeout=0).not_done
    for f in futs:
        assert isinstance(f.exception(), errors.TimeoutError)
    assert js.publish_async_pending == 0


def test_acked_publishes_leave_no_timers_behind(nc: Client) -> None:
    n = 20_000
    js = nc.jetstream(publish_async_stall_wait=30.0)
    js.create_stream(name="B", subjects=["b.>"], storage="memory")
    sched = nc._scheduler
    before = sched.heap_size
    futs = [js.publish_async("b.x", b"p", ack_timeout=30) for _ in range(n)]
    js.publish_async_complete(timeout=60)
    assert futs[-1].result(timeout=0).seq == n
    # Every timer was cancelled by its ack: what stays in the heap is bounded
    # by the live timers (none of these), not by the publishes made.
    eventually(lambda: sched.heap_size <= before + _COMPACT_MIN + 8, 10.0, "a compacted timer heap")
