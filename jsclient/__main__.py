"""Command line: ``python -m jsclient demo``, ``python -m jsclient bench`` (from a
checkout), ``python -m jsclient --version``."""

from __future__ import annotations

import argparse
import os
import platform
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

from jsclient import _impl


class Progress:
    """A one-line text progress bar on stderr."""

    def __init__(self, label: str, total: int, width: int = 32, start: float | None = None) -> None:
        self.label = label
        self.total = max(1, total)
        self.width = width
        # When the clock started (perf_counter): now, or a moment given, such as
        # the first publish for the receive bar.
        self.start = time.perf_counter() if start is None else start
        self._last = 0.0

    def update(self, done: int, force: bool = False) -> None:
        now = time.perf_counter()
        if not force and now - self._last < 0.1:
            return
        self._last = now
        frac = min(1.0, done / self.total)
        filled = int(frac * self.width)
        bar = "#" * filled + "-" * (self.width - filled)
        rate = done / max(1e-9, now - self.start)
        sys.stderr.write(
            f"\r{self.label:<10} [{bar}] {done:>9,}/{self.total:,} {rate:>12,.0f} msg/s"
        )
        sys.stderr.flush()

    def finish(self, done: int) -> float:
        self.update(done, force=True)
        sys.stderr.write("\n")
        return time.perf_counter() - self.start


def demo(argv: Sequence[str]) -> int:
    import jsclient
    from jsclient.server import NatsServer

    ap = argparse.ArgumentParser(prog="python -m jsclient demo")
    ap.add_argument(
        "-n", "--count", type=int, help="messages to send (default 200,000; 20,000 with --spark)"
    )
    ap.add_argument("--size", type=int, default=16, help="payload bytes")
    ap.add_argument("--server", help="use this server URL instead of an embedded one")
    ap.add_argument(
        "--spark", action="store_true", help="a PySpark job instead (needs jsclient[spark], java)"
    )
    args = ap.parse_args(argv)
    if args.spark:
        try:
            import pyarrow  # noqa: F401
            import pyspark  # noqa: F401
        except ImportError as exc:
            print(f'demo --spark needs pip install "jsclient[spark]": {exc}', file=sys.stderr)
            return 2
        from jsclient.spark.demo import main as spark_demo

        return spark_demo(args.server, args.count or 20_000)
    args.count = args.count or 200_000
    print(f"jsclient {jsclient.__version__} (impl={_impl.IMPL})")
    if args.server:
        try:
            return _demo_all(args.server, args.count, args.size)
        except (jsclient.errors.NoServersError, jsclient.errors.AuthorizationError) as exc:
            print(f"demo: cannot connect to {args.server}: {exc}", file=sys.stderr)
            return 2
    with NatsServer(jetstream=True) as srv:
        print(f"embedded nats-server {srv.info.get('version', '')} at {srv.url}")
        return _demo_all(srv.url, args.count, args.size)


def _demo_all(url: str, count: int, size: int) -> int:
    rc = _demo_core(url, count, size)
    return rc or _demo_jetstream(url, count, size)


def _demo_jetstream(url: str, count: int, size: int) -> int:
    """The JetStream pipeline: stream, async publish with acks, consume + ack, verify."""
    import jsclient

    with jsclient.connect(url, name="jsclient-demo-js") as nc:
        js = nc.jetstream(publish_async_max_pending=4000)
        try:
            js.delete_stream("DEMO")
        except jsclient.errors.NotFoundError:
            pass
        js.create_stream(name="DEMO", subjects=["demo.orders.>"], storage="file")
        payload = b"o" * size
        bar = Progress("js publish", count)
        futures = []
        # (The loops below end with a plain statement and test inside a while
        # True: Ctrl+C then always closes the connection on 3.13+; see
        # tests/unit/test_interrupt_cover.py.)
        for i in range(count):
            if i % 2048 == 0:
                bar.update(i)
            futures.append(js.publish_async(f"demo.orders.{i % 8}", payload))
        js.publish_async_complete(timeout=120)
        pub_secs = bar.finish(count)
        failed = sum(1 for f in futures if f.exception() is not None)
        state = js.stream("DEMO").info().state
        print(
            f"jetstream publish: {count:,} acked in {pub_secs:.2f}s "
            f"({count / pub_secs:,.0f} msg/s), {failed} failed, stream holds {state.messages:,}"
        )

        consumer = js.create_consumer("DEMO", durable_name="demo", ack_policy="explicit")
        seen = bytearray(count + 1)
        done = threading.Event()
        received = 0

        def on_order(msg: jsclient.Msg) -> None:
            nonlocal received
            seen[msg.metadata.sequence.stream] += 1
            msg.ack()
            received += 1
            if received >= count:
                done.set()

        bar = Progress("js consume", count)
        ctx = consumer.consume(on_order, max_messages=1000)
        while True:
            if done.wait(0.1) or ctx.closed:
                break
            bar.update(received)
        cons_secs = bar.finish(received)
        ctx.stop()
        nc.flush()
        exactly_once = seen.count(1, 1) == count  # every sequence 1..count seen once
        info = consumer.info()
        deadline = time.monotonic() + 5  # the server moves the ack floor a moment later
        while True:
            if not info.num_ack_pending or time.monotonic() >= deadline:
                break
            time.sleep(0.05)
            info = consumer.info()
        print(
            f"jetstream consume: {received:,} consumed + acked in {cons_secs:.2f}s "
            f"({received / cons_secs:,.0f} msg/s); every sequence exactly once: {exactly_once}; "
            f"ack floor {info.ack_floor.stream_seq if info.ack_floor else 0:,}"
        )
        js.delete_stream("DEMO")
    return 0 if exactly_once and failed == 0 else 1


