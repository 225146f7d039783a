"""Key and value codecs for a bucket (ADR-54), as orbit.go's ``kvcodec``.

A :class:`KeyCodec` turns the keys an application uses into the keys stored
(and back); a :class:`ValueCodec` does the same for values. :func:`wrap`
gives a bucket that applies them to every call: ``get``, ``put``, ``create``,
``update``, ``delete``, ``purge``, ``keys``, ``history`` and ``watch``.

Ready-made: :class:`NoOpCodec`, :class:`Base64Codec` (each key token, or the
whole value, as unpadded URL-safe base64), :class:`PathCodec` (``/a/b`` stored
as ``_root_.a.b``, ``a/b`` as ``a.b``); :class:`KeyChainCodec` and
:class:`ValueChainCodec` chain several: encoding runs them in order, decoding
in reverse. The stored bytes are orbit.go's, so a Go (or other) client with the
same codecs reads what jsclient writes.

Wildcards: a key codec that can encode a filter while keeping ``*`` and ``>``
(a :class:`FilterableKeyCodec`: all of the ready-made ones) works with
``watch`` and ``keys`` filters; with any other codec a filter with a wildcard
raises :class:`WildcardNotSupportedError` (watch everything instead and filter
the decoded keys). Encryption, compression: subclass :class:`ValueCodec`.
"""

from __future__ import annotations

import base64
import binascii
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from jsclient import errors
from jsclient._threads import log
from jsclient.jetstream.kv._entry import PUT, KeyValueEntry

if TYPE_CHECKING:
    from jsclient.jetstream.kv import KeyValue, KeyValueStatus, KeyWatcher

__all__ = [
    "Base64Codec",
    "CodecError",
    "CodecKeyValue",
    "CodecKeyWatcher",
    "FilterEncodeError",
    "FilterableKeyCodec",
    "KeyChainCodec",
    "KeyCodec",
    "KeyDecodeError",
    "KeyEncodeError",
    "NoCodecsError",
    "NoOpCodec",
    "PathCodec",
    "ValueChainCodec",
    "ValueCodec",
    "ValueDecodeError",
    "ValueEncodeError",
    "WildcardNotSupportedError",
    "wrap",
    "wrap_keys",
    "wrap_values",
]

# -- errors ---------------------------------------------------------------------


class CodecError(errors.JetStreamError):
    """Base of the codec errors."""

    default_message = "nats: KV codec error"


class NoCodecsError(CodecError, ValueError):
    """A chain made of no codecs."""

    default_message = "nats: at least one codec must be provided"


class WildcardNotSupportedError(CodecError, errors.InvalidKeyError):
    """A filter with ``*`` or ``>`` for a key codec that cannot keep wildcards."""

    default_message = "nats: codec does not support wildcard filtering"


class KeyEncodeError(CodecError):
    """A key codec failed to encode a key."""

    default_message = "nats: failed to encode key"


class KeyDecodeError(CodecError):
    """A key codec failed to decode a stored key."""

    default_message = "nats: failed to decode key"


class ValueEncodeError(CodecError):
    """A value codec failed to encode a value."""

    default_message = "nats: failed to encode value"


class ValueDecodeError(CodecError):
    """A value codec failed to decode a stored value."""

    default_message = "nats: failed to decode value"


class FilterEncodeError(CodecError):
    """A key codec failed to encode a filter."""

    default_message = "nats: failed to encode filter pattern"


# -- the interfaces ---------------------------------------------------------------


class KeyCodec(ABC):
    """Turns keys into stored keys and back. Raise any exception for a key that
    cannot be encoded or decoded: the bucket wraps it in a typed error."""

    @abstractmethod
    def encode_key(self, key: str) -> str:
        """The stored form of ``key``."""

    @abstractmethod
    def decode_key(self, key: str) -> str:
        """The key a stored key stands for."""


