"""Streams and consumers as resources: create, update, info, delete, direct get.

- ``stream.py``: :class:`Stream`, the handle ``js.stream(...)`` returns;
- ``consumer_admin.py``: pause, resume, unpin and reset (servers 2.11-2.14);
- ``direct.py``: direct gets (single and batched, ADR-31);
- ``names.py``: client-side checks of names and configs; ``api_level.py``:
  the server's JetStream API level.
"""
