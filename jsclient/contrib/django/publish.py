"""``publish_on_commit``: publish to JetStream once the database transaction commits.

Inside ``transaction.atomic()`` the publish is queued with
``transaction.on_commit``: a rolled-back transaction publishes nothing, and a
committed one publishes after the commit, so a consumer never sees a message
about a row it cannot read yet. Outside a transaction (autocommit) it
publishes at once.

The publish waits for the stream's ack. With a ``msg_id`` the stream drops a
duplicate within its de-duplication window, so a publish whose ack timed out
is sent once more, and a retried request that commits again (same id)
publishes nothing twice. Without a ``msg_id`` nothing is retried. If the
publish still fails, the error propagates from the commit (Django's
``on_commit`` behaviour); the data is committed by then, so the failure is
also logged with the subject and id for reconciliation.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from django.db import transaction

from jsclient import errors
from jsclient.contrib.django.connection import get_jetstream
from jsclient.protocol import commands

log = logging.getLogger("jsclient.contrib.django")

_ATTEMPTS_WITH_ID = 2


def publish_on_commit(
    subject: str,
    data: bytes = b"",
    msg_id: str | None = None,
    *,
    headers: Mapping[str, str] | None = None,
    using: str | None = None,
    timeout: float | None = None,
) -> None:
    """Publish ``data`` to ``subject`` when the current transaction on ``using`` commits.

    ``msg_id`` goes out as ``Nats-Msg-Id`` (JetStream de-duplication); derive
    it from what the message is about (``f"order-{order.pk}"``). ``timeout``
    bounds each publish attempt (default: ``JSCLIENT['jetstream']['timeout']``).
    The subject and payload are checked now, so a mistake fails in the caller,
    not after the commit.
    """
    commands.check_subject(subject)
    if not isinstance(data, bytes | bytearray | memoryview):
        raise TypeError(f"publish_on_commit data must be bytes, not {type(data).__name__}")
    if msg_id is not None and (not isinstance(msg_id, str) or not msg_id):
        raise ValueError("publish_on_commit msg_id must be a non-empty string")
    payload = bytes(data)
    hdrs = dict(headers) if headers else None

    def send() -> None:
        _publish(subject, payload, msg_id, hdrs, timeout)

    transaction.on_commit(send, using=using)


def _publish(
    subject: str,
    payload: bytes,
    msg_id: str | None,
    headers: dict[str, str] | None,
    timeout: float | None,
) -> None:
    attempts = _ATTEMPTS_WITH_ID if msg_id is not None else 1
    for attempt in range(1, attempts + 1):
        try:
            get_jetstream().publish(
                subject, payload, headers=headers, msg_id=msg_id, timeout=timeout
            )
            return
        except Exception as exc:
            if isinstance(exc, errors.TimeoutError) and attempt < attempts:
                log.warning(
                    "publish on commit to %s (msg id %s) got no ack in time; sending it again",
                    subject,
                    msg_id,
                )
                continue
            _log_failure(subject, msg_id)
            raise


def _log_failure(subject: str, msg_id: str | None) -> None:
    log.error(
        "transaction committed but its message to %s (msg id %s) was not published",
        subject,
        msg_id,
        exc_info=True,
    )