class FilterableKeyCodec(KeyCodec):
    """A key codec that can also encode a filter, keeping its ``*`` and ``>``."""

    @abstractmethod
    def encode_filter(self, filter: str) -> str:
        """The stored form of a key filter, wildcards kept."""


class ValueCodec(ABC):
    """Turns values into stored values and back: the hook for encryption or
    compression. Raise any exception for a value that cannot be handled."""

    @abstractmethod
    def encode_value(self, value: bytes) -> bytes:
        """The stored form of ``value``."""

    @abstractmethod
    def decode_value(self, value: bytes) -> bytes:
        """The value a stored value stands for."""


# -- ready-made codecs ----------------------------------------------------------


class NoOpCodec(FilterableKeyCodec, ValueCodec):
    """Keys, filters and values as they are."""

    def encode_key(self, key: str) -> str:
        """``key`` itself."""
        return key

    def decode_key(self, key: str) -> str:
        """``key`` itself."""
        return key

    def encode_filter(self, filter: str) -> str:
        """``filter`` itself."""
        return filter

    def encode_value(self, value: bytes) -> bytes:
        """``value`` itself."""
        return value

    def decode_value(self, value: bytes) -> bytes:
        """``value`` itself."""
        return value


def _b64encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64decode(text: str | bytes) -> bytes:
    raw = text.encode("ascii") if isinstance(text, str) else bytes(text)
    if any(c in raw for c in b"+/="):
        raise ValueError("illegal base64 data: not unpadded URL-safe base64")
    try:
        return base64.b64decode(raw + b"=" * (-len(raw) % 4), altchars=b"-_", validate=True)
    except binascii.Error as exc:
        raise ValueError(f"illegal base64 data: {exc}") from None


class Base64Codec(FilterableKeyCodec, ValueCodec):
    """Unpadded URL-safe base64 (Go's ``RawURLEncoding``): of each ``.``-separated
    key token (so any text fits in a key), and of a whole value."""

    def encode_key(self, key: str) -> str:
        """Each token base64-encoded."""
        return ".".join(_b64encode(t.encode()) for t in key.split("."))

    def decode_key(self, key: str) -> str:
        """Each token base64-decoded."""
        return ".".join(_b64decode(t).decode() for t in key.split("."))

    def encode_filter(self, filter: str) -> str:
        """Each token encoded but ``*`` and ``>``."""
        return ".".join(t if t in ("*", ">") else _b64encode(t.encode()) for t in filter.split("."))

    def encode_value(self, value: bytes) -> bytes:
        """The value base64-encoded."""
        return _b64encode(value).encode("ascii")

    def decode_value(self, value: bytes) -> bytes:
        """The value base64-decoded."""
        return _b64decode(value)


_ROOT = "_root_"


class PathCodec(FilterableKeyCodec, ValueCodec):
    """Path-like keys: ``/`` separates tokens; a leading ``/`` is the token
    ``_root_`` and a trailing one is dropped (``/a/b/`` is stored as ``_root_.a.b``).
    Values pass unchanged."""

    def encode_key(self, key: str) -> str:
        """``a/b`` as ``a.b``, ``/a/b`` as ``_root_.a.b``, ``/`` as ``_root_``."""
        if key.startswith("/"):
            if key == "/":
                return _ROOT
            key = f"{_ROOT}.{key[1:]}"
        return key.removesuffix("/").replace("/", ".")

    def decode_key(self, key: str) -> str:
        """The path a stored key stands for."""
        if key == _ROOT:
            return "/"
        if key.startswith(_ROOT + "."):
            return "/" + key[len(_ROOT) + 1 :].replace(".", "/")
        return key.replace(".", "/")

    def encode_filter(self, filter: str) -> str:
        """As :meth:`encode_key` (``*`` and ``>`` pass as tokens)."""
        return self.encode_key(filter)

    def encode_value(self, value: bytes) -> bytes:
        """``value`` itself."""
        return value

    def decode_value(self, value: bytes) -> bytes:
        """``value`` itself."""
        return value


