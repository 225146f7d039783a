"""ADR-32's wire facts without a server: names, SemVer, subjects, times, JSON, error headers."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from jsclient import errors
from jsclient.micro import (
    EndpointInfo,
    EndpointStats,
    PingResponse,
    ServiceConfigError,
    ServiceError,
    ServiceInfo,
    ServiceStats,
    control_subject,
)
from jsclient.micro._types import (
    check_endpoint_subject,
    check_metadata,
    check_name,
    check_version,
    format_started,
    parse_started,
)
from jsclient.msg import Msg


@pytest.mark.parametrize("name", ["billing", "a", "A-z_09", "-", "_x-"])
def test_valid_names(name: str) -> None:
    assert check_name(name) == name


@pytest.mark.parametrize(
    "name", ["", "a b", "a.b", "a*", "a>", "é", "a\n", "\u0661\u0662", "billing\n", None, 5]
)
def test_invalid_names(name: object) -> None:
    with pytest.raises(ValueError):
        check_name(name)


# From semver.org's regex test set (https://regex101.com/r/Ly7O1x/3/).
@pytest.mark.parametrize(
    "version",
    [
        "0.0.4",
        "1.2.3",
        "10.20.30",
        "1.1.2-prerelease+meta",
        "1.1.2+meta",
        "1.1.2+meta-valid",
        "1.0.0-alpha",
        "1.0.0-beta",
        "1.0.0-alpha.beta",
        "1.0.0-alpha.beta.1",
        "1.0.0-alpha.1",
        "1.0.0-alpha0.valid",
        "1.0.0-alpha.0valid",
        "1.0.0-alpha-a.b-c-somethinglong+build.1-aef.1-its-okay",
        "1.0.0-rc.1+build.1",
        "2.0.0-rc.1+build.123",
        "1.2.3-beta",
        "10.2.3-DEV-SNAPSHOT",
        "1.2.3-SNAPSHOT-123",
        "2.0.0+build.1848",
        "2.0.1-alpha.1227",
        "1.0.0-alpha+beta",
        "1.2.3----RC-SNAPSHOT.12.9.1--.12+788",
        "1.2.3----R-S.12.9.1--.12+meta",
        "1.0.0+0.build.1-rc.10000aaa-kk-0.1",
        "99999999999999999999999.999999999999999999.99999999999999999",
        "1.0.0-0A.is.legal",
    ],
)
def test_valid_semver(version: str) -> None:
    assert check_version(version) == version


@pytest.mark.parametrize(
    "version",
    [
        "1",
        "1.2",
        "1.2.3-0123",
        "1.2.3-0123.0123",
        "1.1.2+.123",
        "+invalid",
        "-invalid",
        "-invalid+invalid",
        "alpha",
        "1.0.0-alpha_beta",
        "1.0.0-alpha..",
        "01.1.1",
        "1.01.1",
        "1.1.01",
        "1.2.3.DEV",
        "1.2-SNAPSHOT",
        "1.2.31.2.3----RC-SNAPSHOT.12.09.1--..12+788",
        "9.8.7+meta+meta",
        "v1.2.3",
        "1.2.3\n",
        "\u0661.\u0662.\u0663",  # Arabic-Indic digits: \d in Python, not in Go or the spec
        "",
    ],
)
def test_invalid_semver(version: str) -> None:
    with pytest.raises(ValueError):
        check_version(version)


def test_control_subjects() -> None:
    assert control_subject("$SRV", "PING") == "$SRV.PING"
    assert control_subject("$SRV", "INFO", "billing") == "$SRV.INFO.billing"
    assert control_subject("$SRV", "STATS", "billing", "ID1") == "$SRV.STATS.billing.ID1"
    assert control_subject("acct.SRV", "PING", "x") == "acct.SRV.PING.x"
    with pytest.raises(ValueError):
        control_subject("$SRV", "PING", None, "ID1")  # an id needs the name
    with pytest.raises(ValueError):
        control_subject("$SRV", "HELLO")


@pytest.mark.parametrize("subject", ["a", "a.b", "a.*.c", "a.>", "*", ">"])
def test_valid_endpoint_subjects(subject: str) -> None:
    assert check_endpoint_subject(subject, "endpoint subject") == subject


@pytest.mark.parametrize("subject", ["", "a b", "a.>.b", "a..b", ".a", "a.", "a\tb"])
def test_invalid_endpoint_subjects(subject: str) -> None:
    with pytest.raises(ValueError):
        check_endpoint_subject(subject, "endpoint subject")


def test_metadata_is_copied_and_typed() -> None:
    src = {"k": "v"}
    got = check_metadata(src)
    src["k"] = "changed"
    assert got == {"k": "v"}
    assert check_metadata(None) == {}
    with pytest.raises(TypeError):
        check_metadata({"k": 1})  # type: ignore[dict-item]


def test_started_written_and_read() -> None:
    when = datetime(2026, 11, 27, 22, 35, 32, 123456, tzinfo=UTC)
    assert format_started(when) == "2026-11-27T22:35:32.123456Z"
    assert parse_started("2026-11-27T22:35:32.123456Z") == when
    # nats.go (RFC 3339 nano, fraction optional), nats.js / nats-py (milliseconds)
    assert parse_started("2026-11-27T22:35:32.123456789Z") == when
    assert parse_started("2026-11-27T22:35:32Z") == when.replace(microsecond=0)
    assert parse_started("2026-11-27T22:35:32.123Z") == when.replace(microsecond=123000)
    assert parse_started("2026-11-27T23:35:32.123456+01:00") == when
    assert parse_started("2026-11-27T22:35:32Z").tzinfo is UTC
    with pytest.raises(ValueError):
        parse_started("yesterday")


def test_results_round_trip() -> None:
    ping = PingResponse("io.nats.micro.v1.ping_response", "svc", "ID", "1.0.0", {"a": "b"})
    assert PingResponse.from_dict(ping.to_dict()) == ping
    info = ServiceInfo(
        "io.nats.micro.v1.info_response",
        "svc",
        "ID",
        "1.0.0",
        {},
        "desc",
        [EndpointInfo("e", "s.e", "q", {"x": "y"}), EndpointInfo("f", "f", None, {})],
    )
    d = info.to_dict()
    assert d["endpoints"][1]["queue_group"] == ""  # as nats.go writes "no queue group"
    assert ServiceInfo.from_dict(d) == info
    stats = ServiceStats(
        "io.nats.micro.v1.stats_response",
        "svc",
        "ID",
        "1.0.0",
        datetime(2026, 1, 2, 3, 4, 5, 6000, tzinfo=UTC),
        {},
        [EndpointStats("e", "e", "q", 3, 1, "400:bad", 3000, 1000, {"n": 1})],
    )
    d = stats.to_dict()
    assert d["started"] == "2026-01-02T03:04:05.006000Z"
    assert d["endpoints"][0]["processing_time"] == 3000
    assert ServiceStats.from_dict(d) == stats
    # metadata null (nats.go endpoint without metadata), optional keys missing
    assert EndpointInfo.from_dict({"name": "e", "subject": "e", "metadata": None}) == EndpointInfo(
        "e", "e", None, {}
    )


def _msg(hdr: bytes | None, data: bytes = b"") -> Msg:
    return Msg(None, "_INBOX.x", "", data, hdr)


def test_service_error_check() -> None:
    plain = _msg(None, b"ok")
    assert ServiceError.check(plain) is plain
    other = _msg(b"NATS/1.0\r\nX: 1\r\n\r\n", b"ok")
    assert ServiceError.check(other) is other
    with pytest.raises(ServiceError) as ei:
        ServiceError.check(
            _msg(
                b"NATS/1.0\r\nNats-Service-Error: bad amount\r\n"
                b"Nats-Service-Error-Code: 400\r\n\r\n"
            )
        )
    assert (ei.value.code, ei.value.description) == (400, "bad amount")
    assert "400" in str(ei.value) and "bad amount" in str(ei.value)
    with pytest.raises(ServiceError) as ei:  # a code that is not ASCII digits is 0
        ServiceError.check(_msg(b"NATS/1.0\r\nNats-Service-Error-Code: +5\r\n\r\n"))
    assert (ei.value.code, ei.value.description) == (0, "")


def test_service_error_pickles() -> None:
    import pickle

    err = pickle.loads(pickle.dumps(ServiceError(503, "down")))
    assert (err.code, err.description) == (503, "down")


def test_config_errors_are_jsclient_errors_and_value_errors() -> None:
    with pytest.raises(ServiceConfigError) as ei:
        check_name("a b")
    assert isinstance(ei.value, errors.Error) and isinstance(ei.value, ValueError)
    assert "a b" in str(ei.value)
