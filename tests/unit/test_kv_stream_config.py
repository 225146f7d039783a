"""A bucket's stream config field by field against what nats.go writes.

The expected values are nats.go's ``prepareKeyValueConfig`` (jetstream/kv.go;
read at nats.go commit 850f889c, 2026-08), which nats.js's ``Bucket.init``
(kv/src/kv.ts) matches for mirrors and sources. The comments name the Go lines
each value comes from. A mirror or source of a bucket in another domain
(``external``) is configured exactly as nats.go configures it, so nats.go and
nats.js read a mirror made here (tests/integration/test_natsjs_interop.py shows
nats.js doing it).
"""

from __future__ import annotations

from typing import Any

import pytest

from jsclient.api import ExternalStream, StreamSource, SubjectTransform
from jsclient.jetstream.kv._config import kv_config, stream_config

HUB = ExternalStream(api="$JS.hub.API", deliver="dlv.hub")
HUB_JSON = {"api": "$JS.hub.API", "deliver": "dlv.hub"}

#: ``scfg := StreamConfig{...}`` for ``KeyValueConfig{Bucket: "b"}``, as JSON.
PLAIN: dict[str, Any] = {
    "name": "KV_b",  # Name: fmt.Sprintf(kvBucketNameTmpl, cfg.Bucket), "KV_%s"
    "max_msgs_per_subject": 1,  # history: 1 unless cfg.History
    "max_bytes": -1,  # maxBytes: -1 when cfg.MaxBytes is 0
    "max_age": 0,  # MaxAge: cfg.TTL
    "max_msg_size": -1,  # maxMsgSize: -1 when cfg.MaxValueSize is 0
    "storage": "file",  # Storage: cfg.Storage, FileStorage its zero value
    "num_replicas": 1,  # replicas: 1 when cfg.Replicas is 0
    "allow_rollup_hdrs": True,  # AllowRollup: true
    "deny_delete": True,  # DenyDelete: true
    "duplicate_window": 120_000_000_000,  # duplicateWindow: 2 * time.Minute
    "max_msgs": -1,  # MaxMsgs: -1
    "max_consumers": -1,  # MaxConsumers: -1
    "allow_direct": True,  # AllowDirect: true
    "discard": "new",  # Discard: DiscardNew
    # the last else: Subjects: fmt.Sprintf(kvSubjectsTmpl, cfg.Bucket), "$KV.%s.>"
    "subjects": ["$KV.b.>"],
}
#: Set only for a mirror or sources (omitempty in Go's StreamConfig JSON).
MIRROR_FIELDS = ("mirror", "mirror_direct", "sources", "subjects")


def _json(**fields: Any) -> dict[str, Any]:
    d = stream_config(kv_config(None, {"bucket": "b", **fields})).as_dict()
    for k in ("storage", "discard"):
        d[k] = getattr(d[k], "value", d[k])
    return d


def _go(**changes: Any) -> dict[str, Any]:
    """nats.go's JSON: PLAIN with ``changes`` (a None value: the field is absent)."""
    out = {**PLAIN, **changes}
    return {k: v for k, v in out.items() if v is not None}


def _fields(d: dict[str, Any]) -> dict[str, Any]:
    """The fields nats.go sets, as ``d`` has them (absent ones left out)."""
    return {k: d[k] for k in (*PLAIN, *MIRROR_FIELDS) if k in d}


def test_plain_bucket() -> None:
    assert _fields(_json()) == _go()
    # duplicateWindow: cfg.TTL when it is under 2 minutes
    assert _json(ttl=30.0)["duplicate_window"] == 30_000_000_000
    assert _json(ttl=30.0)["max_age"] == 30_000_000_000
    assert _json(ttl=600.0)["duplicate_window"] == 120_000_000_000


