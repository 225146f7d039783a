"""Partitioned consumer groups (jsclient.jetstream.pcgroups) against a real nats-server.

The assignment, transform and validation cases are orbit.go's own
(``pcgroups/partitioned_consumer_groups_test.go``); the JSON bytes are what Go's
``encoding/json`` writes for orbit.go's structs.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator

import pytest
from _js import eventually

import jsclient
from jsclient import errors
from jsclient.api import AckPolicy, ConsumerConfig, RetentionPolicy, SubjectTransform
from jsclient.client import Client
from jsclient.jetstream import JetStream, pcgroups
from jsclient.jetstream.pcgroups import (
    ElasticConsumerGroupConfig,
    MemberMapping,
    PartitioningFilter,
    StaticConsumerGroupConfig,
)
from jsclient.msg import Msg
from jsclient.server import NatsServer

ACK_WAIT = 2.0


@pytest.fixture
def js(nc: Client) -> JetStream:
    return nc.jetstream()


class Recorder:
    """What each member's callback saw: (member, subject, data), in arrival order."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen: list[tuple[str, str, str]] = []
        self.threads: set[str] = set()

    def callback(self, member: str) -> Callable[[Msg], None]:
        def cb(msg: Msg) -> None:
            with self.lock:
                self.seen.append((member, msg.subject, msg.data.decode()))
                self.threads.add(threading.current_thread().name)
            msg.ack()

        return cb

    def count(self) -> int:
        with self.lock:
            return len(self.seen)

    def check(self, expected: dict[str, list[str]]) -> dict[str, set[str]]:
        """Each message once, in order per key; returns the members each key went to."""
        with self.lock:
            seen = list(self.seen)
        by_key: dict[str, list[str]] = defaultdict(list)
        owners: dict[str, set[str]] = defaultdict(set)
        for member, subject, data in seen:
            by_key[subject].append(data)
            owners[subject].add(member)
        assert dict(by_key) == expected
        return owners


def publish_keys(js: JetStream, prefix: str, keys: int, per_key: int, start: int = 0) -> None:
    for i in range(start, start + per_key):
        for k in range(keys):
            js.publish_async(f"{prefix}.k{k}", str(i).encode())
    js.publish_async_complete(timeout=30)


def expected_keys(prefix: str, keys: int, per_key: int) -> dict[str, list[str]]:
    return {f"{prefix}.k{k}": [str(i) for i in range(per_key)] for k in range(keys)}


def filters_of(js: JetStream, stream: str, name: str) -> list[str]:
    """The consumer's filters, [] while it is away (being recreated)."""
    try:
        return list(js.consumer(stream, name).config.filter_subjects or [])
    except errors.NotFoundError:
        return []


def no_group_threads() -> bool:
    return not [
        t.name
        for t in threading.enumerate()
        if t.name.startswith(("jsclient-pcgroup-", "jsclient-consume-"))
    ]


@pytest.fixture
def stopping() -> Iterator[list[pcgroups.ConsumerGroupContext]]:
    """Contexts to stop at the end, whatever the test did."""
    ctxs: list[pcgroups.ConsumerGroupContext] = []
    yield ctxs
    for c in ctxs:
        c.stop()
    for c in ctxs:
        assert c.wait(10.0)


# -- assignment maths, transforms, validation: orbit.go's cases -------------------


