"""A service (ADR-32): endpoints, groups, discovery and statistics.

Discovery (``<prefix>.PING|INFO|STATS``, ``.<name>``, ``.<name>.<id>``) is
answered from three plain subscriptions (``<prefix>.*``, ``<prefix>.*.<name>``,
``<prefix>.*.<name>.<id>``; the verb is the token after the prefix), each
with its own callback dispatcher thread: discovery is answered while every
handler thread is busy. Endpoints have handler threads of their own (see
:mod:`jsclient.micro.endpoint`).

``stop()`` drains the endpoints' subscriptions, lets the handler threads
answer what was queued, then drains discovery. The service also registers
with the connection's drain, so ``nc.drain()`` waits for in-flight handlers
before it closes, and it counts as stopped once the connection closed.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from types import EllipsisType
from typing import TYPE_CHECKING, Any

from jsclient import errors
from jsclient._threads import log
from jsclient.micro._types import (
    DEFAULT_API_PREFIX,
    DEFAULT_QUEUE_GROUP,
    INFO_RESPONSE_TYPE,
    PING_RESPONSE_TYPE,
    STATS_RESPONSE_TYPE,
    EndpointStats,
    PingResponse,
    ServiceConfigError,
    ServiceInfo,
    ServiceStats,
    check_endpoint_subject,
    check_handler,
    check_metadata,
    check_name,
    check_threads,
    check_version,
)
from jsclient.micro.endpoint import Endpoint, Handler

if TYPE_CHECKING:
    from jsclient._core import Core
    from jsclient.msg import Msg

__all__ = ["Group", "Service", "add_service"]

QueueGroupArg = str | None | EllipsisType
StatsHandler = Callable[[EndpointStats], Any]

_id_lock = threading.Lock()
_nuid: Any = None


def _new_id() -> str:
    global _nuid
    with _id_lock:  # NUID is not thread-safe
        if _nuid is None:
            from nats.nuid import NUID

            _nuid = NUID()
        return str(_nuid.next().decode())


def _queue_arg(queue_group: QueueGroupArg, inherited: str | None) -> str | None:
    """``...`` inherits; None means no queue group (a plain subscription)."""
    if queue_group is ...:
        return inherited
    if queue_group is None:
        return None
    return check_endpoint_subject(queue_group, "queue group")


class _Adder:
    """``add_endpoint`` / ``add_group`` shared by a service and its groups."""

    _service: Service
    _prefix: str
    _queue_group: str | None

    def add_endpoint(
        self,
        name: str,
        handler: Handler,
        *,
        subject: str | None = None,
        queue_group: QueueGroupArg = ...,
        metadata: Mapping[str, str] | None = None,
        threads: int | None = None,
    ) -> Endpoint:
        """Serve ``handler`` on ``subject`` (default: the name) under this prefix.

        ``handler(request)`` runs on the endpoint's handler threads
        (``jsclient-svc-<service>-<endpoint>-<i>``, ``threads`` of them), never
        on the socket reader; a handler that raises answers 500 and the thread
        goes on.

        Returns once the subscription reached the server. ``queue_group``:
        ``...`` inherits, None subscribes without one. ``threads``: None is
        the service's.
        """
        check_name(name, "endpoint name")
        check_handler(handler)
        subj = check_endpoint_subject(name if subject is None else subject, "endpoint subject")
        if self._prefix:
            subj = f"{self._prefix}.{subj}"
        svc = self._service
        return svc._add(
            name,
            subj,
            _queue_arg(queue_group, self._queue_group),
            check_metadata(metadata, "endpoint metadata"),
            handler,
            svc._threads if threads is None else check_threads(threads),
        )

    def add_group(self, name: str, queue_group: QueueGroupArg = ...) -> Group:
        """A group: its endpoints' subjects start with ``<name>.``."""
        if name:
            check_endpoint_subject(name, "group name")
            if ">" in name:
                raise ServiceConfigError(f"nats: invalid group name {name!r}: no '>' in a group")
        prefix = ".".join(p for p in (self._prefix, name) if p)
        return Group(self._service, prefix, _queue_arg(queue_group, self._queue_group))


class Group(_Adder):
    """A subject prefix (and default queue group) for endpoints; made by ``add_group``."""

    def __init__(self, service: Service, prefix: str, queue_group: str | None) -> None:
        self._service = service
        self._prefix = prefix
        self._queue_group = queue_group

    def __repr__(self) -> str:
        return f"<Group prefix={self._prefix!r} queue={self._queue_group!r}>"

    @property
    def prefix(self) -> str:
        """The subject prefix of this group's endpoints (``v1`` for ``v1.<endpoint>``)."""
        return self._prefix

    @property
    def queue_group(self) -> str | None:
        """The queue group of this group's endpoints, or None for plain subscriptions."""
        return self._queue_group


