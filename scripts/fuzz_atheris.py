"""Coverage-guided fuzzing of both parser twins with atheris (``pip install -e ".[fuzz]"``).

    python scripts/fuzz_atheris.py -atheris_runs=1000000

Each input is fed to the pure and the Cython parser, whole and split in two at
a point taken from the input; anything but ProtocolError escaping, a split
changing the outcome, or the twins disagreeing is a crash atheris reports.
"""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports():
    from jsclient.bench.fuzz import FuzzFailure, _parse
    from jsclient.protocol import parser as py_parser

    try:
        from jsclient._speedups import parser as c_parser
    except ImportError:
        c_parser = None

TWINS = [m for m in (py_parser, c_parser) if m is not None]


def one_input(data: bytes) -> None:
    if len(data) < 2:
        return
    mcl = (4096, 32, 4)[data[0] % 3]
    raw = data[2:]
    cut = data[1] % (len(raw) + 1)
    results = []
    for mod in TWINS:
        whole = _parse(mod, [raw], mcl, 1 << 20)
        if _parse(mod, [raw[:cut], raw[cut:]], mcl, 1 << 20) != whole:
            raise FuzzFailure("split != whole", raw)
        results.append(whole)
    if len(results) == 2 and results[0] != results[1]:
        raise FuzzFailure("the twins disagree", raw)


if __name__ == "__main__":
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()
