"""publish_on_commit, the per-process connection and the JSCLIENT setting, on a real Django."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.test.utils import override_settings
from jsclient_testapp.models import Order

import jsclient
from jsclient import errors
from jsclient.contrib.django import (
    close_connection,
    get_connection,
    get_jetstream,
    publish_failed,
    publish_on_commit,
)
from jsclient.server import NatsServer


def _stream_msgs(name: str) -> int:
    return int(get_jetstream().stream(name).info().state.messages)


@pytest.fixture
def orders(django_nats: NatsServer) -> str:
    get_jetstream().create_stream(name="ORDERS", subjects=["orders.>"])
    Order.objects.all().delete()
    return "ORDERS"


def test_publishes_after_commit_only(orders: str) -> None:
    with transaction.atomic():
        order = Order.objects.create(item="book")
        publish_on_commit("orders.new", b"%d" % order.pk, msg_id=f"order-{order.pk}")
        get_connection().flush(timeout=5)
        assert _stream_msgs(orders) == 0  # not before the commit
    assert _stream_msgs(orders) == 1
    msg = get_jetstream().stream(orders).get_msg(1)
    assert msg.data == b"%d" % order.pk
    assert msg.headers is not None and msg.headers["Nats-Msg-Id"] == f"order-{order.pk}"


def test_rolled_back_transaction_publishes_nothing(orders: str) -> None:
    with pytest.raises(RuntimeError), transaction.atomic():
        order = Order.objects.create(item="lamp")
        publish_on_commit("orders.new", b"lamp", msg_id=f"order-{order.pk}")
        raise RuntimeError("roll back")
    # A savepoint rolled back inside a committed transaction drops its publish too.
    with transaction.atomic():
        Order.objects.create(item="kept")
        publish_on_commit("orders.new", b"kept", msg_id="kept")
        try:
            with transaction.atomic():
                publish_on_commit("orders.new", b"inner", msg_id="inner")
                raise ValueError("inner rolls back")
        except ValueError:
            pass
    get_connection().flush(timeout=5)
    assert list(Order.objects.values_list("item", flat=True)) == ["kept"]
    assert _stream_msgs(orders) == 1
    assert get_jetstream().stream(orders).get_msg(1).data == b"kept"


def test_same_msg_id_twice_is_stored_once(orders: str) -> None:
    # A retried request that commits again publishes the same id: de-duplicated.
    for _ in range(2):
        with transaction.atomic():
            publish_on_commit("orders.new", b"once", msg_id="order-42")
    publish_on_commit("orders.new", b"autocommit")  # outside a transaction: at once
    assert _stream_msgs(orders) == 2


def test_bad_input_fails_in_the_caller(orders: str) -> None:
    with transaction.atomic():
        with pytest.raises(errors.BadSubjectError):
            publish_on_commit("orders new", b"x")
        with pytest.raises(TypeError):
            publish_on_commit("orders.new", "text")  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            publish_on_commit("orders.new", b"x", msg_id="")
    assert _stream_msgs(orders) == 0


@pytest.fixture
def failures() -> Iterator[list[dict[str, Any]]]:
    got: list[dict[str, Any]] = []

    def receiver(sender: Any, **kwargs: Any) -> None:
        got.append(kwargs)

    publish_failed.connect(receiver, dispatch_uid="test-publish-failed")
    try:
        yield got
    finally:
        publish_failed.disconnect(dispatch_uid="test-publish-failed")


def test_one_failed_publish_does_not_lose_the_others(
    orders: str, failures: list[dict[str, Any]], caplog: pytest.LogCaptureFixture
) -> None:
    # The first message has no stream: the other two (and a later on_commit
    # hook of another app) still run; the failure is logged and signalled once.
    other_app: list[str] = []
    with transaction.atomic():
        Order.objects.create(item="three")
        publish_on_commit("nostream.x", b"lost", msg_id="lost-1", timeout=2.0)
        publish_on_commit("orders.new", b"a", msg_id="a-1")
        publish_on_commit("orders.new", b"b", msg_id="b-1")
        transaction.on_commit(lambda: other_app.append("ran"))
    assert _stream_msgs(orders) == 2
    assert other_app == ["ran"]
    assert len(failures) == 1
    f = failures[0]
    assert (f["subject"], f["msg_id"], f["data"]) == ("nostream.x", "lost-1", b"lost")
    assert isinstance(f["exception"], errors.NoStreamResponseError)
    logged = [r for r in caplog.records if "was not published" in r.getMessage()]
    assert len(logged) == 1 and "nostream.x" in logged[0].getMessage()
    assert "lost-1" in logged[0].getMessage()


def test_publish_failure_after_commit_is_reported_not_raised(
    django_nats: NatsServer, failures: list[dict[str, Any]], caplog: pytest.LogCaptureFixture
) -> None:
    # No stream listens on the subject: the commit has happened, the failure
    # is logged and signalled; a receiver that raises is logged too.
    def broken(sender: Any, **kwargs: Any) -> None:
        raise RuntimeError("receiver bug")

    publish_failed.connect(broken, dispatch_uid="test-broken")
    try:
        with transaction.atomic():
            Order.objects.create(item="orphan")
            publish_on_commit("nostream.x", b"x", msg_id="orphan-1", timeout=2.0)
    finally:
        publish_failed.disconnect(dispatch_uid="test-broken")
    assert Order.objects.filter(item="orphan").exists()
    assert "was not published" in caplog.text and "orphan-1" in caplog.text
    assert "receiver bug" in caplog.text
    assert [f["msg_id"] for f in failures] == ["orphan-1"]
    # Outside a transaction it publishes at once: the caller gets the error.
    with pytest.raises(errors.NoStreamResponseError):
        publish_on_commit("nostream.x", b"x", timeout=2.0)
    assert len(failures) == 1


def test_one_connection_per_process_made_once(django_nats: NatsServer) -> None:
    got: list[jsclient.Client] = []
    barrier = threading.Barrier(8)

    def first_use() -> None:
        barrier.wait(5)
        got.append(get_connection())

    threads = [threading.Thread(target=first_use, name=f"first-use-{i}") for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(got) == 8 and all(c is got[0] for c in got)
    assert get_jetstream()._client is got[0]
    # Closed: the next use connects again.
    close_connection()
    assert got[0].is_closed
    again = get_connection()
    assert again is not got[0] and again.is_connected


def test_settings_are_checked(django_nats: NatsServer) -> None:
    close_connection()
    for bad in (
        {"server": "nats://x"},
        {"options": {"no_such_option": 1}},
        {"jetstream": {"domian": "x"}},
        {"servers": []},
        "nats://x",
    ):
        with override_settings(JSCLIENT=bad), pytest.raises(ImproperlyConfigured):
            get_connection()
    with override_settings(
        JSCLIENT={
            "servers": django_nats.url,
            "options": {"name": "web-test"},
            "jetstream": {"domain": None, "timeout": 2.0},
        }
    ):
        nc = get_connection()
        assert nc._opts.name == "web-test"
        assert get_jetstream()._timeout == 2.0
