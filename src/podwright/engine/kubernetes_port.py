"""What the engine needs from Kubernetes, and the errors it can get back.

The port speaks plain JSON objects (dicts as the API server sends them): the engine handles many
kinds, custom resources among them, and reads only a few status fields of each. The error tree is
the port's contract: an adapter maps its library's exceptions onto it, so the engine classifies a
refusal (quota, invalid, too large, throttled…) without knowing which client produced it.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from podwright.core.lifecycle.objects import section, text

JsonObject = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """Everything needed to address one namespaced object."""

    api_version: str
    kind: str
    namespace: str
    name: str

    @classmethod
    def of(cls, obj: JsonObject) -> ObjectRef:
        """The address of ``obj`` (its apiVersion, kind, namespace and name)."""
        metadata = section(obj, "metadata")
        return cls(
            text(obj, "apiVersion"),
            text(obj, "kind"),
            text(metadata, "namespace"),
            text(metadata, "name"),
        )

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


class PatchType(enum.StrEnum):
    MERGE = "application/merge-patch+json"
    JSON = "application/json-patch+json"


class KubernetesPort(Protocol):
    def create(self, obj: JsonObject) -> dict[str, Any]:
        """Create ``obj`` in its namespace and return it as stored."""

    def get(self, ref: ObjectRef) -> dict[str, Any]:
        """Read the object from the API server."""

    def cached(self, ref: ObjectRef) -> JsonObject | None:
        """The object as the watch cache last saw it, or None when the cache has not seen it."""

    def cached_pods(self, namespace: str, label: str, value: str) -> list[JsonObject] | None:
        """The pods of ``namespace`` labelled ``label=value`` as a watch cache of pods last saw
        them, or None when no such cache answers (none is kept, or it has not listed yet): the
        caller then goes by the task's resource alone."""

    def patch(self, ref: ObjectRef, body: Any, patch_type: PatchType) -> dict[str, Any]:
        """Patch the object; a ``metadata.resourceVersion`` in a merge patch (or a JSON patch
        ``test`` of it) makes the patch conditional on that version."""

    def replace(self, ref: ObjectRef, obj: JsonObject) -> dict[str, Any]:
        """Replace the object (conditional on the ``metadata.resourceVersion`` it carries)."""

    def delete(self, ref: ObjectRef, *, propagation: str = "Background") -> None:
        """Ask for the object's deletion (finalizers may keep it a while)."""


class KubernetesError(Exception):
    """A request to the Kubernetes API failed. ``status``, ``reason`` and ``details`` (the
    ``Status`` object's ``details``: the ``name`` and ``kind`` it is about) are the API's."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        reason: str = "",
        details: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.reason = reason
        self.details: Mapping[str, Any] = details or {}


class NotFoundError(KubernetesError):
    """404: the object does not exist."""


class NamespaceNotFoundError(NotFoundError):
    """404 from the NamespaceLifecycle admission plugin: the object's namespace does not exist
    (``details.kind`` is ``namespaces``, ``details.name`` the namespace)."""

    @property
    def namespace(self) -> str:
        return str(self.details.get("name") or "")


class GoneError(KubernetesError):
    """410: the object or the resource version asked for is gone (Gone, Expired)."""


class ConflictError(KubernetesError):
    """409: a resourceVersion precondition failed; read again and retry."""


class AlreadyExistsError(ConflictError):
    """409 AlreadyExists: an object of that name exists."""


class ForbiddenError(KubernetesError):
    """403: refused by authorization or admission."""


class QuotaExceededError(ForbiddenError):
    """403 by the ResourceQuota admission plugin: the request does not fit the namespace's quota."""


class InvalidError(KubernetesError):
    """400 or 422: the object or request is malformed or fails validation."""


class TooLargeError(KubernetesError):
    """413: the object is larger than the API server accepts."""


class ThrottledError(KubernetesError):
    """429: the API server asks the client to slow down, for ``retry_after`` seconds if given."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = 429,
        reason: str = "",
        details: Mapping[str, Any] | None = None,
        retry_after: float | None,
    ) -> None:
        super().__init__(message, status=status, reason=reason, details=details)
        self.retry_after = retry_after


class ServerError(KubernetesError):
    """5xx (and any status the API does not document): the server failed; retry with backoff."""


class ApiConnectionError(KubernetesError):
    """The API server could not be reached, or the connection broke before an answer.

    ``server`` is the API server's URL and ``cause`` what went wrong ("connection refused").
    ``may_have_reached`` says whether the request can have reached the server: not when the
    connection was refused, the name did not resolve or TLS failed (nothing was sent, so nothing
    was done); perhaps when the connection broke or timed out after the request was sent (a
    create may then have created its object).
    """

    def __init__(
        self, message: str, *, server: str = "", cause: str = "", may_have_reached: bool = True
    ) -> None:
        super().__init__(message)
        self.server = server
        self.cause = cause
        self.may_have_reached = may_have_reached
