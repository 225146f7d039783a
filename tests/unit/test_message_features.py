"""Client-side formats and checks of TTLs, schedules, counters and batches (no server)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from jsclient import errors
from jsclient.jetstream._wire import pub_headers, ttl_value
from jsclient.jetstream.publish.counters import parse_value, value_of_body
from jsclient.jetstream.publish.schedule import at_value, cron_value, every_value, schedule_headers


@pytest.mark.parametrize(
    "ttl,wire",
    [
        (1, "1s"),
        (60, "60s"),
        (1.0, "1s"),
        (1.5, "1500ms"),
        (3600.25, "3600250ms"),
        ("never", "never"),
        ("NEVER", "never"),
    ],
)
def test_ttl_wire_form(ttl: float | str, wire: str) -> None:
    assert ttl_value(ttl) == wire


@pytest.mark.parametrize("bad", [0, 0.999, -5, True, False, "", "5", "1h", None, [1]])
def test_ttl_refused(bad: object) -> None:
    with pytest.raises(ValueError):
        ttl_value(bad)  # type: ignore[arg-type]


def test_pub_headers_adds_ttl_without_touching_the_callers_dict() -> None:
    mine = {"X-A": "1"}
    out = pub_headers(mine, "id", None, None, None, None, 2)
    assert out == {"X-A": "1", "Nats-Msg-Id": "id", "Nats-TTL": "2s"}
    assert mine == {"X-A": "1"}
    assert pub_headers(mine, None, None, None, None, None) is mine


def test_at_is_utc_rfc3339_rounded_up() -> None:
    assert at_value(datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)) == "@at 2030-01-02T03:04:05Z"
    assert at_value(datetime(2030, 1, 2, 3, 4, 5, 1, tzinfo=UTC)) == "@at 2030-01-02T03:04:06Z"
    plus2 = timezone(timedelta(hours=2))
    assert at_value(datetime(2030, 1, 2, 3, 0, 0, tzinfo=plus2)) == "@at 2030-01-02T01:00:00Z"
    assert at_value(datetime(2030, 1, 2, 3, 0, 0)) == "@at 2030-01-02T03:00:00Z"  # naive: UTC
    with pytest.raises(TypeError):
        at_value("2030-01-02T03:00:00Z")  # type: ignore[arg-type]


def test_every_is_a_go_duration() -> None:
    assert every_value(1) == "@every 1s"
    assert every_value(90) == "@every 90s"
    assert every_value(2.5) == "@every 2500ms"
    assert every_value(timedelta(minutes=5)) == "@every 300s"
    for bad in (0, 0.5, -1, True, "5s"):
        with pytest.raises(ValueError):
            every_value(bad)  # type: ignore[arg-type]


def test_cron_has_six_fields_or_a_shorthand() -> None:
    assert cron_value("0 30  4 1,15 * mon-fri") == "0 30 4 1,15 * mon-fri"
    assert cron_value("*/5 * * * * *") == "*/5 * * * * *"
    assert cron_value("@hourly") == "@hourly"
    for bad in ("* * * * *", "* * * * * * *", "@often", "* * * * * $", ""):
        with pytest.raises(ValueError):
            cron_value(bad)


def test_schedule_headers() -> None:
    h = schedule_headers(
        "s.sched",
        target="s.out",
        at=None,
        every=None,
        cron="0 0 * * * *",
        time_zone="Europe/Amsterdam",
        ttl=300,
        source="s.src",
        headers={"X-A": "1"},
    )
    assert h == {
        "X-A": "1",
        "Nats-Schedule": "0 0 * * * *",
        "Nats-Schedule-Target": "s.out",
        "Nats-Schedule-Time-Zone": "Europe/Amsterdam",
        "Nats-Schedule-TTL": "300s",
        "Nats-Schedule-Source": "s.src",
    }


def test_counter_values_are_strict_ascii_integers() -> None:
    assert parse_value("123456789012345678901234567890", "x") == 123456789012345678901234567890
    assert parse_value("-7", "x") == -7 and parse_value(b"0", "x") == 0
    assert value_of_body(b'{"val":"-18446744073709551621"}', "x") == -(2**64) - 5
    for bad in (None, "", " 5", "1_0", "\u0663", "1.5", "+", "0x10"):
        with pytest.raises(errors.JetStreamError):
            parse_value(bad, "x")
    for body in (b"", b"5", b'{"val":5}', b"[]", b'{"value":"5"}'):
        with pytest.raises(errors.JetStreamError):
            value_of_body(body, "x")


def test_new_err_codes_map_to_their_classes() -> None:
    for code, cls in [
        (10165, errors.MessageTTLInvalidError),
        (10166, errors.MessageTTLDisabledError),
        (10168, errors.MessageCounterDisabledError),
        (10176, errors.AtomicPublishIncompleteBatchError),
        (10199, errors.AtomicPublishTooLargeBatchError),
        (10205, errors.BatchPublishDisabledError),
        (10210, errors.AtomicPublishTooManyInflightError),
        (10223, errors.MessageSchedulesTimeZoneInvalidError),
    ]:
        exc = errors.api_error({"code": 400, "err_code": code, "description": "d"})
        assert type(exc) is cls and exc.err_code == code
    assert issubclass(errors.CounterNotFoundError, errors.MessageNotFoundError)
    assert issubclass(errors.AtomicPublishDisabledError, errors.BadRequestError)