def test_partition_filters_are_orbit_gos() -> None:
    pfs = [PartitioningFilter("foo.*.*.>", [1, 2])]
    cfg = ElasticConsumerGroupConfig(6, pfs, members=["m1", "m2", "m3"])
    got = {m: pcgroups.elastic_partition_filters(cfg, m) for m in ("m1", "m2", "m3")}
    assert got == {
        "m1": ["0.foo.*.*.>", "1.foo.*.*.>"],
        "m2": ["2.foo.*.*.>", "3.foo.*.*.>"],
        "m3": ["4.foo.*.*.>", "5.foo.*.*.>"],
    }
    cfg.max_members = 7
    assert pcgroups.elastic_partition_filters(cfg, "m1") == [
        "0.foo.*.*.>",
        "1.foo.*.*.>",
        "6.foo.*.*.>",
    ]
    assert pcgroups.elastic_partition_filters(cfg, "m3") == ["4.foo.*.*.>", "5.foo.*.*.>"]
    cfg.max_members = 8
    assert pcgroups.elastic_partition_filters(cfg, "m2") == [
        "2.foo.*.*.>",
        "3.foo.*.*.>",
        "7.foo.*.*.>",
    ]
    # Deduplicated, sorted, capped to max_members; a member past the cap gets nothing.
    assert pcgroups.assignment(["c", "a", "b", "a"], 8) == {
        "a": [0, 1, 6],
        "b": [2, 3, 7],
        "c": [4, 5],
    }
    assert pcgroups.assignment(["d", "c", "b", "a"], 2) == {"a": [0], "b": [1]}
    assert pcgroups.generate_partition_filters(["a", "b"], 2, [], "z", ">") == []
    # Mappings: "<p>.>" whatever the filter.
    mm = [MemberMapping("x", [2, 0]), MemberMapping("y", [1])]
    assert pcgroups.generate_partition_filters([], 3, mm, "x", "foo.*") == ["2.>", "0.>"]
    dest = pcgroups.partitioning_transform_destination(pfs[0], 4)
    assert dest == "{{Partition(4,1,2)}}.foo.{{Wildcard(1)}}.{{Wildcard(2)}}.>"
    whole = pcgroups.partitioning_transform_destination(PartitioningFilter(">"), 6)
    assert whole == "{{Partition(6)}}.>"
    assert pcgroups.strip_partition("3.orders.k1") == "orders.k1"


def test_validation_is_orbit_gos() -> None:
    cfg = ElasticConsumerGroupConfig(2, [PartitioningFilter("foo.*", [1])], members=["m1", "m2"])
    cfg.validate()
    bad: list[list[MemberMapping]] = [
        [MemberMapping("m1", [1, 1])],
        [MemberMapping("m1", [1])],
        [MemberMapping("m1", [0, 1, 2])],
        [MemberMapping("m1", [0, 2])],
        [MemberMapping("m1", [0, 1]), MemberMapping("m1", [0, 1])],
        [MemberMapping("m1", [0, 1]), MemberMapping("m2", [0, 1])],
        [MemberMapping("m1", [0, 1]), MemberMapping("m2", [2, 3])],
    ]
    cfg.member_mappings = [MemberMapping("m1", [0, 1])]
    with pytest.raises(pcgroups.ConsumerGroupConfigError):
        cfg.validate()  # members are still set
    cfg.members = []
    cfg.validate()
    for mappings in bad:
        cfg.member_mappings = mappings
        with pytest.raises(pcgroups.ConsumerGroupConfigError):
            cfg.validate()
    cfg.member_mappings = [MemberMapping("m1", [0]), MemberMapping("m2", [1])]
    cfg.validate()
    cfg.max_members = 3
    with pytest.raises(pcgroups.ConsumerGroupConfigError):
        cfg.validate()
    cfg.member_mappings = [MemberMapping("m1", [0, 2]), MemberMapping("m2", [1])]
    cfg.validate()
    for pf in (
        PartitioningFilter("foo.bar"),  # no wildcard
        PartitioningFilter("foo.*", [1, 1]),
        PartitioningFilter("foo.*", [2]),
        PartitioningFilter("foo.*", [1, 2]),
        PartitioningFilter(""),
    ):
        with pytest.raises(errors.JetStreamError):
            ElasticConsumerGroupConfig(3, [pf]).validate()
    with pytest.raises(pcgroups.ConsumerGroupConfigError):
        StaticConsumerGroupConfig(0).validate()


