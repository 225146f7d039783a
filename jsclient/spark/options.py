"""Options of the ``jetstream`` data source: parsed once, checked, and kept picklable.

Spark hands a data source its options as strings in a case-insensitive map
(``.option("startSeq", 5)`` arrives as ``{"startseq": "5"}``). This module
turns them into frozen dataclasses of plain values, so the readers and writers
that Spark pickles to its executors carry no connection, lock or socket, and
every bad value fails early with :class:`jsclient.errors.SparkOptionError`
naming the option. Nothing here imports pyspark.

Secrets (password, token, nkey seed) never appear in a ``repr`` or an error.
"""

from __future__ import annotations

import math
import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from jsclient import errors

__all__ = [
    "ConnectionOptions",
    "ReadOptions",
    "StreamReadOptions",
    "WriteOptions",
    "lower_keys",
    "parse_time_ns",
]

DEFAULT_SERVERS = "nats://127.0.0.1:4222"

# The reserved columns of the read schema. A write accepts them as input (so a
# DataFrame read from one stream can be written as is) and ignores stream, seq
# and timestamp: the target stream assigns its own.
READ_COLUMNS = ("stream", "subject", "seq", "timestamp", "data", "headers")
IGNORED_WRITE_COLUMNS = frozenset({"stream", "seq", "timestamp"})
#: How a read gets a range's messages: with an ephemeral pull consumer (the
#: default, measured as fast or faster), or by batched direct gets where the
#: stream allows them (direct).
READ_MODES = ("consumer", "direct")


def lower_keys(options: Mapping[str, Any]) -> dict[str, str]:
    """A plain dict with lower-cased keys (Spark's option names are case-insensitive)."""
    return {str(k).lower(): str(v) for k, v in options.items() if v is not None}


class _Opts:
    """Typed access to one option map; every failure names the option."""

    def __init__(self, options: Mapping[str, Any]) -> None:
        self.raw = lower_keys(options)

    def text(self, name: str, default: str | None = None) -> str | None:
        value = self.raw.get(name.lower())
        if value is None or value.strip() == "":
            return default
        return value.strip()

    def secret(self, name: str) -> str | None:
        value = self.raw.get(name.lower())
        return value if value else None

    def opt_int(self, name: str, minimum: int = 0) -> int | None:
        text = self.text(name)
        if text is None:
            return None
        # ASCII digits only: int() would also take " 5", "+5", "1_0" and other scripts' digits.
        if not (text.isascii() and text.isdigit()):
            raise errors.SparkOptionError(
                f"jetstream: option '{name}' must be a whole number, got {text!r}"
            )
        value = int(text)
        if value < minimum:
            raise errors.SparkOptionError(
                f"jetstream: option '{name}' must be at least {minimum}, got {value}"
            )
        return value

    def integer(self, name: str, default: int, minimum: int = 0) -> int:
        value = self.opt_int(name, minimum)
        return default if value is None else value

    def seconds(self, name: str, default: float, minimum: float = 0.0) -> float:
        text = self.text(name)
        if text is None:
            return default
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value <= minimum:
            raise errors.SparkOptionError(
                f"jetstream: option '{name}' must be a number of seconds above {minimum}, "
                f"got {text!r}"
            )
        return value

    def flag(self, name: str, default: bool) -> bool:
        text = self.text(name)
        if text is None:
            return default
        low = text.lower()
        if low in ("true", "1", "yes"):
            return True
        if low in ("false", "0", "no"):
            return False
        raise errors.SparkOptionError(
            f"jetstream: option '{name}' must be true or false, got {text!r}"
        )

    def time_ns(self, name: str) -> int | None:
        text = self.text(name)
        if text is None:
            return None
        return parse_time_ns(text, name)

    def timestamp_ns(self, name: str) -> int | None:
        """An ISO 8601 / RFC 3339 time, or whole milliseconds since the epoch."""
        text = self.text(name)
        if text is None:
            return None
        if text.isascii() and text.isdigit():
            return int(text) * 1_000_000
        return parse_time_ns(text, name)

    def choice(self, name: str, default: str, allowed: tuple[str, ...]) -> str:
        text = self.text(name)
        if text is None:
            return default
        low = text.lower()
        if low not in allowed:
            raise errors.SparkOptionError(
                f"jetstream: option '{name}' must be one of {', '.join(allowed)}, got {text!r}"
            )
        return low


