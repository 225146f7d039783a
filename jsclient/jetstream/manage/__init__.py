"""Streams and consumers as resources: create, update, info, delete, direct get.

- ``stream.py``: :class:`Stream`, the handle ``js.stream(...)`` returns;
- ``stream_admin.py``: the context's stream calls (``js.create_stream`` ...);
- ``consumer_admin.py``: the context's consumer calls: create, update, delete,
  and pause, resume, unpin and reset (servers 2.11-2.14);
- ``direct.py``: direct gets (single and batched, ADR-31);
- ``names.py``: client-side checks of names and configs; ``api_level.py``:
  the server's JetStream API level.
"""
