"""The interpreter a benchmark ran on, and the versions of everything it measured.

A ratio between a Cython client and a pure-Python one depends on how the
interpreter was built: a profile-guided (PGO) build runs pure Python code
noticeably faster, so the same run on pyenv's default build (no PGO) and on a
distribution's build gives different ratios. The report therefore names the
build, and says "unknown" rather than guessing when ``sysconfig`` cannot tell.
"""

from __future__ import annotations

import os
import platform
import sys
import sysconfig
from collections.abc import Mapping
from typing import Any

PGO = "PGO"
NO_PGO = "no PGO"
UNKNOWN = "unknown"

# Where a build's compiler flags are recorded; a PGO build compiled the core
# with one of the profile-use flags (GCC, clang) in one of these.
_FLAG_VARS = ("PY_CFLAGS", "PY_CFLAGS_NODIST", "CFLAGS_NODIST", "PY_CORE_CFLAGS")
_PROFILE_USE = ("-fprofile-use", "-fprofile-instr-use")


def pgo_status(config: Mapping[str, Any]) -> tuple[str, str]:
    """(``"PGO"`` | ``"no PGO"`` | ``"unknown"``, the evidence) from sysconfig variables.

    - ``--enable-optimizations`` among the configure arguments, or a
      profile-use flag among the recorded compiler flags: PGO.
    - configured without it, with configure's own ``PGO_PROF_USE_FLAG``
      intact: CPython's build never used a profile (pyenv's default build).
    - configured without it, but ``PGO_PROF_USE_FLAG`` blanked: a packager's
      build that ran its own profile step (Debian and Ubuntu build their
      ``python3.X`` packages this way, and blank the flag so that extensions
      do not inherit it); PGO, with that reason.
    - no configure arguments at all (Windows, some embedders): unknown.
    """
    args = str(config.get("CONFIG_ARGS") or "")
    if "--enable-optimizations" in args:
        return PGO, "--enable-optimizations in CONFIG_ARGS"
    for var in _FLAG_VARS:
        flags = str(config.get(var) or "")
        for flag in _PROFILE_USE:
            if flag in flags:
                return PGO, f"{flag} in {var}"
    if not args:
        return UNKNOWN, "sysconfig records no configure arguments"
    if str(config.get("PGO_PROF_USE_FLAG") or "").strip():
        return NO_PGO, "configured without --enable-optimizations"
    return PGO, (
        "PGO_PROF_USE_FLAG blanked by the packager, whose own profile build "
        "(as Debian's and Ubuntu's) sysconfig does not record"
    )


def dist_version(name: str) -> str | None:
    """Installed version of a distribution, or None."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def natsio_status() -> tuple[bool, str]:
    """(usable, version or the reason it is not): natsio runs only where it imports."""
    try:
        import natsio  # noqa: F401
    except ImportError:
        if sys.version_info < (3, 13):
            return False, "n/a (needs Python 3.13+)"
        return False, "not installed"
    except Exception as exc:  # a broken install must not end the report
        return False, f"does not import ({type(exc).__name__}: {exc})"
    return True, dist_version("natsio") or "?"


def gil_status(config: Mapping[str, Any], gil_enabled: bool | None, env: str | None) -> str:
    """Whether the run had a GIL: always on a default build; on a free-threaded build
    (``Py_GIL_DISABLED``) as the process found it, with the ``PYTHON_GIL`` it was given.

    The state is this process's: importing an extension module that does not
    declare itself free-threading compatible turns the GIL back on, unless
    ``PYTHON_GIL=0`` keeps it off, and each benchmark child does its own imports.
    """
    if not config.get("Py_GIL_DISABLED"):
        return "GIL (default build)"
    state = "unknown" if gil_enabled is None else ("on" if gil_enabled else "off")
    return f"free-threaded build, GIL {state} (PYTHON_GIL={env if env is not None else 'unset'})"


def interpreter_info(config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Version, implementation, path and build of the running interpreter."""
    cfg = sysconfig.get_config_vars() if config is None else config
    pgo, evidence = pgo_status(cfg)
    base = getattr(sys, "_base_executable", sys.executable)
    return {
        "version": platform.python_version(),
        "implementation": platform.python_implementation(),
        "executable": sys.executable,
        "base_executable": os.path.realpath(base) if base else None,
        "pgo": pgo,
        "pgo_evidence": evidence,
        "compiler": platform.python_compiler(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cpu, {platform.system()}",
        "gil": gil_status(cfg, _gil_enabled(), os.environ.get("PYTHON_GIL")),
    }


def _gil_enabled() -> bool | None:
    probe = getattr(sys, "_is_gil_enabled", None)  # 3.13+
    return None if probe is None else bool(probe())


def describe_interpreter(info: Mapping[str, Any]) -> list[str]:
    """The header lines naming the interpreter and its build."""
    path = str(info["executable"])
    base = info.get("base_executable")
    if base and os.path.realpath(path) != base:
        path += f" (venv of {base})"
    build = f"  build: {info['pgo']} ({info['pgo_evidence']}); {info['compiler']}"
    build += f"; {info['machine']}"
    if info.get("gil"):  # absent from reports written before it was recorded
        build += f"; {info['gil']}"
    return [f"Python {info['version']} ({info['implementation']}) {path}", build]
