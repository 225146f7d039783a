"""The server's JetStream API level, asked once per context, and the check each
feature of servers 2.11+ makes with it before anything is sent.

``$JS.API.INFO`` answers ``"api": {"level": N}`` from server 2.11 on (none:
level 0). An older server would drop fields it does not know or not answer an
API subject it lacks, so a feature that needs level N raises
:class:`~jsclient.errors.FeatureNotSupportedError` on a lower one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jsclient import errors

if TYPE_CHECKING:
    from jsclient.jetstream._ctx import Context


class ApiLevel:
    """The API level of the server behind one JetStream context (its ``_levels``).

    The context's ``_api_level()`` and ``_require_api_level()`` call this.
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
