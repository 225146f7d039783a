"""Fork safety: a client belongs to the process that connected it.

A child made by ``os.fork()`` (or multiprocessing's fork context) that uses
the parent's client gets ForkedConnectionError for every operation and never
writes to the shared socket; the parent's connection goes on untouched, also
when the child exits normally (``with`` block exit, atexit, finalizers).
"""

from __future__ import annotations

import faulthandler
import json
import multiprocessing
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import jsclient
from jsclient import errors
from jsclient.server import NatsServer

# Forking a process that has threads (the client's, the server launcher's) is
# what these tests are about; Python 3.12+ warns about it.
pytestmark = pytest.mark.filterwarnings(
    "ignore:This process .* is multi-threaded:DeprecationWarning"
)


def _wait_child(pid: int, timeout: float = 30.0) -> int:
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("forked child did not finish in time")
        time.sleep(0.01)


def _read_all(fd: int) -> bytes:
    chunks = []
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def test_child_gets_forked_error_and_parent_is_untouched(
    nats_server: NatsServer, tmp_path: Path
) -> None:
    seen_errors: list[BaseException] = []
    nc = jsclient.connect(nats_server.url, error_cb=seen_errors.append)
    try:
        sub = nc.subscribe("fork.>")
        js = nc.jetstream()
        js.create_stream(name="FORK", subjects=["forkjs.>"])
        js.publish("forkjs.a", b"stored")
        consumer = js.create_consumer("FORK", durable_name="d", ack_policy="explicit")
        held = consumer.next(timeout=5)  # received in the parent, acked by nobody yet
        push = js.subscribe("forkjs.>", durable="push", manual_ack=True)
        pushed = push.next_msg(timeout=5)
        pulled = js.pull_subscribe("forkjs.>", durable="legacy")
        r, w = os.pipe()
        # A child stuck on something the fork left locked writes every
        # thread's stack here and exits, so the failure says where.
        stacks = open(tmp_path / "child-stacks.txt", "w+")  # noqa: SIM115
        pid = os.fork()
        if pid == 0:  # pragma: no cover - runs in the child
            code = 1
            try:
                os.close(r)
                faulthandler.dump_traceback_later(30, exit=True, file=stacks)
                ops: dict[str, Callable[[], Any]] = {
                    "publish": lambda: nc.publish("fork.child", b"child"),
                    "publish_headers": lambda: nc.publish("fork.child", b"c", headers={"a": "b"}),
                    "request": lambda: nc.request("fork.child", b"", timeout=0.5),
                    "subscribe": lambda: nc.subscribe("fork.other"),
                    "flush": lambda: nc.flush(timeout=0.5),
                    "jetstream": lambda: nc.jetstream(),
                    "js_publish": lambda: js.publish("forkjs.b", b"child", timeout=0.5),
                    "js_publish_async": lambda: js.publish_async("forkjs.b", b"child"),
                    "js_stream": lambda: js.stream("FORK"),
                    "fetch": lambda: list(consumer.fetch(1, expires=0.5)),
                    "ack": lambda: held.ack(),
                    "next_msg": lambda: sub.next_msg(timeout=0.5),
                    "push_next_msg": lambda: push.next_msg(timeout=0.5),
                    "push_unsubscribe": lambda: push.unsubscribe(),
                    "pull_subscribe_fetch": lambda: pulled.fetch(1, timeout=0.5),
                    "unsubscribe": lambda: sub.unsubscribe(),
                    "drain": lambda: nc.drain(timeout=0.5),
                    "close": lambda: nc.close(),
                }
                out: dict[str, str] = {}
                for name, op in ops.items():
                    try:
                        op()
                        out[name] = "no error"
                    except errors.ForkedConnectionError as exc:
                        out[name] = f"ForkedConnectionError: {exc}"
                    except BaseException as exc:
                        out[name] = f"{type(exc).__name__}: {exc}"
                with nc:  # leaving a with block in the child is quiet
                    pass
                out["with_exit"] = "ok"
                os.write(w, json.dumps(out).encode())
                code = 0
            finally:
                os._exit(code)
        os.close(w)
        try:
            data = _read_all(r)
        finally:
            os.close(r)
        code = _wait_child(pid)
        stacks.seek(0)
        where = stacks.read()
        stacks.close()
        assert code == 0 and not where, f"the child (exit {code}) hung:\n{where}"
        out = json.loads(data)
        assert out.pop("with_exit") == "ok"
        for name, result in out.items():
            assert result.startswith("ForkedConnectionError: "), (name, result)
            assert f"in process {pid}" in result and "jsclient.connect() in the child" in result
            assert f"connected in process {os.getpid()}" in result

        # The parent's connection is as it was: its subscription still gets
        # messages, and the first is the parent's (nothing the child tried went out).
        nc.publish("fork.parent", b"parent")
        msg = sub.next_msg(timeout=5)
        assert (msg.subject, msg.data) == ("fork.parent", b"parent")
        nc.flush(timeout=5)
        with pytest.raises(errors.TimeoutError):
            sub.next_msg(timeout=0.2)
        held.ack_sync(timeout=5)  # the child's ack attempt sent nothing
        pushed.ack_sync(timeout=5)
        assert [m.data for m in pulled.fetch(1, timeout=5)] == [b"stored"]
        ack = js.publish("forkjs.c", b"parent")
        assert ack.seq == 2  # the child's js publishes stored nothing
        assert nc.stats["reconnects"] == 0 and nc.is_connected
        assert seen_errors == []
    finally:
        nc.close()


