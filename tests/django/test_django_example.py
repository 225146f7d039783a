"""The example project runs as its README says: ``python run_example.py`` in its directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "django_worker"


def test_example_runs_end_to_end() -> None:
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    proc = subprocess.run(
        [sys.executable, "run_example.py", "-n", "10"],
        cwd=EXAMPLE,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "5. all 10 orders billed" in out and "'status': 'billed'" in out
    assert "stream ORDERS holds 10 messages" in out
    assert "the shop service says: {" in out and '"status": "billed"' in out  # @endpoint
    assert "6. worker stopped with SIGTERM, exit status 0" in out
    assert "billed order 10" in proc.stderr  # the worker's handler log, through LOGGING
    assert not (EXAMPLE / "db.sqlite3").exists()  # a throw-away database
