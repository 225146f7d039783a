"""Every backward jump inside a ``with``, a ``finally`` or an ``except
BaseException`` of the library is covered by that block's handler.

An interrupt (``KeyboardInterrupt`` from Ctrl+C, or any exception raised into
a thread) is delivered where the interpreter checks for it: at a loop's
backward jump and after a call. From CPython 3.13 the compiler leaves some
backward jumps out of the exception table: the jump after a conditional
one, as ``while cond:`` compiles its test at the loop's end, or a ``for``
body that ends with an ``if`` and no ``else``. An interrupt on such a jump
skips the handler: ``with lock:`` leaves the lock held (every later user of
it hangs), a ``finally`` does not run. It was seen as a hang of the managed
publisher (``test_publisher_safety.py``) on 3.13, with or without the GIL.

The library's loops inside those blocks are written so that the compiler
covers every jump (``while True:`` with the test inside, an ``else`` where
it is needed, or the loop in a function of its own). 3.12 has one case of its
own: the jump back of a ``yield from`` inside a ``finally``'s block (a ``for``
loop that yields is covered). This test keeps it so on the running
interpreter; the suite's quick runs on 3.12, 3.13 and 3.14 are the ones that
can fail (3.11's and 3.15's compilers cover every jump).
"""

from __future__ import annotations

import dis
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import jsclient

ROOT = Path(jsclient.__file__).parent


def _codes(co: types.CodeType) -> Iterator[types.CodeType]:
    yield co
    for c in co.co_consts:
        if isinstance(c, types.CodeType):
            yield from _codes(c)


def _guards(ins: list[dis.Instruction], start: int) -> str | None:
    """What the handler at ``ins[start]`` is: "with", "finally", "except
    BaseException", or None for one an interrupt does not need (an ``except``
    of an Exception class, a generator's guard, the cleanup of an ``except
    ... as`` name or of an inlined comprehension's variable)."""
    if ins[start].opname != "PUSH_EXC_INFO":
        return None
    names: list[object] = []
    for i in ins[start : start + 40]:
        if i.opname == "WITH_EXCEPT_START":
            return "with"
        if i.opname in ("LOAD_GLOBAL", "LOAD_NAME", "LOAD_ATTR"):
            names.append(i.argval)
        if i.opname == "CHECK_EXC_MATCH":
            base = names and names[-1] in ("BaseException", "KeyboardInterrupt")
            return "except BaseException" if base else None
        if i.opname in ("RERAISE", "POP_EXCEPT"):
            break
    return "finally"


def uncovered_jumps(source: str, name: str) -> list[str]:
    """The backward jumps of ``source``'s code that start a loop's next round
    inside a guarded block without being covered by its handler."""
    found = []
    for co in _codes(compile(source, name, "exec")):
        table = list(dis._parse_exception_table(co))  # type: ignore[attr-defined]
        if not table:
            continue
        ins = list(dis.get_instructions(co))
        at = {i.offset: n for n, i in enumerate(ins)}
        guarded = [(e, g) for e in table if (g := _guards(ins, at[e.target]))]
        for i in ins:
            if i.opname != "JUMP_BACKWARD":
                continue
            if any(e.start <= i.offset < e.end for e in table):
                continue
            kinds = sorted({g for e, g in guarded if e.start <= i.argval < e.end})
            if kinds:
                line = i.positions.lineno if i.positions else "?"
                found.append(f"{name}:{line} in {co.co_qualname}: {', '.join(kinds)}")
    return found


def test_the_scan_finds_the_pattern() -> None:
    # The scan's own check, on a loop whose last jump 3.13 and 3.14 (up to
    # 3.14.10 at least) leave uncovered; 3.15's compiler covers it.
    src = (
        "import threading\n"
        "lock = threading.Lock()\n"
        "def f(items, out):\n"
        "    with lock:\n"
        "        for x in items:\n"
        "            if x:\n"
        "                out.append(x)\n"
    )
    found = uncovered_jumps(src, "sample.py")
    f = next(
        c for c in compile(src, "sample.py", "exec").co_consts if isinstance(c, types.CodeType)
    )
    table = list(dis._parse_exception_table(f))  # type: ignore[attr-defined]
    bare = [
        i
        for i in dis.get_instructions(f)
        if i.opname == "JUMP_BACKWARD" and not any(e.start <= i.offset < e.end for e in table)
    ]
    assert len(found) == len(bare), (found, bare)
    if sys.version_info[:2] == (3, 13):
        assert len(found) == 1 and found[0].endswith(" in f: with"), found


def test_no_interrupt_skips_a_handler_of_the_library() -> None:
    found = [
        hit
        for p in sorted(ROOT.rglob("*.py"))
        for hit in uncovered_jumps(p.read_text(), str(p.relative_to(ROOT.parent)))
    ]
    assert not found, "\n".join(found)
