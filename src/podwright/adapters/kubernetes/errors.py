"""Failures of requests to the API server, mapped onto the engine's Kubernetes error tree.

:func:`error_from_status` maps an HTTP answer (a status code and its ``Status`` body);
:func:`connection_error` a request that got no answer, naming the server, the cause, and whether
the request can have reached the server.
"""

from __future__ import annotations

import errno
import http.client
import json
import socket
import ssl
from collections.abc import Mapping
from typing import Any

import urllib3

from podwright.adapters.kubernetes.retry import retry_after_seconds
from podwright.engine.kubernetes_port import (
    AlreadyExistsError,
    ApiConnectionError,
    ConflictError,
    ForbiddenError,
    GoneError,
    InvalidError,
    KubernetesError,
    NamespaceNotFoundError,
    NotFoundError,
    QuotaExceededError,
    ServerError,
    ThrottledError,
    TooLargeError,
)


def error_from_status(
    code: int,
    body: bytes | str | Mapping[str, object],
    headers: Mapping[str, str] | None = None,
    *,
    note: str = "",
) -> KubernetesError:
    """The error for an HTTP status ``code`` and its ``Status`` body; ``note`` (how the request
    was retried) follows the server's message in parentheses."""
    status = _status(body)
    reason = str(status.get("reason") or "")
    message = str(status.get("message") or f"HTTP {code}")
    if note:
        message = f"{message} ({note})"
    found = status.get("details")
    details: dict[str, Any] = dict(found) if isinstance(found, Mapping) else {}
    common: dict[str, Any] = {"status": code, "reason": reason, "details": details}
    if code == 404:
        # The NamespaceLifecycle admission plugin refuses an object whose namespace does not
        # exist with NewNotFound(Resource("namespaces"), namespace): details.kind "namespaces"
        # (plugin/pkg/admission/namespace/lifecycle/admission.go).
        if details.get("kind") == "namespaces" and not details.get("group"):
            return NamespaceNotFoundError(message, **common)
        return NotFoundError(message, **common)
    if code == 410:
        return GoneError(message, **common)
    if code == 409:
        if reason == "AlreadyExists":
            return AlreadyExistsError(message, **common)
        return ConflictError(message, **common)
    if code in (401, 403):
        if "exceeded quota" in message:
            return QuotaExceededError(message, **common)
        return ForbiddenError(message, **common)
    if code in (400, 422):
        return InvalidError(message, **common)
    if code == 413:
        return TooLargeError(message, **common)
    if code == 429:
        return ThrottledError(message, **common, retry_after=retry_after_seconds(headers or {}))
    return ServerError(message, **common)


def connection_error(server: str, exc: BaseException, *, during: str = "") -> ApiConnectionError:
    """The error for a request to ``server`` that got no answer because of ``exc`` (urllib3's,
    or the socket's); ``during`` names a long request that broke midway ("the watch of Pod")."""
    cause, sent = _cause(exc)
    if sent:
        where = f" during {during}" if during else ""
        message = (
            f"lost the connection to the Kubernetes API server {server}{where}: {cause}; "
            "the request may have reached it"
        )
    else:
        message = f"cannot reach the Kubernetes API server {server}: {cause}"
    return ApiConnectionError(message, server=server, cause=cause, may_have_reached=sent)


_ERRNO_CAUSES = {
    errno.ECONNREFUSED: "connection refused",
    errno.EHOSTUNREACH: "no route to host",
    errno.ENETUNREACH: "network is unreachable",
    errno.ETIMEDOUT: "connection timed out",
    errno.ECONNRESET: "connection reset by the server",
    errno.EPIPE: "the server closed the connection",
}


def _cause(exc: BaseException) -> tuple[str, bool]:
    """What went wrong, in a few words, and whether the request may have been sent."""
    if isinstance(exc, urllib3.exceptions.MaxRetryError) and exc.reason is not None:
        return _cause(exc.reason)
    if isinstance(exc, urllib3.exceptions.NameResolutionError):
        resolving = exc.__cause__ or exc.__context__
        detail = resolving.strerror if isinstance(resolving, socket.gaierror) else str(exc)
        return f"cannot resolve the host name ({detail})", False
    if isinstance(exc, urllib3.exceptions.NewConnectionError):
        return _os_cause(exc.__cause__ or exc.__context__, str(exc)), False
    if isinstance(exc, urllib3.exceptions.ConnectTimeoutError):
        return "the connection timed out", False
    if isinstance(exc, urllib3.exceptions.SSLError | ssl.SSLError):
        return f"the TLS handshake failed ({exc})", False
    if isinstance(exc, urllib3.exceptions.ReadTimeoutError):
        return "no answer before the read timeout", True
    if isinstance(exc, urllib3.exceptions.ProtocolError):
        inner = exc.args[1] if len(exc.args) > 1 else None
        if isinstance(inner, BaseException):
            return _cause(inner)
        return f"the connection broke mid-answer ({exc.args[0] if exc.args else exc})", True
    if isinstance(exc, http.client.RemoteDisconnected):
        return "the server closed the connection without answering", True
    if isinstance(exc, http.client.IncompleteRead | urllib3.exceptions.IncompleteRead):
        return "the answer was cut short", True
    if isinstance(exc, OSError):
        return _os_cause(exc, str(exc)), True
    return str(exc) or type(exc).__name__, True


def _os_cause(error: BaseException | None, fallback: str) -> str:
    if isinstance(error, OSError) and error.errno in _ERRNO_CAUSES:
        return _ERRNO_CAUSES[error.errno]
    if isinstance(error, OSError) and error.strerror:
        return error.strerror[:1].lower() + error.strerror[1:]
    return fallback


def _status(body: bytes | str | Mapping[str, object]) -> Mapping[str, object]:
    if isinstance(body, Mapping):
        return body
    try:
        decoded = json.loads(body) if body else {}
    except ValueError:
        text = body.decode(errors="replace") if isinstance(body, bytes) else body
        return {"message": text.strip()[:500]}
    return decoded if isinstance(decoded, dict) else {}