def test_config_json_is_go_json() -> None:
    cfg = ElasticConsumerGroupConfig(
        6,
        [PartitioningFilter("orders.*.>", [1])],
        max_buffered_msgs=100,
        members=["m1", "m2"],
    )
    raw = (
        b'{"max_members":6,"partitioning_filters":[{"filter":"orders.*.\\u003e",'
        b'"partitioning_wildcards":[1]}],"max_buffered_msg":100,"members":["m1","m2"]}'
    )
    assert cfg.to_json() == raw
    assert ElasticConsumerGroupConfig.from_json(raw) == cfg
    # As another client may write it: spaces, nulls, -1 limits, unknown fields.
    other = (
        b'{"max_members": 2, "partitioning_filters": [{"filter": "a.*", '
        b'"partitioning_wildcards": null}], "max_buffered_bytes": -1, '
        b'"member_mappings": [{"member": "x", "partitions": [0, 1]}], "extra": 1}'
    )
    back = ElasticConsumerGroupConfig.from_json(other, revision=7)
    assert back.partitioning_filters == [PartitioningFilter("a.*", [])]
    assert back.member_mappings == [MemberMapping("x", [0, 1])] and back.revision == 7
    assert back.to_json() == (
        b'{"max_members":2,"partitioning_filters":[{"filter":"a.*","partitioning_wildcards":[]}],'
        b'"max_buffered_bytes":-1,"member_mappings":[{"member":"x","partitions":[0,1]}]}'
    )
    st = StaticConsumerGroupConfig(4, ["o.*"], member_mappings=[MemberMapping("a", [0, 1, 2, 3])])
    assert st.to_json() == (
        b'{"max_members":4,"filters":["o.*"],'
        b'"member_mappings":[{"member":"a","partitions":[0,1,2,3]}]}'
    )
    assert StaticConsumerGroupConfig.from_json(st.to_json()) == st
    assert StaticConsumerGroupConfig(2).to_json() == b'{"max_members":2}'
    for junk in (b"not json", b"[]", b'{"max_members":"2"}', b'{"max_members":0}'):
        with pytest.raises(pcgroups.ConsumerGroupConfigError):
            StaticConsumerGroupConfig.from_json(junk)


# -- elastic ------------------------------------------------------------------------


def test_create_elastic_makes_bucket_entry_and_stream(js: JetStream) -> None:
    js.create_stream(name="ORD", subjects=["ord.*.*"], storage="memory")
    cfg = pcgroups.create_elastic(js, "ORD", "cg", 6, "ord.*.*", [2], max_buffered_msgs=1000)
    assert cfg.revision > 0
    entry = js.key_value("elastic-consumer-groups").get("ORD.cg")
    assert entry.value == (
        b'{"max_members":6,"partitioning_filters":[{"filter":"ord.*.*",'
        b'"partitioning_wildcards":[2]}],"max_buffered_msg":1000}'
    )
    sc = js.stream("ORD-cg").info().config
    assert sc.retention == RetentionPolicy.WORK_QUEUE and sc.allow_direct
    assert str(getattr(sc.discard, "value", sc.discard)) == "new" and sc.max_msgs == 1000
    assert sc.sources is not None and sc.sources[0].name == "ORD"
    assert sc.sources[0].subject_transforms == [
        SubjectTransform(
            src="ord.*.*", dest="{{Partition(6,2)}}.ord.{{Wildcard(1)}}.{{Wildcard(2)}}"
        )
    ]
    # Again with the same shape: the existing group; another shape: an error.
    again = pcgroups.create_elastic(js, "ORD", "cg", 6, "ord.*.*", [2], max_buffered_msgs=1000)
    assert again == cfg
    with pytest.raises(pcgroups.ConsumerGroupExistsError):
        pcgroups.create_elastic(js, "ORD", "cg", 4, "ord.*.*", [2])
    assert pcgroups.get_elastic_config(js, "ORD", "cg") == cfg
    assert pcgroups.list_elastic(js, "ORD") == ["cg"] and pcgroups.list_elastic(js, "X") == []
    pcgroups.delete_elastic(js, "ORD", "cg")
    with pytest.raises(pcgroups.ConsumerGroupNotFoundError):
        pcgroups.get_elastic_config(js, "ORD", "cg")
    with pytest.raises(errors.StreamNotFoundError):
        js.stream("ORD-cg")


