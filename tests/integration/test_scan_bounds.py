"""Issue 32: every KV / object store read is bounded in time and in memory.

- A scan (``keys``, ``history``, ``purge_deletes``, ``counters.get_many``,
  ``obs.list``) and an object read are one-shot: when the server goes away in
  the middle they raise the typed ``TimeoutError`` after the JetStream
  context's timeout (here 1 s), not hang until it comes back.
- What the server sends ahead of a watcher, a scan or an object read is
  bounded by bytes as well as messages (8 MiB by default): an unread watcher
  over values of ~1 MiB holds 8 MiB, not all of them.
- A watcher whose setup fails after its consumer was made deletes it.
"""

from __future__ import annotations

import gc
import json
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from _js import eventually

from jsclient import errors
from jsclient.api import DeliverPolicy
from jsclient.client import Client
from jsclient.jetstream import JetStream
from jsclient.server import NatsServer

MiB = 1024 * 1024
#: The JetStream timeout of these tests, and the generous bound on a timed-out call.
TIMEOUT = 1.0
BOUND = TIMEOUT * 3 + 5
#: Values of ~1 MiB: the largest the default max_payload (1 MiB) takes, with headers.
BIG = 1_000_000
#: Default buffer bound, and room for what a reader took but did not hand out yet
#: (one routed read: one or two large messages).
LIMIT = 8 * MiB
SLACK = 2.5 * MiB


@pytest.fixture
def js(nc: Client) -> JetStream:
    # nc (conftest) reconnects without end: a killed server leaves it open.
    return nc.jetstream(timeout=TIMEOUT, publish_async_stall_wait=30.0)


def _rss() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def _settled_rss() -> int:
    gc.collect()
    time.sleep(0.2)
    return _rss()


def _published(js: JetStream, items: list[tuple[str, bytes]], headers: Any = None) -> None:
    futures = [js.publish_async(s, v, headers=headers) for s, v in items]
    js.publish_async_complete(timeout=60)
    for f in futures:
        f.result(timeout=0)


def _ends_within(call: Callable[[], Any], bound: float) -> BaseException | None:
    """Run ``call`` on a thread; fail the test if it has not ended within ``bound``
    seconds (it would hang until the server comes back); its exception, if any."""
    out: list[BaseException | None] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:
            out.append(exc)
        else:
            out.append(None)

    t = threading.Thread(target=run, name="test-scan-bounds", daemon=True)
    start = time.monotonic()
    t.start()
    t.join(bound)
    if t.is_alive():
        pytest.fail(f"the call was still blocked {bound:g} s after the server was killed")
    assert time.monotonic() - start < bound
    return out[0]


def _kill_on_first(monkeypatch: pytest.MonkeyPatch, where: Any, name: str, srv: NatsServer) -> None:
    """Make ``where.name`` (called for each item a scan hands out) kill the
    server the first time: the scan is then in progress, with more to come."""
    real = getattr(where, name)
    fired: list[bool] = []

    def hook(*args: Any, **kwargs: Any) -> Any:
        if not fired:
            fired.append(True)
            srv.kill()
        return real(*args, **kwargs)

    monkeypatch.setattr(where, name, hook)


def _assert_timeout(exc: BaseException | None) -> None:
    assert isinstance(exc, errors.TimeoutError), f"expected the typed TimeoutError, got {exc!r}"


# -- 1. bounded in time: the server goes away in the middle of a scan or read -------------


