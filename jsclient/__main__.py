"""Command line: ``python -m jsclient demo``."""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Sequence

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
    ap.add_argument("-n", "--count", type=int, default=200_000, help="messages to send")
    ap.add_argument("--size", type=int, default=16, help="payload bytes")
    ap.add_argument("--server", help="use this server URL instead of an embedded one")
    args = ap.parse_args(argv)
    print(f"jsclient {jsclient.__version__} (impl={_impl.IMPL})")
    if args.server:
        return _demo_core(args.server, args.count, args.size)
    with NatsServer(jetstream=True) as srv:
        print(f"embedded nats-server at {srv.url}")
        return _demo_core(srv.url, args.count, args.size)


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


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    commands = {"demo": demo}
    if not args or args[0] not in commands:
        print("usage: python -m jsclient {demo} [options]", file=sys.stderr)
        return 2
    return commands[args[0]](args[1:])


if __name__ == "__main__":
    sys.exit(main())
