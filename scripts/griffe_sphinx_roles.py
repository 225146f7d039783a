"""Griffe extension for the API reference (mkdocs.yml): Sphinx roles as code.

jsclient's docstrings name other objects the Sphinx way (``:class:`Client```,
``:meth:`fetch```); mkdocstrings renders docstrings as Markdown, where the
role would show as text. This turns each role into inline code (the name
without a leading ``~``), so the pages read as the source does.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:class|meth|func|attr|mod|data|exc|obj|const):`~?([^`]+)`")


class SphinxRoles(griffe.Extension):
    """Rewrite ``:role:`name``` to ```name``` in every docstring griffe loads."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        """Called for every object griffe makes (module, class, function, attribute)."""
        if obj.docstring is not None:
            obj.docstring.value = _ROLE.sub(r"`\1`", obj.docstring.value)
