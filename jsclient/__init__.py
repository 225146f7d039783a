"""jsclient: a blocking, thread-based NATS JetStream client with a Cython hot path.

Public names only; importing this package starts no thread and opens no socket.
"""

from __future__ import annotations

import functools
import inspect
import ssl
from collections.abc import Callable, Sequence
from typing import Any, ParamSpec, TypeVar, cast

from jsclient import api, contexts, errors
from jsclient._request_many import EMPTY_SENTINEL
from jsclient._version import __version__
from jsclient.client import Client
from jsclient.connection import Options
from jsclient.jetstream.publish.publisher import Flight, Publisher, PublisherListener, RetryConfig
from jsclient.msg import Msg, MsgMetadata, SequencePair
from jsclient.subscription import Subscription

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _with_context(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """Apply ``context=NAME``: the context's values, then the arguments the caller gave.

    Only the arguments actually passed override the context (a default value
    never does), so the binding happens here, where they are still known.
    """
    sig = inspect.signature(fn)

    @functools.wraps(fn)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        if kwargs.get("context") is None:  # keyword-only: never positional
            return fn(*args, **kwargs)
        bound = sig.bind(*args, **kwargs)
        name = bound.arguments.pop("context")
        given = dict(bound.arguments.pop("extra", {}))
        given.update(bound.arguments)
        merged = {**contexts.connect_options(contexts.load(name)), **given}
        return cast(Callable[..., _R], fn)(**merged)

    return wrapper


@_with_context
def connect(
    servers: str | Sequence[str] = "nats://127.0.0.1:4222",
    *,
    name: str | None = None,
    user: str | None = None,
    password: str | None = None,
    token: str | None = None,
    creds: str | None = None,
    nkey_seed: str | None = None,
    tls: ssl.SSLContext | None = None,
    connect_timeout: float = 2.0,
    reconnect: bool = True,
    max_reconnect_attempts: int = 60,
    reconnect_wait: float = 2.0,
    reconnect_buffer_size: int = 8 * 1024 * 1024,
    ping_interval: float = 120.0,
    max_pings_outstanding: int = 2,
    no_echo: bool = False,
    inbox_prefix: str = "_INBOX",
    error_cb: Callable[[Exception], Any] | None = None,
    disconnected_cb: Callable[[], Any] | None = None,
    reconnected_cb: Callable[[], Any] | None = None,
    closed_cb: Callable[[], Any] | None = None,
    context: str | None = None,
    reconnect_to_server_cb: Callable[[list[str], dict[str, Any] | None], Any] | None = None,
    ignore_discovered_servers: bool = False,
    retry_on_failed_connect: bool = False,
    **extra: Any,
) -> Client:
    """Connect to NATS and return a blocking :class:`Client`.

    ``servers`` is a URL, a comma-separated list of URLs, or a list. Extra
    keyword options: ``tls_hostname``, ``tls_handshake_first``,
    ``dont_randomize``, ``ignore_discovered_servers``, ``reconnect_jitter``,
    ``reconnect_jitter_tls``, ``lame_duck_cb``, ``discovered_server_cb``,
    ``max_control_line``, ``pending_size`` (bytes the write queue may hold
    while connected, default 4 MiB: a publish beyond it writes the queue
    itself or waits for the flusher) and ``flush_timeout`` (how long such a
    publish waits, default 10 s, then ``FlushTimeoutError`` with nothing of
    that message sent). ``max_reconnect_attempts=-1`` retries forever.

    ``context`` names a NATS CLI context (ADR-21, see :mod:`jsclient.contexts`;
    ``""`` is the selected one): its servers, credentials, TLS files,
    ``tls_first``, ``inbox_prefix`` and JetStream domain / API prefix (the
    defaults of ``nc.jetstream()``) apply, and every argument given here
    overrides the context's value for that argument.
    """
    if isinstance(servers, str):
        urls = [u for u in servers.split(",") if u.strip()]
    else:
        urls = list(servers)
    known = set(Options.__dataclass_fields__)
    unknown = set(extra) - known
    if unknown:
        raise TypeError(f"connect() got unexpected keyword arguments: {sorted(unknown)}")
    opts = Options(
        servers=urls,
        name=name,
        user=user,
        password=password,
        token=token,
        creds=creds,
        nkey_seed=nkey_seed,
        tls=tls,
        connect_timeout=connect_timeout,
        reconnect=reconnect,
        max_reconnect_attempts=max_reconnect_attempts,
        reconnect_wait=reconnect_wait,
        reconnect_buffer_size=reconnect_buffer_size,
        ping_interval=ping_interval,
        max_pings_outstanding=max_pings_outstanding,
        no_echo=no_echo,
        inbox_prefix=inbox_prefix,
        error_cb=error_cb,
        disconnected_cb=disconnected_cb,
        reconnected_cb=reconnected_cb,
        closed_cb=closed_cb,
        reconnect_to_server_cb=reconnect_to_server_cb,
        ignore_discovered_servers=ignore_discovered_servers,
        retry_on_failed_connect=retry_on_failed_connect,
        **extra,
    )
    if opts.creds or opts.nkey_seed:
        from jsclient._io.auth import require_nkeys

        require_nkeys()  # the extra's error now, not a failed handshake later
    client = Client(opts)
    client._start()
    return client


__all__ = [
    "EMPTY_SENTINEL",
    "Client",
    "Flight",
    "Publisher",
    "PublisherListener",
    "RetryConfig",
    "Msg",
    "MsgMetadata",
    "SequencePair",
    "Subscription",
    "__version__",
    "api",
    "connect",
    "contexts",
    "errors",
]
