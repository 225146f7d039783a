"""A Key-Value bucket (ADR-8): :class:`KeyValue`.

Reads of one key are the stream's one read of a message (:mod:`..manage.direct`):
direct gets (``DIRECT.GET.KV_<b>.$KV.<b>.<key>``, answered by any replica with
the message itself) when the bucket's stream allows them, else the leader's
``STREAM.MSG.GET``. Writes are JetStream publishes to ``$KV.<b>.<key>``:
``create`` and ``update`` state the key's last revision
(``Nats-Expected-Last-Subject-Sequence``), deletes and purges are markers
(``KV-Operation``; a purge also rolls the key up). Scans -- ``keys``,
``history``, ``purge_deletes`` and watchers -- read an ordered consumer and stop
at the last pending message, so they see what was there when they began.

A bucket that mirrors another reads the subjects its stream holds and writes to
the origin's, so a put through a mirror lands where the mirror copies from.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from jsclient import errors
from jsclient.api import DeliverPolicy, StreamInfo
from jsclient.jetstream._wire import EXPECTED_LAST_SUBJECT_SEQ, TTL, ttl_value
from jsclient.jetstream.kv._config import STREAM_PREFIX, KeyValueStatus, check_filter, check_key
from jsclient.jetstream.kv._entry import (
    DEL,
    PURGE,
    PUT,
    KeyValueEntry,
    op_headers,
    operation_of,
)
from jsclient.jetstream.kv._watch import KeyWatcher
from jsclient.jetstream.manage.stream import Stream
from jsclient.jetstream.read.scan import scan

if TYPE_CHECKING:
    from jsclient.jetstream._ctx import Context
    from jsclient.msg import Msg

DEFAULT_PREFIX = "$JS.API"
ROLLUP = "Nats-Rollup"
#: Wrong last sequence (10164 is what replicated streams report).
_WRONG_LAST = frozenset({10071, 10164})


def _as_bytes(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    raise TypeError(f"a value must be bytes or str, not {type(value).__name__}")


class KeyValue:
    """A bucket; get one from ``js.key_value(bucket)`` or ``js.create_key_value(...)``."""

    def __init__(self, js: Context, info: StreamInfo) -> None:
        cfg = info.config
        self._js = js
        self._info = info
        self._stream = Stream(js, info)
        self.bucket: str = str(cfg.name).removeprefix(STREAM_PREFIX)
        self._stream_name: str = str(cfg.name)
        read_bucket = self.bucket
        write_pre: str | None = None
        mirror = cfg.mirror
        if mirror is not None:
            origin = str(mirror.name).removeprefix(STREAM_PREFIX)
            transforms = mirror.subject_transforms or []
            if not transforms:
                read_bucket = origin  # the mirror holds the origin's subjects
            external = mirror.external
            if external is not None and external.api:
                write_pre = f"{external.api}.$KV.{origin}."
            else:
                write_pre = f"$KV.{origin}."
        self._pre = f"$KV.{read_bucket}."
        if write_pre is None:
            write_pre = self._pre if read_bucket == self.bucket else f"$KV.{self.bucket}."
            if js._prefix != DEFAULT_PREFIX:
                write_pre = f"{js._prefix}.{write_pre}"
        self._put_pre = write_pre

    def __repr__(self) -> str:
        return f"<KeyValue {self.bucket!r}>"

    # -- reads ---------------------------------------------------------------

    def get(self, key: str, *, revision: int | None = None) -> KeyValueEntry:
        """The key's latest entry, or the one at ``revision``.

        KeyNotFoundError when it has none; KeyDeletedError (a KeyNotFoundError)
        when that entry is a delete or purge marker.
        """
        check_key(key)
        if revision is not None and (not isinstance(revision, int) or revision < 1):
            raise ValueError(f"revision must be a positive int, got {revision!r}")
        entry = self._get(key, revision)
        if entry.operation != PUT:
            raise errors.KeyDeletedError(
                description="key was deleted", entry=entry, op=entry.operation
            )
        return entry

    def _get(self, key: str, revision: int | None) -> KeyValueEntry:
        subject = self._pre + key
        req: dict[str, Any] = {"last_by_subj": subject} if revision is None else {"seq": revision}
        try:
            got, seq, value, hdr, stamp, _direct = self._stream._get(req)
        except errors.MessageNotFoundError:
            raise errors.KeyNotFoundError() from None
        if got != subject:  # the revision of another key
            raise errors.KeyNotFoundError()
        return KeyValueEntry(self.bucket, key, value, seq or 0, 0, stamp, operation_of(hdr))

    # -- writes ----------------------------------------------------------------

    def _publish(self, key: str, value: bytes, headers: dict[str, Any] | None) -> int:
        try:
            ack = self._js.publish(self._put_pre + key, value, headers=headers)
        except errors.APIError as exc:
            if exc.err_code in _WRONG_LAST and not isinstance(exc, errors.KeyValueError):
                raise errors.KeyWrongLastSequenceError(
                    code=exc.code, description=exc.description, err_code=exc.err_code
                ) from None
            raise
        revision: int = ack.seq
        return revision

    def put(self, key: str, value: bytes | str) -> int:
        """Store ``value`` as the key's new revision; returns the revision."""
        check_key(key)
        return self._publish(key, _as_bytes(value), None)

    def create(self, key: str, value: bytes | str, *, ttl: float | str | None = None) -> int:
        """Store ``value`` only if the key has none (never set, deleted or purged).

        KeyExistsError when it has a value. ``ttl`` (seconds, server 2.11 and a
        bucket made with ``limit_marker_ttl``) removes the key after that long.
        """
        check_key(key)
        data = _as_bytes(value)
        extra = {TTL: ttl_value(ttl)} if ttl is not None else None
        try:
            return self._update(key, data, 0, extra)
        except errors.KeyWrongLastSequenceError as exc:
            try:
                latest: KeyValueEntry | None = self._get(key, None)
            except errors.KeyNotFoundError:
                latest = None
            if latest is not None and latest.operation != PUT:
                # Deleted or purged: a value may be created over the marker.
                return self._update(key, data, latest.revision, extra)
            raise errors.KeyExistsError(
                code=exc.code, description="key exists", err_code=exc.err_code
            ) from None

    def update(self, key: str, value: bytes | str, last: int) -> int:
        """Store ``value`` only if the key's latest revision is ``last``.

        KeyWrongLastSequenceError otherwise.
        """
        check_key(key)
        if not isinstance(last, int) or last < 0:
            raise ValueError(f"last must be a revision (int >= 0), got {last!r}")
        return self._update(key, _as_bytes(value), last, None)

    def _update(self, key: str, data: bytes, last: int, extra: dict[str, Any] | None) -> int:
        headers: dict[str, Any] = {EXPECTED_LAST_SUBJECT_SEQ: str(last)}
        if extra:
            headers.update(extra)
        return self._publish(key, data, headers)

    def delete(self, key: str, *, last: int | None = None) -> None:
        """Mark the key deleted; its earlier revisions stay in its history.

        With ``last``, only if its latest revision is that one
        (KeyWrongLastSequenceError otherwise).
        """
        check_key(key)
        extra = None if last is None else {EXPECTED_LAST_SUBJECT_SEQ: str(int(last))}
        self._publish(key, b"", op_headers(DEL, extra))

    def purge(self, key: str, *, ttl: float | str | None = None, last: int | None = None) -> None:
        """Remove every revision of the key; only a purge marker stays.

        ``ttl`` (server 2.11) removes the marker itself after that long.
        """
        check_key(key)
        extra: dict[str, Any] = {ROLLUP: "sub"}
        if ttl is not None:
            extra[TTL] = ttl_value(ttl)
        if last is not None:
            extra[EXPECTED_LAST_SUBJECT_SEQ] = str(int(last))
        self._publish(key, b"", op_headers(PURGE, extra))

    # -- scans -----------------------------------------------------------------

    def _scan(
        self,
        filters: list[str],
        deliver_policy: DeliverPolicy,
        headers_only: bool,
        timeout: float | None = None,
        max_buffered_bytes: int | None = None,
    ) -> Iterator[tuple[Msg, int, int, int]]:
        """What the filters match now: (message, revision, pending, time in ns).

        TimeoutError when no message comes for ``timeout`` seconds (default: the
        JetStream context's timeout), e.g. while the server is away; at most
        ``max_buffered_bytes`` (8 MiB by default) are read ahead (issue 32)."""
        return scan(
            self._js,
            self._stream_name,
            [self._pre + f for f in filters],
            deliver_policy,
            headers_only=headers_only,
            name="kv",
            timeout=timeout,
            max_buffered_bytes=max_buffered_bytes,
        )

    def keys(
        self,
        *filters: str,
        timeout: float | None = None,
        max_buffered_bytes: int | None = None,
        **kw: Any,
    ) -> list[str]:
        """Keys holding a value (deleted and purged ones left out); ``[]`` when none.

        ``filters`` are key wildcards (``"cfg.*"``, ``"app.>"``); default all keys.
        nats-py's ``filters=[...]`` keyword is taken too, as wildcards (nats-py
        matches substrings: see the migration page). TimeoutError when no key
        comes for ``timeout`` seconds (default: the JetStream context's
        timeout); see :meth:`_scan`.
        """
        named = kw.pop("filters", None)
        if kw:
            raise TypeError(f"keys() got unexpected keyword arguments {sorted(kw)}")
        if named is not None:
            if filters:
                raise TypeError("give the filters as arguments or as filters=[...], not both")
            filters = (named,) if isinstance(named, str) else tuple(named)
        pats = [check_filter(f) for f in filters] or [">"]
        n = len(self._pre)
        out: list[str] = []
        append = out.append
        for msg, _rev, _pending, _ts in self._scan(
            pats, DeliverPolicy.LAST_PER_SUBJECT, True, timeout, max_buffered_bytes
        ):
            if operation_of(msg._hdr) == PUT:
                append(msg.subject[n:])
        return out

    def history(
        self, key: str, *, timeout: float | None = None, max_buffered_bytes: int | None = None
    ) -> list[KeyValueEntry]:
        """Every stored revision of the key, oldest first; KeyNotFoundError when none.

        TimeoutError when no revision comes for ``timeout`` seconds (default: the
        JetStream context's timeout); see :meth:`_scan`."""
        check_key(key)
        out = [
            self._entry(m, rev, pending, ts)
            for m, rev, pending, ts in self._scan(
                [key], DeliverPolicy.ALL, False, timeout, max_buffered_bytes
            )
        ]
        if not out:
            raise errors.KeyNotFoundError()
        return out

    def _entry(self, msg: Msg, revision: int, delta: int, ts: int) -> KeyValueEntry:
        return KeyValueEntry(
            self.bucket,
            msg.subject[len(self._pre) :],
            msg.data,
            revision,
            delta,
            ts,
            operation_of(msg._hdr),
        )

    def purge_deletes(self, *, older_than: float = 1800.0, timeout: float | None = None) -> int:
        """Remove delete and purge markers older than ``older_than`` seconds, with the
        key's earlier revisions; younger markers stay, alone. ``older_than <= 0``
        removes every marker. Returns how many markers were removed. The scan for
        markers raises TimeoutError when no key comes for ``timeout`` seconds
        (default: the JetStream context's timeout); see :meth:`_scan`."""
        cutoff = datetime.now(UTC).timestamp() - older_than if older_than > 0 else None
        markers = [
            self._entry(m, rev, pending, ts)
            for m, rev, pending, ts in self._scan(
                [">"], DeliverPolicy.LAST_PER_SUBJECT, True, timeout
            )
            if operation_of(m.raw_headers) != PUT
        ]
        removed = 0
        for entry in markers:
            created = entry.created
            young = cutoff is not None and created is not None and created.timestamp() > cutoff
            self._stream.purge(subject=self._pre + entry.key, keep=1 if young else None)
            if not young:
                removed += 1
        return removed

    def status(self) -> KeyValueStatus:
        """The bucket's state and settings."""
        info = self._stream.info()
        self._info = info
        return KeyValueStatus.of(info)

    # -- watch -------------------------------------------------------------------

    def watch(
        self,
        keys: str | list[str] = ">",
        *,
        include_history: bool = False,
        ignore_deletes: bool = False,
        meta_only: bool = False,
        updates_only: bool = False,
        resume_from_revision: int | None = None,
        cb: Callable[[KeyValueEntry | None], Any] | None = None,
        max_buffered_bytes: int | None = None,
    ) -> KeyWatcher:
        """Watch keys matching ``keys`` (a wildcard or a list of them); see KeyWatcher.

        Iterate the watcher (or call its ``next(timeout=)``), or pass ``cb``:
        ``cb(entry)`` then runs on the watcher's own thread
        (``jsclient-kv-watch-<bucket>``), never the socket reader; an exception
        it raises is logged and the watcher goes on. Both get ``None`` once,
        after the values present at the start. At most ``max_buffered_bytes``
        (8 MiB by default) of values are read ahead of what was handed out.
        Raises ``InvalidKeyError`` for a bad filter and ``ValueError`` for
        ``include_history`` with ``updates_only``, before anything is sent."""
        pats = [keys] if isinstance(keys, str) else list(keys)
        if not pats:
            raise errors.InvalidKeyError("nats: watch needs at least one key filter")
        for p in pats:
            check_filter(p)
        if include_history and updates_only:
            raise ValueError("include_history and updates_only cannot be combined")
        if resume_from_revision is not None:
            if not isinstance(resume_from_revision, int) or resume_from_revision < 1:
                raise ValueError(f"resume_from_revision must be >= 1, got {resume_from_revision!r}")
            if updates_only:
                raise ValueError("resume_from_revision and updates_only cannot be combined")
        return KeyWatcher(
            self._js,
            self.bucket,
            self._stream_name,
            self._pre,
            [self._pre + p for p in pats],
            include_history=include_history,
            ignore_deletes=ignore_deletes,
            meta_only=meta_only,
            updates_only=updates_only,
            resume_from_revision=resume_from_revision,
            cb=cb,
            max_buffered_bytes=max_buffered_bytes,
        )

    def watch_all(self, **options: Any) -> KeyWatcher:
        """``watch(">", ...)``: every key of the bucket."""
        return self.watch(">", **options)
