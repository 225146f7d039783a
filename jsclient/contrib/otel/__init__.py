"""OpenTelemetry for jsclient (extra ``jsclient[otel]``): traces, metrics, W3C trace context.

::

    from jsclient.contrib.otel import JsclientInstrumentor
    JsclientInstrumentor().instrument(tracer_provider=None, meter_provider=None)
    JsclientInstrumentor().uninstrument()

Also registered as the ``opentelemetry_instrumentor`` entry point ``jsclient``,
so ``opentelemetry-instrument python manage.py jetstream_worker`` enables it.
``instrument()`` wraps public methods of the client's classes and
``uninstrument()`` restores them: an uninstrumented process runs jsclient's
own code, unchanged. What is traced, and the names: docs/otel.md.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from opentelemetry.instrumentation.instrumentor import (  # type: ignore[attr-defined]
    BaseInstrumentor,
)

from jsclient.contrib.otel import _patches
from jsclient.contrib.otel import _telemetry as _tm
from jsclient.contrib.otel._telemetry import SEMCONV_VERSION

__all__ = ["SEMCONV_VERSION", "JsclientInstrumentor"]

_INSTRUMENTS = ("jsclient",)


class JsclientInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """Instruments every jsclient connection of the process (a singleton, as all instrumentors)."""

    def instrumentation_dependencies(self) -> Collection[str]:
        return _INSTRUMENTS

    def _instrument(self, **kwargs: Any) -> None:
        _tm.ACTIVE = _tm.Telemetry(kwargs.get("tracer_provider"), kwargs.get("meter_provider"))
        try:
            _patches.patch_all()
        except BaseException:
            _patches.unpatch_all()
            _tm.ACTIVE = None
            raise

    def _uninstrument(self, **kwargs: Any) -> None:
        _tm.ACTIVE = None
        _patches.unpatch_all()
