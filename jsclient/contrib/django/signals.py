"""Signals of the Django integration.

``publish_failed``: a message of :func:`~jsclient.contrib.django.publish_on_commit`
was not published after its transaction committed (the data is committed, the
message is not in the stream). Sent once per such message, from the thread that
committed, after the failure was logged. Keyword arguments: ``subject``,
``data`` (bytes), ``headers`` (dict or None), ``msg_id`` (str or None),
``exception``; ``sender`` is ``publish_on_commit``. Receivers can store the
message for a later retry (an outbox); an exception in a receiver is logged and
does not stop the other hooks of the commit.

```python
from django.dispatch import receiver
from jsclient.contrib.django.signals import publish_failed

@receiver(publish_failed)
def keep_for_retry(sender, subject, data, headers, msg_id, exception, **kwargs):
    Outbox.objects.create(subject=subject, data=data, msg_id=msg_id)
```
"""

from __future__ import annotations

from django.dispatch import Signal

publish_failed = Signal()
