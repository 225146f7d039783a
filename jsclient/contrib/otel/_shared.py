"""What the wrapper modules share: the library's own subjects, skipped callbacks."""

from __future__ import annotations

from typing import Any

#: Subjects of the library's own traffic (no spans): JetStream API, services, system.
INTERNAL_SUBJECTS = ("$JS.", "$SRV.", "$SYS.")
#: Functions whose callbacks are wrapped elsewhere (the Django runner's dispatch).
SKIP_CALLBACKS: set[Any] = set()
