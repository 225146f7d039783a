"""Test helper: publish to streams and wait until JetStream has stored every message.

A core publish followed by ``flush()`` only proves the server received the
messages; JetStream stores them asynchronously, so a test that reads right
after could see fewer. Acked publishes remove that race.
"""

from __future__ import annotations

from collections.abc import Iterable

import jsclient


def publish_stored(nc: jsclient.Client, subject: str, payloads: Iterable[bytes]) -> None:
    """Publish every payload with an ack and raise if any publish failed."""
    js = nc.jetstream(publish_async_stall_wait=30.0)
    futures = [js.publish_async(subject, p) for p in payloads]
    js.publish_async_complete(timeout=60)
    for f in futures:
        f.result(timeout=0)
