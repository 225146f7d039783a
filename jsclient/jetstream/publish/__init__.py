"""Publishing: every way a message gets into a stream.

- ``async_pub.py``: ``js.publish_async`` and its window of pending acks;
- ``publisher.py``, ``settle.py``, ``flight.py``: the managed publisher
  (:class:`Publisher`: publish runner, flights runner, flights, retries);
- ``window.py``: the flow-control window the async paths share;
- ``batch.py`` (atomic batch, ADR-50), ``fast.py`` (fast ingest), ``counters.py``
  (ADR-49), ``schedule.py`` (ADR-51), and ``features.py``, their methods on the
  context.

``js.publish`` itself is a request on the context (``context.py``).
"""