@pytest.mark.parametrize("name", ["o", "KV_o"])
def test_mirror_of_a_local_bucket(name: str) -> None:
    # if cfg.Mirror != nil: m := cfg.Mirror.copy(); the name gets "KV_" unless it
    # has it; scfg.Mirror = m; scfg.MirrorDirect = true; no Subjects.
    got = _json(mirror=StreamSource(name=name))
    assert _fields(got) == _go(mirror={"name": "KV_o"}, mirror_direct=True, subjects=None)


@pytest.mark.parametrize(
    "external, external_json",
    [
        (HUB, HUB_JSON),  # a domain: what nats.go's convertDomain makes of Domain: "hub"
        (ExternalStream(api="$JS.API", deliver="dlv.x"), {"api": "$JS.API", "deliver": "dlv.x"}),
    ],
)
def test_mirror_of_an_external_bucket(external: ExternalStream, external_json: Any) -> None:
    # The same branch: the mirror is copied as given, External included; no subject
    # transform (the mirror holds the origin's subjects, $KV.o.>, where nats.go's
    # mapStreamToKVS and nats.js's initializePrefixes read them). The old code
    # added a transform to $KV.b.>, which nats.go and nats.js could not read.
    got = _json(mirror=StreamSource(name="o", external=external, filter_subject="$KV.o.a.>"))
    mirror = {"name": "KV_o", "filter_subject": "$KV.o.a.>", "external": external_json}
    assert _fields(got) == _go(mirror=mirror, mirror_direct=True, subjects=None)
    assert "subject_transforms" not in got["mirror"]


def test_mirror_wins_over_sources() -> None:
    # if cfg.Mirror != nil { ... } else if len(cfg.Sources) > 0 { ... }
    got = _json(mirror=StreamSource(name="o"), sources=[StreamSource(name="s")])
    assert _fields(got) == _go(mirror={"name": "KV_o"}, mirror_direct=True, subjects=None)


def _transform(origin: str) -> list[dict[str, str]]:
    # ss.SubjectTransforms = {Source: "$KV.<origin>.>", Destination: "$KV.<bucket>.>"}
    return [{"src": f"$KV.{origin}.>", "dest": "$KV.b.>"}]


def test_local_sources() -> None:
    # A source's name gets "KV_" unless it has it; as ss.External == nil, its
    # subjects are renamed to this bucket's, whatever its name (even "b").
    got = _json(sources=[StreamSource(name="one"), StreamSource(name="KV_two"), {"name": "b"}])
    sources = [
        {"name": "KV_one", "subject_transforms": _transform("one")},
        {"name": "KV_two", "subject_transforms": _transform("two")},
        {"name": "KV_b", "subject_transforms": _transform("b")},
    ]
    # Subjects: fmt.Sprintf(kvSubjectsTmpl, cfg.Bucket) in the sources branch too.
    assert _fields(got) == _go(sources=sources)


def test_external_sources() -> None:
    # if ss.External == nil || sourceBucketName != cfg.Bucket: a transform; so a
    # bucket of the same name in another domain has none (its subjects are $KV.b.>
    # already), one of another name has one.
    got = _json(
        sources=[StreamSource(name="b", external=HUB), StreamSource(name="KV_o", external=HUB)]
    )
    sources = [
        {"name": "KV_b", "external": HUB_JSON},
        {"name": "KV_o", "external": HUB_JSON, "subject_transforms": _transform("o")},
    ]
    assert _fields(got) == _go(sources=sources)


def test_a_source_with_its_own_transforms_is_kept_as_given() -> None:
    # if len(ss.SubjectTransforms) > 0: appended as is, the name not modified ("the
    # full stream name must be provided"): e.g. a stream that is not a bucket.
    own = [SubjectTransform(src="orders.*", dest="$KV.b.{{wildcard(1)}}")]
    got = _json(sources=[StreamSource(name="ORDERS", subject_transforms=own)])
    sources = [{"name": "ORDERS", "subject_transforms": [{"src": "orders.*", "dest": own[0].dest}]}]
    assert _fields(got) == _go(sources=sources)