def _through(
    x: Any, steps: Sequence[tuple[int, Callable[[Any], Any]]], error: type, what: str
) -> Any:
    """``x`` through each ``(index, step)`` in turn; a step's exception as ``error``."""
    for i, step in steps:
        try:
            x = step(x)
        except Exception as exc:
            raise error(f"nats: failed to {what} (codec {i}): {exc}") from exc
    return x


class KeyChainCodec(FilterableKeyCodec):
    """Several key codecs: encoded by each in order, decoded in reverse.

    Filters encode only when every codec of the chain is filterable
    (WildcardNotSupportedError otherwise)."""

    def __init__(self, *codecs: KeyCodec) -> None:
        if not codecs:
            raise NoCodecsError()
        self.codecs: tuple[KeyCodec, ...] = codecs

    def encode_key(self, key: str) -> str:
        """``key`` through each codec, first to last."""
        steps = [(i, c.encode_key) for i, c in enumerate(self.codecs)]
        return str(_through(key, steps, KeyEncodeError, "encode key"))

    def decode_key(self, key: str) -> str:
        """``key`` through each codec, last to first."""
        steps = [(i, c.decode_key) for i, c in enumerate(self.codecs)][::-1]
        return str(_through(key, steps, KeyDecodeError, "decode key"))

    def encode_filter(self, filter: str) -> str:
        """``filter`` through each codec's ``encode_filter``, first to last."""
        for i, codec in enumerate(self.codecs):
            if not isinstance(codec, FilterableKeyCodec):
                raise WildcardNotSupportedError(
                    f"nats: codec does not support wildcard filtering: codec {i} "
                    "is not a FilterableKeyCodec"
                )
        for i, codec in enumerate(self.codecs):
            assert isinstance(codec, FilterableKeyCodec)
            try:
                filter = codec.encode_filter(filter)
            except Exception as exc:
                raise FilterEncodeError(
                    f"nats: failed to encode filter pattern (codec {i}): {exc}"
                ) from exc
        return filter


class ValueChainCodec(ValueCodec):
    """Several value codecs: encoded by each in order, decoded in reverse."""

    def __init__(self, *codecs: ValueCodec) -> None:
        if not codecs:
            raise NoCodecsError()
        self.codecs: tuple[ValueCodec, ...] = codecs

    def encode_value(self, value: bytes) -> bytes:
        """``value`` through each codec, first to last."""
        steps = [(i, c.encode_value) for i, c in enumerate(self.codecs)]
        return bytes(_through(value, steps, ValueEncodeError, "encode value"))

    def decode_value(self, value: bytes) -> bytes:
        """``value`` through each codec, last to first."""
        steps = [(i, c.decode_value) for i, c in enumerate(self.codecs)][::-1]
        return bytes(_through(value, steps, ValueDecodeError, "decode value"))


# -- the bucket ---------------------------------------------------------------------


def _has_wildcard(text: str) -> bool:
    return "*" in text or ">" in text