def _demo_core(url: str, count: int, size: int) -> int:
    import jsclient

    payload = b"x" * size
    received = 0
    done = threading.Event()

    def on_msg(_msg: jsclient.Msg) -> None:
        nonlocal received
        received += 1
        if received >= count:
            done.set()

    with jsclient.connect(url, name="jsclient-demo") as sub_nc, jsclient.connect(url) as pub_nc:
        sub = sub_nc.subscribe(
            "demo.core", cb=on_msg, pending_msgs_limit=count + 1, pending_bytes_limit=1 << 30
        )
        sub_nc.flush()
        bar = Progress("publish", count)
        first = bar.start  # the first publish: the receive time runs from here
        for i in range(count):
            if i % 4096 == 0:
                bar.update(i)
            pub_nc.publish("demo.core", payload)
        pub_nc.flush(timeout=30)
        pub_secs = bar.finish(count)
        bar = Progress("receive", count, start=first)
        while True:
            if done.wait(0.1):
                break
            bar.update(received)
        recv_secs = bar.finish(received)
        sub.unsubscribe()
    print(
        f"core pub/sub: {count:,} x {size} B published in {pub_secs:.2f}s "
        f"({count / pub_secs:,.0f} msg/s); all received {recv_secs:.2f}s after the "
        f"first publish ({received / recv_secs:,.0f} msg/s)"
    )
    return 0 if received == count else 1


_BENCH_MISSING = """\
The benchmark is not part of the installed package: it is tooling that lives
in the project's repository (the jsbench folder beside jsclient). From a
checkout of the repository, run it with

    python -m jsclient bench --help     (or: python -m jsbench --help)

after the README's setup command, which installs jsclient and the peers it
measures (nats-py; natsio on Python 3.13+)."""


def _load_bench() -> Any:
    """``jsbench.__main__`` from the checkout this jsclient belongs to, or None."""
    try:
        import jsbench.__main__ as cli
    except ImportError:
        # An editable install or a run from elsewhere: the checkout's root is
        # the folder that holds this package.
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        if not os.path.isfile(os.path.join(root, "jsbench", "__main__.py")):
            return None
        sys.path.insert(0, root)
        try:
            import jsbench.__main__ as cli
        except ImportError:
            return None
    return cli


def bench(argv: Sequence[str]) -> int:
    """Run the benchmark of a checkout (``jsbench``), or say where to get it."""
    cli = _load_bench()
    if cli is None:
        print(_BENCH_MISSING, file=sys.stderr)
        return 2
    rc: int = cli.main(list(argv))
    return rc


def _version() -> str:
    import jsclient

    return (
        f"jsclient {jsclient.__version__} (impl={_impl.IMPL}) on Python "
        f"{platform.python_version()} ({platform.python_implementation()})"
    )


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m jsclient",
        description="jsclient, a blocking NATS JetStream client: its demo and its benchmark.",
        epilog="Each command has its own help: python -m jsclient COMMAND --help",
    )
    ap.add_argument("--version", action="version", version=_version())
    cmds = ap.add_subparsers(dest="command", metavar="COMMAND")
    cmds.add_parser(
        "demo",
        help="publish and consume on an embedded nats-server (core and JetStream); "
        "--spark for a PySpark job",
        add_help=False,
    )
    cmds.add_parser(
        "bench",
        help="jsclient against nats-py, natsio and a raw socket (from a checkout)",
        add_help=False,
    )
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    commands = {"demo": demo, "bench": bench}
    if args and args[0] in commands:
        # The command parses the rest itself (its own --help included).
        return commands[args[0]](args[1:])
    ap = _parser()
    ap.parse_args(args)  # --help and --version exit 0 here; an unknown command exits 2
    ap.print_usage(sys.stderr)
    print("python -m jsclient: a command is needed (demo or bench)", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
