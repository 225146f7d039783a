"""The Key-Value store against a real nats-server: buckets, keys, revisions, markers, errors."""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import nats.js.errors
import pytest
from _js import wait_for

import jsclient
from jsclient import errors
from jsclient.api import KeyValueConfig, StreamSource
from jsclient.client import Client
from jsclient.jetstream import JetStream
from jsclient.testing import NatsServerFactory

if TYPE_CHECKING:
    from jsclient.jetstream.kv import KeyValue

BAD_KEYS = ["", ".a", "a.", "a b", "a*", "a.>", ">", "a\tb", "ä"]
BAD_BUCKETS = ["", "a.b", "a b", "a*", "a>", "a/b"]


@pytest.fixture
def js(nc: Client) -> JetStream:
    return nc.jetstream()


@pytest.fixture
def kv(js: JetStream) -> KeyValue:
    """A memory bucket ``b`` keeping 5 revisions per key."""
    return js.create_key_value(bucket="b", history=5, storage="memory")


def _val(x: Any) -> str:
    """An enum or its plain string value, as a string."""
    return str(getattr(x, "value", x))


def _gone(kv: KeyValue, key: str) -> bool:
    try:
        kv.get(key)
    except errors.KeyNotFoundError:
        return True
    return False


def _history_gone(kv: KeyValue, key: str) -> bool:
    try:
        kv.history(key)
    except errors.KeyNotFoundError:
        return True
    return False


def _initial_entries(w: Any) -> list[Any]:
    """What a watcher delivers before its None marker."""
    out: list[Any] = []
    while (entry := w.next(timeout=5.0)) is not None:
        out.append(entry)
    return out


def _value(kv: KeyValue, key: str) -> bytes | None:
    try:
        value: bytes = kv.get(key).value
    except errors.KeyNotFoundError:
        return None
    return value


def _assert_recent_utc(created: Any) -> None:
    assert isinstance(created, datetime.datetime)
    assert created.tzinfo is not None
    assert created.utcoffset() == datetime.timedelta(0)
    now = datetime.datetime.now(datetime.UTC)
    assert abs((now - created).total_seconds()) < 60


# -- buckets -------------------------------------------------------------------


def test_create_maps_to_the_backing_stream(js: JetStream) -> None:
    kv = js.create_key_value(
        bucket="cfg",
        history=5,
        ttl=60,
        max_value_size=1024,
        max_bytes=1 << 20,
        storage="memory",
        description="settings",
    )
    assert kv.bucket == "cfg"
    c = js.stream("KV_cfg").info().config
    assert c.name == "KV_cfg"
    assert c.subjects == ["$KV.cfg.>"]
    assert c.max_msgs_per_subject == 5
    assert _val(c.discard) == "new"
    assert c.allow_rollup_hdrs is True
    assert c.deny_delete is True
    assert c.allow_direct is True
    assert c.max_age == 60.0
    assert c.max_msg_size == 1024
    assert c.max_bytes == 1 << 20
    assert _val(c.storage) == "memory"
    assert c.description == "settings"
    assert c.num_replicas == 1


def test_create_defaults_and_config_object(js: JetStream) -> None:
    js.create_key_value(bucket="dflt", storage="memory")
    c = js.stream("KV_dflt").info().config
    assert c.max_msgs_per_subject == 1  # history=1
    assert c.allow_direct is True
    assert not c.max_age  # no TTL
    assert _val(c.discard) == "new"

    kv = js.create_key_value(KeyValueConfig(bucket="obj", history=3, storage="memory"))
    assert kv.bucket == "obj"
    assert js.stream("KV_obj").info().config.max_msgs_per_subject == 3

    js.create_key_value(bucket="nodirect", storage="memory", direct=False)
    assert js.stream("KV_nodirect").info().config.allow_direct is False


