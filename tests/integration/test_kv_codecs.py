"""KV codecs (jsclient.jetstream.kv.codecs): orbit.go's kvcodec encodings, and a bucket
seen through them against a real nats-server."""

from __future__ import annotations

import zlib

import pytest

from jsclient import errors
from jsclient.client import Client
from jsclient.jetstream import JetStream
from jsclient.jetstream.kv import codecs
from jsclient.jetstream.kv.codecs import (
    Base64Codec,
    KeyChainCodec,
    NoOpCodec,
    PathCodec,
    ValueChainCodec,
    ValueCodec,
)


@pytest.fixture
def js(nc: Client) -> JetStream:
    return nc.jetstream()


class Zlib(ValueCodec):
    """A user's value codec (the hook encryption uses too)."""

    def encode_value(self, value: bytes) -> bytes:
        return zlib.compress(value)

    def decode_value(self, value: bytes) -> bytes:
        return zlib.decompress(value)


class Upper(codecs.KeyCodec):
    """A key codec that cannot encode filters."""

    def encode_key(self, key: str) -> str:
        return key.upper()

    def decode_key(self, key: str) -> str:
        return key.lower()


# -- the encodings: orbit.go's results ---------------------------------------------


def test_base64_per_token_unpadded_url_safe() -> None:
    b = Base64Codec()
    assert b.encode_key("a.bb.ccc") == "YQ.YmI.Y2Nj"
    assert b.decode_key("YQ.YmI.Y2Nj") == "a.bb.ccc"
    assert b.encode_key("日本.a b") == "5pel5pys.YSBi"
    assert b.encode_filter("a.*.b.>") == "YQ.*.Yg.>"
    assert b.encode_value(b"\xfb\xff") == b"-_8"  # URL alphabet, no padding
    assert b.decode_value(b"-_8") == b"\xfb\xff"
    for bad in (b"YQ==", b"a+b", b"a/b", b"!!", b"Y"):
        with pytest.raises(ValueError):
            b.decode_value(bad)


def test_path_codec() -> None:
    p = PathCodec()
    cases = {
        "/": "_root_",
        "/a/b": "_root_.a.b",
        "/a/b/": "_root_.a.b",
        "a/b": "a.b",
        "a": "a",
    }
    for key, stored in cases.items():
        assert p.encode_key(key) == stored
    assert p.decode_key("_root_") == "/" and p.decode_key("_root_.a.b") == "/a/b"
    assert p.decode_key("a.b") == "a/b"
    assert p.encode_filter("/a/*/>") == "_root_.a.*.>"
    assert p.encode_value(b"x") == b"x"


def test_chains_encode_in_order_decode_in_reverse() -> None:
    chain = KeyChainCodec(PathCodec(), Base64Codec())
    assert chain.encode_key("/app/db") == "X3Jvb3Rf.YXBw.ZGI"
    assert chain.decode_key("X3Jvb3Rf.YXBw.ZGI") == "/app/db"
    assert chain.encode_filter("/app/*") == "X3Jvb3Rf.YXBw.*"
    values = ValueChainCodec(Zlib(), Base64Codec())
    stored = values.encode_value(b"hello" * 10)
    assert stored == Base64Codec().encode_value(zlib.compress(b"hello" * 10))
    assert values.decode_value(stored) == b"hello" * 10
    with pytest.raises(codecs.ValueDecodeError):
        values.decode_value(b"!!")
    with pytest.raises(codecs.WildcardNotSupportedError):
        KeyChainCodec(Base64Codec(), Upper()).encode_filter("a.*")
    with pytest.raises(codecs.NoCodecsError):
        KeyChainCodec()
    with pytest.raises(codecs.NoCodecsError):
        ValueChainCodec()
    assert NoOpCodec().encode_filter("a.>") == "a.>"


# -- a bucket through codecs ------------------------------------------------------------


