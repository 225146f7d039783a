"""The Object store's wire formats without a server: names, meta JSON, digests, chunking."""

from __future__ import annotations

import base64
import hashlib
import io
from typing import Any

import pytest

from jsclient import errors
from jsclient.api import ObjectInfo, ObjectLink, ObjectMeta, ObjectMetaOptions
from jsclient.jetstream.obj._config import check_name, encode_name
from jsclient.jetstream.obj._meta import (
    digest_bytes,
    digest_value,
    format_ns,
    meta_json,
    new_info,
    parse_meta,
    wire_headers,
)
from jsclient.jetstream.obj._reader import window_messages
from jsclient.jetstream.obj.store import _chunker


def test_names_are_padded_base64url() -> None:
    # What Go's base64.URLEncoding gives for these names.
    assert encode_name("a") == "YQ=="
    assert encode_name("dir/file?.txt") == "ZGlyL2ZpbGU_LnR4dA=="
    assert encode_name("ü") == "w7w="
    assert check_name("any thing/ü.*>") == "any thing/ü.*>"
    for bad in ("", None, 1, "\udcff"):
        with pytest.raises(errors.InvalidObjectNameError):
            check_name(bad)


def test_digest_value_and_forms() -> None:
    raw = hashlib.sha256(b"abc").digest()
    value = digest_value(raw)
    assert value == "SHA-256=ungWv48Bz-pBQUDeXa4iI7ADYaOWF3qctBD_YfIAFa0="
    for form in (
        value,
        value.rstrip("="),
        "SHA-256=" + base64.b64encode(raw).decode(),
        "sha-256=" + value.split("=", 1)[1],
    ):
        assert digest_bytes(form) == raw
    assert digest_bytes(None) is None and digest_bytes("") is None
    for bad in ("MD5=abc", "SHA-256", "SHA-256=!!!!", "SHA-256=YWJj"):
        with pytest.raises(errors.BadObjectMetaError):
            digest_bytes(bad)


def test_meta_json_is_what_nats_go_writes() -> None:
    info = new_info(
        "b",
        "NUID",
        ObjectMeta(name="n", description="d", headers={"A": "1", "B": ["2", "3"]}),
        chunk_size=1024,
    )
    info.size, info.chunks, info.digest = 5, 1, "SHA-256=x"
    assert meta_json(info) == (
        b'{"name":"n","description":"d","headers":{"A":["1"],"B":["2","3"]},'
        b'"options":{"max_chunk_size":1024},"bucket":"b","nuid":"NUID","size":5,'
        b'"mtime":"0001-01-01T00:00:00Z","chunks":1,"digest":"SHA-256=x"}'
    )
    link = new_info("b", "N2", ObjectMeta(name="l"), link=ObjectLink(bucket="o"))
    assert meta_json(link) == (
        b'{"name":"l","options":{"link":{"bucket":"o"}},"bucket":"b","nuid":"N2",'
        b'"size":0,"mtime":"0001-01-01T00:00:00Z","chunks":0}'
    )
    gone = ObjectInfo(name="ü", bucket="b", nuid="N", deleted=True, metadata={"k": "v"})
    assert (
        meta_json(gone)
        == (
            '{"name":"ü","metadata":{"k":"v"},"bucket":"b","nuid":"N","size":0,'
            '"mtime":"0001-01-01T00:00:00Z","chunks":0,"deleted":true}'
        ).encode()
    )


def test_parse_meta_round_trip_and_refusals() -> None:
    info = new_info(
        "b",
        "N",
        ObjectMeta(name="x", metadata={"m": "1"}),
        link=ObjectLink(bucket="o", name="t"),
    )
    back = parse_meta(meta_json(info), "2024-01-02T03:04:05.5Z")
    assert back.name == "x" and back.metadata == {"m": "1"}
    assert back.options == ObjectMetaOptions(link=ObjectLink(bucket="o", name="t"))
    assert back.mtime == "2024-01-02T03:04:05.5Z"
    assert back.is_link() and back.deleted is False
    for bad in (
        b"",
        b"[]",
        b"{not json",
        b'{"bucket":"b","nuid":"n"}',  # no name
        b'{"name":1,"bucket":"b","nuid":"n"}',
        b'{"name":"x","bucket":"b","nuid":7}',
        b'{"name":"x","bucket":"b","nuid":"n","size":-1}',
        b'{"name":"x","bucket":"b","nuid":"n","options":"o"}',
    ):
        with pytest.raises(errors.BadObjectMetaError):
            parse_meta(bad, None)


def test_parse_meta_takes_a_nats_js_link() -> None:
    # What nats.js (3.x ``os.link``) writes: no nuid, size, chunks, mtime or digest;
    # they read as nats.go's zero values.
    raw = b'{"name":"n-link","bucket":"LNK","options":{"link":{"bucket":"LNK","name":"n"}}}'
    info = parse_meta(raw, "2024-01-02T03:04:05Z")
    assert (info.name, info.bucket, info.nuid, info.size, info.chunks) == (
        "n-link",
        "LNK",
        "",
        0,
        0,
    )
    assert info.digest is None and info.deleted is False and info.is_link()
    assert info.options is not None and info.options.link == ObjectLink(bucket="LNK", name="n")
    nulls = parse_meta(b'{"name":"x","nuid":null,"size":null,"digest":""}', None)
    assert (nulls.bucket, nulls.nuid, nulls.size, nulls.chunks) == ("", "", 0, 0)


def test_headers_and_times() -> None:
    assert wire_headers(None) is None
    assert wire_headers({"a": "1", "b": ("2",)}) == {"a": ["1"], "b": ["2"]}
    for bad in ({1: "x"}, {"a": [1]}, "a=b"):
        with pytest.raises(TypeError):
            wire_headers(bad)
    assert format_ns(1_700_000_000_123_000_000) == "2023-11-14T22:13:20.123Z"
    assert format_ns(1_700_000_000_000_000_000) == "2023-11-14T22:13:20Z"


def test_read_window() -> None:
    def info(size: int, chunks: int, max_chunk: int | None) -> ObjectInfo:
        opts = ObjectMetaOptions(max_chunk_size=max_chunk)
        return ObjectInfo(name="o", bucket="b", nuid="n", size=size, chunks=chunks, options=opts)

    assert window_messages(info(64 << 20, 512, 128 * 1024)) == 64  # 8 MiB of chunks
    assert window_messages(info(100, 100, 1)) == 1000  # at most 1000 messages
    assert window_messages(info(8 << 20, 1, None)) == 2  # at least 2, sized by the largest
    assert window_messages(info(0, 0, None)) == 64


class _Short(io.RawIOBase):
    def __init__(self, data: bytes, step: int) -> None:
        self.data, self.step, self.pos = data, step, 0

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        n = min(self.step, len(b), len(self.data) - self.pos)
        b[:n] = self.data[self.pos : self.pos + n]
        self.pos += n
        return n


def test_chunking() -> None:
    data = bytes(range(256)) * 10
    for source in (data, bytearray(data), memoryview(data), io.BytesIO(data), _Short(data, 3)):
        chunks = [bytes(c) for c in _chunker(source, 1000)]
        assert [len(c) for c in chunks] == [1000, 1000, 560]
        assert b"".join(chunks) == data
    assert [bytes(c) for c in _chunker("ü", 1)] == [b"\xc3", b"\xbc"]
    assert list(_chunker(b"", 10)) == []
    for bad in (1, None, ["x"], io.StringIO("x")):
        with pytest.raises(TypeError):
            _chunker(bad, 10)
