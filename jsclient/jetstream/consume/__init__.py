"""Consuming (ADR-37, ADR-13 internals): the consumer handle and the pull engine.

- ``consumer.py``: :class:`Consumer`, the handle ``js.consumer(...)`` returns;
- ``pull.py``: its ``fetch``/``fetch_bytes``/``fetch_no_wait``/``next``/``consume``/``messages``;
- ``engine.py``: the one pull engine (tagged pulls, pending accounting, statuses,
  heartbeats) every pull path runs on;
- ``fetch.py``: one pull's messages as an iterator (``fetch``);
- ``feed.py`` and ``contexts.py``: continuous pulling and the running ``consume()``
  and ``messages()`` handles;
- ``ordered.py``: the ordered consumer (ADR-17), which KV and object store
  readers build on; ``ordered_source.py``: its order-checking readers;
- ``deleter.py``: the connection's one thread deleting consumers off callers' paths;
- ``priority.py``: priority groups (ADR-42); ``keepalive.py``: ``+WPI`` keep-alive.
"""
