"""Auth test helpers shared by test_core_auth_tls.py and test_contexts_connect.py."""

from __future__ import annotations

from jsclient.client import Client


def roundtrip(nc: Client, subject: str = "auth.check") -> None:
    """Publish/subscribe and request/reply work on ``nc``."""
    sub = nc.subscribe(subject)
    nc.publish(subject, b"hello")
    assert sub.next_msg(timeout=2).data == b"hello"
    nc.subscribe(subject + ".svc", cb=lambda m: m.respond(b"re:" + m.data))
    assert nc.request(subject + ".svc", b"q", timeout=2).data == b"re:q"