def test_membership_changes_compare_and_set(js: JetStream) -> None:
    js.create_stream(name="MEM", subjects=["mem.*"], storage="memory")
    pcgroups.create_elastic(js, "MEM", "cg", 4, "mem.*", [1])
    assert pcgroups.add_members(js, "MEM", "cg", ["m1", "m2"]) == ["m1", "m2"]
    assert pcgroups.add_members(js, "MEM", "cg", ["m2", "m3"]) == ["m1", "m2", "m3"]
    assert pcgroups.delete_members(js, "MEM", "cg", ["m1"]) == ["m2", "m3"]
    # Writers side by side: each change lands (re-read and applied again on conflict).
    names = [f"w{i}" for i in range(8)]
    threads = [
        threading.Thread(target=pcgroups.add_members, args=(js, "MEM", "cg", [n])) for n in names
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    members = pcgroups.get_elastic_config(js, "MEM", "cg").members
    assert sorted(members) == sorted(["m2", "m3", *names])
    mm = [MemberMapping("a", [0, 1]), MemberMapping("b", [2, 3])]
    pcgroups.set_member_mappings(js, "MEM", "cg", mm)
    cfg = pcgroups.get_elastic_config(js, "MEM", "cg")
    assert cfg.members == [] and cfg.member_mappings == mm
    with pytest.raises(pcgroups.ConsumerGroupConfigError):
        pcgroups.add_members(js, "MEM", "cg", ["z"])
    with pytest.raises(pcgroups.ConsumerGroupConfigError):
        pcgroups.set_member_mappings(js, "MEM", "cg", [MemberMapping("a", [0])])
    pcgroups.delete_member_mappings(js, "MEM", "cg")
    cfg = pcgroups.get_elastic_config(js, "MEM", "cg")
    assert cfg.member_mappings == [] and cfg.members == []
    assert pcgroups.is_in_membership_and_active(js, "MEM", "cg", "a") == (False, False)


def test_elastic_three_members_each_message_once_in_order(
    js: JetStream, stopping: list[pcgroups.ConsumerGroupContext]
) -> None:
    js.create_stream(name="EL", subjects=["el.*"], storage="memory")
    pcgroups.create_elastic(js, "EL", "cg", 6, "el.*", [1])
    pcgroups.add_members(js, "EL", "cg", ["m1", "m2", "m3"])
    rec = Recorder()
    cfg = ConsumerConfig(ack_wait=ACK_WAIT)
    for m in ("m1", "m2", "m3"):
        stopping.append(pcgroups.consume_elastic(js, "EL", "cg", m, rec.callback(m), cfg))
    publish_keys(js, "el", 30, 20)
    eventually(lambda: rec.count() >= 600, 20, "600 messages")
    time.sleep(0.3)  # nothing more comes
    owners = rec.check(expected_keys("el", 30, 20))
    assert all(len(o) == 1 for o in owners.values())  # a key stays with one member
    assert {m for o in owners.values() for m in o} == {"m1", "m2", "m3"}
    assert all(t.startswith("jsclient-consume-") for t in rec.threads)
    assert sorted(pcgroups.list_active_members(js, "EL", "cg")) == ["m1", "m2", "m3"]
    assert pcgroups.is_in_membership_and_active(js, "EL", "cg", "m2") == (True, True)
    for c in stopping:
        c.stop()
    assert all(c.wait(10) for c in stopping) and all(c.closed for c in stopping)
    assert stopping[0].error is None
    assert eventually(no_group_threads, 5, "the members' threads to end")


def test_elastic_member_added_and_one_stopped_moves_partitions(
    js: JetStream, stopping: list[pcgroups.ConsumerGroupContext]
) -> None:
    js.create_stream(name="MV", subjects=["mv.*"], storage="memory")
    pcgroups.create_elastic(js, "MV", "cg", 6, "mv.*", [1])
    pcgroups.add_members(js, "MV", "cg", ["m1", "m2"])
    rec = Recorder()
    cfg = ConsumerConfig(ack_wait=ACK_WAIT)
    ctx = {
        m: pcgroups.consume_elastic(js, "MV", "cg", m, rec.callback(m), cfg) for m in ("m1", "m2")
    }
    # m3 runs before it is a member: it waits, consuming nothing.
    ctx["m3"] = pcgroups.consume_elastic(js, "MV", "cg", "m3", rec.callback("m3"), cfg)
    stopping.extend(ctx.values())
    assert not ctx["m3"].consuming
    publish_keys(js, "mv", 12, 5)
    eventually(lambda: rec.count() >= 60, 15, "the first 60")
    assert {m for m, _, _ in rec.seen} == {"m1", "m2"}

    pcgroups.add_members(js, "MV", "cg", ["m3"])
    eventually(lambda: all(c.consuming for c in ctx.values()), 15, "three members consuming")
    eventually(
        lambda: len(filters_of(js, "MV-cg", "m3")) == 2,
        10,
        "m3's consumer",
    )
    time.sleep(1.0)  # the others' consumers follow
    publish_keys(js, "mv", 12, 5, start=5)
    eventually(lambda: rec.count() >= 120, 15, "the next 60")
    assert "m3" in {m for m, _, _ in rec.seen[60:]}

    # m1 stops and is dropped: its partitions go to m2 and m3.
    ctx["m1"].stop()
    assert ctx["m1"].wait(10)
    pcgroups.delete_members(js, "MV", "cg", ["m1"])
    eventually(
        lambda: len(filters_of(js, "MV-cg", "m2")) == 3 and len(filters_of(js, "MV-cg", "m3")) == 3,
        15,
        "m2 and m3 taking m1's partitions",
    )
    publish_keys(js, "mv", 12, 5, start=10)
    eventually(lambda: rec.count() >= 180, 20, "the last 60")
    time.sleep(0.3)
    rec.check(expected_keys("mv", 12, 15))
    assert {m for m, _, _ in rec.seen[120:]} == {"m2", "m3"}


def test_elastic_step_down_moves_the_pin(
    nats_server: NatsServer, js: JetStream, stopping: list[pcgroups.ConsumerGroupContext]
) -> None:
    js.create_stream(name="SD", subjects=["sd.*"], storage="memory")
    pcgroups.create_elastic(js, "SD", "cg", 2, "sd.*", [1])
    pcgroups.add_members(js, "SD", "cg", ["m1"])
    rec = Recorder()
    cfg = ConsumerConfig(ack_wait=ACK_WAIT)
    with jsclient.connect(nats_server.url) as other:
        stopping.append(pcgroups.consume_elastic(js, "SD", "cg", "m1", rec.callback("a"), cfg))
        stopping.append(
            pcgroups.consume_elastic(other.jetstream(), "SD", "cg", "m1", rec.callback("b"), cfg)
        )

        def pinned() -> str | None:
            groups = js.consumer("SD-cg", "m1").info().priority_groups or []
            return next((g.pinned_client_id for g in groups if g.group == "PCG"), None)

        publish_keys(js, "sd", 4, 5)
        eventually(lambda: rec.count() >= 20, 15, "20 messages")
        first = {who for who, _, _ in rec.seen}
        assert len(first) == 1  # one instance is pinned
        pin = eventually(pinned, 5, "a pin")
        pcgroups.step_down_elastic(js, "SD", "cg", "m1")
        publish_keys(js, "sd", 4, 5, start=5)
        eventually(lambda: rec.count() >= 40, 15, "20 more")
        assert eventually(lambda: (p := pinned()) is not None and p != pin, 5, "a new pin")
        rec.check(expected_keys("sd", 4, 10))
        for c in stopping:
            c.stop()
        assert all(c.wait(10) for c in stopping)


def test_elastic_needs_explicit_acks_and_a_group(js: JetStream) -> None:
    js.create_stream(name="EX", subjects=["ex.*"], storage="memory")
    with pytest.raises(pcgroups.ConsumerGroupNotFoundError):
        pcgroups.consume_elastic(js, "EX", "nope", "m", lambda m: None)
    pcgroups.create_elastic(js, "EX", "cg", 2, "ex.*", [1])
    with pytest.raises(pcgroups.ConsumerGroupConfigError):
        pcgroups.consume_elastic(
            js, "EX", "cg", "m", lambda m: None, ConsumerConfig(ack_policy=AckPolicy.NONE)
        )


def test_elastic_member_ends_when_the_group_goes(
    js: JetStream, stopping: list[pcgroups.ConsumerGroupContext]
) -> None:
    js.create_stream(name="GO", subjects=["go.*"], storage="memory")
    pcgroups.create_elastic(js, "GO", "cg", 2, "go.*", [1])
    pcgroups.add_members(js, "GO", "cg", ["m"])
    changed = pcgroups.consume_elastic(js, "GO", "cg", "m", lambda m: m.ack())
    stopping.append(changed)
    kv = js.key_value("elastic-consumer-groups")
    entry = kv.get("GO.cg")
    wider = ElasticConsumerGroupConfig.from_json(entry.value)
    wider.max_members = 3
    kv.update("GO.cg", wider.to_json(), last=entry.revision)
    assert changed.wait(10)
    assert isinstance(changed.error, pcgroups.GroupConfigChangedError)
    kv.put("GO.cg", entry.value)
    gone = pcgroups.consume_elastic(js, "GO", "cg", "m", lambda m: m.ack())
    stopping.append(gone)
    pcgroups.delete_elastic(js, "GO", "cg")
    assert gone.wait(10) and gone.error is None


# -- static -------------------------------------------------------------------------


def _partitioned_stream(js: JetStream, name: str, prefix: str, n: int) -> None:
    js.create_stream(
        name=name,
        subjects=[f"{prefix}.*"],
        storage="memory",
        subject_transform=SubjectTransform(
            src=f"{prefix}.*", dest=f"{{{{Partition({n},1)}}}}.{prefix}.{{{{Wildcard(1)}}}}"
        ),
    )


def test_static_members_each_message_once_in_order(
    js: JetStream, stopping: list[pcgroups.ConsumerGroupContext]
) -> None:
    _partitioned_stream(js, "ST", "st", 4)
    cfg = pcgroups.create_static(js, "ST", "cg", 4, "st.*", members=["a", "b", "c"])
    assert js.key_value("static-consumer-groups").get("ST.cg").value == (
        b'{"max_members":4,"filters":["st.*"],"members":["a","b","c"]}'
    )
    assert pcgroups.create_static(js, "ST", "cg", 4, "st.*", members=["a", "b", "c"]) == cfg
    with pytest.raises(pcgroups.ConsumerGroupExistsError):
        pcgroups.create_static(js, "ST", "cg", 4, "st.*", members=["a"])
    with pytest.raises(pcgroups.MemberNotInGroupError):
        pcgroups.consume_static(js, "ST", "cg", "zz", lambda m: None)
    rec = Recorder()
    ccfg = ConsumerConfig(ack_wait=ACK_WAIT)
    for m in ("a", "b", "c"):
        stopping.append(pcgroups.consume_static(js, "ST", "cg", m, rec.callback(m), ccfg))
    info = js.consumer("ST", "cg-a").config
    assert info.filter_subjects == ["0.st.*", "3.st.*"]  # 4 // 3 = 1 each, the rest to a
    assert info.priority_groups == ["PCG"] and info.priority_timeout == ACK_WAIT
    publish_keys(js, "st", 20, 10)
    eventually(lambda: rec.count() >= 200, 15, "200 messages")
    time.sleep(0.3)
    owners = rec.check(expected_keys("st", 20, 10))
    assert all(len(o) == 1 for o in owners.values())
    assert sorted(pcgroups.list_active_members(js, "ST", "cg")) == ["a", "b", "c"]
    assert pcgroups.list_static(js, "ST") == ["cg"]
    pcgroups.step_down_static(js, "ST", "cg", "a")  # the one instance is pinned again

    # A changed config ends the members, with the reason.
    kv = js.key_value("static-consumer-groups")
    kv.put("ST.cg", StaticConsumerGroupConfig(4, ["st.*"], ["a", "b"]).to_json())
    assert all(c.wait(10) for c in stopping)
    assert all(isinstance(c.error, pcgroups.GroupConfigChangedError) for c in stopping)
    assert eventually(no_group_threads, 5, "the members' threads to end")


def test_static_mappings_and_delete(
    js: JetStream, stopping: list[pcgroups.ConsumerGroupContext]
) -> None:
    _partitioned_stream(js, "SM", "sm", 3)
    mm = [MemberMapping("x", [0, 2]), MemberMapping("y", [1])]
    pcgroups.create_static(js, "SM", "cg", 3, member_mappings=mm)
    rec = Recorder()
    for m in ("x", "y"):
        stopping.append(pcgroups.consume_static(js, "SM", "cg", m, rec.callback(m)))
    assert js.consumer("SM", "cg-x").config.filter_subjects == ["0.>", "2.>"]
    publish_keys(js, "sm", 9, 4)
    eventually(lambda: rec.count() >= 36, 15, "36 messages")
    rec.check(expected_keys("sm", 9, 4))
    pcgroups.delete_static(js, "SM", "cg")
    assert all(c.wait(10) and c.error is None for c in stopping)
    assert [n for n in js.stream("SM").consumer_names() if n.startswith("cg-")] == []
    with pytest.raises(pcgroups.ConsumerGroupNotFoundError):
        pcgroups.get_static_config(js, "SM", "cg")


def test_elastic_membership_changes_under_load(
    js: JetStream, stopping: list[pcgroups.ConsumerGroupContext]
) -> None:
    """Messages keep coming while a member joins and another leaves: none is lost,
    none comes twice, each key's stay in order."""
    js.create_stream(name="LD", subjects=["ld.*"], storage="memory")
    pcgroups.create_elastic(js, "LD", "cg", 6, "ld.*", [1])
    pcgroups.add_members(js, "LD", "cg", ["m1", "m2"])
    rec = Recorder()
    cfg = ConsumerConfig(ack_wait=ACK_WAIT)
    ctx = {
        m: pcgroups.consume_elastic(js, "LD", "cg", m, rec.callback(m), cfg)
        for m in ("m1", "m2", "m3")
    }
    stopping.extend(ctx.values())
    keys, rounds = 12, 60
    done = threading.Event()

    def publish() -> None:
        for i in range(rounds):
            for k in range(keys):
                js.publish(f"ld.k{k}", str(i).encode())
            time.sleep(0.05)
        done.set()

    pub = threading.Thread(target=publish)
    pub.start()
    try:
        time.sleep(0.6)
        pcgroups.add_members(js, "LD", "cg", ["m3"])
        time.sleep(1.0)
        ctx["m1"].stop()
        assert ctx["m1"].wait(10)
        pcgroups.delete_members(js, "LD", "cg", ["m1"])
    finally:
        pub.join(30)
    assert done.is_set()
    eventually(lambda: rec.count() >= keys * rounds, 25, f"{keys * rounds} messages")
    time.sleep(0.5)
    rec.check(expected_keys("ld", keys, rounds))
    assert {m for m, _, _ in rec.seen[-keys:]} <= {"m2", "m3"}


def test_static_standby_instance_takes_over(
    nats_server: NatsServer, js: JetStream, stopping: list[pcgroups.ConsumerGroupContext]
) -> None:
    _partitioned_stream(js, "HA", "ha", 2)
    with pytest.raises(pcgroups.ConsumerGroupNotFoundError):
        pcgroups.consume_static(js, "HA", "cg", "a", lambda m: None)
    pcgroups.create_static(js, "HA", "cg", 2, "ha.*", members=["a"])
    rec = Recorder()
    cfg = ConsumerConfig(ack_wait=ACK_WAIT)
    with jsclient.connect(nats_server.url) as other:
        one = pcgroups.consume_static(js, "HA", "cg", "a", rec.callback("one"), cfg)
        two = pcgroups.consume_static(other.jetstream(), "HA", "cg", "a", rec.callback("two"), cfg)
        stopping.extend([one, two])
        publish_keys(js, "ha", 4, 5)
        eventually(lambda: rec.count() >= 20, 15, "20 messages")
        (active,) = {who for who, _, _ in rec.seen}  # one instance at a time
        ctx = {"one": one, "two": two}
        ctx[active].stop()
        assert ctx[active].wait(10)
        publish_keys(js, "ha", 4, 5, start=5)
        # The pin lapses after max(ack_wait, 1 s): the standby is pinned then.
        eventually(lambda: rec.count() >= 40, 15, "the standby's 20")
        rec.check(expected_keys("ha", 4, 10))
        assert {who for who, _, _ in rec.seen[20:]} == {"two" if active == "one" else "one"}
        for c in stopping:
            c.stop()
        assert all(c.wait(10) for c in stopping)
