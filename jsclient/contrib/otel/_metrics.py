"""Message counters kept in-process and reported by observable counters, with a
bounded number of attribute sets (see :class:`Tally`)."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from opentelemetry.metrics import CallbackOptions, Observation


def _no_count() -> None:
    """The counter of a process without a meter."""


#: The most attribute sets a :class:`Tally` keeps (the SDK's default cardinality limit).
MAX_SERIES = 2000
#: The attribute set the counts beyond :data:`MAX_SERIES` go to (the SDK's convention).
OVERFLOW: tuple[tuple[str, Any], ...] = (("otel.metric.overflow", True),)


class Tally:
    """Message counts kept here, reported by an asynchronous (observable) counter.

    The SDK's synchronous ``Counter.add`` costs about 2.7 µs a call, more than
    a publish; counting here is a short lock and a dict update, and the SDK
    reads the totals when it collects. Exported the same way (a cumulative
    monotonic sum per attribute set). At most :data:`MAX_SERIES` attribute sets
    are kept, the SDK's own default cardinality limit: counts of further sets
    (many subjects, ``orders.<id>``) go to one overflow series marked
    ``otel.metric.overflow``, as the SDK does, so memory and each collection
    stay bounded whatever the subjects.
    """

    __slots__ = ("_counts", "_fast", "_lock")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[tuple[tuple[str, Any], ...], int] = {}
        self._fast: dict[tuple[tuple[str, Any], ...], list[Any]] = {}

    def add(self, n: int, attrs: Mapping[str, Any]) -> None:
        key = tuple(attrs.items())
        with self._lock:
            if key not in self._counts and len(self._counts) + len(self._fast) >= MAX_SERIES:
                key = OVERFLOW
            self._counts[key] = self._counts.get(key, 0) + n

    def counter(self, attrs: Mapping[str, Any]) -> Callable[[], Any]:
        """A function that counts one for ``attrs``, without a lock: the per-message paths
        keep it with the attributes' shape. It is an ``itertools.count``'s ``__next__``
        (one C call, atomic under the GIL); ``observe`` reads it by drawing a number too
        and subtracting the numbers drawn by earlier reads."""
        key = tuple(attrs.items())
        with self._lock:
            slot = self._fast.get(key)
            if slot is None:
                if len(self._counts) + len(self._fast) >= MAX_SERIES:
                    key = OVERFLOW
                    slot = self._fast.get(key)
                if slot is None:
                    slot = self._fast[key] = [itertools.count(), 0]
        fn: Callable[[], Any] = slot[0].__next__
        return fn

    def observe(self, options: CallbackOptions) -> Iterable[Observation]:
        with self._lock:
            counts = list(self._counts.items())
            for key, slot in self._fast.items():
                drawn = next(slot[0])  # the counts, plus one per earlier read
                n = drawn - slot[1]
                slot[1] += 1
                # Every key listed, the zeros dropped below: a loop body that
                # ends with an if is not covered by the with on 3.13+
                # (tests/unit/test_interrupt_cover.py).
                counts.append((key, n))
        merged: dict[frozenset[tuple[str, Any]], int] = {}
        for key, n in counts:  # the same attributes in another order: one series
            fk = frozenset(key)
            merged[fk] = merged.get(fk, 0) + n
        return [Observation(n, dict(fk)) for fk, n in merged.items() if n]
