"""docs/errors.md documents every public error class of :mod:`jsclient.errors`.

Each class needs a table row whose first cell is `` `ClassName` ``, listing its
direct bases, and, where it has one, the code it stands for: every ``err_code``
of ``API_ERRORS_BY_ERR_CODE`` and every ``code`` of a subscribe refusal in its
row's Code cell. A new error class without a row fails here.
"""

from __future__ import annotations

import importlib
import pickle
import pkgutil
import re
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from jsclient import errors
from jsclient.errors import jetstream as api_errors

DOC = Path(__file__).resolve().parents[2] / "docs" / "errors.md"


@dataclass(frozen=True)
class Row:
    bases: str
    code: str
    when: str


def _modules() -> list[ModuleType]:
    subs = [
        importlib.import_module(f"{errors.__name__}.{info.name}")
        for info in pkgutil.iter_modules(errors.__path__)
    ]
    return [errors, *subs]


def _error_classes() -> dict[str, type[BaseException]]:
    """Every public exception class defined in jsclient.errors or a submodule."""
    found: dict[str, type[BaseException]] = {}
    for mod in _modules():
        for name, obj in vars(mod).items():
            if (
                isinstance(obj, type)
                and issubclass(obj, BaseException)
                and not name.startswith("_")
                and obj.__name__ == name
                and obj.__module__.split(".")[:2] == ["jsclient", "errors"]
            ):
                found[name] = obj
    return found


def _rows() -> dict[str, Row]:
    """The doc's table rows, by the class named in their first cell."""
    rows: dict[str, Row] = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        m = re.match(r"^\|\s*`(\w+)`\s*\|", line)
        if not m:
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|", 3)]
        assert len(cells) == 4, f"docs/errors.md: row needs 4 cells: {line}"
        assert m.group(1) not in rows, f"docs/errors.md: {m.group(1)} has two rows"
        rows[m.group(1)] = Row(bases=cells[1], code=cells[2], when=cells[3])
    return rows


CLASSES = _error_classes()
ROWS = _rows()


def test_collects_the_error_classes() -> None:
    exported = {
        n for n in errors.__all__ if isinstance(getattr(errors, n), type) and n != "api_error"
    }
    assert exported <= set(CLASSES)
    assert {"Error", "JetStreamError", "APIError", "SubscribeError"} <= set(CLASSES)


def test_every_error_class_is_exported_from_the_package() -> None:
    missing = [n for n, cls in CLASSES.items() if getattr(errors, n, None) is not cls]
    assert not missing, f"define in a submodule, re-export from jsclient.errors: {missing}"
    unlisted = [n for n in CLASSES if n not in errors.__all__]
    assert not unlisted, f"add to jsclient.errors.__all__: {unlisted}"


def test_every_error_class_is_documented() -> None:
    text = DOC.read_text(encoding="utf-8")
    unnamed = [n for n in CLASSES if f"`{n}`" not in text]
    assert not unnamed, f"docs/errors.md does not name: {unnamed}"
    no_row = [n for n in CLASSES if n not in ROWS]
    assert not no_row, f"docs/errors.md has no table row for: {no_row}"
    empty = [n for n, row in ROWS.items() if n in CLASSES and not row.when]
    assert not empty, f"docs/errors.md does not say when these are raised: {empty}"


def test_no_row_for_a_class_that_does_not_exist() -> None:
    stale = [n for n in ROWS if n not in CLASSES]
    assert not stale, f"docs/errors.md documents classes jsclient.errors lacks: {stale}"


def test_rows_list_the_direct_bases() -> None:
    wrong = []
    for name, cls in CLASSES.items():
        if name not in ROWS:
            continue  # test_every_error_class_is_documented reports it
        for base in cls.__bases__:
            if base.__module__.startswith("jsclient.errors"):
                shown = f"`{base.__name__}`"
            elif base.__module__ == "builtins":
                shown = f"`{base.__qualname__}`"
            else:
                shown = f"`{base.__module__}.{base.__qualname__}`"
            if shown not in ROWS[name].bases:
                wrong.append(f"{name}: {shown}")
    assert not wrong, f"docs/errors.md: bases missing from the Bases cell: {wrong}"


def test_err_codes_are_next_to_their_class() -> None:
    table = errors.API_ERRORS_BY_ERR_CODE
    assert table, "the err_code table is empty"
    wrong = [
        f"{cls.__name__}: err_code {code}"
        for code, cls in table.items()
        if not re.search(rf"\berr_code {code}\b", ROWS[cls.__name__].code)
    ]
    assert not wrong, f"docs/errors.md: err_code missing from the class's row: {wrong}"
    # ... and no row claims an err_code the table maps elsewhere (or not at all).
    stale = [
        f"{name}: err_code {code}"
        for name, row in ROWS.items()
        for code in map(int, re.findall(r"\berr_code (\d+)", row.code))
        if code not in table or table[code].__name__ != name
    ]
    assert not stale, f"docs/errors.md: err_code not mapped to that class: {stale}"


def test_api_status_codes_are_next_to_their_class() -> None:
    wrong = [
        f"{cls.__name__}: code {code}"
        for code, cls in api_errors._API_ERRORS_BY_CODE.items()
        if not re.search(rf"\bcode {code}\b", ROWS[cls.__name__].code)
    ]
    assert not wrong, f"docs/errors.md: API status missing from the class's row: {wrong}"


def test_subscribe_codes_are_next_to_their_class() -> None:
    subscribe: dict[str, type[errors.SubscribeError]] = {}
    for name, cls in CLASSES.items():
        if issubclass(cls, errors.SubscribeError):
            subscribe[name] = cls
    assert len(subscribe) > 1
    wrong = [
        f"{name}: SUB-{cls.code}"
        for name, cls in subscribe.items()
        if not re.search(rf"\bSUB-{cls.code}\b", ROWS[name].code)
    ]
    assert not wrong, f"docs/errors.md: SUB- code missing from the class's row: {wrong}"
    codes = [cls.code for cls in subscribe.values()]
    assert len(codes) == len(set(codes)), "two subscribe refusals share a code"


def test_classes_keep_their_public_module_and_pickle() -> None:
    """Reprs, tracebacks and pickles name ``jsclient.errors.X``, not a submodule."""
    moved = [n for n, cls in CLASSES.items() if cls.__module__ != "jsclient.errors"]
    assert not moved, f"__module__ is not jsclient.errors: {moved}"
    for cls in CLASSES.values():
        err = cls()
        copy = pickle.loads(pickle.dumps(err))
        assert type(copy) is cls
        assert str(copy) == str(err)
