"""The JetStream context's public methods, as the API contract (design/api.md) lists them.

Each entry below is copied from api.md (``js.<entry>``). Every one must be a
method defined on ``JetStream`` itself (no mixins: ``help(JetStream)`` and IDEs
show it where it is; the one base, ``NatsPyCompat``, holds only nats-py's names
for these calls), with the documented parameters in the documented order,
kind and default. Keyword options api.md does not name may follow (api.md leaves
"extra keyword options" to the implementer).
"""

from __future__ import annotations

import ast
import inspect
from typing import Any

import pytest
from nats.js.client import JetStreamContext
from nats.js.manager import JetStreamManager

from jsclient.jetstream.compat import NatsPyCompat
from jsclient.jetstream.context import JetStream

_PUBLISH_OPTIONS = (
    "headers=None, msg_id=None, expected_stream=None, expected_last_seq=None,"
    " expected_last_subject_seq=None, expected_last_msg_id=None, ttl=None, timeout=None"
)

API_MD = [
    # ## JetStream context (ADR-37)
    "create_stream(config=None, **fields)",
    "update_stream(config=None, **fields)",
    "create_or_update_stream(config=None, **fields)",
    "stream(name)",
    "delete_stream(name)",
    "streams(subject=None)",
    "stream_names(subject=None)",
    "create_consumer(stream, config=None, **fields)",
    "update_consumer(stream, config=None, **fields)",
    "create_or_update_consumer(stream, config=None, **fields)",
    "consumer(stream, name)",
    "delete_consumer(stream, name)",
    "ordered_consumer(stream, **options)",
    "account_info()",
    f"publish(subject, payload=b'', *, {_PUBLISH_OPTIONS})",  # ttl: "Messages of 2.11-2.14"
    f"publish_async(subject, payload=b'', *, {_PUBLISH_OPTIONS})",  # **same_options
    "publish_async_complete(timeout=None)",
    # ## Legacy subscriptions (ADR-13, ADR-15)
    "pull_subscribe(subject, durable=None, *, stream=None, config=None, inbox_prefix=None)",
    "pull_subscribe_bind(consumer=None, stream=None, *, durable=None, inbox_prefix=None)",
    "subscribe(subject, queue=None, *, cb=None, durable=None, stream=None, consumer=None,"
    " config=None, manual_ack=False, ordered_consumer=False, idle_heartbeat=None,"
    " flow_control=False, deliver_policy=None, pending_msgs_limit=65536,"
    " pending_bytes_limit=64 * 1024 * 1024, heartbeat_alarm_factor=3.0,"
    " delete_consumer='if_created')",
    # ## Key-Value store
    "create_key_value(config=None, **fields)",
    "update_key_value(config=None, **fields)",
    "create_or_update_key_value(config=None, **fields)",
    "key_value(bucket)",
    "delete_key_value(bucket)",
    "key_value_names()",
    "key_values()",
    # ## Object store
    "create_object_store(config=None, **fields)",
    "object_store(bucket)",
    "delete_object_store(bucket)",
    "object_store_names()",
    "object_stores()",
    # ## Consumers of server 2.11-2.14
    "unpin_consumer(stream, consumer, group)",
    "pause_consumer(stream, name, until)",
    "resume_consumer(stream, name)",
    "reset_consumer(stream, name, seq=None)",
    # ## Messages of server 2.11-2.14
    "publish_schedule(subject, payload=b'', *, target, at=None, every=None, cron=None,"
    " time_zone=None, ttl=None, source=None)",
    "counters(stream)",
    "atomic_batch()",
    "fast_publisher()",  # **flow_options: every option has a default
]


