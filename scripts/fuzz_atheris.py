"""Coverage-guided fuzzing of both parser twins with atheris (``pip install -e ".[fuzz]"``).

    python scripts/fuzz_atheris.py -atheris_runs=1000000

Each input is fed to the pure and the Cython parser, whole and split in two at
a point taken from the input; anything but ProtocolError escaping, a split
changing the outcome, or the twins disagreeing is a crash atheris reports
(the checks are :func:`jsbench.fuzz.check`, the random fuzzer's own).
"""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports():
    from jsbench.fuzz import check, load_twins

    TWINS = load_twins()


def one_input(data: bytes) -> None:
    if len(data) < 2:
        return
    mcl = (4096, 32, 4)[data[0] % 3]
    raw = data[2:]
    cut = data[1] % (len(raw) + 1)
    check(TWINS, raw, [[raw[:cut], raw[cut:]]], mcl, 1 << 20)


if __name__ == "__main__":
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()
