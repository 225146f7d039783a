"""The benchmark's command line: ``python -m jsbench`` (``python -m jsclient bench``
in a checkout runs the same).

Measures jsclient against nats-py, natsio, a raw socket and the C client
library libnats (natsc) and prints the tables; ``--reliability`` runs the
reliability scenarios at full size instead.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from collections.abc import Sequence
from typing import Any

from jsbench._child import ROOT
from jsbench.workloads import CLIENTS, NATSC
from jsclient import _impl


def main(argv: Sequence[str] | None = None) -> int:
    """Measure jsclient against nats-py, natsio, a raw socket and natsc; print the tables."""
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
    ap.add_argument(
        "--otel",
        default="none",
        metavar="MODES",
        help="comma-separated modes among none,sampled-off,sdk (default none): every row "
        "runs once per mode, in order; the instrumented runs (jsclient.contrib.otel, "
        "jsbench/otel.py) are jsclient's alone, named {row}+otel-{mode}",
    )
    ap.add_argument("--list", action="store_true", help="list the workloads and exit")
    ap.add_argument(
        "--reliability",
        action="store_true",
        help="run the reliability scenarios (kill -9, cluster failover, network faults, "
        "soak, thread stress, fuzzing) at full size and print their figures",
    )
    ap.add_argument(
        "--gil-scaling",
        action="store_true",
        help="on a free-threaded build: the thread-scaling rows (jsclient, 1/2/4 threads), "
        "each with PYTHON_GIL=1 and PYTHON_GIL=0 side by side (jsbench/scaling.py)",
    )
    argv = list(sys.argv[1:] if argv is None else argv)
    args = ap.parse_args(argv)
    if args.impl and args.impl != _impl.IMPL:
        # The implementation is chosen at import time: re-run with it selected.
        env = dict(os.environ, JSCLIENT_IMPL=args.impl)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, env.get("PYTHONPATH")]))
        os.execve(sys.executable, [sys.executable, "-m", "jsbench", *argv], env)

    if args.reliability:
        return _reliability(args)
    if args.gil_scaling:
        return _gil_scaling(args)
    import fnmatch

    import jsbench as b
    import jsclient
    from jsbench import interp, raw, report
    from jsclient.server import NatsServer

    every = b.workloads()
    if args.list:
        for w in every:
            runs = ", ".join(c for c in CLIENTS if c in w.fns)
            print(f"{w.name:<24} {w.description} [{runs}]")
        return 0
    from jsbench import otel as bench_otel

    try:
        otel_modes = bench_otel.parse(args.otel)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    if otel_modes != [bench_otel.NONE]:
        why = bench_otel.available()
        if why is not None:
            print(f"--otel: {why}", file=sys.stderr)
            return 2
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

    natsc_ok, natsc_version = _natsc_status(clients)
    run_clients = [c for c in clients if natsc_ok or c != NATSC]
    info = interp.interpreter_info()
    _natsio_ok, natsio_version = interp.natsio_status()
    meta: dict[str, Any] = {
        "interpreter": info,
        "jsclient": jsclient.__version__,
        "impl": _impl.IMPL,
        "nats_py": interp.dist_version("nats-py"),
        # orbit.py's batched direct get for nats-py (the direct-get-batch row)
        "jetstreamext": interp.dist_version("jetstreamext"),
        "natsio": natsio_version,
        "natsc": natsc_version,
        "quick": args.quick,
        "repeat": repeat,
        "clients": clients,
        "otel": otel_modes,
    }
    for line in interp.describe_interpreter(info):
        print(line)

    def run_all(url: str, server: str, server_pid: int | None = None) -> list[Any]:
        meta["server"] = server
        meta["server_url"] = url
        print(
            f"jsclient {meta['jsclient']} (impl={meta['impl']}), nats-py {meta['nats_py']} "
            f"(jetstreamext {meta['jetstreamext'] or 'not installed'}), "
            f"natsio {meta['natsio']}, natsc {natsc_version or 'not selected'}, "
            f"nats-server {server}"
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
                clients=run_clients,
                impl=_impl.IMPL,
                timeout=args.timeout,
                progress=progress,
                server_pid=server_pid,
                otel=otel_modes,
            )
        finally:
            sys.stderr.write("\n")

    if args.server:
        outcomes = run_all(args.server, raw.server_version(args.server) or "?")
    else:
        with NatsServer(jetstream=True) as srv:
            outcomes = run_all(srv.url, f"{srv.info.get('version', '?')} (embedded)", srv.pid)
    if not natsc_ok and natsc_version:
        rows = [w.name for w in chosen if NATSC in w.fns]
        outcomes = report.mark_unavailable(outcomes, NATSC, natsc_version, rows)
    print()
    print(b.table(outcomes))
    if args.json:
        with open(args.json, "w") as f:
            f.write(b.to_json(outcomes, meta))
        print(f"wrote {args.json}")
    if args.plot:
        _plot(outcomes, args.plot)
    return 0


def _natsc_status(clients: Sequence[str]) -> tuple[bool, str | None]:
    """Whether the natsc peer runs here: (True, its version), (False, why), or
    (False, None) when it was not selected. Its program is built now, once."""
    if NATSC not in clients:
        return False, None
    from jsbench import natsc

    ok, what = natsc.available()
    if not ok:
        print(f"natsc: {what}", file=sys.stderr)
    return ok, what


def _reliability(args: argparse.Namespace) -> int:
    import json

    import jsclient
    from jsbench import reliability

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


def _gil_scaling(args: argparse.Namespace) -> int:
    import fnmatch

    import jsclient
    from jsbench import interp, scaling
    from jsclient.server import NatsServer

    rows = scaling.scaling_workloads()
    if args.list:
        for w in rows:
            print(f"{w.name:<16} {w.description}")
        return 0
    why = scaling.unavailable()
    if why is not None:
        print(why, file=sys.stderr)
        return 2
    if args.only:
        rows = [w for w in rows if any(fnmatch.fnmatchcase(w.name, p) for p in args.only)]
        if not rows:
            print(f"no scaling row matches {args.only}; try --gil-scaling --list", file=sys.stderr)
            return 2
    repeat = args.repeat if args.repeat is not None else (1 if args.quick else 3)
    info = interp.interpreter_info()
    for line in interp.describe_interpreter(info):
        print(line)
    print(
        f"jsclient {jsclient.__version__} (impl={_impl.IMPL}); thread scaling, "
        f"PYTHON_GIL=1 and PYTHON_GIL=0 alternating, {repeat} round(s), medians, "
        f"{'quick' if args.quick else 'full'} counts; {os.cpu_count()} cpu"
    )

    def progress(label: str, done: int, total: int) -> None:
        sys.stderr.write(f"\r[{done:>3}/{total}] {label:<60}")
        sys.stderr.flush()

    timeout = args.timeout or (180.0 if args.quick else 600.0)
    with NatsServer(jetstream=True) as srv:
        try:
            out = scaling.run(
                srv.url, rows, quick=args.quick, repeat=repeat, timeout=timeout, progress=progress
            )
        finally:
            sys.stderr.write("\n")
    print()
    print(scaling.table(out))
    if args.json:
        with open(args.json, "w") as f:
            f.write(scaling.to_json(out, {"interpreter": info, "repeat": repeat}))
        print(f"wrote {args.json}")
    return 0


def _plot(outcomes: Sequence[Any], path: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("--plot needs matplotlib: pip install matplotlib", file=sys.stderr)
        return
    from jsbench.workloads import PEERS

    names = [o.name for o in outcomes]
    fig, ax = plt.subplots(figsize=(10, 0.6 * len(names) + 1.5))
    height = 0.8 / len(PEERS)
    for k, peer in enumerate(PEERS):
        ratios = [o.ratio(peer) or 0.0 for o in outcomes]
        ys = [i + (k - (len(PEERS) - 1) / 2) * height for i in range(len(names))]
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


if __name__ == "__main__":
    sys.exit(main())