def _documented(entry: str) -> tuple[str, list[tuple[str, Any, Any]]]:
    """The name and the (name, kind, default) of each parameter of one api.md entry."""
    entry = entry.replace("64 * 1024 * 1024", str(64 * 1024 * 1024))  # for literal_eval
    fn = ast.parse(f"def {entry}: pass").body[0]
    assert isinstance(fn, ast.FunctionDef)
    a = fn.args
    params: list[tuple[str, Any, Any]] = []
    pos = a.args
    pos_defaults = [inspect.Parameter.empty] * (len(pos) - len(a.defaults))
    pos_defaults += [ast.literal_eval(d) for d in a.defaults]
    for arg, default in zip(pos, pos_defaults, strict=True):
        params.append((arg.arg, inspect.Parameter.POSITIONAL_OR_KEYWORD, default))
    if a.vararg is not None:
        params.append((a.vararg.arg, inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.empty))
    for arg, kw_default in zip(a.kwonlyargs, a.kw_defaults, strict=True):
        default = inspect.Parameter.empty if kw_default is None else ast.literal_eval(kw_default)
        params.append((arg.arg, inspect.Parameter.KEYWORD_ONLY, default))
    if a.kwarg is not None:
        params.append((a.kwarg.arg, inspect.Parameter.VAR_KEYWORD, inspect.Parameter.empty))
    return fn.name, params


@pytest.mark.parametrize("entry", API_MD, ids=lambda e: e.split("(")[0])
def test_documented_method_is_on_jetstream_itself(entry: str) -> None:
    name, documented = _documented(entry)
    # Defined in JetStream's own body: no mixin, no base class to look in.
    assert name in vars(JetStream), f"JetStream.{name} is not defined on JetStream itself"
    method = vars(JetStream)[name]
    assert callable(method)
    assert method.__doc__, f"JetStream.{name} has no docstring"
    actual = list(inspect.signature(method).parameters.values())
    # The context itself (``self``, or ``js`` for a call bound from its area's module).
    assert actual[0].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    assert actual[0].default is inspect.Parameter.empty
    actual = actual[1:]
    got = [(p.name, p.kind, p.default) for p in actual]
    # The documented parameters, in order, with their kinds and defaults.
    positional = [d for d in documented if d[1] is not inspect.Parameter.KEYWORD_ONLY]
    keyword = [d for d in documented if d[1] is inspect.Parameter.KEYWORD_ONLY]
    got_positional = [g for g in got if g[1] is not inspect.Parameter.KEYWORD_ONLY]
    got_keyword = {g[0]: g for g in got if g[1] is inspect.Parameter.KEYWORD_ONLY}
    assert got_positional == positional, f"{name}: {got} vs api.md {documented}"
    for doc in keyword:
        assert got_keyword.get(doc[0]) == doc, f"{name}: {doc[0]}: {got} vs api.md {doc}"
    # Anything beyond api.md is an optional keyword.
    for extra in got_keyword.values():
        if extra not in keyword:
            assert extra[2] is not inspect.Parameter.empty, f"{name}: {extra}"


def test_publish_async_pending_is_a_property() -> None:
    # api.md: js.publish_async_pending -> int
    assert isinstance(vars(JetStream)["publish_async_pending"], property)


def test_jetstream_has_no_mixins_but_the_nats_py_names() -> None:
    # Issue 33: a reader finds every jsclient method of the context in its own
    # class. The one base holds only aliases under nats-py's names (api.md,
    # "nats-py compatibility"), none of which the context defines itself.
    assert JetStream.__mro__ == (JetStream, NatsPyCompat, object)
    aliases = {n for n in vars(NatsPyCompat) if not n.startswith("_")}
    nats_py = set(dir(JetStreamManager)) | set(dir(JetStreamContext))
    assert aliases <= nats_py, aliases - nats_py
    assert not aliases & set(vars(JetStream))


def test_every_public_method_is_documented_in_api_md() -> None:
    documented = {_documented(e)[0] for e in API_MD} | {"publish_async_pending"}
    public = {n for n in vars(JetStream) if not n.startswith("_")}
    assert public == documented


def test_jetstream_options() -> None:
    # api.md: nc.jetstream(*, prefix="$JS.API", domain=None, timeout=5.0,
    #                      publish_async_max_pending=4000)
    params = inspect.signature(JetStream).parameters
    for name, default in [
        ("prefix", "$JS.API"),
        ("domain", None),
        ("timeout", 5.0),
        ("publish_async_max_pending", 4000),
    ]:
        assert params[name].kind is inspect.Parameter.KEYWORD_ONLY
        assert params[name].default == default
