"""Priority-group pull options, the extended consumer data model and pause times (no server)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import nats.js.api
import pytest

import jsclient._api_consumer as ac
from jsclient import api, errors
from jsclient.jetstream.consume.priority import Priority, priority_options
from jsclient.jetstream.manage import consumer_admin as admin
from jsclient.jetstream.manage import names as _names


def _info(groups: list[str] | None = None, policy: str | None = None) -> Any:
    cfg: dict[str, Any] = {"name": "c"}
    if groups is not None:
        cfg["priority_groups"] = groups
    if policy is not None:
        cfg["priority_policy"] = policy
    return api.ConsumerInfo.from_response(
        {"name": "c", "stream_name": "S", "created": "2025-01-01T00:00:00Z", "config": cfg}
    )


PINNED = _info(["g"], "pinned_client")
OVERFLOW = _info(["g"], "overflow")
PRIORITIZED = _info(["g"], "prioritized")
PLAIN = _info()


# -- pull options --------------------------------------------------------------


def test_request_fields() -> None:
    req: dict[str, Any] = {"batch": 1}
    priority_options(OVERFLOW, "g", min_pending=10, min_ack_pending=2).add_to(req)  # type: ignore[union-attr]
    assert req == {"batch": 1, "group": "g", "min_pending": 10, "min_ack_pending": 2}
    req = {}
    priority_options(PRIORITIZED, "g", priority=0).add_to(req)  # type: ignore[union-attr]
    assert req == {"group": "g"}  # priority 0 is the server's default: not sent
    assert priority_options(PRIORITIZED, "g", priority=9) == Priority("g", 0, 0, 9)
    assert priority_options(PINNED, "g") == Priority("g")
    assert priority_options(PLAIN, None) is None
    assert priority_options(None, None) is None


@pytest.mark.parametrize(
    ("info", "kwargs", "exc"),
    [
        (PINNED, {}, errors.PriorityGroupRequiredError),
        (PINNED, {"group": "h"}, errors.InvalidPriorityGroupError),
        (PLAIN, {"group": "g"}, errors.InvalidPriorityGroupError),
        (PINNED, {"group": "g", "min_pending": 1}, errors.PriorityPolicyError),
        (PRIORITIZED, {"group": "g", "min_ack_pending": 1}, errors.PriorityPolicyError),
        (OVERFLOW, {"group": "g", "priority": 1}, errors.PriorityPolicyError),
        (PLAIN, {"min_pending": 3}, errors.PriorityPolicyError),
        (None, {"priority": 3}, errors.PriorityGroupRequiredError),
        (None, {"group": "x y"}, errors.InvalidPriorityGroupError),
        (None, {"group": "g" * 17}, errors.InvalidPriorityGroupError),
        (None, {"group": ""}, errors.InvalidPriorityGroupError),
        (OVERFLOW, {"group": "g", "min_pending": 0}, ValueError),
        (OVERFLOW, {"group": "g", "min_pending": True}, ValueError),
        (OVERFLOW, {"group": "g", "min_ack_pending": -1}, ValueError),
        (PRIORITIZED, {"group": "g", "priority": 10}, ValueError),
        (PRIORITIZED, {"group": "g", "priority": -1}, ValueError),
        (PRIORITIZED, {"group": "g", "priority": 1.0}, ValueError),
    ],
)
def test_refusals(info: Any, kwargs: dict[str, Any], exc: type[BaseException]) -> None:
    with pytest.raises(exc):
        priority_options(info, kwargs.pop("group", None), **kwargs)


def test_priority_errors_are_value_errors_and_jetstream_errors() -> None:
    with pytest.raises(ValueError):
        priority_options(PINNED, None)
    assert issubclass(errors.PriorityGroupError, errors.JetStreamError)
    assert issubclass(errors.PinIdMismatchError, errors.StatusError)


def test_valid_group_names() -> None:
    for name in ("a", "A-z_0/9=", "x" * 16):
        assert priority_options(None, name) == Priority(name)


# -- the data model ----------------------------------------------------------


def test_every_decoder_uses_the_extended_classes() -> None:
    for module in (
        "jsclient.jetstream.context",
        "jsclient.jetstream.consume.consumer",
        "jsclient.jetstream.manage.stream",
        "jsclient.jetstream.consume.ordered",
        "jsclient.jetstream.subscribe.pull",
        "jsclient.jetstream.subscribe.push",
        "jsclient.jetstream.subscribe.workflow",
        "jsclient.jetstream.manage.consumer_admin",
    ):
        mod = importlib.import_module(module)
        if hasattr(mod, "ConsumerInfo"):
            assert mod.ConsumerInfo is api.ConsumerInfo, module
        if hasattr(mod, "ConsumerConfig"):
            assert mod.ConsumerConfig is api.ConsumerConfig, module


def test_config_round_trip_in_seconds_and_nanoseconds() -> None:
    cfg = api.ConsumerConfig(
        durable_name="w",
        priority_groups=["g"],
        priority_policy=api.PriorityPolicy.PINNED_CLIENT,
        priority_timeout=1.5,
    )
    wire = json.loads(json.dumps(cfg.as_dict()))
    assert wire["priority_timeout"] == 1_500_000_000
    assert wire["priority_policy"] == "pinned_client" and wire["priority_groups"] == ["g"]
    back = api.ConsumerConfig.from_response(wire)
    assert back.priority_timeout == 1.5 and back.priority_groups == ["g"]
    assert "priority_timeout" not in api.ConsumerConfig(name="x").as_dict()


def test_info_decodes_group_state() -> None:
    info = api.ConsumerInfo.from_response(
        {
            "name": "c",
            "stream_name": "S",
            "created": "2025-01-01T00:00:00Z",
            "config": {"priority_timeout": 2_000_000_000, "ack_wait": 30_000_000_000},
            "paused": True,
            "pause_remaining": 5_000_000_000,
            "priority_groups": [
                {"group": "g", "pinned_client_id": "P", "pinned_ts": "2025-01-01T00:00:01.5Z"},
                {"group": "h", "pinned_ts": "0001-01-01T00:00:00Z"},
            ],
        }
    )
    assert isinstance(info.config, api.ConsumerConfig)
    assert info.config.priority_timeout == 2.0 and info.config.ack_wait == 30.0
    assert info.paused is True and info.pause_remaining == 5_000_000_000
    g, h = info.priority_groups  # type: ignore[misc]
    assert g == api.PriorityGroupState(
        "g", "P", dt.datetime(2025, 1, 1, 0, 0, 1, 500000, tzinfo=dt.UTC)
    )
    assert h.pinned_client_id is None and h.pinned_ts is None


def test_nats_py_config_is_accepted_and_pause_until_datetimes_are_text() -> None:
    cfg = _names.consumer_config(nats.js.api.ConsumerConfig(name="n", ack_wait=3.0), {})
    assert type(cfg) is api.ConsumerConfig and cfg.name == "n" and cfg.ack_wait == 3.0
    when = dt.datetime(2030, 1, 2, 3, 4, 5, 6, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    cfg = _names.consumer_config(None, {"name": "p", "pause_until": when})
    assert cfg.pause_until == "2030-01-02T01:04:05.000006Z"
    with pytest.raises(ValueError):
        _names.utc_rfc3339(dt.datetime(2030, 1, 1))


def _load_api_consumer(monkeypatch: pytest.MonkeyPatch, **replace: Any) -> ModuleType:
    """A fresh copy of jsclient._api_consumer, made with nats.js.api patched."""
    for name, value in replace.items():
        monkeypatch.setattr(nats.js.api, name, value, raising=False)
    spec = importlib.util.spec_from_file_location("_api_consumer_copy", Path(ac.__file__))
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, mod)  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def test_the_extension_gives_way_to_a_nats_py_that_has_the_fields(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    @dataclasses.dataclass
    class NewConfig(nats.js.api.ConsumerConfig):  # type: ignore[misc]
        priority_groups: list[str] | None = None
        priority_policy: str | None = None
        priority_timeout: float | None = None

    @dataclasses.dataclass
    class NewInfo(nats.js.api.ConsumerInfo):  # type: ignore[misc]
        priority_groups: list[Any] | None = None

    mod = _load_api_consumer(monkeypatch, ConsumerConfig=NewConfig, ConsumerInfo=NewInfo)
    assert mod.ConsumerConfig is NewConfig and mod.ConsumerInfo is NewInfo
    # The same fields, in the same units, as the extension it replaces.
    ours = {f.name for f in dataclasses.fields(ac.ConsumerConfig)}
    assert ours == {f.name for f in dataclasses.fields(nats.js.api.ConsumerConfig)} | set(
        ac._CONFIG_EXTRA
    )
    # Without the info's fields only the info is extended, on nats-py's config.
    monkeypatch.undo()
    mod = _load_api_consumer(monkeypatch, ConsumerConfig=NewConfig)
    assert mod.ConsumerConfig is NewConfig and mod.ConsumerInfo is not nats.js.api.ConsumerInfo


# -- pause times -----------------------------------------------------------------


def test_pause_deadline() -> None:
    aware = dt.datetime(2030, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=-3)))
    assert admin.pause_deadline(aware) == aware and admin.pause_deadline(aware).tzinfo is dt.UTC
    now = dt.datetime.now(dt.UTC)
    later = admin.pause_deadline(90)
    assert dt.timedelta(seconds=89) < later - now < dt.timedelta(seconds=91)
    for bad, exc in (
        (dt.datetime(2030, 1, 1), ValueError),
        (float("nan"), ValueError),
        (1e300, ValueError),
        (True, TypeError),
        ("soon", TypeError),
    ):
        with pytest.raises(exc):
            admin.pause_deadline(bad)


def test_levels_needed_by_a_config() -> None:
    assert admin.needed_level(api.ConsumerConfig()) == (0, "")
    assert admin.needed_level(api.ConsumerConfig(priority_policy="overflow"))[0] == 1
    assert admin.needed_level(api.ConsumerConfig(priority_groups=["g"]))[0] == 1
    assert admin.needed_level(api.ConsumerConfig(priority_policy="prioritized"))[0] == 2
    assert admin.needed_level(api.ConsumerConfig(pause_until="2030-01-01T00:00:00Z"))[0] == 1
