"""How the bench starts a module of its own in a new interpreter (a run, the echo peer)."""

from __future__ import annotations

import os
import sys

# The folder that holds jsbench (a checkout's root).
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The ``python -c`` program that runs ``main(argv)`` of a bench module
# (argv[2]) with ROOT (argv[1]) last on the path: jsbench is found there, and
# an installed jsclient (with its compiled speedups) is not shadowed by the
# checkout's source tree (an editable install is the tree). Not ``-m``: runpy warns when
# the package's __init__ has imported the module already. The bench modules
# import no client at import time, so a nats-py or natsio child never loads
# jsclient and its memory is that client's alone.
_BOOTSTRAP = (
    "import sys\n"
    "from importlib import import_module\n"
    "sys.path.append(sys.argv.pop(1))\n"
    "sys.exit(import_module(sys.argv.pop(1)).main(sys.argv[1:]))\n"
)


def module_command(module: str, args: list[str]) -> list[str]:
    """The command that runs ``main(args)`` of ``module`` in a new interpreter."""
    return [sys.executable, "-c", _BOOTSTRAP, ROOT, module, *args]
