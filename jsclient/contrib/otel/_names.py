"""The instrumentation's names: the semantic conventions' attribute and metric names,
the operation types, and the context flags (see :mod:`jsclient.contrib.otel._telemetry`)."""

from __future__ import annotations

import contextvars
import logging

log = logging.getLogger("jsclient.contrib.otel")

SEMCONV_VERSION = "1.44.0"

# The conventions' names, spelled out: the semconv package keeps the messaging
# ones in its unstable ``_incubating`` modules, which move between releases
# (tests/integration/test_otel.py checks them against the installed package).
SYSTEM = "messaging.system"
DEST = "messaging.destination.name"
DEST_TEMPLATE = "messaging.destination.template"
DEST_TEMPORARY = "messaging.destination.temporary"
OP_TYPE = "messaging.operation.type"
OP_NAME = "messaging.operation.name"
BODY_SIZE = "messaging.message.body.size"
MSG_ID = "messaging.message.id"
GROUP = "messaging.consumer.group.name"
BATCH_COUNT = "messaging.batch.message_count"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"
ERROR_TYPE = "error.type"
SENT_MESSAGES = "messaging.client.sent.messages"
CONSUMED_MESSAGES = "messaging.client.consumed.messages"
OPERATION_DURATION = "messaging.client.operation.duration"
PROCESS_DURATION = "messaging.process.duration"
# NATS-specific (nats.net has the first two).
SUBJECT = "messaging.nats.message.subject"
REPLY_TO = "messaging.nats.message.reply_to"
STREAM = "messaging.nats.stream.name"
CONSUMER = "messaging.nats.consumer.name"
STREAM_SEQ = "messaging.nats.message.stream_sequence"
DELIVERED = "messaging.nats.message.delivery_count"
DUPLICATE = "messaging.nats.message.duplicate"

SEND = "send"
RECEIVE = "receive"
PROCESS = "process"
SETTLE = "settle"

NESTED: contextvars.ContextVar[bool] = contextvars.ContextVar("jsclient_otel_nested", default=False)
INTERNAL: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "jsclient_otel_internal", default=False
)

#: Subjects of the library's own traffic: JetStream API, acks, flow control, service discovery.
_INTERNAL_PREFIXES = ("$JS.", "$SRV.", "$SYS.")
