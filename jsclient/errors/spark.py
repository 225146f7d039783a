"""Errors of the PySpark data source (:mod:`jsclient.spark`).

Spark flattens exceptions from its Python workers into text, so each message
says what was being done, where, and how far it got.
"""

from __future__ import annotations

from jsclient.errors._base import Error, JetStreamError


class SparkOptionError(Error, ValueError):
    """A ``jetstream`` data source option is missing, unknown or has a bad value."""

    default_message = "jetstream: invalid data source option"


class SparkReadError(JetStreamError):
    """Reading a stream for Spark failed (the cause is chained and in the message)."""

    default_message = "jetstream: read failed"


class SparkWriteError(JetStreamError):
    """Publishing a Spark partition failed; ``published`` messages were acked before."""

    default_message = "jetstream: write failed"

    def __init__(self, message: str | None = None, published: int = 0, duplicates: int = 0) -> None:
        JetStreamError.__init__(self, message)
        self.published = published
        self.duplicates = duplicates


class DataLossError(JetStreamError):
    """A streaming query's next messages were removed (purge, limits) before it read them."""

    default_message = "jetstream: messages were lost before the query read them"
