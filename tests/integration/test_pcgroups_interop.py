"""jsclient and natsio (``natsio-pcgroups``, ``natsio-kvcodec``: orbit.go's layouts in
asyncio Python) share partitioned consumer groups and codec-encoded buckets.

natsio needs Python 3.13+: the session's first test finds a 3.13 interpreter
(``scripts/find-python.sh``), makes a virtualenv for it under ``.pythons/``
with the three packages from the package index (once, under a file lock), and
runs ``tests/_natsio_member.py`` in it. Without the interpreter, or when pip
cannot install, the tests skip, saying why.
"""

from __future__ import annotations

import fcntl
import json
import select
import subprocess
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _js import eventually, flock_within

from jsclient.api import ConsumerConfig
from jsclient.client import Client
from jsclient.jetstream import JetStream, pcgroups
from jsclient.jetstream.kv import codecs
from jsclient.msg import Msg
from jsclient.server import NatsServer

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".pythons" / "natsio-3.13"
DRIVER = ROOT / "tests" / "_natsio_member.py"
PACKAGES = ("natsio", "natsio-pcgroups", "natsio-kvcodec")
INSTALL_TIMEOUT = 300.0
RUN_TIMEOUT = 60.0
ACK_WAIT = 2.0


def _works(python: Path) -> bool:
    done = subprocess.run(
        [str(python), "-c", "import natsio.pcgroups, natsio.kvcodec"],
        capture_output=True,
        timeout=60,
    )
    return done.returncode == 0


