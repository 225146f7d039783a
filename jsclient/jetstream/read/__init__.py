"""Ordered reads of a stream for the stores: what KV and the object store read with.

- ``watcher.py``: :class:`Watcher`, a watch that lives through restarts
  (KV ``watch``, object store ``watch``);
- ``scan.py``: one bounded read of what a stream holds now (KV ``keys``,
  ``history``, object store ``list``).
"""