@pytest.mark.parametrize("kind", ["keys", "history", "purge_deletes"])
def test_kv_scan_times_out_when_the_server_dies_mid_scan(
    nats_server: NatsServer, js: JetStream, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    import jsclient.jetstream.kv.store as kv_store

    kv = js.create_key_value(bucket="scan", history=64, storage="memory")
    if kind == "history":
        # 64 revisions of ~900 KiB: more than one buffer's worth is still to come.
        value = os.urandom(900_000)
        _published(js, [("$KV.scan.k", value) for _ in range(64)])
    else:
        _published(js, [(f"$KV.scan.k{i}", b"v") for i in range(5000)])
        if kind == "purge_deletes":
            hdr = {"KV-Operation": "DEL"}
            _published(js, [(f"$KV.scan.k{i}", b"") for i in range(5000)], headers=hdr)
    _kill_on_first(monkeypatch, kv_store, "operation_of", nats_server)
    call: Callable[[], Any] = {
        "keys": kv.keys,
        "history": lambda: kv.history("k"),
        "purge_deletes": lambda: kv.purge_deletes(older_than=0),
    }[kind]
    _assert_timeout(_ends_within(call, BOUND))


def test_counters_get_many_times_out_when_the_server_dies_mid_scan(
    nats_server: NatsServer, js: JetStream, monkeypatch: pytest.MonkeyPatch
) -> None:
    import jsclient.jetstream.publish.counters as counters_mod

    js.create_stream(name="CTR", subjects=["ctr.>"], storage="memory", allow_msg_counter=True)
    _published(js, [(f"ctr.{i}", b"") for i in range(5000)], headers={"Nats-Incr": "+1"})
    counters = js.counters("CTR")
    _kill_on_first(monkeypatch, counters_mod, "value_of_body", nats_server)
    _assert_timeout(_ends_within(counters.get_many, BOUND))


def test_obs_list_times_out_when_the_server_dies_mid_list(
    nats_server: NatsServer, js: JetStream, monkeypatch: pytest.MonkeyPatch
) -> None:
    import jsclient.jetstream.obj._watch as obj_watch

    obs = js.create_object_store(bucket="many", storage="memory")
    for i in range(3000):
        obs.put(f"o{i}", b"")
    _kill_on_first(monkeypatch, obj_watch, "parse_meta", nats_server)
    _assert_timeout(_ends_within(obs.list, BOUND))


@pytest.mark.parametrize("how", ["read", "readinto", "iterate", "get_bytes", "get_file"])
def test_object_read_times_out_when_the_server_dies_mid_read(
    nats_server: NatsServer,
    js: JetStream,
    tmp_path: Any,
    monkeypatch: pytest.MonkeyPatch,
    how: str,
) -> None:
    obs = js.create_object_store(bucket="big", storage="memory")
    obs.put("o", os.urandom(12 * MiB), chunk_size=128 * 1024)  # more than one window
    if how in ("get_bytes", "get_file"):
        from jsclient.jetstream.obj._reader import ObjectReader

        real = ObjectReader._next_chunk
        fired: list[bool] = []

        def first_then_kill(self: Any) -> Any:
            chunk = real(self)
            if not fired:
                fired.append(True)
                nats_server.kill()
            return chunk

        monkeypatch.setattr(ObjectReader, "_next_chunk", first_then_kill)
        if how == "get_bytes":
            _assert_timeout(_ends_within(lambda: obs.get_bytes("o"), BOUND))
        else:
            _assert_timeout(_ends_within(lambda: obs.get_file("o", tmp_path / "o"), BOUND))
            assert not (tmp_path / "o").exists()  # a failed read removes the file
        return
    r = obs.get("o")
    try:
        assert len(r.read(1000)) == 1000  # the read is under way
        nats_server.kill()
        if how == "read":
            call: Callable[[], Any] = r.read
        elif how == "readinto":
            call = lambda: r.readinto(bytearray(12 * MiB))  # noqa: E731
        else:
            call = lambda: list(r)  # noqa: E731
        _assert_timeout(_ends_within(call, BOUND))
        with pytest.raises(errors.TimeoutError):  # and from every later read
            r.read(1)
    finally:
        r.close()


def test_watcher_next_is_bounded_while_the_server_is_away(
    nats_server: NatsServer, js: JetStream
) -> None:
    kv = js.create_key_value(bucket="w", storage="memory")
    kv.put("a", b"1")
    with kv.watch_all() as w:
        assert w.next(timeout=5.0) is not None
        assert w.next(timeout=5.0) is None
        nats_server.kill()
        start = time.monotonic()
        with pytest.raises(errors.TimeoutError):
            w.next(timeout=TIMEOUT)
        assert time.monotonic() - start < BOUND


# -- 2. bounded in bytes -----------------------------------------------------------------


def _big_values(js: JetStream, subject: Callable[[int], str], n: int) -> list[bytes]:
    """Publish ``n`` values of ~1 MiB (each tagged with its index); their bytes."""
    base = bytearray(os.urandom(BIG))
    values = []
    for i in range(n):
        base[:8] = i.to_bytes(8, "big")
        values.append(bytes(base))
    _published(js, [(subject(i), v) for i, v in enumerate(values)])
    return values


def _received(it: Any) -> int:
    """Payload bytes a reader's inbox received (its ``MessagesContext`` ``it``): the
    reader thread's count on the pull inbox (``SubState._in_bytes``)."""
    return int(it._source.feed._sub._in_bytes)


def test_unread_watcher_buffers_at_most_8_mib(js: JetStream) -> None:
    kv = js.create_key_value(bucket="big", storage="memory")
    values = _big_values(js, lambda i: f"$KV.big.k{i:03d}", 40)
    digests = [hash(v) for v in values]
    del values
    before = _settled_rss()
    with kv.watch_all() as w:
        time.sleep(2.5)  # unread: the server sends what the pulls allow
        grown = _rss() - before
        buffered = _received(w._it)
        assert buffered <= LIMIT + SLACK, f"an unread watcher buffered {buffered / MiB:.1f} MiB"
        assert grown <= LIMIT + 14 * MiB, f"RSS grew {grown / MiB:.1f} MiB"
        got = []
        while (entry := w.next(timeout=10.0)) is not None:
            got.append(entry)
        assert [e.key for e in got] == [f"k{i:03d}" for i in range(40)]
        assert [hash(e.value) for e in got] == digests


def test_history_scan_buffers_at_most_8_mib(js: JetStream) -> None:
    kv = js.create_key_value(bucket="hist", history=64, storage="memory")
    values = _big_values(js, lambda i: "$KV.hist.k", 40)
    digests = [hash(v) for v in values]
    del values
    before = _settled_rss()
    gen = kv._scan(["k"], DeliverPolicy.ALL, False)
    try:
        first = next(gen)
        time.sleep(2.5)  # the scan is paused after its first entry
        grown = _rss() - before
        it = gen.gi_frame.f_locals["it"]  # the paused scan's MessagesContext
        buffered = _received(it) - len(first[0].data)
        assert buffered <= LIMIT + SLACK, f"a paused scan buffered {buffered / MiB:.1f} MiB"
        assert grown <= LIMIT + 14 * MiB, f"RSS grew {grown / MiB:.1f} MiB"
        rest = [hash(m.data) for m, _rev, _pending, _ts in gen]
    finally:
        gen.close()
    assert [hash(first[0].data), *rest] == digests
    assert [e.revision for e in kv.history("k")] == list(range(1, 41))
    assert kv.keys() == ["k"]


def test_object_read_ignores_a_meta_that_understates_chunk_sizes(js: JetStream) -> None:
    # The meta claims tiny chunks, so a window sized from it would be 1000 chunks:
    # the server-side byte bound still holds the read to 8 MiB ahead.
    obs = js.create_object_store(bucket="liar", storage="memory")
    data = os.urandom(40 * BIG)
    info = obs.put("o", data, chunk_size=BIG)
    subject = obs._meta_subject("o")
    raw = json.loads(obs._stream.get_msg(last_by_subject=subject).data)
    raw["options"]["max_chunk_size"] = 1024
    raw["chunks"] = 40_000
    js.publish(subject, json.dumps(raw).encode(), headers={"Nats-Rollup": "sub"})
    assert info.chunks == 40
    r = obs.get("o")
    try:
        assert len(r.read(10)) == 10
        time.sleep(2.5)
        buffered = _received(r._it) - BIG
        assert buffered <= LIMIT + SLACK, f"an object read buffered {buffered / MiB:.1f} MiB"
        with pytest.raises(errors.DigestMismatchError):  # 40 chunks, not 40,000
            r.read()
    finally:
        r.close()


def test_max_buffered_bytes_option(js: JetStream) -> None:
    kv = js.create_key_value(bucket="opt", storage="memory")
    _big_values(js, lambda i: f"$KV.opt.k{i:03d}", 12)
    with kv.watch_all(max_buffered_bytes=3 * MiB) as w:
        time.sleep(1.5)
        assert _received(w._it) <= 3 * MiB
        assert len([e for e in iter(lambda: w.next(timeout=10.0), None)]) == 12
    with pytest.raises(ValueError):
        kv.watch_all(max_buffered_bytes=0)


# -- 3. no leak when a watcher's setup fails ----------------------------------------------


@pytest.mark.parametrize("store", ["kv", "obj"])
def test_watcher_whose_messages_fail_deletes_its_consumer(
    js: JetStream, monkeypatch: pytest.MonkeyPatch, store: str
) -> None:
    from jsclient.jetstream.consume.contexts import MessagesContext

    if store == "kv":
        kv = js.create_key_value(bucket="leak", storage="memory")
        kv.put("a", b"1")
        stream = "KV_leak"
        watch: Callable[[], Any] = kv.watch_all
    else:
        obs = js.create_object_store(bucket="leak", storage="memory")
        obs.put("a", b"1")
        stream = "OBJ_leak"
        watch = obs.watch

    def boom(self: Any, *args: Any, **kwargs: Any) -> None:
        raise errors.JetStreamError("nats: injected failure starting the pull")

    monkeypatch.setattr(MessagesContext, "__init__", boom)
    with pytest.raises(errors.JetStreamError, match="injected"):
        watch()
    monkeypatch.undo()

    def no_consumer() -> bool:
        return not js.stream(stream).info().state.consumer_count

    eventually(no_consumer, 10.0, "the failed watcher's consumer to be deleted")