def test_every_call_goes_through_the_codecs(js: JetStream) -> None:
    kv = js.create_key_value(bucket="cod", history=5, storage="memory")
    ckv = codecs.wrap(kv, KeyChainCodec(PathCodec(), Base64Codec()), ValueChainCodec(Zlib()))
    rev = ckv.put("/app/db/url", b"postgres://x")
    assert kv.get("X3Jvb3Rf.YXBw.ZGI.dXJs").value == zlib.compress(b"postgres://x")
    got = ckv.get("/app/db/url")
    assert (got.key, got.value, got.revision) == ("/app/db/url", b"postgres://x", rev)
    rev2 = ckv.update("/app/db/url", "v2", last=rev)
    with pytest.raises(errors.KeyWrongLastSequenceError):
        ckv.update("/app/db/url", "v3", last=rev)
    ckv.create("/app/name", "n")
    with pytest.raises(errors.KeyExistsError):
        ckv.create("/app/name", "again")
    assert ckv.get("/app/db/url", revision=rev).value == b"postgres://x"
    assert sorted(ckv.keys()) == ["/app/db/url", "/app/name"]
    assert ckv.keys("/app/*") == ["/app/name"]
    assert ckv.keys("/app/>") == ["/app/db/url", "/app/name"]
    hist = ckv.history("/app/db/url")
    assert [(e.key, e.value) for e in hist] == [
        ("/app/db/url", b"postgres://x"),
        ("/app/db/url", b"v2"),
    ]
    assert hist[1].revision == rev2
    ckv.delete("/app/name")
    with pytest.raises(errors.KeyDeletedError):
        ckv.get("/app/name")
    assert ckv.history("/app/name")[-1].operation == "DEL"
    ckv.purge("/app/db/url")
    assert ckv.keys() == []
    assert ckv.bucket == "cod" and ckv.status().bucket == "cod"


def test_watch_decodes_and_keeps_wildcards(js: JetStream) -> None:
    kv = js.create_key_value(bucket="cw", storage="memory")
    ckv = codecs.wrap(kv, KeyChainCodec(PathCodec(), Base64Codec()), Base64Codec())
    ckv.put("/a/x", b"1")
    ckv.put("/b/y", b"2")
    with ckv.watch("/a/*") as w:
        first = w.next(timeout=5)
        assert first is not None and (first.key, first.value) == ("/a/x", b"1")
        assert w.next(timeout=5) is None  # the initial values are out
        ckv.put("/b/z", b"3")
        ckv.put("/a/q", b"4")
        upd = w.next(timeout=5)
        assert upd is not None and (upd.key, upd.value) == ("/a/q", b"4")
    seen: list[tuple[str, bytes]] = []
    with ckv.watch_all() as w:
        for e in w:
            if e is None:
                break
            seen.append((e.key, e.value))
    assert sorted(seen) == [("/a/q", b"4"), ("/a/x", b"1"), ("/b/y", b"2"), ("/b/z", b"3")]
    # A key codec without filters: exact keys and ">" only.
    up = codecs.wrap_keys(kv, Upper())
    up.put("plain", b"v")
    assert kv.get("PLAIN").value == b"v"
    with up.watch("plain") as w:
        e = w.next(timeout=5)
        assert e is not None and e.key == "plain"
    with pytest.raises(codecs.WildcardNotSupportedError):
        up.watch("pl.*")
    with pytest.raises(errors.InvalidKeyError):
        up.keys("p.>")


def test_wrap_values_only_and_encryption_style_hook(js: JetStream) -> None:
    kv = js.create_key_value(bucket="cv", storage="memory")

    class Xor(ValueCodec):
        def encode_value(self, value: bytes) -> bytes:
            return bytes(b ^ 0x5A for b in value)

        def decode_value(self, value: bytes) -> bytes:
            return bytes(b ^ 0x5A for b in value)

    ckv = codecs.wrap_values(kv, Xor())
    ckv.put("k", b"secret")
    assert kv.get("k").value == bytes(b ^ 0x5A for b in b"secret")
    assert ckv.get("k").value == b"secret"
    # Rewrapping wraps the bucket underneath, not the wrapper.
    plain = codecs.wrap(ckv)
    assert plain.kv is kv and plain.get("k").value == kv.get("k").value