class CodecKeyValue:
    """A bucket seen through codecs: what :func:`wrap` returns.

    Its methods are :class:`~jsclient.jetstream.kv.KeyValue`'s; keys and values
    given are encoded, entries and keys returned are decoded (an entry keeps
    its revision, time and operation). Markers' empty values are not decoded.
    ``kv`` is the bucket underneath, for the stored form.
    """

    def __init__(
        self, kv: KeyValue, key_codec: KeyCodec | None = None, value_codec: ValueCodec | None = None
    ) -> None:
        self.kv = kv
        self.key_codec: KeyCodec = key_codec if key_codec is not None else NoOpCodec()
        self.value_codec: ValueCodec = value_codec if value_codec is not None else NoOpCodec()

    @property
    def bucket(self) -> str:
        """The bucket's name."""
        return self.kv.bucket

    def __repr__(self) -> str:
        return f"<CodecKeyValue {self.kv.bucket!r}>"

    # -- encoding ------------------------------------------------------------

    def _key(self, key: str) -> str:
        try:
            return self.key_codec.encode_key(key)
        except CodecError:
            raise
        except Exception as exc:
            raise KeyEncodeError(f"nats: failed to encode key {key!r}: {exc}") from exc

    def _value(self, value: bytes | str) -> bytes:
        data = value.encode() if isinstance(value, str) else bytes(value)
        try:
            return self.value_codec.encode_value(data)
        except CodecError:
            raise
        except Exception as exc:
            raise ValueEncodeError(f"nats: failed to encode value: {exc}") from exc

    def _filter(self, pattern: str) -> str:
        if pattern == ">":
            return pattern  # every key, whatever the codec
        codec = self.key_codec
        if isinstance(codec, FilterableKeyCodec):
            try:
                return codec.encode_filter(pattern)
            except CodecError:
                raise
            except Exception as exc:
                raise FilterEncodeError(
                    f"nats: failed to encode filter pattern {pattern!r}: {exc}"
                ) from exc
        if _has_wildcard(pattern):
            raise WildcardNotSupportedError(
                f"nats: codec does not support wildcard filtering in {pattern!r}; "
                "watch all keys and filter the decoded ones instead"
            )
        return self._key(pattern)

    def _decode_key(self, key: str) -> str:
        try:
            return self.key_codec.decode_key(key)
        except CodecError:
            raise
        except Exception as exc:
            raise KeyDecodeError(f"nats: failed to decode key {key!r}: {exc}") from exc

    def _decode_value(self, value: bytes) -> bytes:
        try:
            return self.value_codec.decode_value(value)
        except CodecError:
            raise
        except Exception as exc:
            raise ValueDecodeError(f"nats: failed to decode value: {exc}") from exc

    def decode_entry(self, entry: KeyValueEntry, key: str | None = None) -> KeyValueEntry:
        """``entry`` (as stored) with its key and value decoded; ``key``: the key
        already known (no decoding)."""
        value = entry.value
        if entry.operation == PUT:
            value = self._decode_value(value)
        name = self._decode_key(entry.key) if key is None else key
        return KeyValueEntry(
            entry.bucket, name, value, entry.revision, entry.delta, entry[5], entry.operation
        )

    # -- the calls -----------------------------------------------------------

    def get(self, key: str, *, revision: int | None = None) -> KeyValueEntry:
        """The key's latest entry (or the one at ``revision``), decoded."""
        return self.decode_entry(self.kv.get(self._key(key), revision=revision), key)

    def put(self, key: str, value: bytes | str) -> int:
        """Store ``value`` (encoded) under the encoded key; returns the revision."""
        return self.kv.put(self._key(key), self._value(value))

    def create(self, key: str, value: bytes | str, *, ttl: float | str | None = None) -> int:
        """``KeyValue.create`` with the key and value encoded."""
        return self.kv.create(self._key(key), self._value(value), ttl=ttl)

    def update(self, key: str, value: bytes | str, last: int) -> int:
        """``KeyValue.update`` with the key and value encoded."""
        return self.kv.update(self._key(key), self._value(value), last)

    def delete(self, key: str, *, last: int | None = None) -> None:
        """``KeyValue.delete`` of the encoded key."""
        self.kv.delete(self._key(key), last=last)

    def purge(self, key: str, *, ttl: float | str | None = None, last: int | None = None) -> None:
        """``KeyValue.purge`` of the encoded key."""
        self.kv.purge(self._key(key), ttl=ttl, last=last)

    def keys(self, *filters: str, **options: Any) -> list[str]:
        """The decoded keys holding a value; ``filters`` are key wildcards (encoded)."""
        stored = self.kv.keys(*(self._filter(f) for f in filters), **options)
        return [self._decode_key(k) for k in stored]

    def history(self, key: str, **options: Any) -> list[KeyValueEntry]:
        """Every stored revision of the key, oldest first, decoded."""
        return [self.decode_entry(e, key) for e in self.kv.history(self._key(key), **options)]

    def watch(
        self,
        keys: str | list[str] = ">",
        *,
        cb: Callable[[KeyValueEntry | None], Any] | None = None,
        **options: Any,
    ) -> CodecKeyWatcher:
        """``KeyValue.watch`` of the encoded filters; entries come decoded.

        WildcardNotSupportedError for a filter with a wildcard under a key codec
        that cannot keep them (``">"`` alone always works)."""
        pats = [keys] if isinstance(keys, str) else list(keys)
        encoded = [self._filter(p) for p in pats]
        user_cb = None if cb is None else _decoding_cb(self, cb)
        return CodecKeyWatcher(self, self.kv.watch(encoded, cb=user_cb, **options))

    def watch_all(self, **options: Any) -> CodecKeyWatcher:
        """``watch(">", ...)``: every key of the bucket."""
        return self.watch(">", **options)

    def purge_deletes(self, **options: Any) -> int:
        """``KeyValue.purge_deletes`` (markers carry no values to decode)."""
        return self.kv.purge_deletes(**options)

    def status(self) -> KeyValueStatus:
        """The bucket's state and settings."""
        return self.kv.status()


