"""The server's JetStream API level, asked once per context; the level each API
request needs; and the ``Nats-Required-Api-Level`` header that asks the server
to refuse a request it is too old for (ADR-44).

``$JS.API.INFO`` answers ``"api": {"level": N}`` from server 2.11 on (none:
level 0). An older server would drop fields it does not know or not answer an
API subject it lacks, so a feature that needs level N raises
:class:`~jsclient.errors.FeatureNotSupportedError` on a lower one, before
anything is sent.

:func:`request_level` is the one place that says which API request needs
which level: from the subject (pause and unpin: 1, reset: 4) and from the
config it carries, as the server computes the ``_nats.req.level`` metadata of
a stream or consumer (TTLs and delete markers: 1; counters, atomic batches,
schedules, ``persist_mode: async``: 2; fast-ingest batches: 4; consumer
priority groups and pausing: 1, the ``prioritized`` policy: 2, the
``flow_control`` ack policy: 4). The context's ``_api_request`` checks that
level here first, then sends it in the header: the server that answers may be
older than the one ``$JS.API.INFO`` reached (a cluster being upgraded), and it
refuses with err_code 10185 (:class:`~jsclient.errors.RequiredApiLevelError`)
instead of half-applying the request; :func:`refused` turns that into
FeatureNotSupportedError naming the feature and the level.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from jsclient import errors

if TYPE_CHECKING:
    from jsclient.jetstream._ctx import Context

#: The request header of ADR-44: the lowest API level that may answer.
REQUIRED_API_LEVEL = "Nats-Required-Api-Level"

NONE: tuple[int, str] = (0, "")

#: API subjects (after the prefix) that exist only from a level on.
_SUBJECT_LEVELS: tuple[tuple[str, int, str], ...] = (
    ("CONSUMER.PAUSE.", 1, "consumer pause"),
    ("CONSUMER.UNPIN.", 1, "consumer unpin"),
    ("CONSUMER.RESET.", 4, "consumer reset"),
)


def _text(value: Any) -> str:
    """An enum member or plain value as the text the server reads."""
    return str(getattr(value, "value", value) or "")


def stream_level(cfg: Mapping[str, Any]) -> tuple[int, str]:
    """The API level a stream config (as sent) needs, and the feature needing it."""
    needs = [NONE]
    if cfg.get("allow_msg_ttl"):
        needs.append((1, "per-message TTL (allow_msg_ttl)"))
    if cfg.get("subject_delete_marker_ttl"):
        needs.append((1, "subject delete markers (subject_delete_marker_ttl)"))
    if cfg.get("allow_msg_counter"):
        needs.append((2, "counters (allow_msg_counter)"))
    if cfg.get("allow_atomic"):
        needs.append((2, "atomic batch publish (allow_atomic)"))
    if cfg.get("allow_msg_schedules"):
        needs.append((2, "message schedules (allow_msg_schedules)"))
    if _text(cfg.get("persist_mode")) == "async":
        needs.append((2, "persist_mode async"))
    if cfg.get("allow_batched"):
        needs.append((4, "fast-ingest batch publish (allow_batched)"))
    return max(needs, key=lambda n: n[0])


def consumer_level(cfg: Mapping[str, Any]) -> tuple[int, str]:
    """The API level a consumer config (as sent) needs, and the feature needing it."""
    needs = [NONE]
    policy = _text(cfg.get("priority_policy")) or "none"
    if policy == "prioritized":
        needs.append((2, "the prioritized priority policy"))
    elif policy != "none" or cfg.get("priority_groups") or cfg.get("priority_timeout"):
        needs.append((1, "consumer priority groups"))
    if cfg.get("pause_until"):
        needs.append((1, "consumer pause_until"))
    if _text(cfg.get("ack_policy")) == "flow_control":
        needs.append((4, "the flow_control ack policy"))
    return max(needs, key=lambda n: n[0])


def request_level(suffix: str, payload: object) -> tuple[int, str]:
    """The API level the request ``<prefix>.<suffix>`` with ``payload`` needs (0: any)."""
    for start, level, feature in _SUBJECT_LEVELS:
        if suffix.startswith(start):
            return level, feature
    if not isinstance(payload, Mapping):
        return NONE
    if suffix.startswith(("STREAM.CREATE.", "STREAM.UPDATE.")):
        return stream_level(payload)
    if suffix.startswith(("CONSUMER.CREATE.", "CONSUMER.DURABLE.CREATE.")):
        config = payload.get("config")
        return consumer_level(config) if isinstance(config, Mapping) else NONE
    return NONE


def refused(feature: str, level: int, seen: int | None) -> errors.FeatureNotSupportedError:
    """FeatureNotSupportedError for the server's refusal (err_code 10185) of a
    request sent with ``Nats-Required-Api-Level: <level>``."""
    server = errors.FeatureNotSupportedError.SERVERS.get(level, f"with API level {level}")
    err = errors.FeatureNotSupportedError(feature, level, seen or 0)
    err.message = err.description = (
        f"nats: {feature} needs nats-server {server} or later (JetStream API level {level}); "
        f"the server that answered refused {REQUIRED_API_LEVEL}: {level} (err_code 10185)"
        + (f", though $JS.API.INFO reported level {seen}" if seen else "")
    )
    err.args = (err.message,)
    return err


class ApiLevel:
    """The API level of the server behind one JetStream context (its ``_levels``).

    The context's ``_api_level()``, ``_require_api_level()`` and
    ``_api_request()`` call this.
    """

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        # Asked once: a context talks to one JetStream. Tests set it to stand
        # in for an older server.
        self.seen: int | None = None

    def level(self) -> int:
        """The server's JetStream API level (0 before 2.11), asked once per context."""
        level = self.seen
        if level is None:
            resp = self._ctx._api_request("INFO")
            api = resp.get("api")
            raw = api.get("level") if isinstance(api, dict) else None
            level = raw if type(raw) is int and raw >= 0 else 0
            self.seen = level
        return level

    def require(self, level: int, feature: str) -> None:
        """FeatureNotSupportedError unless the server's API level is ``level`` or more."""
        if level <= 0:
            return
        seen = self.seen
        if seen is not None and seen >= level:
            return
        have = self.level()
        if have < level:
            raise errors.FeatureNotSupportedError(feature, level, have)