@pytest.fixture(scope="session")
def natsio_python() -> Path:
    """A Python 3.13 with natsio, natsio-pcgroups and natsio-kvcodec."""
    python = VENV / "bin" / "python"
    VENV.parent.mkdir(exist_ok=True)
    with open(VENV.parent / ".natsio-3.13.lock", "w") as lock:
        flock_within(lock, INSTALL_TIMEOUT)
        try:
            if python.exists() and _works(python):
                return python
            found = subprocess.run(
                ["bash", str(ROOT / "scripts" / "find-python.sh"), "3.13"],
                capture_output=True,
                text=True,
                timeout=60,
            )
            if found.returncode != 0 or not found.stdout.strip():
                pytest.skip("the natsio interop tests need a Python 3.13 (scripts/find-python.sh)")
            base = found.stdout.strip()
            made = subprocess.run(
                [base, "-m", "venv", "--clear", str(VENV)], capture_output=True, text=True
            )
            if made.returncode != 0:
                pytest.skip(f"cannot make a 3.13 virtualenv: {made.stderr[-500:]}")
            pip = subprocess.run(
                [str(python), "-m", "pip", "install", "-q", *PACKAGES],
                capture_output=True,
                text=True,
                timeout=INSTALL_TIMEOUT,
            )
            if pip.returncode != 0 or not _works(python):
                pytest.skip(f"pip cannot install {' '.join(PACKAGES)}: {pip.stderr[-800:]}")
            return python
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def natsio(python: Path, *args: str) -> Any:
    """Run one driver command; its JSON result (the last line of stdout)."""
    done = subprocess.run(
        [str(python), str(DRIVER), *args], capture_output=True, text=True, timeout=RUN_TIMEOUT
    )
    if done.returncode != 0:
        pytest.fail(f"natsio {args[0]} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture
def js(nc: Client) -> JetStream:
    return nc.jetstream()


class NatsioMember:
    """A natsio member of an elastic group in its own process; what it saw is in a file."""

    def __init__(
        self,
        python: Path,
        url: str,
        stream: str,
        group: str,
        name: str,
        tmp: Path,
        max_ack_pending: int | None = None,
    ) -> None:
        self.out = tmp / f"{name}.txt"
        self.out.touch()
        self.err_path = tmp / f"{name}.err"
        self.err = self.err_path.open("w")
        argv = ["elastic-member", url, stream, group, name, str(self.out), str(ACK_WAIT)]
        if max_ack_pending is not None:
            argv.append(str(max_ack_pending))
        self.proc = subprocess.Popen(
            [str(python), str(DRIVER), *argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.err,
            text=True,
        )

    def wait_started(self) -> None:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], 30.0)
        if not ready or self.proc.stdout.readline().strip() != "started":
            pytest.fail(f"the natsio member did not start: {self.err_path.read_text()}")

    def lines(self) -> list[tuple[str, str]]:
        """(subject, data) of every message the member handled, in its order."""
        rows = [ln.split("\t") for ln in self.out.read_text(encoding="utf-8").splitlines()]
        return [(r[0], r[1]) for r in rows if len(r) == 2]

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(30)

    def close(self) -> None:
        """Let it stop (stdin closes) and reap it."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        self.proc.wait(30)
        self.proc.stdout.close()
        self.err.close()


# -- one elastic group, a member of each ---------------------------------------------


def test_a_jsclient_and_a_natsio_member_share_an_elastic_group(
    natsio_python: Path, nats_server: NatsServer, js: JetStream, tmp_path: Path
) -> None:
    keys, per_key = 50, 200  # 10,000 messages over 6 partitions
    js.create_stream(name="IOP", subjects=["iop.*"], storage="memory")
    pcgroups.create_elastic(js, "IOP", "cg", 6, "iop.*", [1])
    pcgroups.add_members(js, "IOP", "cg", ["j1", "n1"])
    member = NatsioMember(natsio_python, nats_server.url, "IOP", "cg", "n1", tmp_path)
    lock = threading.Lock()
    mine: list[tuple[str, str]] = []

    def cb(msg: Msg) -> None:
        with lock:
            mine.append((msg.subject, msg.data.decode()))
        msg.ack()

    cc = None
    try:
        member.wait_started()
        cc = pcgroups.consume_elastic(js, "IOP", "cg", "j1", cb, ConsumerConfig(ack_wait=ACK_WAIT))
        for i in range(per_key):
            for k in range(keys):
                js.publish_async(f"iop.k{k}", str(i).encode())
        js.publish_async_complete(timeout=60)

        total = keys * per_key
        eventually(lambda: len(mine) + len(member.lines()) >= total, 25, f"{total} messages")
        time.sleep(0.5)  # nothing more comes
        theirs = member.lines()
        # Both consumers are orbit.go's shape, whoever made them.
        cj = js.consumer("IOP-cg", "j1").config
        cn = js.consumer("IOP-cg", "n1").config
        for c in (cj, cn):
            assert c.priority_groups == ["PCG"] and c.priority_timeout == ACK_WAIT
            assert c.inactive_threshold == ACK_WAIT and c.ack_wait == ACK_WAIT
        assert sorted((cj.filter_subjects or []) + (cn.filter_subjects or [])) == [
            f"{p}.iop.*" for p in range(6)
        ]
    finally:
        if cc is not None:
            cc.stop()
        member.close()
    assert cc.wait(10)
    by_key: dict[str, list[str]] = defaultdict(list)
    owner: dict[str, set[str]] = defaultdict(set)
    for who, rows in (("j1", mine), ("n1", theirs)):
        for subject, data in rows:
            by_key[subject].append(data)
            owner[subject].add(who)
    assert dict(by_key) == {f"iop.k{k}": [str(i) for i in range(per_key)] for k in range(keys)}
    assert all(len(o) == 1 for o in owner.values())  # a key went to one member
    assert mine and theirs


def test_a_natsio_member_killed_and_a_jsclient_member_added_mid_run(
    natsio_python: Path, nats_server: NatsServer, js: JetStream, tmp_path: Path
) -> None:
    """kill -9 of the natsio member while messages flow; it leaves, a jsclient member
    joins: every message arrives, in order per member and key, and the only repeats are
    messages the killed member had taken but not acked (at most its max_ack_pending)."""
    keys, rounds, window = 12, 60, 32
    js.create_stream(name="IOK", subjects=["iok.*"], storage="memory")
    pcgroups.create_elastic(js, "IOK", "cg", 6, "iok.*", [1])
    pcgroups.add_members(js, "IOK", "cg", ["j1", "n1"])
    member = NatsioMember(natsio_python, nats_server.url, "IOK", "cg", "n1", tmp_path, window)
    lock = threading.Lock()
    seen: dict[str, list[tuple[str, str]]] = {"j1": [], "j2": []}

    def callback(name: str) -> Callable[[Msg], None]:
        def cb(msg: Msg) -> None:
            with lock:
                seen[name].append((msg.subject, msg.data.decode()))
            msg.ack()

        return cb

    cfg = ConsumerConfig(ack_wait=ACK_WAIT, max_ack_pending=window)
    ctxs: list[pcgroups.ConsumerGroupContext] = []
    done = threading.Event()

    def publish() -> None:
        for i in range(rounds):
            for k in range(keys):
                js.publish(f"iok.k{k}", str(i).encode())
            time.sleep(0.05)
        done.set()

    pub = threading.Thread(target=publish, name="test-publisher")
    try:
        member.wait_started()
        for name in ("j1", "j2"):  # j2 waits until it is a member
            ctxs.append(pcgroups.consume_elastic(js, "IOK", "cg", name, callback(name), cfg))
        pub.start()
        eventually(lambda: len(member.lines()) >= 20, 15, "the natsio member consuming")
        member.kill()
        pcgroups.delete_members(js, "IOK", "cg", ["n1"])
        pcgroups.add_members(js, "IOK", "cg", ["j2"])
        pub.join(30)
        assert done.is_set()
        theirs = member.lines()
        total = keys * rounds

        def distinct() -> int:
            with lock:
                return len(set(theirs) | set(seen["j1"]) | set(seen["j2"]))

        eventually(lambda: distinct() >= total, 30, f"{total} distinct messages")
        time.sleep(0.5)  # nothing more comes
    finally:
        for c in ctxs:
            c.stop()
        if member.proc.poll() is None:
            member.kill()
        member.close()
    assert all(c.wait(10) for c in ctxs)
    with lock:
        rows = {"n1": theirs, **{k: list(v) for k, v in seen.items()}}
    everything = [m for r in rows.values() for m in r]
    assert set(everything) == {(f"iok.k{k}", str(i)) for k in range(keys) for i in range(rounds)}
    repeats = len(everything) - len(set(everything))
    assert repeats <= window
    again = {m for m in everything if everything.count(m) > 1}
    assert again <= set(theirs)  # only what the killed member had taken comes twice
    for name, got in rows.items():
        by_key: dict[str, list[int]] = defaultdict(list)
        for subject, data in got:
            by_key[subject].append(int(data))
        for subject, numbers in by_key.items():
            assert numbers == sorted(set(numbers)), (name, subject)
    assert rows["j2"], "j2 took over partitions"
    print(f"killed member's repeats: {repeats} (bound {window})")


# -- the config JSON -------------------------------------------------------------------


def test_configs_written_by_either_side_read_by_the_other(
    natsio_python: Path, nats_server: NatsServer, js: JetStream
) -> None:
    js.create_stream(name="CFG", subjects=["cfg.*.*"], storage="memory")
    url = nats_server.url
    # natsio creates, jsclient reads and changes, natsio reads the change.
    made = natsio(natsio_python, "create-elastic", url, "CFG", "byn", "4", "cfg.*.*", "2")
    cfg = pcgroups.get_elastic_config(js, "CFG", "byn")
    assert cfg.max_members == 4 == made["max_members"]
    assert cfg.partitioning_filters == [pcgroups.PartitioningFilter("cfg.*.*", [2])]
    # The same group again from jsclient is the existing one (natsio writes -1 limits).
    assert pcgroups.create_elastic(js, "CFG", "byn", 4, "cfg.*.*", [2]).max_members == 4
    pcgroups.add_members(js, "CFG", "byn", ["a", "b"])
    assert natsio(natsio_python, "get-elastic", url, "CFG", "byn")["members"] == ["a", "b"]
    # jsclient creates, natsio reads and changes, jsclient reads the change.
    pcgroups.create_elastic(js, "CFG", "byj", 3, "cfg.*.*", [1, 2], max_buffered_msgs=50)
    theirs = natsio(natsio_python, "get-elastic", url, "CFG", "byj")
    assert theirs == {
        "max_members": 3,
        "partitioning_filters": [{"filter": "cfg.*.*", "partitioning_wildcards": [1, 2]}],
        "max_buffered_msg": 50,
    }
    assert sorted(natsio(natsio_python, "add-members", url, "CFG", "byj", "x,y")) == ["x", "y"]
    back = pcgroups.get_elastic_config(js, "CFG", "byj")
    assert sorted(back.members) == ["x", "y"] and back.max_buffered_msgs == 50
    pcgroups.set_member_mappings(
        js, "CFG", "byj", [pcgroups.MemberMapping("x", [0, 2]), pcgroups.MemberMapping("y", [1])]
    )
    assert natsio(natsio_python, "get-elastic", url, "CFG", "byj")["member_mappings"] == [
        {"member": "x", "partitions": [0, 2]},
        {"member": "y", "partitions": [1]},
    ]


# -- codec-encoded keys -------------------------------------------------------------------


def test_codec_keys_and_values_cross_both_ways(
    natsio_python: Path, nats_server: NatsServer, js: JetStream
) -> None:
    url = nats_server.url
    written = {"/app/db/url": "postgres://h/db", "/app/name": "svc ü", "top": "t"}
    natsio(natsio_python, "kv-put", url, "CODEC", json.dumps(written))
    kv = js.key_value("CODEC")
    stored = kv.keys()
    assert "X3Jvb3Rf.YXBw.ZGI.dXJs" in stored  # path, then base64 per token
    ckv = codecs.wrap(
        kv, codecs.KeyChainCodec(codecs.PathCodec(), codecs.Base64Codec()), codecs.Base64Codec()
    )
    assert {k: ckv.get(k).value.decode() for k in written} == written
    assert sorted(ckv.keys()) == sorted(written)
    assert ckv.keys("/app/*") == ["/app/name"]
    ckv.put("/app/from/jsclient", "j ✓".encode())
    ckv.put("/app/name", "renamed")
    got = natsio(natsio_python, "kv-get", url, "CODEC", json.dumps(["/app/from/jsclient", "top"]))
    assert got["values"] == {"/app/from/jsclient": "j ✓", "top": "t"}
    assert got["keys"] == sorted([*written, "/app/from/jsclient"])
    again = natsio(natsio_python, "kv-get", url, "CODEC", json.dumps(["/app/name"]))
    assert again["values"] == {"/app/name": "renamed"}
