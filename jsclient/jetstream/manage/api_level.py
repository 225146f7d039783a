"""The server's JetStream API level, asked once per context, and the check each
feature of servers 2.11+ makes with it before anything is sent.

``$JS.API.INFO`` answers ``"api": {"level": N}`` from server 2.11 on (none:
level 0). An older server would drop fields it does not know or not answer an
API subject it lacks, so a feature that needs level N raises
:class:`~jsclient.errors.FeatureNotSupportedError` on a lower one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from jsclient import errors

if TYPE_CHECKING:
    from jsclient.jetstream._ctx import Context


class ApiLevel:
    """A mixin of the JetStream context: ``_api_level()`` and ``_require_api_level()``."""

    # The server's API level, asked once (a context talks to one JetStream).
    _api_level_seen: int | None = None

    def _api_level(self) -> int:
        """The server's JetStream API level (0 before 2.11), asked once per context."""
        level = self._api_level_seen
        if level is None:
            resp = cast("Context", self)._api_request("INFO")
            api = resp.get("api")
            raw = api.get("level") if isinstance(api, dict) else None
            level = raw if type(raw) is int and raw >= 0 else 0
            self._api_level_seen = level
        return level

    def _require_api_level(self, level: int, feature: str) -> None:
        """FeatureNotSupportedError unless the server's API level is ``level`` or more."""
        if level <= 0:
            return
        seen = self._api_level_seen
        if seen is not None and seen >= level:
            return
        have = self._api_level()
        if have < level:
            raise errors.FeatureNotSupportedError(feature, level, have)
