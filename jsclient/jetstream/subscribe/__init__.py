"""The legacy subscriptions (ADR-13, ADR-15): ``js.pull_subscribe`` and ``js.subscribe``.

- ``workflow.py``: the ADR-15 subscribe workflow both share (find or create
  the consumer, check it against the options);
- ``pull.py``: :class:`PullSubscription` and ``psub.fetch`` (ADR-13);
- ``push.py`` and ``push_setup.py``: push subscriptions with automatic status
  management (heartbeats, flow control, ordered push).
"""