class Service(_Adder):
    """A running service; made by ``nc.add_service(...)``, a context manager (stops on exit)."""

    def __init__(
        self,
        nc: Core,
        name: str,
        version: str,
        *,
        description: str | None = None,
        metadata: Mapping[str, str] | None = None,
        queue_group: str | None = DEFAULT_QUEUE_GROUP,
        stats_handler: StatsHandler | None = None,
        threads: int = 1,
        api_prefix: str = DEFAULT_API_PREFIX,
    ) -> None:
        self._name = check_name(name)
        self._version = check_version(version)
        if description is not None and not isinstance(description, str):
            raise TypeError("nats: description must be a str")
        self._description = description or ""
        self._metadata = check_metadata(metadata)
        self._queue_group = (
            None if queue_group is None else check_endpoint_subject(queue_group, "queue group")
        )
        if stats_handler is not None and not callable(stats_handler):
            raise TypeError("nats: stats_handler must be callable")
        self._stats_handler = stats_handler
        self._threads = check_threads(threads)
        self._api_prefix = check_endpoint_subject(api_prefix, "api prefix")
        self._nc = nc
        self._service = self
        self._prefix = ""
        self._id = _new_id()
        self._lock = threading.Lock()  # the endpoint list and the state; never held across a call
        self._endpoints: list[Endpoint] = []
        self._stopped = False
        self._started = datetime.now(UTC)
        self._ping = json.dumps(
            PingResponse(PING_RESPONSE_TYPE, name, self._id, version, self.metadata).to_dict()
        ).encode()
        p = self._api_prefix
        self._discovery: list[Any] = []
        try:
            for s in (f"{p}.*", f"{p}.*.{name}", f"{p}.*.{name}.{self._id}"):
                self._discovery.append(nc.subscribe(s, cb=self._on_discovery))
            nc.flush()
        except BaseException:
            for sub in self._discovery:  # no half-made service left answering
                try:
                    sub.unsubscribe()
                except errors.Error:
                    pass
            raise
        nc._drainables.add(self)
        nc._add_listener(self._on_event)

    def __repr__(self) -> str:
        return f"<Service name={self._name!r} id={self._id!r} version={self._version!r}>"

    def __enter__(self) -> Service:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- identity -------------------------------------------------------------

    @property
    def id(self) -> str:
        """This instance's id (a NUID), as discovery reports it."""
        return self._id

    @property
    def name(self) -> str:
        """The service's name."""
        return self._name

    @property
    def version(self) -> str:
        """The service's version (semantic versioning)."""
        return self._version

    @property
    def description(self) -> str:
        """The service's description (empty when none was given)."""
        return self._description

    @property
    def metadata(self) -> dict[str, str]:
        """A copy: metadata is fixed once set (ADR-32)."""
        return dict(self._metadata)

    @property
    def api_prefix(self) -> str:
        """The prefix of the discovery subjects (``$SRV``)."""
        return self._api_prefix

    @property
    def endpoints(self) -> list[Endpoint]:
        """A copy of the list of the service's endpoints."""
        with self._lock:
            return list(self._endpoints)

    @property
    def stopped(self) -> bool:
        """True once ``stop()`` ran."""
        return self._stopped

    # -- endpoints ------------------------------------------------------------

    def _add(
        self,
        name: str,
        subject: str,
        queue_group: str | None,
        metadata: dict[str, str],
        handler: Handler,
        threads: int,
    ) -> Endpoint:
        if self._stopped:
            raise errors.Error("nats: service stopped")
        nc = self._nc
        nc._watch_sub(subject)  # a refusal of its SUB comes before the flush's PONG
        try:
            ep = Endpoint(nc, self._name, name, subject, queue_group, metadata, handler, threads)
        except BaseException:
            nc._sub_refusal(subject)
            raise
        with self._lock:
            # Read under the lock stop() sets it under: either stop() copies the
            # list with this endpoint in it (and drains it), or it is seen here.
            late = self._stopped
            if not late:
                self._endpoints.append(ep)
        if late:
            nc._sub_refusal(subject)
            self._drop(ep)
            raise errors.Error("nats: service stopped")
        try:
            nc.flush()
        finally:
            refused = nc._sub_refusal(subject)
        if refused is not None:
            # The server will not deliver its requests: no endpoint that looks
            # healthy while requesters get no responders (nats.go's rule).
            with self._lock:
                if ep in self._endpoints:
                    self._endpoints.remove(ep)
            self._drop(ep)
            raise refused
        return ep

    @staticmethod
    def _drop(ep: Endpoint) -> None:
        """Unsubscribe an endpoint and let its handler threads end."""
        ep._drain(time.monotonic() + 5.0)
        ep._join(time.monotonic() + 5.0)

    # -- info and statistics ----------------------------------------------------

    def info(self) -> ServiceInfo:
        """The service's :class:`ServiceInfo`, as ``$SRV.INFO`` answers it."""
        return ServiceInfo(
            INFO_RESPONSE_TYPE,
            self._name,
            self._id,
            self._version,
            self.metadata,
            self._description,
            [ep.info() for ep in self.endpoints],
        )

    def stats(self) -> ServiceStats:
        """Statistics of every endpoint; ``data`` from the stats handler, if any."""
        out = []
        for ep in self.endpoints:
            es = ep.stats()
            if self._stats_handler is not None:
                es = self._with_data(es)
            out.append(es)
        return ServiceStats(
            STATS_RESPONSE_TYPE,
            self._name,
            self._id,
            self._version,
            self._started,
            self.metadata,
            out,
        )

    def _with_data(self, es: EndpointStats) -> EndpointStats:
        assert self._stats_handler is not None
        try:
            data = self._stats_handler(es)
            json.dumps(data)
        except BaseException:  # user code: the stats still go out, without data
            log.exception("jsclient: stats_handler of service %r failed", self._name)
            return es
        return EndpointStats(
            es.name,
            es.subject,
            es.queue_group,
            es.num_requests,
            es.num_errors,
            es.last_error,
            es.processing_time,
            es.average_processing_time,
            data,
        )

    def reset(self) -> None:
        """Zero every endpoint's counters; ``started`` becomes now."""
        for ep in self.endpoints:
            ep.reset()
        self._started = datetime.now(UTC)

    # -- discovery (its subscriptions' dispatcher threads) ----------------------

    def _on_discovery(self, msg: Msg) -> None:
        if not msg.reply:
            return
        verb = msg.subject[len(self._api_prefix) + 1 :].partition(".")[0]
        if verb == "PING":
            body = self._ping
        elif verb == "INFO":
            body = json.dumps(self.info().to_dict()).encode()
        elif verb == "STATS":
            body = json.dumps(self.stats().to_dict()).encode()
        else:
            return  # another verb under the prefix: not ours to answer
        msg.respond(body)

    # -- stopping -----------------------------------------------------------------

    def _on_event(self, event: str) -> None:
        if event == "closed":
            self._stopped = True

    def stop(self, timeout: float | None = 30.0) -> None:
        """Drain the subscriptions; queued requests are answered (waits up to ``timeout``).

        Raises DrainTimeoutError when handlers were still running at the
        deadline. Stopping twice is harmless.
        """
        with self._lock:
            if self._stopped and not self._discovery:
                return
            self._stopped = True
            endpoints = list(self._endpoints)
            discovery, self._discovery = self._discovery, []
        nc = self._nc
        nc._remove_listener(self._on_event)
        nc._drainables.discard(self)
        deadline = None if timeout is None else time.monotonic() + timeout
        for ep in endpoints:
            ep._drain(deadline)
        late = not self._drain_wait(deadline, endpoints)
        for sub in discovery:
            try:
                sub.drain(None if deadline is None else max(0.0, deadline - time.monotonic()))
            except errors.DrainTimeoutError:
                late = True
            except errors.Error:
                pass  # the connection closed: the subscription ended with it
        if late:
            raise errors.DrainTimeoutError()

    # the connection's drain (``nc._drainables``): the client drains the
    # subscriptions itself; this waits for the handler threads.

    def _drain_begin(self) -> None:
        self._stopped = True

    def _drain_wait(self, deadline: float | None, endpoints: list[Endpoint] | None = None) -> bool:
        ok = True
        for ep in self.endpoints if endpoints is None else endpoints:
            ok = ep._join(deadline) and ok
        return ok


def add_service(
    nc: Core,
    name: str,
    version: str,
    *,
    description: str | None = None,
    metadata: Mapping[str, str] | None = None,
    queue_group: str | None = DEFAULT_QUEUE_GROUP,
    stats_handler: StatsHandler | None = None,
    threads: int = 1,
    api_prefix: str = DEFAULT_API_PREFIX,
) -> Service:
    """A service (ADR-32) on this connection, started at once (``Client.add_service``).

    Returns once its discovery subscriptions reached the server. ``threads``:
    handler threads per endpoint (an endpoint may say otherwise);
    ``queue_group=None``: endpoints subscribe without one. Use it as a
    context manager to stop (drain) it on exit.
    """
    return Service(
        nc,
        name,
        version,
        description=description,
        metadata=metadata,
        queue_group=queue_group,
        stats_handler=stats_handler,
        threads=threads,
        api_prefix=api_prefix,
    )
