"""Reading one planned sequence range (:mod:`jsclient.spark._plan`) into Arrow batches.

With ``readMode=direct`` a range is read by batched direct gets (ADR-31,
server 2.11+) where the stream allows direct gets and the read has at most one
subject filter: pages of ``batchSize`` messages from the range's first
sequence, nothing created on the server, answered by any replica. Measured on
one 2-core machine (server and reader sharing it) it reads a 100k range about
as fast as the consumer, with less reader CPU but more server CPU (the server
formats six headers per message), so the consumer stays the default.
Otherwise (the default) a range is read with an ephemeral pull consumer (ack policy
none, memory storage, one replica) that starts at the range's first sequence
and pulls at most what is left of the range per request, so it reads little
past the end; the next pull goes out before the Arrow arrays of the last one
are built. It stops at the range's last sequence, or when the server says
nothing is pending (``num_pending == 0`` in the last message's metadata).
Deleted messages and messages outside the subject filter are simply never
delivered. Like an ordered consumer it checks that consumer sequences have no
gap and recreates the consumer after the last sequence it read when one does
(or when the consumer is lost); it does this itself rather than through
``OrderedConsumer`` because it parses each reply subject once for both the
order check and the row (sequence, timestamp, pending), which is a third of
the per-message cost. User headers are decoded only for messages that have
them, keeping every value of a multi-valued header.

Every wait is bounded: connecting by the connect timeout, API requests by the
request timeout, each pull by ``fetchTimeout`` (plus the client's guard), and
a range that stops making progress fails after ``stallTimeout``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from jsclient import _impl, errors
from jsclient.jetstream.manage import direct as _direct
from jsclient.protocol import headers as _headers
from jsclient.spark._plan import (
    SeqRange,
    StreamState,
    consumer_config,
    delete_quietly,
    plan_ranges,
    pull_size,
    split,
    stream_state,
)
from jsclient.spark.options import ReadOptions

# The planning names stay importable from here, where they were first defined.
__all__ = [
    "SeqRange",
    "StreamState",
    "plan_ranges",
    "pull_size",
    "read_range",
    "split",
    "stream_state",
]

log = logging.getLogger("jsclient.spark")
_parse_jsack = _impl.jsack.parse_jsack
_decode_headers = _headers.decode
# Consumers recreated (or direct reads restarted) in a row without a message read between.
_MAX_RESETS = 5


class _Rows:
    """Column lists of the messages read since the last Arrow batch."""

    __slots__ = ("datas", "hdrs", "nbytes", "seqs", "subjects", "times")

    def __init__(self) -> None:
        self.subjects: list[str] = []
        self.seqs: list[int] = []
        self.times: list[int] = []
        self.datas: list[bytes] = []
        self.hdrs: list[Any] = []
        self.nbytes = 0

    def __len__(self) -> int:
        return len(self.seqs)


def _to_batch(rows: _Rows, stream: str, schema: pa.Schema) -> pa.RecordBatch:
    n = len(rows)
    arrays = []
    for f in schema:
        name, t = f.name, f.type
        if name == "stream":
            arr = pa.array([stream] * n, type=t)
        elif name == "subject":
            arr = pa.array(rows.subjects, type=t)
        elif name == "seq":
            arr = pa.array(rows.seqs, type=t)
        elif name == "timestamp":
            arr = pc.divide(pa.array(rows.times, type=pa.int64()), 1000).cast(t)
        elif name == "data":
            arr = pa.array(rows.datas, type=pa.binary())
            if t != arr.type:
                try:
                    arr = arr.cast(t)
                except pa.ArrowInvalid as exc:
                    raise errors.SparkReadError(
                        f"jetstream: a payload of stream {stream!r} is not valid {t} "
                        f"(read the 'data' column as binary): {exc}"
                    ) from None
        elif name == "headers":
            arr = pa.array(rows.hdrs, type=t)
        else:  # the reader checked the schema; this is a bug
            raise errors.SparkReadError(f"jetstream: unknown column {name!r}")
        arrays.append(arr)
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def read_range(
    opts: ReadOptions, rng: SeqRange, schema: pa.Schema, fail_on_data_loss: bool = False
) -> Iterator[pa.RecordBatch]:
    """Arrow batches (``schema``) of the messages in ``rng``, in sequence order."""
    conn = opts.conn
    got = 0
    try:
        nc = conn.connect()
    except errors.Error as exc:
        raise errors.SparkReadError(
            f"jetstream: reading stream {opts.stream!r} sequences {rng.start}..{rng.end}: {exc}"
        ) from exc
    try:
        js = conn.jetstream(nc)
        for batch in _read(js, opts, rng, schema, fail_on_data_loss):
            got += batch.num_rows
            yield batch
    except (errors.DataLossError, errors.SparkReadError):
        raise
    except errors.Error as exc:
        raise errors.SparkReadError(
            f"jetstream: reading stream {opts.stream!r} sequences {rng.start}..{rng.end} "
            f"from {conn.safe_servers} failed after {got} rows: {exc}"
        ) from exc
    finally:
        nc.close()


def _read(
    js: Any, opts: ReadOptions, rng: SeqRange, schema: pa.Schema, fail_on_data_loss: bool
) -> Iterator[pa.RecordBatch]:
    start, end = rng.start, rng.end
    if rng.first_expected and fail_on_data_loss:
        state = stream_state(js, opts.stream)
        if state.first_seq > start:
            raise errors.DataLossError(
                f"jetstream: messages {start}..{min(end, state.first_seq - 1)} of stream "
                f"{opts.stream!r} were removed (purge, limits or deletes) before the query "
                "read them; set failOnDataLoss=false to skip them"
            )
    if rng.direct:
        yield from _direct_batches(js, opts, rng, schema)
        return
    reader = _RangeReader(js, opts, rng, schema)
    try:
        # A for loop, not ``yield from``: 3.12 leaves a backward jump of
        # ``yield from`` outside this finally (tests/unit/test_interrupt_cover.py).
        for batch in reader.batches():  # noqa: UP028
            yield batch
    finally:
        reader.close()


def _direct_batches(
    js: Any, opts: ReadOptions, rng: SeqRange, schema: pa.Schema
) -> Iterator[pa.RecordBatch]:
    """Read ``rng`` by batched direct gets, one page (``rng.pull`` messages) at a time.

    A wait that times out (a lost connection, a restarted server) starts a new
    read after the last sequence kept, at most ``_MAX_RESETS`` times in a row.
    """
    stream, end = rng.stream, rng.end
    t_lo, t_hi = opts.start_time_ns, opts.end_time_ns
    timed = t_lo is not None or t_hi is not None
    lo_ns = t_lo if t_lo is not None else -1
    hi_ns = t_hi if t_hi is not None else 1 << 80
    pull, max_bytes = rng.pull, opts.max_batch_bytes
    fields = _direct._direct_headers
    decode = _decode_headers
    meta = _direct.SERVER_HEADERS  # what a direct get adds to a stored message
    rows = _Rows()
    last = rng.start - 1
    resets = 0
    while last < end:
        req: dict[str, Any] = {"seq": last + 1}
        if opts.subjects:
            req["next_by_subj"] = opts.subjects[0]
        read = _direct.DirectRead(
            js,
            stream,
            req,
            limit=end - last,
            max_bytes=None,
            timeout=opts.fetch_timeout,
            page_msgs=pull,
            page_bytes=max_bytes,
        )
        it = read.messages()
        try:
            for msg in it:
                # A full batch is built only once the next message is here: a page's
                # last message is followed by its end, which sends the next request,
                # so the server sends that page while this thread builds the batch.
                if len(rows) >= pull or rows.nbytes >= max_bytes:
                    out = _to_batch(rows, stream, schema)
                    rows = _Rows()
                    yield out
                raw = msg._hdr
                assert raw is not None  # messages() yields only answers with headers
                subject, seq, ts, _pending, _last, others = fields(raw)
                if seq <= last:
                    raise errors.SparkReadError(
                        f"jetstream: direct get of stream {stream!r} answered sequence "
                        f"{seq} after {last}"
                    )
                if seq > end:
                    last = end
                    break
                last = seq
                if ts is None:
                    raise errors.SparkReadError(
                        f"jetstream: direct get of stream {stream!r} sequence {seq} has no "
                        "valid Nats-Time-Stamp"
                    )
                if timed and not lo_ns <= ts <= hi_ns:
                    continue
                data = msg.data
                rows.subjects.append(subject)
                rows.seqs.append(seq)
                rows.times.append(ts)
                rows.datas.append(data)
                rows.nbytes += len(data)
                if others:  # the publisher's own headers
                    user = [kv for kv in decode(raw)[2].items() if kv[0] not in meta]
                    rows.hdrs.append(user or None)
                else:
                    rows.hdrs.append(None)
                resets = 0
            else:
                break  # the server has nothing more in the range
        except (errors.TimeoutError, errors.ConnectionClosedError) as exc:
            resets += 1
            if resets > _MAX_RESETS:
                raise
            log.info("jetstream: direct get after sequence %d failed (%s); reading on", last, exc)
        finally:
            it.close()
    if rows.seqs:
        yield _to_batch(rows, stream, schema)


class _RangeReader:
    """Reads one range with an ephemeral consumer, recreated after a gap or its loss."""

    def __init__(self, js: Any, opts: ReadOptions, rng: SeqRange, schema: pa.Schema) -> None:
        self.js = js
        self.opts = opts
        self.rng = rng
        self.schema = schema
        self.last = rng.start - 1  # stream sequence of the last message kept
        self.consumer: Any = None
        self.cseq = 0  # consumer sequence of that message, in the current consumer
        self.resets = 0

    def _create(self) -> bool:
        """A consumer starting after ``last``; False when it has nothing to deliver."""
        old, self.consumer = self.consumer, None
        if old is not None:
            delete_quietly(old)
        self.consumer = self.js.create_consumer(
            self.opts.stream,
            **consumer_config(
                self.opts, deliver_policy="by_start_sequence", opt_start_seq=self.last + 1
            ),
        )
        self.cseq = 0
        return bool(self.consumer.cached_info.num_pending)

    def _reset(self, why: object) -> bool:
        self.resets += 1
        if self.resets > _MAX_RESETS:
            raise errors.SparkReadError(
                f"jetstream: the consumer was lost {self.resets} times in a row without "
                f"progress after sequence {self.last}: {why}"
            )
        log.info("jetstream: recreating the consumer after sequence %d: %s", self.last, why)
        return self._create()

    def _fetch(self) -> Any:
        n = max(1, min(self.rng.pull, self.rng.end - self.last))
        return self.consumer.fetch(n, expires=self.opts.fetch_timeout)

    def close(self) -> None:
        if self.consumer is not None:
            delete_quietly(self.consumer)
            self.consumer = None

    def batches(self) -> Iterator[pa.RecordBatch]:
        if not self._create():
            return
        opts, rng, schema = self.opts, self.rng, self.schema
        stream, end, pull = rng.stream, rng.end, rng.pull
        t_lo, t_hi = opts.start_time_ns, opts.end_time_ns
        timed = t_lo is not None or t_hi is not None
        lo_ns = t_lo if t_lo is not None else -1
        hi_ns = t_hi if t_hi is not None else 1 << 80
        max_bytes = opts.max_batch_bytes
        parse = _parse_jsack
        decode = _decode_headers
        rows = _Rows()
        stalled_since: float | None = None
        batch = self._fetch()
        finished = False
        while not finished:
            count = 0
            gap: object = None
            name, cseq, last = self.consumer.name, self.cseq, self.last
            subjects, seqs, times = rows.subjects, rows.seqs, rows.times
            datas, hdrs = rows.datas, rows.hdrs
            nbytes = rows.nbytes
            lost: errors.Error | None = None
            try:
                for msg in batch:
                    _s, consumer, _d, sseq, mseq, ts, pending, _dom = parse(msg.reply)
                    if mseq != cseq + 1 or consumer != name:
                        gap = f"consumer sequence {mseq} after {cseq} ({consumer})"
                        break
                    cseq = mseq
                    count += 1
                    if sseq > end:
                        finished = True
                        break
                    last = sseq
                    if not timed or lo_ns <= ts <= hi_ns:
                        data = msg.data
                        subjects.append(msg.subject)
                        seqs.append(sseq)
                        times.append(ts)
                        datas.append(data)
                        raw = msg.raw_headers
                        hdrs.append(None if raw is None else list(decode(raw)[2].items()) or None)
                        nbytes += len(data)
                    if sseq >= end or pending == 0:
                        finished = True
                        break
            except (errors.ConsumerNotFoundError, errors.ConsumerDeletedError) as exc:
                lost = exc  # raised at the batch's end, after the messages before it
            self.cseq, self.last = cseq, last
            rows.nbytes = nbytes
            if count:
                self.resets = 0
            if not finished:
                error = lost or batch.error
                if gap is not None or isinstance(
                    error, errors.ConsumerDeletedError | errors.NoRespondersError
                ):
                    finished = not self._reset(gap or error)
                elif count:
                    stalled_since = None
                elif self._nothing_pending(batch):
                    finished = True
                else:
                    now = time.monotonic()
                    if stalled_since is None:
                        stalled_since = now
                    elif now - stalled_since > opts.stall_timeout:
                        raise errors.SparkReadError(
                            f"jetstream: no progress reading stream {stream!r} after sequence "
                            f"{self.last} (range {rng.start}..{end}) for "
                            f"{opts.stall_timeout:g} s" + (f": {error}" if error else "")
                        )
            if not finished:
                # Ask for the next messages before building Arrow arrays, so the
                # server streams them while this thread converts.
                batch = self._fetch()
            if rows.seqs and (finished or len(rows) >= pull or rows.nbytes >= max_bytes):
                out = _to_batch(rows, stream, schema)
                rows = _Rows()
                yield out
        if rows.seqs:
            yield _to_batch(rows, stream, schema)

    def _nothing_pending(self, batch: Any) -> bool:
        """After an empty pull: is there really nothing left (or did the pull just fail)?"""
        if batch.error is not None:
            log.debug("jetstream: pull ended with %s", batch.error)
            return False
        try:
            return bool(self.consumer.info().num_pending == 0)
        except errors.Error as exc:
            log.debug("jetstream: consumer info failed: %s", exc)
            return False
