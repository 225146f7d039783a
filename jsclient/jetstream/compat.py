"""nats-py's names on the JetStream context, so a nats-py program ports by dropping
``async``/``await``.

:class:`NatsPyCompat` is a base class of :class:`~jsclient.jetstream.context.JetStream`:
it answers the names of nats-py's ``JetStreamManager`` and ``JetStreamContext``
that jsclient spells otherwise, with nats-py's parameters (names, order,
defaults) and return types. Each is a thin alias of a jsclient call and says
which; the work, the checks and the errors are that call's. Where a name is
both nats-py's and jsclient's (``update_stream``, ``delete_stream``,
``delete_consumer``, ``account_info``, ``pause_consumer``, ...) the jsclient
call stands, in the context itself; the migration page (``docs/migration.md``)
lists every nats-py name beside its jsclient call, and the differences.

The calls that need only a stream's name (``purge_stream``, ``get_msg``,
``delete_msg``, ``stream_info``, ``consumers_info``) make one request, as
nats-py's do, through the functions of :mod:`.manage.stream` rather than a
``Stream`` handle (whose making asks for the stream's info first).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import islice
from typing import TYPE_CHECKING, Any, Protocol

from jsclient import errors
from jsclient.jetstream.manage import stream as _stream
from jsclient.jetstream.manage.names import check_consumer_name, check_stream_name
from jsclient.jetstream.subscribe import push_setup as _push
from jsclient.jetstream.subscribe import workflow as _wf

if TYPE_CHECKING:
    from jsclient.api import ConsumerInfo, RawStreamMsg, StreamInfo
    from jsclient.jetstream._ctx import Context
    from jsclient.jetstream.consume.consumer import Consumer
    from jsclient.jetstream.manage.consumer_admin import ConsumerAdmin
    from jsclient.jetstream.manage.names import ConsumerConfigLike, StreamConfigLike
    from jsclient.jetstream.manage.stream import Stream
    from jsclient.jetstream.subscribe.push import JsSubscription
    from jsclient.msg import Msg

    class _Host(Context, Protocol):
        """What the aliases use of the context they are called on (the JetStream)."""

        _consumers: ConsumerAdmin

        def create_stream(
            self, config: StreamConfigLike | None = None, **fields: Any
        ) -> Stream: ...
        def streams(self, subject: str | None = None) -> Iterator[StreamInfo]: ...
        def publish_async_complete(self, timeout: float | None = None) -> None: ...
        def get_msg(
            self,
            stream_name: str,
            seq: int | None = None,
            subject: str | None = None,
            direct: bool | None = False,
            next: bool | None = False,
        ) -> RawStreamMsg: ...


#: nats-py's default pending limits of a push subscription (its
#: DEFAULT_JS_SUB_PENDING_MSGS_LIMIT / _BYTES_LIMIT), for ``subscribe_bind``.
NATS_PY_PENDING_MSGS = 512 * 1024
NATS_PY_PENDING_BYTES = 256 * 1024 * 1024


class NatsPyCompat:
    """nats-py's ``JetStreamManager`` / ``JetStreamContext`` names (see the module docstring)."""

    # -- streams -----------------------------------------------------------------

    def add_stream(
        self: _Host, config: StreamConfigLike | None = None, **params: Any
    ) -> StreamInfo:
        """``create_stream(config, **params)``, returning the new stream's ``StreamInfo``."""
        return self.create_stream(config, **params).cached_info

    def stream_info(self: _Host, name: str, subjects_filter: str | None = None) -> StreamInfo:
        """``stream(name).info()``; ``subjects_filter`` (a wildcard) fills
        ``state.subjects`` with the count of each matching subject."""
        check_stream_name(name)
        return _stream.stream_info(self, name, subjects_filter)

    def streams_info(self: _Host, offset: int = 0) -> list[StreamInfo]:
        """``list(streams())`` from the ``offset``-th stream on (every page, not one)."""
        return list(islice(self.streams(), offset, None))

    def streams_info_iterator(self: _Host, offset: int = 0) -> Iterator[StreamInfo]:
        """``streams()`` from the ``offset``-th stream on, page by page."""
        return islice(self.streams(), offset, None)

    def purge_stream(
        self: _Host,
        name: str,
        seq: int | None = None,
        subject: str | None = None,
        keep: int | None = None,
    ) -> bool:
        """``stream(name).purge(subject=subject, seq=seq, keep=keep)``; True."""
        check_stream_name(name)
        _stream.purge(self, name, subject, seq, keep)
        return True

    def find_stream_name_by_subject(self: _Host, subject: str) -> str:
        """The first of ``stream_names(subject=subject)``; StreamNotFoundError (a
        ``NotFoundError``) when no stream listens on ``subject``."""
        name = next(self.stream_names(subject), None)
        if name is None:
            raise errors.StreamNotFoundError(
                code=404, err_code=10059, description=f"no stream listens on {subject!r}"
            )
        return name

    # -- consumers ---------------------------------------------------------------

    def add_consumer(
        self: _Host,
        stream: str,
        config: ConsumerConfigLike | None = None,
        timeout: float | None = None,
        **params: Any,
    ) -> ConsumerInfo:
        """``create_or_update_consumer(stream, config, **params)`` (nats-py's call updates
        a consumer that exists), returning its ``ConsumerInfo``."""
        consumer: Consumer = self._consumers.upsert_consumer(stream, config, params, None, timeout)
        return consumer.cached_info

    def consumer_info(
        self: _Host, stream: str, consumer: str, timeout: float | None = None
    ) -> ConsumerInfo:
        """``consumer(stream, consumer).info()``: ConsumerNotFoundError if there is none."""
        check_stream_name(stream)
        check_consumer_name(consumer)
        return self._consumers.consumer_info(stream, consumer, timeout)

    def consumers_info(self: _Host, stream: str, offset: int | None = None) -> list[ConsumerInfo]:
        """``list(stream(stream).consumers())`` from the ``offset``-th on (every page)."""
        check_stream_name(stream)
        return list(islice(_stream.consumer_infos(self, stream), offset or 0, None))

    # -- messages ----------------------------------------------------------------

    def get_msg(
        self: _Host,
        stream_name: str,
        seq: int | None = None,
        subject: str | None = None,
        direct: bool | None = False,
        next: bool | None = False,
    ) -> RawStreamMsg:
        """``stream(stream_name).get_msg(...)``: by ``seq``; the last on ``subject``; with
        ``next=True`` the first on ``subject`` at or after ``seq``. ``direct=True`` reads
        by direct get (the stream must allow it), else the leader answers."""
        check_stream_name(stream_name)
        if next and subject is not None:
            req = _stream.msg_request(seq or None, None, subject)
        elif subject is not None:
            req = _stream.msg_request(None, subject, None)  # nats-py drops seq here
        else:
            req = _stream.msg_request(seq or None, None, None)
        return _stream.read_msg(self, stream_name, req, bool(direct))

    def get_last_msg(
        self: _Host, stream_name: str, subject: str, direct: bool | None = False
    ) -> RawStreamMsg:
        """``stream(stream_name).get_msg(last_by_subject=subject)``."""
        return self.get_msg(stream_name, subject=subject, direct=direct)

    def delete_msg(self: _Host, stream_name: str, seq: int) -> bool:
        """``stream(stream_name).delete_msg(seq, erase=True)``; True. It erases, as
        nats-py's call does (the server's default): the stored bytes are overwritten."""
        check_stream_name(stream_name)
        _stream.delete_msg(self, stream_name, seq, True)
        return True

    # -- subscriptions and publishing --------------------------------------------

    def subscribe_bind(
        self: _Host,
        stream: str,
        config: ConsumerConfigLike | None,
        consumer: str,
        cb: Callable[[Msg], Any] | None = None,
        manual_ack: bool = False,
        ordered_consumer: bool = False,
        pending_msgs_limit: int = NATS_PY_PENDING_MSGS,
        pending_bytes_limit: int = NATS_PY_PENDING_BYTES,
    ) -> JsSubscription:
        """``subscribe(None, queue, cb=cb, stream=stream, consumer=consumer, ...)``: a push
        subscription to the existing consumer, which is looked up (its deliver subject
        and settings are the server's); ``config`` gives only the queue, its
        ``deliver_group``."""
        queue = _wf.user_config(config).deliver_group if config is not None else None
        return _push.subscribe(
            self,
            None,
            queue or None,
            cb=cb,
            stream=stream,
            consumer=consumer,
            manual_ack=manual_ack,
            ordered_consumer=ordered_consumer,
            pending_msgs_limit=pending_msgs_limit,
            pending_bytes_limit=pending_bytes_limit,
        )

    def publish_async_completed(self: _Host, timeout: float | None = None) -> None:
        """``publish_async_complete(timeout)``: wait until every async publish is settled."""
        self.publish_async_complete(timeout)