def test_create_compressed_bucket(js: JetStream) -> None:
    kv = js.create_key_value(bucket="z", storage="memory", compression="s2")
    assert _val(js.stream("KV_z").info().config.compression) == "s2"
    assert kv.status().is_compressed is True
    plain = js.create_key_value(bucket="nz", storage="memory")
    assert plain.status().is_compressed is False


def test_bucket_handles_and_lifecycle(js: JetStream) -> None:
    with pytest.raises(errors.BucketNotFoundError) as ei:
        js.key_value("missing")
    assert isinstance(ei.value, nats.js.errors.BucketNotFoundError)

    created = js.create_key_value(bucket="life", history=2, storage="memory")
    created.put("k", b"v")
    handle = js.key_value("life")
    assert handle.bucket == "life"
    assert handle.get("k").value == b"v"

    # A different config under the same name is refused.
    with pytest.raises(errors.Error):
        js.create_key_value(bucket="life", history=7, storage="file")

    updated = js.update_key_value(bucket="life", history=10, storage="memory")
    assert updated.status().history == 10
    assert updated.get("k").value == b"v"  # data survives an update
    with pytest.raises(nats.js.errors.NotFoundError):
        js.update_key_value(bucket="nothere", storage="memory")

    js.delete_key_value("life")
    with pytest.raises(errors.BucketNotFoundError):
        js.key_value("life")
    assert "KV_life" not in list(js.stream_names())


def test_create_or_update(js: JetStream) -> None:
    kv = js.create_or_update_key_value(bucket="cu", storage="memory")
    assert kv.status().history == 1
    kv.put("k", b"1")
    again = js.create_or_update_key_value(bucket="cu", storage="memory", history=3)
    assert again.status().history == 3
    assert again.get("k").value == b"1"


def test_names_and_statuses(js: JetStream) -> None:
    assert list(js.key_value_names()) == []
    assert list(js.key_values()) == []
    js.create_stream(name="PLAIN", subjects=["plain"], storage="memory")
    js.create_key_value(bucket="one", storage="memory", history=2)
    two = js.create_key_value(bucket="two", storage="memory", history=4)
    two.put("x", b"1")
    assert sorted(js.key_value_names()) == ["one", "two"]
    statuses = sorted(js.key_values(), key=lambda s: s.bucket)
    assert [s.bucket for s in statuses] == ["one", "two"]
    assert [s.history for s in statuses] == [2, 4]
    assert [s.values for s in statuses] == [0, 1]


def test_status(js: JetStream) -> None:
    kv = js.create_key_value(bucket="st", history=3, ttl=120, storage="memory")
    kv.put("a", b"1")
    kv.put("a", b"2")
    kv.put("b", b"xyz")
    s = kv.status()
    assert s.bucket == "st"
    assert s.values == 3
    assert s.history == 3
    assert s.ttl == 120.0
    assert s.bytes == s.stream_info.state.bytes and s.bytes > 0
    assert s.backing_store == "JetStream"
    assert s.is_compressed is False
    assert not s.limit_marker_ttl
    assert s.stream_info.config.name == "KV_st"


def test_history_bounds_checked_before_sending(js: JetStream) -> None:
    for history in (0, 65, -1):
        with pytest.raises(nats.js.errors.KeyHistoryTooLargeError):
            js.create_key_value(bucket="h", history=history, storage="memory")
    assert list(js.stream_names()) == []
    js.create_key_value(bucket="h64", history=64, storage="memory")
    assert js.stream("KV_h64").info().config.max_msgs_per_subject == 64


@pytest.mark.parametrize("name", BAD_BUCKETS)
def test_bad_bucket_names(js: JetStream, name: str) -> None:
    with pytest.raises(errors.InvalidBucketNameError) as ei:
        js.create_key_value(bucket=name, storage="memory")
    assert isinstance(ei.value, nats.js.errors.InvalidBucketNameError)
    with pytest.raises(errors.InvalidBucketNameError):
        js.key_value(name)
    with pytest.raises(errors.InvalidBucketNameError):
        js.delete_key_value(name)
    assert list(js.stream_names()) == []