_FRACTION = re.compile(r"^(.*T\d\d:\d\d:\d\d)[.,](\d+)(.*)$")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def parse_time_ns(text: str, what: str = "time") -> int:
    """Nanoseconds since the epoch from an ISO 8601 time; a time without an offset is UTC.

    Up to nine fractional digits are kept (JetStream stamps messages in nanoseconds).
    """
    base = text.strip()
    nanos = 0
    match = _FRACTION.match(base)
    if match:
        head, frac, tail = match.groups()
        if len(frac) > 9:
            raise errors.SparkOptionError(
                f"jetstream: option '{what}': more than nine fractional digits in {text!r}"
            )
        nanos = int(frac.ljust(9, "0"))
        base = head + tail
    try:
        parsed = datetime.fromisoformat(base)
    except ValueError:
        raise errors.SparkOptionError(
            f"jetstream: option '{what}' must be an ISO 8601 time "
            f"(e.g. 2024-05-01T12:00:00Z), got {text!r}"
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    delta = parsed - _EPOCH
    # Integer arithmetic: a float timestamp would lose the nanoseconds.
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000 + nanos


def format_time_ns(ns: int) -> str:
    """RFC 3339 with nanoseconds, UTC (what the JetStream API takes for start times)."""
    secs, frac = divmod(ns, 1_000_000_000)
    stamp = datetime.fromtimestamp(secs, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{stamp}.{frac:09d}Z"


@dataclass(frozen=True)
class ConnectionOptions:
    """How a task connects: servers, auth, TLS, and the bounds on every network wait.

    A dead server costs at most ``connect_timeout`` per URL to find out; a
    connection lost mid-task is retried ``max_reconnects`` times,
    ``reconnect_wait`` apart, then the task fails.
    """

    servers: str = DEFAULT_SERVERS
    name: str = "jsclient-spark"
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    token: str | None = field(default=None, repr=False)
    creds: str | None = None
    nkey_seed: str | None = field(default=None, repr=False)
    tls_ca_file: str | None = None
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    tls_hostname: str | None = None
    tls_handshake_first: bool = False
    connect_timeout: float = 2.0
    request_timeout: float = 5.0
    max_reconnects: int = 3
    reconnect_wait: float = 0.5
    domain: str | None = None
    api_prefix: str | None = None

    @classmethod
    def parse(cls, options: Mapping[str, Any] | _Opts) -> ConnectionOptions:
        o = options if isinstance(options, _Opts) else _Opts(options)
        servers = o.text("servers") or o.text("url") or DEFAULT_SERVERS
        cert, key = o.text("tlsCertFile"), o.text("tlsKeyFile")
        if (cert is None) != (key is None):
            raise errors.SparkOptionError(
                "jetstream: options 'tlsCertFile' and 'tlsKeyFile' go together"
            )
        domain, prefix = o.text("jsDomain"), o.text("apiPrefix")
        if domain and prefix:
            raise errors.SparkOptionError("jetstream: give 'jsDomain' or 'apiPrefix', not both")
        return cls(
            servers=servers,
            name=o.text("connectionName", "jsclient-spark") or "jsclient-spark",
            user=o.text("user"),
            password=o.secret("password"),
            token=o.secret("token"),
            creds=o.text("creds"),
            nkey_seed=o.secret("nkeySeed"),
            tls_ca_file=o.text("tlsCaFile"),
            tls_cert_file=cert,
            tls_key_file=key,
            tls_hostname=o.text("tlsHostname"),
            tls_handshake_first=o.flag("tlsHandshakeFirst", False),
            connect_timeout=o.seconds("connectTimeout", 2.0),
            request_timeout=o.seconds("requestTimeout", 5.0),
            max_reconnects=o.integer("maxReconnects", 3),
            reconnect_wait=o.seconds("reconnectWait", 0.5),
            domain=domain,
            api_prefix=prefix,
        )

    @property
    def safe_servers(self) -> str:
        """The server list without any user:password@ part (for messages and logs)."""
        return re.sub(r"//[^@/]*@", "//", self.servers)

    def tls_context(self) -> ssl.SSLContext | None:
        if not (self.tls_ca_file or self.tls_cert_file):
            return None
        ctx = ssl.create_default_context(cafile=self.tls_ca_file)
        if self.tls_cert_file and self.tls_key_file:
            ctx.load_cert_chain(self.tls_cert_file, self.tls_key_file)
        return ctx

    def connect(self) -> Any:
        """A new :class:`jsclient.Client` with every wait bounded (call on the executor)."""
        import jsclient

        kwargs: dict[str, Any] = {}
        if self.tls_hostname:
            kwargs["tls_hostname"] = self.tls_hostname
        if self.tls_handshake_first:
            kwargs["tls_handshake_first"] = True
        try:
            return jsclient.connect(
                self.servers,
                name=self.name,
                user=self.user,
                password=self.password,
                token=self.token,
                creds=self.creds,
                nkey_seed=self.nkey_seed,
                tls=self.tls_context(),
                connect_timeout=self.connect_timeout,
                reconnect=self.max_reconnects > 0,
                max_reconnect_attempts=self.max_reconnects,
                reconnect_wait=self.reconnect_wait,
                **kwargs,
            )
        except errors.AuthorizationError as exc:
            raise errors.AuthorizationError(
                f"jetstream: cannot connect to {self.safe_servers}: the server refused "
                f"the credentials: {exc}"
            ) from exc
        except (errors.Error, OSError) as exc:
            raise errors.NoServersError(
                f"jetstream: cannot connect to {self.safe_servers} "
                f"(connect timeout {self.connect_timeout:g} s): {exc}"
            ) from exc

    def jetstream(self, nc: Any, **kwargs: Any) -> Any:
        """The JetStream context on ``nc`` with this domain/prefix and request timeout."""
        if self.domain:
            kwargs["domain"] = self.domain
        elif self.api_prefix:
            kwargs["prefix"] = self.api_prefix
        return nc.jetstream(timeout=self.request_timeout, **kwargs)


def _subjects(text: str | None) -> tuple[str, ...]:
    if text is None:
        return ()
    return tuple(s.strip() for s in text.split(",") if s.strip())


@dataclass(frozen=True)
class ReadOptions:
    """What a batch read (and each micro-batch of a streaming read) reads."""

    conn: ConnectionOptions
    stream: str
    subjects: tuple[str, ...] = ()
    start_seq: int | None = None
    end_seq: int | None = None
    start_time_ns: int | None = None
    end_time_ns: int | None = None
    partitions: int | None = None
    max_messages_per_partition: int = 100_000
    batch_size: int = 10_000
    max_batch_bytes: int = 32 * 1024 * 1024
    fetch_timeout: float = 5.0
    stall_timeout: float = 30.0
    read_mode: str = "consumer"  # consumer | direct

    @classmethod
    def parse(cls, options: Mapping[str, Any]) -> ReadOptions:
        o = _Opts(options)
        stream = o.text("stream") or o.text("path")
        if not stream:
            raise errors.SparkOptionError(
                "jetstream: option 'stream' is required to read (or pass it to load())"
            )
        start_seq, end_seq = o.opt_int("startSeq", 1), o.opt_int("endSeq", 1)
        if start_seq is not None and end_seq is not None and end_seq < start_seq:
            raise errors.SparkOptionError(
                f"jetstream: 'endSeq' ({end_seq}) is before 'startSeq' ({start_seq})"
            )
        start_t, end_t = o.time_ns("startTime"), o.time_ns("endTime")
        starting_ts = o.timestamp_ns("startingTimestamp")
        if starting_ts is not None:
            if start_t is not None:
                raise errors.SparkOptionError(
                    "jetstream: give 'startingTimestamp' or 'startTime', not both"
                )
            if o.text("startingOffsets") is not None:
                raise errors.SparkOptionError(
                    "jetstream: give 'startingTimestamp' or 'startingOffsets', not both"
                )
            start_t = starting_ts
        if start_t is not None and end_t is not None and end_t < start_t:
            raise errors.SparkOptionError("jetstream: 'endTime' is before 'startTime'")
        subjects = _subjects(o.text("subject") or o.text("subjects"))
        read_mode = o.choice("readMode", "consumer", READ_MODES)
        return cls(
            conn=ConnectionOptions.parse(o),
            stream=stream,
            subjects=subjects,
            start_seq=start_seq,
            end_seq=end_seq,
            start_time_ns=start_t,
            end_time_ns=end_t,
            partitions=o.opt_int("partitions", 1) or o.opt_int("numPartitions", 1),
            max_messages_per_partition=o.integer("maxMessagesPerPartition", 100_000, 1),
            batch_size=o.integer("batchSize", 10_000, 1),
            max_batch_bytes=o.integer("maxBatchBytes", 32 * 1024 * 1024, 1),
            fetch_timeout=o.seconds("fetchTimeout", 5.0),
            stall_timeout=o.seconds("stallTimeout", 30.0),
            read_mode=read_mode,
        )


@dataclass(frozen=True)
class StreamReadOptions:
    """Streaming-only read options (on top of :class:`ReadOptions`)."""

    read: ReadOptions
    starting: str = "earliest"  # earliest | latest | <seq> | <ISO time>
    max_messages_per_trigger: int | None = None
    fail_on_data_loss: bool = True

    @classmethod
    def parse(cls, options: Mapping[str, Any]) -> StreamReadOptions:
        o = _Opts(options)
        read = ReadOptions.parse(options)
        starting = o.text("startingOffsets")
        if starting is None:
            if read.start_seq is not None:
                starting = str(read.start_seq)
            elif read.start_time_ns is not None:
                starting = format_time_ns(read.start_time_ns)
            else:
                starting = "earliest"
        low = starting.lower()
        if low not in ("earliest", "latest") and not (starting.isascii() and starting.isdigit()):
            parse_time_ns(starting, "startingOffsets")
            low = starting
        return cls(
            read=read,
            starting=low,
            max_messages_per_trigger=o.opt_int("maxMessagesPerTrigger", 1),
            fail_on_data_loss=o.flag("failOnDataLoss", True),
        )


@dataclass(frozen=True)
class WriteOptions:
    """How a write publishes: subject, expected stream, message ids, the ack window."""

    conn: ConnectionOptions
    subject: str | None = None
    stream: str | None = None
    msg_id_column: str | None = None
    write_id: str | None = None
    sink_id: str | None = None
    publish_window: int = 4000
    publish_timeout: float = 30.0
    publish_retries: int = 3
    ignore_extra_columns: bool = False

    @classmethod
    def parse(cls, options: Mapping[str, Any]) -> WriteOptions:
        o = _Opts(options)
        subject = o.text("subject")
        if subject is not None and not _valid_publish_subject(subject):
            raise errors.SparkOptionError(
                f"jetstream: option 'subject' must be a subject to publish to "
                f"(no spaces or wildcards), got {subject!r}"
            )
        return cls(
            conn=ConnectionOptions.parse(o),
            subject=subject,
            stream=o.text("stream") or o.text("path"),
            msg_id_column=o.text("msgIdColumn"),
            write_id=o.text("writeId"),
            sink_id=o.text("sinkId"),
            publish_window=o.integer("publishWindow", 4000, 1),
            publish_timeout=o.seconds("publishTimeout", 30.0),
            publish_retries=o.integer("publishRetries", 3, 0),
            ignore_extra_columns=o.flag("ignoreExtraColumns", False),
        )


def _valid_publish_subject(subject: str) -> bool:
    if not subject or any(c in subject for c in " \t\r\n"):
        return False
    tokens = subject.split(".")
    return all(t and t not in ("*", ">") for t in tokens)
