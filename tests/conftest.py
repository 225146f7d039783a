"""Suite-wide settings.

Hypothesis: no per-example deadline. The suite shares two vCPUs with a real
nats-server, so a slow example is load, not a bug; the example counts stay as
each test sets them.
"""

from __future__ import annotations

from hypothesis import settings

settings.register_profile("jsclient", deadline=None)
settings.load_profile("jsclient")