# -- keys and values -------------------------------------------------------------


@pytest.mark.parametrize("direct", [True, False])
def test_put_get_revisions(js: JetStream, direct: bool) -> None:
    kv = js.create_key_value(bucket="pg", history=5, storage="memory", direct=direct)
    assert kv.put("a", b"1") == 1
    assert kv.put("b", b"x") == 2
    assert kv.put("a", "two") == 3
    e = kv.get("a")
    assert (e.bucket, e.key, e.value, e.revision, e.operation) == ("pg", "a", b"two", 3, "PUT")
    _assert_recent_utc(e.created)

    old = kv.get("a", revision=1)
    assert (old.key, old.value, old.revision, old.operation) == ("a", b"1", 1, "PUT")
    _assert_recent_utc(old.created)
    # Revision 2 belongs to another key.
    with pytest.raises(errors.KeyNotFoundError) as ei:
        kv.get("a", revision=2)
    assert not isinstance(ei.value, errors.KeyDeletedError)
    with pytest.raises(errors.KeyNotFoundError):
        kv.get("a", revision=99)
    with pytest.raises(errors.KeyNotFoundError) as ei2:
        kv.get("never")
    assert isinstance(ei2.value, nats.js.errors.KeyNotFoundError)
    assert not isinstance(ei2.value, errors.KeyDeletedError)


def test_empty_and_text_values(kv: KeyValue) -> None:
    rev = kv.put("empty", b"")
    e = kv.get("empty")
    assert (e.value, e.revision, e.operation) == (b"", rev, "PUT")
    kv.put("text", "héllo wörld")
    assert kv.get("text").value == "héllo wörld".encode()
    assert kv.get("text").value.decode() == "héllo wörld"
    ok = "a-b_c/d=e.F9"
    kv.put(ok, b"fine")
    assert kv.get(ok).value == b"fine"
    assert ok in list(kv.keys())


def test_deleted_and_purged_keys(kv: KeyValue) -> None:
    kv.put("d", b"1")
    kv.put("d", b"2")
    assert kv.delete("d") is None
    with pytest.raises(errors.KeyDeletedError) as ei:
        kv.get("d")
    assert isinstance(ei.value, errors.KeyNotFoundError)
    assert isinstance(ei.value, nats.js.errors.KeyDeletedError)
    hist = kv.history("d")
    assert [(h.value, h.operation) for h in hist] == [(b"1", "PUT"), (b"2", "PUT"), (b"", "DEL")]
    assert [h.revision for h in hist] == [1, 2, 3]
    # A revision that is still there can be read even though the key is deleted.
    assert kv.get("d", revision=2).value == b"2"

    kv.put("p", b"1")
    kv.put("p", b"2")
    assert kv.purge("p") is None
    with pytest.raises(errors.KeyDeletedError):
        kv.get("p")
    only = kv.history("p")
    assert len(only) == 1
    assert (only[0].key, only[0].operation, only[0].value) == ("p", "PURGE", b"")
    with pytest.raises(errors.KeyNotFoundError):
        kv.get("p", revision=4)  # purged away

    kv.put("live", b"x")
    assert kv.keys() == ["live"]


def test_create_only_when_no_value(kv: KeyValue) -> None:
    assert kv.create("k", b"1") == 1
    with pytest.raises(errors.KeyExistsError) as ei:
        kv.create("k", b"again")
    assert isinstance(ei.value, errors.KeyWrongLastSequenceError)
    assert isinstance(ei.value, nats.js.errors.KeyWrongLastSequenceError)
    assert kv.get("k").value == b"1"

    kv.delete("k")
    rev = kv.create("k", b"2")  # over a delete marker
    assert kv.get("k").value == b"2" and kv.get("k").revision == rev

    kv.purge("k")
    rev = kv.create("k", b"3")  # over a purge marker
    e = kv.get("k")
    assert (e.value, e.revision, e.operation) == (b"3", rev, "PUT")
    with pytest.raises(errors.KeyExistsError):
        kv.create("k", b"4")


