"""Ordered reads of a stream for the stores: what KV and the object store read with.

- ``reader.py``: :class:`OrderedReader`, the one reader of an ordered consumer
  (a routed batch at a time, within a message and byte bound, sliced waits,
  its consumer deleted by the connection's deleter) the others build on;
- ``watcher.py``: :class:`Watcher`, a watch that lives through restarts
  (KV ``watch``, object store ``watch`` and ``list``);
- ``scan.py``: one bounded read of what a stream holds now (KV ``keys``,
  ``history``, ``purge_deletes``, ``counters.get_many``).

Object reads (``obj/_reader.py``) use the reader too.
"""
