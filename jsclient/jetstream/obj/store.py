"""An object store bucket (ADR-20): :class:`ObjectStore`.

A put cuts the data into chunks (128 KiB unless told otherwise), hashes them
as they go and publishes them with ``publish_async`` to a fresh
``$O.<bucket>.C.<nuid>``, keeping a bounded number unacked (so memory holds a
few chunks, and a file is read chunk by chunk, never whole: :mod:`._put`). The
meta comes last, rolled up on ``$O.<bucket>.M.<name>`` and stating the meta it replaces
(``Nats-Expected-Last-Subject-Sequence``): when another put of the same name
got there first, the put reads the new meta and tries again, so the chunks of
exactly the version it replaced are the ones it purges afterwards. A put that
fails purges what it had published. Reads are :class:`ObjectReader`.

Meta reads are the stream's one read of a message (:mod:`..manage.direct`): a
direct get of the last message on the meta subject, or the leader's
``STREAM.MSG.GET`` where the stream does not allow direct gets; ``mtime`` is
the server's text of when it was stored either way.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from jsclient import errors
from jsclient._threads import log
from jsclient.api import ObjectInfo, ObjectLink, ObjectMeta, PubAck, StreamInfo
from jsclient.jetstream._wire import EXPECTED_LAST_SUBJECT_SEQ
from jsclient.jetstream.manage.stream import Stream
from jsclient.jetstream.obj._config import (
    DEFAULT_CHUNK_SIZE,
    STREAM_PREFIX,
    ObjectStoreStatus,
    check_bucket,
    check_name,
    encode_name,
)
from jsclient.jetstream.obj._meta import (
    digest_value,
    format_ns,
    meta_json,
    new_info,
    now_rfc3339,
    parse_meta,
)
from jsclient.jetstream.obj._put import chunk_size_for, publish_chunks
from jsclient.jetstream.obj._put import chunker as _chunker
from jsclient.jetstream.obj._reader import ObjectReader
from jsclient.jetstream.obj._watch import ObjectWatcher

if TYPE_CHECKING:
    from jsclient.jetstream._ctx import Context

ROLLUP = "Nats-Rollup"
#: How often a write of the meta is tried again when another writer was first.
META_ATTEMPTS = 8


class ObjectStore:
    """A bucket of objects; get one from ``js.object_store(bucket)`` or
    ``js.create_object_store(...)``."""

    def __init__(self, js: Context, info: StreamInfo) -> None:
        self._js = js
        self._stream = Stream(js, info)
        self._stream_name: str = str(info.config.name)
        self.bucket: str = self._stream_name.removeprefix(STREAM_PREFIX)
        self._meta_pre = f"$O.{self.bucket}.M."
        self._chunk_pre = f"$O.{self.bucket}.C."

    @classmethod
    def bind(cls, js: Context, bucket: str) -> ObjectStore:
        """A handle on an existing bucket; BucketNotFoundError otherwise."""
        check_bucket(bucket)
        try:
            resp = js._api_request(f"STREAM.INFO.{STREAM_PREFIX}{bucket}")
        except errors.StreamNotFoundError as exc:
            raise errors.BucketNotFoundError(
                code=exc.code, description=f"bucket {bucket!r} not found", err_code=exc.err_code
            ) from None
        return cls(js, StreamInfo.from_response(resp))

    def __repr__(self) -> str:
        return f"<ObjectStore {self.bucket!r}>"

    # -- meta ----------------------------------------------------------------------

    def _meta_subject(self, name: str) -> str:
        return self._meta_pre + encode_name(name)

    def _load(self, name: str, *, replacing: bool = False) -> tuple[ObjectInfo | None, int]:
        """The latest meta stored for ``name`` (a deleted one too) and its stream
        sequence; ``(None, 0)`` when there is none. A meta that cannot be read
        raises BadObjectMetaError, unless it is about to be ``replacing``: then
        it counts as none (at its sequence), so a put can mend it."""
        try:
            m = self._stream._get({"last_by_subj": self._meta_subject(name)})
        except errors.MessageNotFoundError:
            return None, 0
        # The server's text either way: a direct get's stamp as format_ns writes it.
        mtime = format_ns(m.time) if isinstance(m.time, int) else m.time
        return self._parsed(m.data, mtime, m.seq or 0, replacing)

    @staticmethod
    def _parsed(
        data: bytes, mtime: str | None, seq: int, replacing: bool
    ) -> tuple[ObjectInfo | None, int]:
        try:
            return parse_meta(data, mtime), seq
        except errors.BadObjectMetaError:
            if replacing:
                return None, seq
            raise

    def _publish_meta(self, info: ObjectInfo, expected: int | None) -> PubAck:
        """Store ``info`` as its name's only meta; with ``expected``, only if that is
        the sequence of the name's last meta (0: none), else WrongLastSequenceError."""
        headers = {ROLLUP: "sub"}
        if expected is not None:
            headers[EXPECTED_LAST_SUBJECT_SEQ] = str(expected)
        ack: PubAck = self._js.publish(
            self._meta_subject(info.name), meta_json(info), headers=headers
        )
        return ack

    def info(self, name: str, *, show_deleted: bool = False) -> ObjectInfo:
        """The object's meta; ObjectNotFoundError when there is none, and
        ObjectDeletedError (an ObjectNotFoundError) for a deleted one unless
        ``show_deleted``. ``mtime`` is when the meta was stored (the server's time)."""
        check_name(name)
        info, _seq = self._load(name)
        if info is None:
            raise errors.ObjectNotFoundError(f"object {name!r} not found in {self.bucket!r}")
        if info.deleted and not show_deleted:
            raise errors.ObjectDeletedError(f"object {name!r} in {self.bucket!r} is deleted")
        return info

    # -- put ---------------------------------------------------------------------------

    def put(
        self,
        name: str,
        data: Any,
        *,
        meta: ObjectMeta | None = None,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
    ) -> ObjectInfo:
        """Store ``data`` (bytes, a str, or a binary file object, read chunk by chunk)
        as the object ``name``, replacing any object of that name.

        ``meta`` adds a description, headers and metadata (its name is ``name``);
        its ``options.max_chunk_size`` is the chunk size unless ``chunk_size`` is
        given. Returns the stored info (``mtime``: now).
        """
        check_name(name)
        chunk_size = chunk_size_for(self._js, meta, chunk_size)
        chunks = _chunker(data, chunk_size)
        info = new_info(
            self.bucket, self._js._new_name(), meta or ObjectMeta(), chunk_size=chunk_size
        )
        info.name = name
        prev, prev_seq = self._load(name, replacing=True)
        subject = self._chunk_pre + info.nuid
        try:
            info.size, info.chunks, sha = publish_chunks(self._js, subject, chunks, chunk_size)
            info.digest = digest_value(sha)
            prev = self._store_new(info, prev, prev_seq)
        except BaseException:  # purge what it published
            self._purge_quietly(subject)
            raise
        info.mtime = now_rfc3339()
        if prev is not None and not prev.deleted and not prev.is_link() and prev.nuid:
            self._purge_quietly(self._chunk_pre + prev.nuid)
        return info

    def _store_new(self, info: ObjectInfo, prev: ObjectInfo | None, seq: int) -> ObjectInfo | None:
        """Write the meta of a new version over ``prev`` (at ``seq``); another writer
        first makes it read the meta again and retry. Returns what it replaced."""
        for _ in range(META_ATTEMPTS - 1):
            try:
                self._publish_meta(info, seq)
                return prev
            except errors.WrongLastSequenceError:
                prev, seq = self._load(info.name, replacing=True)
        self._publish_meta(info, seq)
        return prev

    def _purge_quietly(self, subject: str) -> None:
        try:
            self._stream.purge(subject=subject)
        except errors.Error as exc:  # the put's outcome stands; the chunks stay orphaned
            log.warning("jsclient: could not purge object chunks on %s: %s", subject, exc)

    def put_file(
        self,
        path: str | os.PathLike[str],
        *,
        name: str | None = None,
        meta: ObjectMeta | None = None,
    ) -> ObjectInfo:
        """Store the file at ``path`` (read chunk by chunk) as ``name``, by default
        the file's base name."""
        obj = name if name is not None else os.path.basename(os.fspath(path))
        check_name(obj)
        with open(path, "rb") as f:
            return self.put(obj, f, meta=meta)

    # -- get -----------------------------------------------------------------------

    def get(
        self, name: str, *, timeout: float | None = None, max_buffered_bytes: int | None = None
    ) -> ObjectReader:
        """The object as a binary file object (see :class:`ObjectReader`).

        A read raises TimeoutError when no chunk comes for ``timeout`` seconds
        (default: the JetStream context's timeout), e.g. while the server is
        away; at most ``max_buffered_bytes`` (8 MiB by default) are read ahead.
        A link is followed (to its target, in this bucket or another);
        LinkIsABucketError for a link to a whole bucket, NoLinkToLinkError for a
        link whose target is a link. ObjectNotFoundError when there is no object.
        """
        info = self.info(name)
        store = self
        link = info.options.link if info.options is not None else None
        if link is not None:
            if not link.name:
                raise errors.LinkIsABucketError(
                    f"nats: {name!r} is a link to bucket {link.bucket!r}"
                )
            if link.bucket != self.bucket:
                store = ObjectStore.bind(self._js, link.bucket)
            info = store.info(link.name)
            if info.is_link():
                raise errors.NoLinkToLinkError(
                    f"nats: {name!r} links to {link.bucket}/{link.name!r}, itself a link"
                )
        if not info.nuid:
            raise errors.BadObjectMetaError(f"nats: the meta of {info.name!r} has no nuid")
        return ObjectReader(
            self._js,
            store._stream_name,
            store._chunk_pre + info.nuid,
            info,
            timeout=timeout,
            max_buffered_bytes=max_buffered_bytes,
        )

    def get_bytes(self, name: str, *, timeout: float | None = None) -> bytes:
        """The whole object in memory (checked as :meth:`get` checks it; ``timeout``
        as there)."""
        with self.get(name, timeout=timeout) as r:
            return r.readall()

    def get_file(
        self, name: str, path: str | os.PathLike[str], *, timeout: float | None = None
    ) -> ObjectInfo:
        """Write the object into the file at ``path`` (replaced), chunk by chunk.

        A failed read removes the file; returns the object's info. ``timeout``
        as in :meth:`get`.
        """
        with self.get(name, timeout=timeout) as r:
            try:
                with open(path, "wb") as f:
                    write = f.write
                    for chunk in r:
                        write(chunk)
            except BaseException:
                try:
                    os.remove(path)
                except OSError:
                    pass
                raise
            return r.info

    # -- meta changes ------------------------------------------------------------------

    def update_meta(self, name: str, meta: ObjectMeta) -> None:
        """Replace the object's name, description, headers and metadata with ``meta``'s
        (a new ``meta.name`` renames it). ObjectNotFoundError when there is no such
        object, ObjectDeletedError for a deleted one, ObjectAlreadyExists when the
        new name is taken."""
        check_name(name)
        new_name = check_name(meta.name) if meta.name else name
        for attempt in range(META_ATTEMPTS):
            info, seq = self._load(name)
            if info is None:
                raise errors.ObjectNotFoundError(f"object {name!r} not found in {self.bucket!r}")
            if info.deleted:
                raise errors.ObjectDeletedError(f"object {name!r} in {self.bucket!r} is deleted")
            expected = seq
            if new_name != name:
                other, expected = self._load(new_name)
                if other is not None and not other.deleted:
                    raise errors.ObjectAlreadyExists(
                        f"nats: an object named {new_name!r} exists in {self.bucket!r}"
                    )
            info.name = new_name
            info.description = meta.description
            info.headers = meta.headers
            info.metadata = getattr(meta, "metadata", None)
            try:
                self._publish_meta(info, expected)
            except errors.WrongLastSequenceError:
                if attempt == META_ATTEMPTS - 1:
                    raise
                continue
            if new_name != name:
                # Only the old meta read above: a put of the old name since stays.
                self._stream.purge(subject=self._meta_subject(name), seq=seq + 1)
            return

    def delete(self, name: str) -> None:
        """Delete the object: a deleted marker replaces its meta, its chunks are
        purged. ObjectNotFoundError when there is no such object; deleting a
        deleted one does nothing."""
        check_name(name)
        for attempt in range(META_ATTEMPTS):
            info, seq = self._load(name)
            if info is None:
                raise errors.ObjectNotFoundError(f"object {name!r} not found in {self.bucket!r}")
            if info.deleted:
                return
            nuid, link = info.nuid, info.is_link()
            info.deleted = True
            info.size, info.chunks, info.digest = 0, 0, None
            try:
                self._publish_meta(info, seq)
            except errors.WrongLastSequenceError:
                if attempt == META_ATTEMPTS - 1:
                    raise
                continue
            if nuid and not link:
                self._stream.purge(subject=self._chunk_pre + nuid)
            return

    # -- links ---------------------------------------------------------------------

    def add_link(self, name: str, target: ObjectInfo) -> ObjectInfo:
        """Store ``name`` as a link to the object ``target`` (its info, from this
        bucket or another). A link may replace a link or a deleted object, not a
        live object (ObjectAlreadyExists); NoLinkToDeletedError and
        NoLinkToLinkError for such targets."""
        check_name(name)
        if not isinstance(target, ObjectInfo) and not hasattr(target, "nuid"):
            raise TypeError(f"target must be an ObjectInfo, not {type(target).__name__}")
        check_name(target.name)
        if target.deleted:
            raise errors.NoLinkToDeletedError()
        if target.is_link():
            raise errors.NoLinkToLinkError()
        return self._put_link(name, ObjectLink(bucket=target.bucket, name=target.name))

    def add_bucket_link(self, name: str, other_store: ObjectStore | str) -> ObjectInfo:
        """Store ``name`` as a link to the whole bucket ``other_store`` (a store or its name)."""
        check_name(name)
        bucket = other_store if isinstance(other_store, str) else other_store.bucket
        return self._put_link(name, ObjectLink(bucket=check_bucket(bucket)))

    def _put_link(self, name: str, link: ObjectLink) -> ObjectInfo:
        info = new_info(self.bucket, self._js._new_name(), ObjectMeta(name=name), link=link)
        for attempt in range(META_ATTEMPTS):
            existing, seq = self._load(name, replacing=True)
            if existing is not None and not existing.deleted and not existing.is_link():
                raise errors.ObjectAlreadyExists(
                    f"nats: an object named {name!r} exists in {self.bucket!r}"
                )
            try:
                self._publish_meta(info, seq)
            except errors.WrongLastSequenceError:
                if attempt == META_ATTEMPTS - 1:
                    raise
                continue
            break
        info.mtime = now_rfc3339()
        return info

    # -- listing and watching --------------------------------------------------------

    def watch(
        self,
        *,
        ignore_deletes: bool = False,
        include_history: bool = False,
        updates_only: bool = False,
        cb: Callable[[ObjectInfo | None], Any] | None = None,
        max_buffered_bytes: int | None = None,
    ) -> ObjectWatcher:
        """Watch the bucket's objects (see :class:`ObjectWatcher`): the info of each,
        one ``None`` once those present at the start are out, then every change.
        At most ``max_buffered_bytes`` (8 MiB by default) are read ahead. With
        ``cb``, ``cb(info)`` runs on the watcher's own thread
        (``jsclient-obj-watch-<bucket>``), never the socket reader."""
        if include_history and updates_only:
            raise ValueError("include_history and updates_only cannot be combined")
        return ObjectWatcher(
            self._js,
            self.bucket,
            self._stream_name,
            ignore_deletes=ignore_deletes,
            include_history=include_history,
            updates_only=updates_only,
            cb=cb,
            max_buffered_bytes=max_buffered_bytes,
        )

    def list(
        self, *, ignore_deletes: bool = True, timeout: float | None = None
    ) -> list[ObjectInfo]:
        """The info of every object (deleted ones too with ``ignore_deletes=False``),
        in the order they were last written; ``[]`` when there is none.
        TimeoutError when no info comes for ``timeout`` seconds (default: the
        JetStream context's timeout), e.g. while the server is away."""
        stall = self._js._timeout if timeout is None else timeout
        out: list[ObjectInfo] = []
        with self.watch(ignore_deletes=ignore_deletes) as w:
            while True:  # the test inside: see tests/unit/test_interrupt_cover.py
                info = w.next(timeout=stall)
                if info is None:
                    break
                out.append(info)
        return out

    # -- the bucket ------------------------------------------------------------------

    def seal(self) -> None:
        """Seal the bucket: nothing can be put, changed or deleted any more."""
        cfg = self._stream.info().config
        cfg.sealed = True
        resp = self._js._api_request(f"STREAM.UPDATE.{self._stream_name}", cfg.as_dict())
        self._stream = Stream(self._js, StreamInfo.from_response(resp))

    def status(self) -> ObjectStoreStatus:
        """The bucket's state and settings."""
        return ObjectStoreStatus.of(self._stream.info())
