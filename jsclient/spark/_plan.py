"""Planning a Spark read of a stream: which sequence ranges, read how.

Planning (on the driver) takes one ``STREAM.INFO`` snapshot and clips the
stream's ``[first_seq, last_seq]`` by ``startSeq``/``endSeq`` and by
``startTime``/``endTime`` (resolved to sequences by a direct get at that time
where the stream allows direct gets, else with a short-lived consumer that
starts at that time), then splits it into contiguous inclusive ranges
(:class:`SeqRange`, one Spark task each) that :mod:`jsclient.spark._read`
reads. The streaming source splits its micro-batches with the same
:func:`split`.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import InputPartition

from jsclient import _impl, errors
from jsclient.jetstream.manage import direct as _direct
from jsclient.spark.options import ReadOptions, format_time_ns

__all__ = [
    "SeqRange",
    "StreamState",
    "consumer_config",
    "delete_quietly",
    "first_seq_at",
    "plan_ranges",
    "pull_size",
    "split",
    "stream_state",
    "use_direct",
]

log = logging.getLogger("jsclient.spark")
_parse_jsack = _impl.jsack.parse_jsack
# Never pull more than this many messages in one request, whatever batchSize says.
_MAX_PULL = 100_000


@dataclass
class SeqRange(InputPartition):
    """One Spark task: the inclusive stream-sequence range ``[start, end]`` of ``stream``.

    ``pull`` is how many messages one pull request asks for (``batchSize``,
    lowered for large messages so one pull stays near ``maxBatchBytes``).
    ``first_expected`` (streaming, ``failOnDataLoss``) asks the reader to check
    that no message of the range was removed before it started.
    """

    index: int
    stream: str
    start: int
    end: int
    pull: int
    first_expected: bool = False
    direct: bool = False  # read by batched direct gets, else by a pull consumer

    def __post_init__(self) -> None:
        InputPartition.__init__(self, (self.start, self.end))


@dataclass(frozen=True)
class StreamState:
    """The part of a stream's info a plan needs."""

    first_seq: int
    last_seq: int
    messages: int
    bytes: int
    allow_direct: bool = False

    @property
    def next_seq(self) -> int:
        """The sequence the next stored message will get."""
        return self.last_seq + 1

    @property
    def avg_size(self) -> int:
        return max(1, self.bytes // self.messages) if self.messages else 1


def stream_state(js: Any, stream: str) -> StreamState:
    """One ``STREAM.INFO`` snapshot of ``stream``."""
    info = js.stream(stream).cached_info
    state = info.state
    return StreamState(
        first_seq=int(state.first_seq or 0),
        last_seq=int(state.last_seq or 0),
        messages=int(state.messages or 0),
        bytes=int(state.bytes or 0),
        allow_direct=bool(info.config.allow_direct),
    )


def use_direct(opts: ReadOptions, state: StreamState) -> bool:
    """Read ranges by batched direct gets? With ``readMode=direct``, where the
    stream allows them and one request can carry the filter (one subject at
    most); else the consumer, with a log line saying why."""
    if opts.read_mode != "direct":
        return False
    if not state.allow_direct:
        log.info(
            "jetstream: stream %s does not allow direct gets; reading with a consumer", opts.stream
        )
        return False
    if len(opts.subjects) > 1:
        log.info(
            "jetstream: %d subject filters need a consumer; reading with one", len(opts.subjects)
        )
        return False
    return True


def pull_size(opts: ReadOptions, state: StreamState) -> int:
    """Messages per pull: ``batchSize``, fewer when the average message is large."""
    by_bytes = max(1, opts.max_batch_bytes // state.avg_size)
    return max(1, min(opts.batch_size, by_bytes, _MAX_PULL))


def split(
    stream: str,
    lo: int,
    hi: int,
    parts: int | None,
    per_partition: int,
    pull: int,
    first_expected: bool = False,
    direct: bool = False,
) -> list[SeqRange]:
    """Split ``[lo, hi]`` into contiguous inclusive ranges.

    ``parts`` ranges when given (never more than there are sequences), else
    one range per ``per_partition`` sequences.
    """
    if hi < lo:
        return []
    span = hi - lo + 1
    n = parts if parts is not None else math.ceil(span / per_partition)
    n = max(1, min(n, span))
    size, extra = divmod(span, n)
    ranges = []
    start = lo
    for i in range(n):
        end = start + size - 1 + (1 if i < extra else 0)
        ranges.append(SeqRange(i, stream, start, end, pull, first_expected, direct))
        start = end + 1
    return ranges


def consumer_config(opts: ReadOptions, **start: Any) -> dict[str, Any]:
    """The config of an ephemeral consumer of the read (``start``: its deliver policy)."""
    cfg: dict[str, Any] = {
        "ack_policy": "none",
        "mem_storage": True,
        "num_replicas": 1,
        "max_deliver": -1,
        "inactive_threshold": max(60.0, 2 * opts.stall_timeout),
        **start,
    }
    if len(opts.subjects) == 1:
        cfg["filter_subject"] = opts.subjects[0]
    elif opts.subjects:
        cfg["filter_subjects"] = list(opts.subjects)
    return cfg


def first_seq_at(
    js: Any, opts: ReadOptions, t_ns: int, state: StreamState | None = None
) -> int | None:
    """The sequence of the first message (matching the filter) stored at or after ``t_ns``.

    A direct get answers where the stream allows it and there is at most one
    filter (with several, the first message at that time of any subject: the
    range read filters); else a short-lived consumer starting at that time.
    """
    if state is not None and state.allow_direct:
        req: dict[str, Any] = {"start_time": format_time_ns(t_ns)}
        if len(opts.subjects) == 1:
            req["next_by_subj"] = opts.subjects[0]
        read = _direct.DirectRead(js, opts.stream, req, limit=1, max_bytes=None)
        for msg in read.messages():
            return _direct.uint(_direct._header_value(msg._hdr, _direct.SEQ_HDR))
        return None
    consumer = js.create_consumer(
        opts.stream,
        **consumer_config(
            opts, deliver_policy="by_start_time", opt_start_time=format_time_ns(t_ns)
        ),
    )
    try:
        if consumer.cached_info.num_pending == 0:
            return None
        for msg in consumer.fetch(1, expires=opts.fetch_timeout):
            seq: int = _parse_jsack(msg.reply)[3]
            return seq
        return None
    finally:
        delete_quietly(consumer)


def plan_ranges(js: Any, opts: ReadOptions) -> tuple[list[SeqRange], StreamState]:
    """The ranges of a batch read (possibly none) and the stream state they came from."""
    state = stream_state(js, opts.stream)
    if state.messages == 0:
        return [], state
    lo, hi = state.first_seq, state.last_seq
    if opts.start_seq is not None:
        lo = max(lo, opts.start_seq)
    if opts.end_seq is not None:
        hi = min(hi, opts.end_seq)
    if opts.start_time_ns is not None and lo <= hi:
        at = first_seq_at(js, opts, opts.start_time_ns, state)
        lo = max(lo, at) if at is not None else hi + 1
    if opts.end_time_ns is not None and lo <= hi:
        after = first_seq_at(js, opts, opts.end_time_ns + 1, state)
        if after is not None:
            hi = min(hi, after - 1)
    ranges = split(
        opts.stream,
        lo,
        hi,
        opts.partitions,
        opts.max_messages_per_partition,
        pull_size(opts, state),
        direct=use_direct(opts, state),
    )
    return ranges, state


def delete_quietly(oc: Any) -> None:
    """Delete a consumer of the read; one left behind expires on its own."""
    try:
        oc.delete()
    except errors.Error as exc:  # it expires on its own (inactive threshold)
        log.debug("jetstream: could not delete consumer %s: %s", oc.name, exc)
