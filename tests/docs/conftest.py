"""The documentation's tests: examples, docstrings, the built site (issue 37)."""

from __future__ import annotations

import pytest
from _docexamples import Counter


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if Counter.executed:
        counts = ", ".join(f"{lane} {n}" for lane, n in sorted(Counter.executed.items()))
        total = sum(Counter.executed.values())
        terminalreporter.write_line(f"docs examples executed: {total} ({counts})")
