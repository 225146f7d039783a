"""The docs' ``<!-- lane: django -->`` examples, with Django configured (issue 37).

The rules are in ``tests/_docexamples.py``. The blocks register consumers and
endpoints as an app would; the registries are swapped for empty ones while
they run, so that nothing leaks into the other Django tests.
"""

from __future__ import annotations

import pytest
from _docexamples import Counter, page_examples, run_page

from jsclient.contrib.django import consumers, endpoints
from jsclient.server import NatsServer

PAGES = page_examples("django")


@pytest.mark.parametrize("page", sorted(PAGES))
def test_django_page_examples_run(
    page: str, django_nats: NatsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(consumers, "_registry", {})
    monkeypatch.setattr(endpoints, "_registry", {})
    ran = run_page(PAGES[page], {"__name__": "__docs__", "url": django_nats.url})
    Counter.add("django", ran)
