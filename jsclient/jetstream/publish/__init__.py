"""Publishing: every way a message gets into a stream.

- ``engine.py``: the async-publish engine (pending set, window, ack timeouts,
  503 rule, the one disconnect rule) that ``js.publish_async``, the managed
  publisher and the Spark sink share; ``window.py``: its flow-control window;
- ``async_pub.py``: ``js.publish_async``, its futures on the engine;
- ``publisher.py`` (API), ``state.py`` (shared state), ``publish_runner.py``,
  ``settle.py`` (flights runner), ``flight.py``: the managed publisher
  (:class:`Publisher`: publish runner, flights runner, flights, retries);
- ``batch.py`` (atomic batch, ADR-50), ``fast.py`` (fast ingest), ``counters.py``
  (ADR-49), ``schedule.py`` (ADR-51), and ``features.py``, their methods on the
  context.

``calls.py``: ``js.publish`` (a request, retried on 503) and ``js.publish_async``
(its headers), which the context binds as its methods.
"""
