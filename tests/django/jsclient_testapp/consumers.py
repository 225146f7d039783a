"""Consumers that ``manage.py jetstream_worker`` finds (autodiscovery of ``<app>.consumers``).

``jobs``: records every message it handles in ``Handled``; sleeps
``JSCLIENT_TEST_HANDLER_SLEEP`` seconds per message so a stop lands mid-stream.
"""

from __future__ import annotations

import os
import time

from jsclient.contrib.django import consumer
from jsclient.msg import Msg
from jsclient_testapp.models import Handled

SLEEP = float(os.environ.get("JSCLIENT_TEST_HANDLER_SLEEP", "0"))


@consumer(
    stream="JOBS",
    durable="jobs",
    filter_subject="jobs.>",
    max_messages=20,
    threads=2,
    nak_delay=0.5,
    # Short, so a message the server sent as the pull inbox closed comes back
    # soon after the restart, yet well above the time a message waits in the
    # buffer plus its handling on a loaded machine (else the server would
    # redeliver a message still waiting: handled twice, by design).
    config={"ack_wait": 10.0},
)
def handle_job(msg: Msg) -> None:
    if SLEEP:
        time.sleep(SLEEP)
    meta = msg.metadata
    Handled.objects.create(
        key=msg.data.decode(),
        stream_seq=meta.sequence.stream,
        delivered=meta.num_delivered,
        pid=os.getpid(),
    )
