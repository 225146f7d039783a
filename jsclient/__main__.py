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
    """Measure jsclient against nats-py, natsio and a raw socket, and print the tables."""
    from jsclient.bench.workloads import CLIENTS

    ap = argparse.ArgumentParser(
        prog="python -m jsclient bench",
        description="Every workload for every client, each run in a fresh process against "
        "one shared server; medians of alternating rounds.",
    )
    ap.add_argument("--server", help="use this server URL instead of an embedded one")
    ap.add_argument("--quick", action="store_true", help="small message counts, one round")
    ap.add_argument("--impl", choices=["c", "python"], help="jsclient implementation to use")
    ap.add_argument(
        "--only", action="append", help="run only this workload (repeatable; globs such as 'js-*')"
    )
    ap.add_argument(
        "--repeat", type=int, help="alternating rounds, medians (default 3; 1 with --quick)"
    )
    ap.add_argument(
        "--clients",
        default=",".join(CLIENTS),
        help=f"comma-separated subset of {','.join(CLIENTS)} (default: all that run here)",
    )
    ap.add_argument("--timeout", type=float, help="seconds per run (default 600; 180 quick)")
    ap.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    ap.add_argument("--plot", metavar="FILE.png", help="bar chart of the ratios (needs matplotlib)")
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
    import fnmatch

    import jsclient
    from jsclient import bench as b
    from jsclient.bench import interp, raw
    from jsclient.server import NatsServer

    every = b.workloads()
    if args.list:
        for w in every:
            runs = ", ".join(c for c in CLIENTS if c in w.fns)
            print(f"{w.name:<24} {w.description} [{runs}]")
        return 0
    clients = [c.strip() for c in args.clients.split(",") if c.strip()]
    unknown = [c for c in clients if c not in CLIENTS]
    if unknown or "jsclient" not in clients:
        print(f"--clients: choose from {', '.join(CLIENTS)}, jsclient included", file=sys.stderr)
        return 2
    chosen = [
        w for w in every if not args.only or any(fnmatch.fnmatchcase(w.name, p) for p in args.only)
    ]
    if not chosen:
        print(f"no workload matches {args.only}; try --list", file=sys.stderr)
        return 2
    repeat = args.repeat if args.repeat is not None else (1 if args.quick else 3)
    if repeat < 1:
        print("--repeat must be at least 1", file=sys.stderr)
        return 2

    info = interp.interpreter_info()
    _natsio_ok, natsio_version = interp.natsio_status()
    meta: dict[str, Any] = {
        "interpreter": info,
        "jsclient": jsclient.__version__,
        "impl": _impl.IMPL,
        "nats_py": interp.dist_version("nats-py"),
        "natsio": natsio_version,
        "quick": args.quick,
        "repeat": repeat,
        "clients": clients,
    }
    for line in interp.describe_interpreter(info):
        print(line)

    def run_all(url: str, server: str, server_pid: int | None = None) -> list[Any]:
        meta["server"] = server
        meta["server_url"] = url
        print(
            f"jsclient {meta['jsclient']} (impl={meta['impl']}), nats-py {meta['nats_py']}, "
            f"natsio {meta['natsio']}, nats-server {server}"
        )
        print(
            f"method: every (workload, client, round) in a fresh process; {repeat} alternating "
            f"round{'s' if repeat > 1 else ''}, medians; {'quick' if args.quick else 'full'} counts"
        )

        def progress(label: str, done: int, total: int) -> None:
            sys.stderr.write(f"\r[{done:>3}/{total}] {label:<60}")
            sys.stderr.flush()

        try:
            return b.run(
                url,
                chosen,
                quick=args.quick,
                repeat=repeat,
                clients=clients,
                impl=_impl.IMPL,
                timeout=args.timeout,
                progress=progress,
                server_pid=server_pid,
            )
        finally:
            sys.stderr.write("\n")

    if args.server:
        outcomes = run_all(args.server, raw.server_version(args.server) or "?")
    else:
        with NatsServer(jetstream=True) as srv:
            outcomes = run_all(srv.url, f"{srv.info.get('version', '?')} (embedded)", srv.pid)
    print()
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


def _plot(outcomes: Sequence[Any], path: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("--plot needs matplotlib: pip install matplotlib", file=sys.stderr)
        return
    from jsclient.bench.workloads import PEERS

    names = [o.name for o in outcomes]
    fig, ax = plt.subplots(figsize=(10, 0.6 * len(names) + 1.5))
    height = 0.8 / len(PEERS)
    for k, peer in enumerate(PEERS):
        ratios = [o.ratio(peer) or 0.0 for o in outcomes]
        ys = [i + (k - 1) * height for i in range(len(names))]
        ax.barh(ys, ratios, height=height, label=f"jsclient / {peer}")
        for y, r in zip(ys, ratios, strict=True):
            if r:
                ax.text(r, y, f" {r:.2f}x", va="center", fontsize=7)
    ax.set_yticks(range(len(names)), names)
    ax.axvline(1.0, color="grey", lw=1)
    ax.set_xlabel("jsclient msgs/s ratio (medians, same run)")
    ax.invert_yaxis()
    ax.legend(loc="lower right")
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
