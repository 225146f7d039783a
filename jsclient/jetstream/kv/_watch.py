"""Watching a bucket: :class:`KeyWatcher`, an iterator (or a callback) of entries.

A watcher reads an ordered consumer on the bucket's stream, filtered to the
watched keys: the latest revision of each (every revision with
``include_history``; only later ones with ``updates_only``; from a revision
with ``resume_from_revision``). It never repeats or skips a revision, across
resets, reconnects and server restarts, and gives one ``None`` once every
revision that matched when the watch began has been handed out (see
:mod:`jsclient.jetstream.read.watcher`, which it shares with the Object store).
Memory is bounded whatever the bucket holds: at most :data:`BATCH` entries and
``max_buffered_bytes`` (8 MiB by default) of them are read ahead of what was
handed out (``tests/integration/test_scan_bounds.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from jsclient.jetstream.kv._entry import PUT, KeyValueEntry, operation_of
from jsclient.jetstream.read.watcher import BATCH, Watcher

if TYPE_CHECKING:
    from jsclient.jetstream._ctx import Context
    from jsclient.jetstream.read.reader import Entry

__all__ = ["BATCH", "KeyWatcher"]


class KeyWatcher(Watcher[KeyValueEntry]):
    """Entries of the watched keys in revision order, then live updates.

    Iterate it (``for entry in w``), or call ``next(timeout)``; ``None`` comes
    once, after the values present at the start (not with ``updates_only``).
    ``stop()`` never blocks; a loop over the watcher then ends. Made with
    ``cb=``, a library thread calls ``cb(entry)`` for each, ``None`` included.
    """

    _area = "kv"
    _kind = "key"

    def __init__(
        self,
        js: Context,
        bucket: str,
        stream: str,
        key_prefix: str,
        subjects: list[str],
        *,
        include_history: bool,
        ignore_deletes: bool,
        meta_only: bool,
        updates_only: bool,
        resume_from_revision: int | None,
        cb: Callable[[KeyValueEntry | None], Any] | None,
        max_buffered_bytes: int | None = None,
    ) -> None:
        self._pre_len = len(key_prefix)
        self._ignore_deletes = ignore_deletes
        super().__init__(
            js,
            bucket,
            stream,
            subjects,
            include_history=include_history,
            updates_only=updates_only,
            resume_from=resume_from_revision,
            headers_only=meta_only,
            cb=cb,
            max_buffered_bytes=max_buffered_bytes,
        )

    def _fill(self, buf: list[Entry]) -> None:
        """Entries for what the ordered consumer delivered (each with its stream
        sequence, pending count and time), the None marker after the one that
        left none pending while the initial values were due."""
        append = self._ready.append
        new = tuple.__new__
        cls = KeyValueEntry
        bucket = self._bucket
        n = self._pre_len
        skip_markers = self._ignore_deletes
        last_rev = self._last_rev
        initial_done = self._initial_done
        for msg, sseq, pending, ts in buf:
            hdr = msg._hdr
            op = PUT if hdr is None else operation_of(hdr)
            # Skipped: had already (a reset started again), or a marker not wanted.
            if sseq > last_rev and (op == PUT or not skip_markers):
                last_rev = sseq
                append(new(cls, (bucket, msg.subject[n:], msg.data, sseq, pending, ts, op)))
            if pending == 0 and not initial_done:
                initial_done = True
                self._oc._keep_start = False
                append(None)
        buf.clear()
        self._last_rev = last_rev
        self._initial_done = initial_done
