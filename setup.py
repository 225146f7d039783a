"""Build script: the pure package always, the Cython speedups when possible.

The extensions are optional for users: if the compiler fails, the pure-Python
package is installed and the build says so. CI sets JSCLIENT_STRICT_BUILD=1,
which turns any build failure into an error, so a broken extension can never
pass unnoticed. JSCLIENT_NO_EXTENSIONS=1 skips them entirely.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).parent
STRICT = os.environ.get("JSCLIENT_STRICT_BUILD") == "1"
SKIP = os.environ.get("JSCLIENT_NO_EXTENSIONS") == "1"


class OptionalBuildExt(build_ext):
    """Build each extension; outside strict mode a failure only warns."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:
            self._give_up(exc)

    def build_extension(self, ext):  # type: ignore[no-untyped-def]
        try:
            super().build_extension(ext)
        except Exception as exc:
            self._give_up(exc, ext.name)

    def _give_up(self, exc: Exception, name: str = "speedups") -> None:
        if STRICT:
            raise
        sys.stderr.write(
            f"\n*** jsclient: could not build {name} ({exc}).\n"
            "*** Installing the pure-Python implementation; it is correct but slower.\n"
            "*** Install a C compiler and Python headers to get the speedups.\n\n"
        )


def extensions() -> list:  # type: ignore[type-arg]
    if SKIP:
        return []
    sources = sorted((HERE / "_speedups").glob("*.pyx"))
    if not sources:
        return []
    try:
        from Cython.Build import cythonize
        from setuptools import Extension
    except ImportError:
        if STRICT:
            raise
        sys.stderr.write("*** jsclient: Cython not available; pure-Python install.\n")
        return []
    exts = [
        Extension(f"jsclient._speedups.{src.stem}", [str(src.relative_to(HERE))]) for src in sources
    ]
    built = cythonize(
        exts,
        language_level=3,
        compiler_directives={
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "embedsignature": True,
        },
        quiet=True,
    )
    # cythonize() returns fresh Extension objects and drops optional=True,
    # so the flag is set on what it returns.
    for ext in built:
        ext.optional = not STRICT
    return built


setup(
    ext_modules=extensions(),
    cmdclass={"build_ext": OptionalBuildExt},
    packages=[
        "jsclient",
        "jsclient.protocol",
        "jsclient.jetstream",
        "jsclient._speedups",
    ],
    package_dir={"jsclient._speedups": "_speedups"},
)
