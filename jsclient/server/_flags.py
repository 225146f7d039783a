"""ADR-53 feature flags for every embedded server a test suite starts, from the environment."""

from __future__ import annotations

import os
import re

__all__ = ["FEATURE_FLAGS_ENV", "FLAG_NAME", "feature_flags_from_env"]

#: Feature flags (ADR-53) every server started without ``feature_flags=`` gets,
#: e.g. ``js_ack_fc_v2`` or ``js_ack_fc_v2,other=false``: how a test suite runs
#: once more against servers with a flag on.
FEATURE_FLAGS_ENV = "JSCLIENT_TEST_SERVER_FEATURES"

FLAG_NAME = re.compile(r"[A-Za-z0-9_]+")
_BOOLS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


def feature_flags_from_env() -> dict[str, bool]:
    """The feature flags :data:`FEATURE_FLAGS_ENV` names (``name`` or ``name=false``,
    comma separated); ValueError for a malformed entry, so a typo fails loudly."""
    flags: dict[str, bool] = {}
    for item in os.environ.get(FEATURE_FLAGS_ENV, "").replace(" ", ",").split(","):
        if not item:
            continue
        name, sep, value = item.partition("=")
        on = _BOOLS.get(value.strip().lower()) if sep else True
        if not FLAG_NAME.fullmatch(name) or on is None:
            raise ValueError(
                f"{FEATURE_FLAGS_ENV}: {item!r} is not a feature flag (name or name=true/false)"
            )
        flags[name] = on
    return flags
