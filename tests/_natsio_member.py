"""A natsio (asyncio, Python 3.13+) peer for tests/integration/test_pcgroups_interop.py.

Run by a Python 3.13 interpreter that has ``natsio``, ``natsio-pcgroups`` and
``natsio-kvcodec``; never imported by the suite. Commands (argv[1]):

- ``elastic-member URL STREAM GROUP MEMBER OUT ACK_WAIT [MAX_ACK_PENDING]``: consume as
  MEMBER of the elastic group, appending ``subject<TAB>data`` per message to OUT
  and acking it; prints ``started`` then runs until stdin closes.
- ``create-elastic URL STREAM GROUP MAX FILTER WILDCARDS``: create the group
  (WILDCARDS: comma-separated, may be empty).
- ``add-members URL STREAM GROUP M1,M2``.
- ``get-elastic URL STREAM GROUP``: the config as natsio reads it.
- ``kv-put URL BUCKET JSON``: put ``{key: value}`` through a path+base64 key
  codec and a base64 value codec (the bucket made when missing).
- ``kv-get URL BUCKET JSON``: get the keys of ``[key, ...]`` through the same
  codecs; also every key and the keys under ``/app/*``.

Each command but ``elastic-member`` prints one JSON line.
"""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import timedelta
from typing import Any


async def _connect(url: str) -> Any:
    import natsio

    return await natsio.connect(url)


def _codecs() -> tuple[Any, Any]:
    from natsio.kvcodec import Base64KeyCodec, Base64ValueCodec, ChainKeyCodec, PathKeyCodec

    return ChainKeyCodec(PathKeyCodec(), Base64KeyCodec()), Base64ValueCodec()


async def _member(
    url: str, stream: str, group: str, member: str, out: str, ack_wait: str, pending: str = ""
) -> None:
    from natsio.jetstream import ConsumerConfig
    from natsio.pcgroups import elastic_consume

    nc = await _connect(url)
    js = nc.jetstream()
    with open(out, "a", encoding="utf-8") as f:

        async def handle(msg: Any) -> None:
            f.write(f"{msg.subject}\t{msg.data.decode()}\n")
            f.flush()
            await msg.ack()

        cfg = ConsumerConfig(ack_wait=timedelta(seconds=float(ack_wait)))
        if pending:
            cfg.max_ack_pending = int(pending)
        ctx = await elastic_consume(js, stream, group, member, handle, cfg)
        print("started", flush=True)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, sys.stdin.read)  # until stdin closes
        await ctx.stop()
    await nc.close()


async def _run(cmd: str, args: list[str]) -> Any:
    if cmd == "elastic-member":
        await _member(*args)
        return None
    from natsio.kv import KeyValueConfig
    from natsio.pcgroups import (
        PartitioningFilter,
        add_members,
        create_elastic,
        get_elastic_config,
    )

    nc = await _connect(args[0])
    js = nc.jetstream()
    try:
        if cmd == "create-elastic":
            stream, group, n, flt, wcs = args[1:]
            pf = PartitioningFilter(
                filter=flt, partitioning_wildcards=[int(w) for w in wcs.split(",") if w]
            )
            cfg = await create_elastic(js, stream, group, int(n), [pf])
            return cfg.to_wire()
        if cmd == "add-members":
            return await add_members(js, args[1], args[2], args[3].split(","))
        if cmd == "get-elastic":
            return (await get_elastic_config(js, args[1], args[2])).to_wire()
        key_codec, value_codec = _codecs()
        if cmd == "kv-put":
            try:
                kv = await js.key_value(args[1], key_codec=key_codec, value_codec=value_codec)
            except Exception:
                kv = await js.create_key_value(
                    KeyValueConfig(bucket=args[1]), key_codec=key_codec, value_codec=value_codec
                )
            for k, v in json.loads(args[2]).items():
                await kv.put(k, v.encode())
            return "ok"
        if cmd == "kv-get":
            kv = await js.key_value(args[1], key_codec=key_codec, value_codec=value_codec)
            got = {k: (await kv.get(k)).value.decode() for k in json.loads(args[2])}
            return {"values": got, "keys": sorted(await kv.keys())}
        raise SystemExit(f"unknown command {cmd!r}")
    finally:
        await nc.close()


def main() -> None:
    """Run the command argv names; print its result as one JSON line."""
    result = asyncio.run(_run(sys.argv[1], sys.argv[2:]))
    if result is not None:
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