def test_update_compare_and_set(kv: KeyValue) -> None:
    r1 = kv.put("k", b"1")
    kv.put("other", b"o")
    r2 = kv.update("k", b"2", r1)
    assert r2 == r1 + 2
    with pytest.raises(errors.KeyWrongLastSequenceError) as ei:
        kv.update("k", b"3", r1)
    assert isinstance(ei.value, nats.js.errors.KeyWrongLastSequenceError)
    assert not isinstance(ei.value, errors.KeyExistsError)
    assert kv.get("k").value == b"2"
    assert kv.update("k", b"3", r2) == r2 + 1
    assert [h.value for h in kv.history("k")] == [b"1", b"2", b"3"]


def test_delete_with_last(kv: KeyValue) -> None:
    r1 = kv.put("k", b"1")
    r2 = kv.put("k", b"2")
    with pytest.raises(errors.KeyWrongLastSequenceError):
        kv.delete("k", last=r1)
    assert kv.get("k").value == b"2"
    kv.delete("k", last=r2)
    with pytest.raises(errors.KeyDeletedError):
        kv.get("k")
    assert [h.operation for h in kv.history("k")] == ["PUT", "PUT", "DEL"]


def test_keys(kv: KeyValue) -> None:
    assert kv.keys() == []
    assert kv.keys("a.*") == []
    for key in ("a.1", "a.2", "a.1", "a.x.y", "b.1", "c", "gone", "purged"):
        kv.put(key, b"v")
    kv.delete("gone")
    kv.purge("purged")
    keys = kv.keys()
    assert isinstance(keys, list)
    assert sorted(keys) == ["a.1", "a.2", "a.x.y", "b.1", "c"]  # each once
    assert sorted(kv.keys("a.*")) == ["a.1", "a.2"]
    assert sorted(kv.keys("a.>")) == ["a.1", "a.2", "a.x.y"]
    assert sorted(kv.keys("a.*", "b.>")) == ["a.1", "a.2", "b.1"]
    assert sorted(kv.keys("*")) == ["c"]
    assert kv.keys("gone") == []
    assert kv.keys("zzz.>") == []


def test_history(js: JetStream) -> None:
    kv = js.create_key_value(bucket="hist", history=2, storage="memory")
    with pytest.raises(errors.KeyNotFoundError):
        kv.history("a")
    kv.put("a", b"1")
    kv.put("b", b"x")
    kv.put("a", b"2")
    kv.put("a", b"3")
    hist = kv.history("a")
    assert [(h.key, h.value, h.revision, h.operation) for h in hist] == [
        ("a", b"2", 3, "PUT"),
        ("a", b"3", 4, "PUT"),
    ]
    for h in hist:
        assert h.bucket == "hist"
        _assert_recent_utc(h.created)
    assert [h.value for h in kv.history("b")] == [b"x"]


def test_purge_deletes(kv: KeyValue) -> None:
    kv.put("a", b"1")
    kv.put("a", b"2")
    kv.delete("a")
    kv.put("b", b"1")
    kv.purge("b")
    kv.put("c", b"keep")
    # Fresh markers are younger than the default 30 minutes: they stay.
    assert kv.purge_deletes() == 0
    assert kv.history("a")[-1].operation == "DEL"
    assert kv.history("b")[-1].operation == "PURGE"
    assert kv.keys() == ["c"]
    # older_than <= 0 removes every marker, with its key.
    assert kv.purge_deletes(older_than=0) == 2
    with pytest.raises(errors.KeyNotFoundError):
        kv.history("a")
    with pytest.raises(errors.KeyNotFoundError):
        kv.history("b")
    assert kv.get("c").value == b"keep"
    assert kv.status().values == 1
    assert kv.purge_deletes(older_than=0) == 0