def _decoding_cb(
    bucket: CodecKeyValue, cb: Callable[[KeyValueEntry | None], Any]
) -> Callable[[KeyValueEntry | None], Any]:
    def call(entry: KeyValueEntry | None) -> Any:
        return cb(None if entry is None else _watched(bucket, entry))

    return call


def _watched(bucket: CodecKeyValue, entry: KeyValueEntry) -> KeyValueEntry:
    """A watched entry decoded; one that fails to decode comes as stored (logged)."""
    try:
        return bucket.decode_entry(entry)
    except CodecError as exc:
        log.warning("jsclient: KV watch of %r: %s; entry delivered as stored", bucket.bucket, exc)
        return entry


class CodecKeyWatcher:
    """A :class:`~jsclient.jetstream.kv.KeyWatcher` whose entries come decoded.

    Iterate it or call ``next(timeout)``; ``None`` comes once after the initial
    values, as from the watcher underneath. An entry that fails to decode
    comes as stored (and is logged), so one bad entry does not end a watch.
    """

    def __init__(self, bucket: CodecKeyValue, watcher: KeyWatcher) -> None:
        self._bucket = bucket
        self.watcher = watcher

    def __enter__(self) -> CodecKeyWatcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __iter__(self) -> Iterator[KeyValueEntry | None]:
        for entry in self.watcher:
            yield None if entry is None else _watched(self._bucket, entry)

    def next(self, timeout: float | None = 5.0) -> KeyValueEntry | None:
        """The next entry (or the one ``None``); TimeoutError when none comes in time."""
        entry = self.watcher.next(timeout)
        return None if entry is None else _watched(self._bucket, entry)

    def stop(self) -> None:
        """Stop watching (returns at once)."""
        self.watcher.stop()

    @property
    def stopped(self) -> bool:
        """True once ``stop()`` was called."""
        return self.watcher.stopped


def wrap(
    kv: KeyValue | CodecKeyValue,
    key_codec: KeyCodec | None = None,
    value_codec: ValueCodec | None = None,
) -> CodecKeyValue:
    """The bucket ``kv`` seen through ``key_codec`` and ``value_codec`` (None: as is).

    Wrapping a wrapped bucket wraps the bucket underneath with the new codecs."""
    base = kv.kv if isinstance(kv, CodecKeyValue) else kv
    return CodecKeyValue(base, key_codec, value_codec)


def wrap_keys(kv: KeyValue | CodecKeyValue, key_codec: KeyCodec) -> CodecKeyValue:
    """``wrap(kv, key_codec=key_codec)``: keys encoded, values as they are."""
    return wrap(kv, key_codec, None)


def wrap_values(kv: KeyValue | CodecKeyValue, value_codec: ValueCodec) -> CodecKeyValue:
    """``wrap(kv, value_codec=value_codec)``: values encoded, keys as they are."""
    return wrap(kv, None, value_codec)
