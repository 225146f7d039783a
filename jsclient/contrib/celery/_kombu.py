"""kombu and Celery as this package's type checker sees them: the parts it uses, loosely typed.

kombu ships type hints for part of its API only, and Celery none, so the
base classes are ``Any`` to mypy and the few functions called are given
their signatures here; at run time these are kombu's and Celery's own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kombu.utils import json as _json

loads: Callable[[bytes | str], Any] = _json.loads
dumps: Callable[[Any], str | bytes] = _json.dumps

if TYPE_CHECKING:
    VirtualChannel = Any
    VirtualQoS = Any
    VirtualTransport = Any
    ChannelError = Exception
else:
    from kombu.exceptions import ChannelError
    from kombu.transport.virtual import Channel as VirtualChannel
    from kombu.transport.virtual import QoS as VirtualQoS
    from kombu.transport.virtual import Transport as VirtualTransport

__all__ = ["ChannelError", "VirtualChannel", "VirtualQoS", "VirtualTransport", "dumps", "loads"]
