"""Build script: the pure package always, the Cython speedups unless told not to.

Where the extensions come from:

- ``_speedups/*.pyx`` (in the git tree and in the sdist) are the sources; with
  Cython available (it is a build requirement) they are compiled from them;
- without Cython (``--no-build-isolation`` in an environment that lacks it),
  the ``_speedups/*.c`` files that ``cythonize`` wrote into the sdist are used;
- with neither, the build fails: it never installs the pure package silently
  for lack of sources.

If the compiler fails, the pure-Python package is installed and the build says
so. ``JSCLIENT_STRICT_BUILD=1`` (CI, the scripts, release wheels) turns any
extension problem into an error, so a broken extension can never pass
unnoticed. ``JSCLIENT_NO_EXTENSIONS=1`` builds the pure package on purpose.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).parent
SPEEDUPS = HERE / "_speedups"
STRICT = os.environ.get("JSCLIENT_STRICT_BUILD") == "1"
SKIP = os.environ.get("JSCLIENT_NO_EXTENSIONS") == "1"
DIRECTIVES = {
    "boundscheck": False,
    "wraparound": False,
    "cdivision": True,
    "embedsignature": True,
}


def _say(text: str) -> None:
    sys.stderr.write(f"\n*** jsclient: {text}\n\n")


class OptionalBuildExt(build_ext):
    """Build each extension; outside strict mode a compiler failure only warns.

    The extensions compile in parallel, one job per core (``--parallel`` of
    setuptools' build_ext, unless given): the first command on a new machine
    is mostly this compile.
    """

    def finalize_options(self) -> None:
        super().finalize_options()
        if self.parallel is None:
            self.parallel = os.cpu_count() or 1

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
        _say(
            f"could not build {name} ({exc}).\n"
            "*** Installing the pure-Python implementation; it is correct but slower.\n"
            "*** Install a C compiler and the Python headers to get the speedups."
        )


def extensions() -> list[Extension]:
    if SKIP:
        _say("JSCLIENT_NO_EXTENSIONS=1: building the pure-Python package, no speedups.")
        return []
    pyx = sorted(SPEEDUPS.glob("*.pyx"))
    try:
        from Cython.Build import cythonize
    except ImportError:
        cythonize = None
    if pyx and cythonize is not None:
        exts = [
            Extension(f"jsclient._speedups.{src.stem}", [str(src.relative_to(HERE))]) for src in pyx
        ]
        # include_path: the twins cimport their shared inline helpers
        # (``_speedups/*.pxd``) by plain name, e.g. ``from _scan cimport _crlf``.
        built: list[Extension] = cythonize(
            exts,
            language_level=3,
            compiler_directives=DIRECTIVES,
            include_path=[str(SPEEDUPS)],
            quiet=True,
            nthreads=os.cpu_count() or 1,
        )
    else:
        c_files = sorted(SPEEDUPS.glob("*.c"))
        stems = {p.stem for p in pyx}
        if not c_files or (stems and stems != {c.stem for c in c_files}):
            raise SystemExit(
                "jsclient: cannot build the speedups: "
                + ("Cython is not installed and " if pyx else "")
                + "no matching generated _speedups/*.c files are present.\n"
                "Install Cython (pip install 'cython>=3.2.5'), or set "
                "JSCLIENT_NO_EXTENSIONS=1 to install the slower pure-Python package."
            )
        _say("Cython not available: compiling the generated _speedups/*.c files.")
        built = [
            Extension(f"jsclient._speedups.{src.stem}", [str(src.relative_to(HERE))])
            for src in c_files
        ]
    # cythonize() returns fresh Extension objects and drops optional=True,
    # so the flag is set on what it returns.
    for ext in built:
        ext.optional = not STRICT
    return built


setup(
    ext_modules=extensions(),
    cmdclass={"build_ext": OptionalBuildExt},
    # Every package under jsclient/ is found, so a new subpackage cannot be
    # left out of the wheel; the Cython twins live in _speedups/ and install
    # as jsclient._speedups. pyspark_jetstream is the top-level module Spark
    # scans for to find the "jetstream" data source with no register() call.
    packages=[
        *find_packages(include=["jsclient", "jsclient.*"]),
        "jsclient._speedups",
        "pyspark_jetstream",
    ],
    package_dir={"jsclient._speedups": "_speedups"},
)
