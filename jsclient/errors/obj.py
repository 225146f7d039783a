"""Errors of the Object store (:mod:`jsclient.jetstream.obj`).

Where nats-py has a class of the same name (``nats.js.errors``), each also
subclasses it, so code written for nats-py's object store keeps catching
them. Object names are checked before anything is sent; the buckets share the
Key-Value store's ``InvalidBucketNameError`` and ``BucketNotFoundError``.
"""

from __future__ import annotations

import nats.js.errors as _jse

from jsclient.errors._base import JetStreamError
from jsclient.errors.jetstream import NotFoundError


class InvalidObjectNameError(JetStreamError, _jse.InvalidObjectNameError):
    """An object name is empty, not a ``str``, or cannot be encoded as UTF-8."""

    default_message = "nats: invalid object name"


class BadObjectMetaError(JetStreamError, _jse.BadObjectMetaError):
    """An object's stored meta is not valid ObjectInfo JSON, has no ``nuid``, or names
    a digest that is not SHA-256."""

    default_message = "nats: object meta information invalid"


class ObjectNotFoundError(NotFoundError, _jse.ObjectNotFoundError):
    """No object of that name (never stored, or deleted and not asked for)."""

    def __init__(self, description: str = "object not found") -> None:
        NotFoundError.__init__(self, code=404, description=description)


class ObjectDeletedError(ObjectNotFoundError, _jse.ObjectDeletedError):
    """The object was deleted: ``update_meta`` of a deleted object."""

    def __init__(self, description: str = "object is deleted") -> None:
        ObjectNotFoundError.__init__(self, description)


class ObjectAlreadyExists(JetStreamError, _jse.ObjectAlreadyExists):
    """A rename or a link would replace an object that exists (and is not deleted)."""

    default_message = "nats: an object already exists with that name"


class DigestMismatchError(JetStreamError, _jse.DigestMismatchError):
    """The chunks read do not make the object its meta describes: another size,
    chunk count or SHA-256 digest. The data read must be discarded."""

    default_message = "nats: received a corrupt object, digests do not match"


class LinkIsABucketError(JetStreamError, _jse.LinkIsABucketError):
    """``get`` of a link to a whole bucket: open that bucket instead."""

    default_message = "nats: link is a bucket"


class NoLinkToLinkError(JetStreamError):
    """A link may not point to another link (``add_link``, or a link found to
    point to one when it is followed)."""

    default_message = "nats: link cannot be to another link"


class NoLinkToDeletedError(JetStreamError):
    """``add_link`` to a deleted object."""

    default_message = "nats: not allowed to link to a deleted object"


class LinkNotAllowedError(JetStreamError):
    """``put`` with meta whose options hold a link: use ``add_link``."""

    default_message = "nats: link not allowed in put, use add_link"
