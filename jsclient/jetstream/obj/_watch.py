"""Watching a bucket's objects: :class:`ObjectWatcher`, an iterator (or a callback)
of :class:`~jsclient.api.ObjectInfo`.

It reads the meta subjects (``$O.<bucket>.M.>``) through an ordered consumer,
as the Key-Value watcher reads keys (:mod:`jsclient.jetstream.read.watcher`): the
latest meta of each object, one ``None`` once those present at the start are
out, then every change. Each item's ``mtime`` is when its meta was stored.
At most ``max_buffered_bytes`` (8 MiB by default) of metas are read ahead.
A meta message that is not an object's meta is reported to the connection's
error callback (``BadObjectMetaError``) and left out.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from jsclient import errors
from jsclient.api import ObjectInfo
from jsclient.jetstream.obj._meta import format_ns, parse_meta
from jsclient.jetstream.read.watcher import Watcher

if TYPE_CHECKING:
    from jsclient.jetstream._ctx import Context
    from jsclient.jetstream.read.reader import Entry
    from jsclient.msg import Msg

__all__ = ["ObjectWatcher"]


class ObjectWatcher(Watcher[ObjectInfo]):
    """The info of the bucket's objects as they are written, then live changes.

    Iterate it (``for info in w``), or call ``next(timeout)``; ``None`` comes
    once, after the objects present at the start (not with ``updates_only``).
    ``stop()`` never blocks; a loop over the watcher then ends. Made with
    ``cb=``, a library thread calls ``cb(info)`` for each, ``None`` included.
    """

    _area = "obj"
    _kind = "object"

    def __init__(
        self,
        js: Context,
        bucket: str,
        stream: str,
        *,
        ignore_deletes: bool,
        include_history: bool,
        updates_only: bool,
        cb: Callable[[ObjectInfo | None], Any] | None,
        max_buffered_bytes: int | None = None,
    ) -> None:
        self._ignore_deletes = ignore_deletes
        self._js = js
        super().__init__(
            js,
            bucket,
            stream,
            [f"$O.{bucket}.M.>"],
            include_history=include_history,
            updates_only=updates_only,
            resume_from=None,
            headers_only=False,
            cb=cb,
            max_buffered_bytes=max_buffered_bytes,
        )

    def _fill(self, buf: list[Entry]) -> None:
        """Infos for what the ordered consumer delivered (each with its stream
        sequence, pending count and time), the None marker after the one that
        left none pending while the initial objects were due."""
        append = self._ready.append
        last_rev = self._last_rev
        initial_done = self._initial_done
        for msg, sseq, pending, ts in buf:
            # Skipped: had already (a reset started again), unreadable, or not wanted.
            if sseq > last_rev:
                info = self._info(msg, ts)
                if info is not None:
                    last_rev = sseq
                    append(info)
            if pending == 0 and not initial_done:
                initial_done = True
                self._oc._keep_start = False
                append(None)
        buf.clear()
        self._last_rev = last_rev
        self._initial_done = initial_done

    def _info(self, msg: Msg, ts: int) -> ObjectInfo | None:
        try:
            info = parse_meta(msg.data, format_ns(ts) if ts else None)
        except errors.BadObjectMetaError as exc:
            self._js._client._report_error(exc)
            return None
        if info.deleted and self._ignore_deletes:
            return None
        return info