def test_purge_deletes_older_than(kv: KeyValue) -> None:
    kv.put("old", b"1")
    kv.delete("old")
    time.sleep(0.7)
    kv.put("young", b"1")
    kv.delete("young")
    assert kv.purge_deletes(older_than=0.5) == 1
    with pytest.raises(errors.KeyNotFoundError):
        kv.history("old")
    assert kv.history("young")[-1].operation == "DEL"


@pytest.mark.parametrize("key", BAD_KEYS)
def test_bad_keys_are_refused(kv: KeyValue, key: str) -> None:
    kv.put("ok", b"v")
    calls: list[Callable[[], Any]] = [
        lambda: kv.put(key, b"v"),
        lambda: kv.get(key),
        lambda: kv.get(key, revision=1),
        lambda: kv.create(key, b"v"),
        lambda: kv.update(key, b"v", 1),
        lambda: kv.delete(key),
        lambda: kv.purge(key),
        lambda: kv.history(key),
    ]
    for call in calls:
        with pytest.raises(errors.InvalidKeyError) as ei:
            call()
        assert isinstance(ei.value, nats.js.errors.InvalidKeyError)
    assert kv.status().values == 1  # nothing was written


@pytest.mark.parametrize("pattern", ["", ".a", "a.", "a b", "a*", "a.>.b", "a>", "*a"])
def test_bad_filters_are_refused(kv: KeyValue, pattern: str) -> None:
    with pytest.raises(errors.InvalidKeyError):
        kv.keys(pattern)
    with pytest.raises(errors.InvalidKeyError):
        kv.watch(pattern)
    with pytest.raises(errors.InvalidKeyError):
        kv.watch(["ok.>", pattern])


def test_value_size_limits(nc: Client, js: JetStream) -> None:
    small = js.create_key_value(bucket="small", max_value_size=1024, storage="memory")
    at_limit = bytes(range(256)) * 4
    rev = small.put("k", at_limit)
    assert small.get("k").value == at_limit
    with pytest.raises(errors.APIError) as ei:
        small.put("k", at_limit + b"!")
    assert isinstance(ei.value, nats.js.errors.APIError)
    assert small.get("k").revision == rev  # the oversized value was not stored

    big = js.create_key_value(bucket="big", storage="memory")
    value = b"\x00\x01" * (256 * 1024)  # 512 KiB
    big.put("k", value)
    assert big.get("k").value == value
    with pytest.raises(errors.MaxPayloadError):
        big.put("k", b"x" * (nc.max_payload + 1))
    assert big.get("k").value == value


