"""Command line: ``python -m jsclient demo`` and ``python -m jsclient bench``."""

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

    def __init__(self, label: str, total: int, width: int = 32) -> None:
        self.label = label
        self.total = max(1, total)
        self.width = width
        self.start = time.perf_counter()
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
        return _demo_all(args.server, args.count, args.size)
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
        for i in range(count):
            futures.append(js.publish_async(f"demo.orders.{i % 8}", payload))
            if i % 2048 == 0:
                bar.update(i)
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
        while not done.wait(0.1) and not ctx.closed:
            bar.update(received)
        cons_secs = bar.finish(received)
        ctx.stop()
        nc.flush()
        exactly_once = all(seen[i] == 1 for i in range(1, count + 1))
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
        for i in range(count):
            pub_nc.publish("demo.core", payload)
            if i % 4096 == 0:
                bar.update(i)
        pub_nc.flush(timeout=30)
        pub_secs = bar.finish(count)
        bar = Progress("receive", count)
        while not done.wait(0.1):
            bar.update(received)
        recv_secs = bar.finish(received)
        sub.unsubscribe()
    print(
        f"core pub/sub: {count:,} x {size} B published in {pub_secs:.2f}s "
        f"({count / pub_secs:,.0f} msg/s), all received in {recv_secs:.2f}s"
    )
    return 0 if received == count else 1


def bench(argv: Sequence[str]) -> int:
    """Measure jsclient against nats-py, side by side, and print one table."""
    ap = argparse.ArgumentParser(prog="python -m jsclient bench")
    ap.add_argument("--server", help="use this server URL instead of an embedded one")
    ap.add_argument("--quick", action="store_true", help="small message counts (< 1 minute)")
    ap.add_argument("--impl", choices=["c", "python"], help="jsclient implementation to use")
    ap.add_argument("--only", action="append", help="run only this workload (repeatable)")
    ap.add_argument("--repeat", type=int, default=1, help="repetitions per workload (median)")
    ap.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    ap.add_argument("--plot", metavar="FILE.png", help="bar chart of ratios (needs matplotlib)")
    ap.add_argument("--list", action="store_true", help="list the workloads and exit")
    ap.add_argument(
        "--reliability",
        action="store_true",
        help="run the reliability scenarios (kill -9, cluster failover, network faults, "
        "soak, thread stress, fuzzing) at full size and print their figures",
    )
    args = ap.parse_args(argv)
    if args.impl and args.impl != _impl.IMPL:
        # The implementation is chosen at import time: re-run with it selected.
        env = dict(os.environ, JSCLIENT_IMPL=args.impl)
        os.execve(sys.executable, [sys.executable, "-m", "jsclient", "bench", *argv], env)

    if args.reliability:
        return _reliability(args)

    import jsclient
    from jsclient import bench as b
    from jsclient.server import NatsServer

    every = b.workloads()
    if args.list:
        for w in every:
            print(f"{w.name:<28} {w.description}")
        return 0
    chosen = [w for w in every if not args.only or w.name in args.only]
    if not chosen:
        print(f"no workload named {args.only}; try --list", file=sys.stderr)
        return 2
    meta = {
        "jsclient": jsclient.__version__,
        "impl": _impl.IMPL,
        "nats_py": _dist_version("nats-py"),
        "python": platform.python_version(),
        "machine": f"{platform.machine()} {os.cpu_count()} cpu, {platform.system()}",
        "quick": args.quick,
    }
    print(
        f"jsclient {meta['jsclient']} (impl={meta['impl']}) vs nats-py {meta['nats_py']}, "
        f"Python {meta['python']}, {meta['machine']}"
    )
    bar = Progress("bench", len(chosen))

    def progress(label: str, done: int, total: int) -> None:
        bar.label = label[:26]
        bar.update(done, force=True)

    bar.label = "bench"
    if args.server:
        outcomes = b.run(
            args.server, chosen, quick=args.quick, repeat=args.repeat, progress=progress
        )
    else:
        with NatsServer(jetstream=True) as srv:
            meta["server"] = srv.info.get("version", "?")
            outcomes = b.run(
                srv.url, chosen, quick=args.quick, repeat=args.repeat, progress=progress
            )
    sys.stderr.write("\n")
    print(b.table(outcomes))
    if args.json:
        with open(args.json, "w") as f:
            f.write(b.to_json(outcomes, meta))
        print(f"wrote {args.json}")
    if args.plot:
        _plot(outcomes, args.plot)
    return 0


def _reliability(args: argparse.Namespace) -> int:
    import json

    import jsclient
    from jsclient.bench import reliability

    if args.list:
        for name, _ in reliability.scenarios():
            print(name)
        return 0
    print(
        f"jsclient {jsclient.__version__} (impl={_impl.IMPL}), Python "
        f"{platform.python_version()}, {platform.machine()} {os.cpu_count()} cpu: "
        f"reliability scenarios{' (quick)' if args.quick else ''}",
        flush=True,
    )
    results = reliability.run(quick=args.quick, only=args.only, out=lambda s: print(s, flush=True))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"impl": _impl.IMPL, "quick": args.quick, "results": results}, f, indent=1)
        print(f"wrote {args.json}")
    return 1 if any(r["problems"] for r in results) else 0


def _dist_version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "?"


def _plot(outcomes: Sequence[Any], path: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("--plot needs matplotlib: pip install matplotlib", file=sys.stderr)
        return
    names = [getattr(o, "name", "") for o in outcomes]
    ratios = [getattr(o, "ratio", 0.0) for o in outcomes]
    fig, ax = plt.subplots(figsize=(9, 0.45 * len(names) + 1.5))
    ax.barh(names, ratios, color="#3b7dd8")
    ax.axvline(1.0, color="grey", lw=1)
    ax.set_xlabel("jsclient / nats-py (msgs/s ratio)")
    ax.invert_yaxis()
    for i, r in enumerate(ratios):
        ax.text(r, i, f" {r:.1f}x", va="center")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"wrote {path}")


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    commands = {"demo": demo, "bench": bench}
    if not args or args[0] not in commands:
        print("usage: python -m jsclient {demo,bench} [options]", file=sys.stderr)
        return 2
    return commands[args[0]](args[1:])


if __name__ == "__main__":
    sys.exit(main())
