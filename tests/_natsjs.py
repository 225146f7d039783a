"""nats.js (the npm ``@nats-io`` 3.x packages) as a peer in interop tests.

nats.js runs as small node scripts in ``tests/natsjs`` (versions pinned in its
``package.json`` and ``package-lock.json``); the session's first test that needs
them runs ``npm ci`` there when ``node_modules`` lacks the pinned versions, once,
under a file lock so that parallel pytest runs do not install over each other.
Without ``node`` (or ``npm``, when nothing is installed yet) the tests skip,
saying so; a failed install fails them. A test module imports the fixture
``natsjs`` (``from _natsjs import natsjs_fixture``) and runs scripts with ``node``.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from _js import flock_within

NATSJS = Path(__file__).resolve().parent / "natsjs"
#: The longest a node script or the install may take (a loaded machine, a cold npm cache).
SCRIPT_TIMEOUT = 60.0
INSTALL_TIMEOUT = 300.0


def _installed() -> bool:
    """Whether node_modules holds every package at the version package.json pins."""
    wanted = json.loads((NATSJS / "package.json").read_text())["dependencies"]
    for name, version in wanted.items():
        manifest = NATSJS / "node_modules" / name / "package.json"
        if not manifest.is_file() or json.loads(manifest.read_text())["version"] != version:
            return False
    return True


@pytest.fixture(scope="session", name="natsjs")
def natsjs_fixture() -> Path:
    """The folder of the nats.js scripts, with its packages installed."""
    if shutil.which("node") is None:
        pytest.skip("the nats.js interop tests need node (20 or later) on PATH")
    with open(NATSJS / "package-lock.json", "rb") as lock:
        flock_within(lock, INSTALL_TIMEOUT)
        try:
            if not _installed():
                npm = shutil.which("npm")
                if npm is None:
                    pytest.skip("the nats.js interop tests need npm to install tests/natsjs")
                done = subprocess.run(
                    [npm, "ci", "--no-audit", "--no-fund"],
                    cwd=NATSJS,
                    capture_output=True,
                    text=True,
                    timeout=INSTALL_TIMEOUT,
                )
                if done.returncode != 0 or not _installed():
                    pytest.fail(
                        f"npm ci in {NATSJS} failed (exit {done.returncode}):\n"
                        f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
                    )
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return NATSJS


def node(folder: Path, script: str, *args: str) -> Any:
    """Run a script of ``tests/natsjs``; its JSON output (the last line of stdout)."""
    done = subprocess.run(
        ["node", script, *args],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=SCRIPT_TIMEOUT,
        env={**os.environ, "NODE_NO_WARNINGS": "1"},
    )
    if done.returncode != 0:
        pytest.fail(f"node {script} {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])