def test_scans_end_when_what_was_pending_goes_away(
    js: JetStream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scan reads up to what was pending when it began; if that went away before
    it was delivered (an age limit or a TTL ran out), the scan ends instead of
    waiting for it."""
    kv = js.create_key_value(bucket="gone", storage="memory", history=5)
    kv.put("a", b"1")
    kv.put("b", b"2")
    stream = js.stream("KV_gone")
    make = js.ordered_consumer

    def then_purge(*args: Any, **kwargs: Any) -> Any:
        oc = make(*args, **kwargs)  # made: it counts "b" as pending
        stream.purge(subject="$KV.gone.b")  # gone before any pull
        return oc

    monkeypatch.setattr(js, "ordered_consumer", then_purge)
    t0 = time.monotonic()
    with pytest.raises(errors.KeyNotFoundError):
        kv.history("b")  # counted as pending, then gone: nothing is ever delivered
    assert time.monotonic() - t0 < 10.0
    assert kv.keys() == ["a"]
    monkeypatch.undo()
    kv.put("c", b"3")
    kv.put("d", b"4")

    def then_purge_last(*args: Any, **kwargs: Any) -> Any:
        oc = make(*args, **kwargs)
        stream.purge(subject="$KV.gone.d")  # the last pending: the marker was to follow it
        return oc

    monkeypatch.setattr(js, "ordered_consumer", then_purge_last)
    with kv.watch(">") as w:  # the initial values end with None all the same
        got = []
        while (e := w.next(timeout=10.0)) is not None:
            got.append(e.key)
    assert got == ["a", "c"]


def test_per_key_ttl(js: JetStream) -> None:
    kv = js.create_key_value(bucket="ttl", storage="memory", history=3, limit_marker_ttl=1.0)
    assert kv.status().limit_marker_ttl == 1.0
    kv.create("t", b"short", ttl=1.0)
    kv.put("stay", b"v")
    assert kv.get("t").value == b"short"
    kv.put("p", b"1")
    kv.purge("p", ttl=1.0)
    assert [h.operation for h in kv.history("p")] == ["PURGE"]
    assert wait_for(lambda: _gone(kv, "t"), 8.0), "the key outlived its TTL"
    assert wait_for(lambda: _history_gone(kv, "p"), 8.0), "the purge marker outlived its TTL"
    assert kv.get("stay").value == b"v"
    assert "t" not in list(kv.keys())


def test_expired_key_is_gone_while_its_limit_marker_stays(js: JetStream) -> None:
    # When a key's TTL runs out the server replaces its value with a limit marker
    # (header Nats-Marker-Reason, no KV-Operation) that lives limit_marker_ttl
    # seconds. During that time the key is gone, not a key with an empty value.
    kv = js.create_key_value(bucket="lm", storage="memory", history=3, limit_marker_ttl=2.0)
    kv.put("stay", b"v")
    with kv.watch("t") as w:
        assert w.next(timeout=5.0) is None
        kv.create("t", b"short", ttl=2.0)
        assert w.next(timeout=5.0).value == b"short"
        expired = w.next(timeout=10.0)  # the marker, as the server writes it
        assert expired.key == "t" and expired.value == b""
        assert expired.operation in ("DEL", "PURGE")
        # The marker lives on for about 2 s: the key must read as gone meanwhile.
        with pytest.raises(errors.KeyNotFoundError):
            kv.get("t")
        assert sorted(kv.keys()) == ["stay"]
        with kv.watch_all(ignore_deletes=True) as w2:
            assert [e.key for e in _initial_entries(w2)] == ["stay"]


def test_mirror_bucket(js: JetStream) -> None:
    src = js.create_key_value(bucket="src", storage="memory", history=3)
    src.put("k", b"1")
    src.put("gone", b"x")
    src.delete("gone")
    mir = js.create_key_value(bucket="mir", storage="memory", mirror=StreamSource(name="src"))
    assert mir.bucket == "mir"
    assert js.stream("KV_mir").info().config.mirror.name == "KV_src"
    # Direct gets are answered by the origin or by any of its mirrors (mirror_direct),
    # and a mirror catches up in the background: reads are checked once it holds
    # what the origin holds (a mirror keeps the origin's sequence numbers).
    assert wait_for(lambda: js.stream("KV_mir").info().state.last_seq == 3)
    assert mir.get("k").value == b"1"
    with pytest.raises(errors.KeyDeletedError):
        mir.get("gone")
    assert mir.keys() == ["k"]
    # Writes through a mirror's handle go to its origin, and come back mirrored.
    rev = mir.put("w", b"2")
    assert rev == 4 and js.stream("KV_src").info().state.last_seq == 4
    assert wait_for(lambda: js.stream("KV_mir").info().state.last_seq == 4)
    assert src.get("w").value == b"2"
    assert js.key_value("mir").get("w").value == b"2"


def test_mirror_bucket_without_direct_gets_reads_from_the_leader(js: JetStream) -> None:
    # direct=False: the mirror's stream has mirror_direct (it answers its
    # origin's direct gets) but not allow_direct, so nothing answers a direct
    # get on its own name. Reads go to its leader, as Stream.get_msg's do (issue
    # 33: the bucket used to send direct gets there and got no responders).
    src = js.create_key_value(bucket="src", storage="memory", history=3)
    src.put("k", b"1")
    mir = js.create_key_value(
        bucket="mir", storage="memory", mirror=StreamSource(name="src"), direct=False
    )
    cfg = js.stream("KV_mir").info().config
    assert (cfg.allow_direct, cfg.mirror_direct) == (False, True)
    assert wait_for(lambda: js.stream("KV_mir").info().state.last_seq == 1)
    entry = mir.get("k")
    assert (entry.value, entry.revision) == (b"1", 1)
    assert mir.get("k", revision=1).value == b"1"
    with pytest.raises(errors.KeyNotFoundError):
        mir.get("none")
    assert js.stream("KV_mir").get_msg(last_by_subject="$KV.src.k").data == b"1"


def test_bucket_with_sources(js: JetStream) -> None:
    one = js.create_key_value(bucket="one", storage="memory")
    two = js.create_key_value(bucket="two", storage="memory")
    one.put("a", b"1")
    two.put("b", b"2")
    agg = js.create_key_value(
        bucket="agg",
        storage="memory",
        sources=[StreamSource(name="one"), StreamSource(name="two")],
    )
    assert wait_for(lambda: sorted(agg.keys()) == ["a", "b"])
    assert (agg.get("a").value, agg.get("b").value) == (b"1", b"2")
    agg.put("own", b"3")
    assert agg.get("own").value == b"3"
    assert one.keys() == ["a"] and two.keys() == ["b"]
    one.put("a", b"1b")
    assert wait_for(lambda: _value(agg, "a") == b"1b")


def test_keys_and_history_beyond_one_batch(nc: Client, js: JetStream) -> None:
    kv = js.create_key_value(bucket="lots", storage="memory", history=64)
    pub = nc.jetstream(publish_async_stall_wait=30.0)
    futures = [pub.publish_async(f"$KV.lots.k.{i}", b"v") for i in range(2500)]
    futures += [pub.publish_async("$KV.lots.h", b"%d" % i) for i in range(100)]
    pub.publish_async_complete(timeout=60)
    for f in futures:
        f.result(timeout=0)
    keys = kv.keys()
    assert len(keys) == 2501
    assert set(keys) == {f"k.{i}" for i in range(2500)} | {"h"}
    assert len(kv.keys("k.*")) == 2500
    hist = kv.history("h")
    assert [h.value for h in hist] == [b"%d" % i for i in range(36, 100)]  # the last 64
    assert [h.revision for h in hist] == list(range(2537, 2601))


def test_kv_through_a_domain(nats_server_factory: NatsServerFactory, tmp_path: Path) -> None:
    store = tmp_path / "js"
    srv = nats_server_factory(
        jetstream=False, config=f'jetstream {{ domain: hub, store_dir: "{store}" }}'
    )
    with jsclient.connect(srv.url) as client:
        js = client.jetstream(domain="hub")
        kv = js.create_key_value(bucket="dom", storage="memory", history=3)
        assert kv.put("a", b"1") == 1
        assert js.key_value("dom").get("a").value == b"1"
        assert kv.get("a", revision=1).value == b"1"
        assert kv.keys() == ["a"]
        with kv.watch_all() as w:
            first = w.next(timeout=5.0)
            assert first is not None and (first.key, first.value) == ("a", b"1")
            assert w.next(timeout=5.0) is None
            kv.put("b", b"2")
            live = w.next(timeout=5.0)
            assert live is not None and (live.key, live.value, live.revision) == ("b", b"2", 2)
        assert sorted(js.key_value_names()) == ["dom"]
        js.delete_key_value("dom")
        with pytest.raises(errors.BucketNotFoundError):
            js.key_value("dom")