_EXIT_SCRIPT = textwrap.dedent(
    """
    import json, os, sys, threading
    import jsclient

    url = sys.argv[1]
    got = []
    second = threading.Event()

    def on_msg(m):
        got.append(m.data)
        m.ack()
        if m.data == b"2":
            second.set()

    with jsclient.connect(url) as nc:
        sub = nc.subscribe("exit.>")
        js = nc.jetstream()
        js.create_stream(name="EXIT", subjects=["exitjs"])
        js.publish("exitjs", b"1")
        c = js.create_consumer("EXIT", durable_name="d", ack_policy="explicit")
        for m in c.fetch(1, expires=2):   # a pull engine, with a finalizer
            m.ack()
        cc = c.consume(on_msg)             # a live consume in the parent
        pid = os.fork()
        if pid == 0:
            # Normal interpreter exit in the child: the with block's __exit__,
            # atexit hooks and finalizers all run here.
            sys.exit(0)
        _, status = os.waitpid(pid, 0)
        nc.publish("exit.after", b"parent")
        first = sub.next_msg(timeout=5)
        js.publish("exitjs", b"2")
        ok = second.wait(10)
        cc.stop()
        print(json.dumps({
            "child": os.waitstatus_to_exitcode(status),
            "first": first.data.decode(),
            "consume_got_2": ok,
            "reconnects": nc.stats["reconnects"],
            "connected": nc.is_connected,
        }))
    """
)


def test_child_exit_does_not_touch_parent_connection(nats_server: NatsServer) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _EXIT_SCRIPT, nats_server.url],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out == {
        "child": 0,
        "first": "parent",
        "consume_got_2": True,
        "reconnects": 0,
        "connected": True,
    }, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr


def _child_uses_parent(nc: jsclient.Client, q: Any) -> None:  # pragma: no cover - child
    try:
        nc.publish("mp.x", b"from child")
    except errors.ForkedConnectionError as exc:
        q.put(("forked", str(exc)))
    else:
        q.put(("no error", ""))


def _child_connects(url: str, q: Any) -> None:  # pragma: no cover - child
    with jsclient.connect(url) as own:
        ack = own.jetstream().publish("mpjs", b"child")
        q.put(("published", ack.seq))


def test_multiprocessing_fork_child(nats_server: NatsServer) -> None:
    ctx = multiprocessing.get_context("fork")
    nc = jsclient.connect(nats_server.url)
    try:
        js = nc.jetstream()
        js.create_stream(name="MP", subjects=["mpjs"])
        q = ctx.Queue()
        bad = ctx.Process(target=_child_uses_parent, args=(nc, q), name="fork-bad")
        good = ctx.Process(target=_child_connects, args=(nats_server.url, q), name="fork-good")
        bad.start()
        good.start()
        # The parent keeps publishing while its children run.
        for i in range(50):
            js.publish("mpjs", b"parent %d" % i)
        results = sorted([q.get(timeout=30), q.get(timeout=30)])
        bad.join(30)
        good.join(30)
        assert bad.exitcode == 0 and good.exitcode == 0
        assert results[0][0] == "forked" and "connect" in results[0][1]
        assert results[1][0] == "published"
        assert js.stream("MP").info().state.messages == 51
        assert nc.stats["reconnects"] == 0
    finally:
        nc.close()
