"""The Django example project's Celery worker, end to end: ``run_celery_example.py``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("django")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "django_worker"


def test_run_celery_example() -> None:
    run = subprocess.run(
        [sys.executable, "run_celery_example.py"],
        cwd=EXAMPLE,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    out = run.stdout
    assert "order 3: 3 x book-2" in out
    assert "all at once (a group): 3 receipts" in out
    assert "'ok': 'pong'" in out
    assert "exit status 0" in out
