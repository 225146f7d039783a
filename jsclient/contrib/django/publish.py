"""``publish_on_commit``: publish to JetStream once the database transaction commits.

Inside ``transaction.atomic()`` the publish is queued with
``transaction.on_commit``: a rolled-back transaction publishes nothing, and a
committed one publishes after the commit, so a consumer never sees a message
about a row it cannot read yet. Outside a transaction (autocommit) it
publishes at once.

The publish waits for the stream's ack. With a ``msg_id`` the stream drops a
duplicate within its de-duplication window, so a publish whose ack timed out
is sent once more, and a retried request that commits again (same id)
publishes nothing twice. Without a ``msg_id`` nothing is retried.

After a commit every message of the transaction is attempted, each on its own:
the hooks are registered ``robust`` and catch their own errors, so one failed
publish neither skips the later messages nor the other ``on_commit`` hooks of
the transaction (Django stops at the first hook that raises). A message that
still fails is logged (ERROR, with subject and id) and reported through the
:data:`~jsclient.contrib.django.signals.publish_failed` signal, once; the
commit itself does not raise, the data being committed by then. Outside a
transaction the publish happens at once and its error is raised to the caller.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from django.db import transaction

from jsclient import errors
from jsclient.contrib.django.connection import get_jetstream
from jsclient.contrib.django.signals import publish_failed
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

    if not transaction.get_connection(using).in_atomic_block:
        _publish(subject, payload, msg_id, hdrs, timeout)  # autocommit: the caller sees errors
        return

    def send() -> None:
        try:
            _publish(subject, payload, msg_id, hdrs, timeout)
        except Exception as exc:
            _report(subject, payload, msg_id, hdrs, exc)

    # robust: should anything escape send(), Django logs it and runs the other hooks.
    transaction.on_commit(send, using=using, robust=True)


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
            raise


def _report(
    subject: str,
    payload: bytes,
    msg_id: str | None,
    headers: dict[str, str] | None,
    exc: Exception,
) -> None:
    log.error(
        "transaction committed but its message to %s (msg id %s) was not published: %s",
        subject,
        msg_id,
        exc,
        exc_info=exc,
    )
    results = publish_failed.send_robust(
        sender=publish_on_commit,
        subject=subject,
        data=payload,
        headers=headers,
        msg_id=msg_id,
        exception=exc,
    )
    for receiver, result in results:
        if isinstance(result, Exception):
            log.error(
                "publish_failed receiver %r raised for the message to %s (msg id %s)",
                receiver,
                subject,
                msg_id,
                exc_info=result,
            )
