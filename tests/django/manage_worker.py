"""``manage.py`` for the worker subprocess: settings from the environment, then the command line.

JSCLIENT_TEST_DB is the SQLite file, JSCLIENT_TEST_NATS the server URL.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from django.core.management import execute_from_command_line


def main() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import djsettings

    djsettings.configure(os.environ["JSCLIENT_TEST_DB"], os.environ["JSCLIENT_TEST_NATS"])
    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
