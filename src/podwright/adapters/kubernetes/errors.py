"""HTTP answers of the API server, mapped onto the engine's Kubernetes error tree."""

from __future__ import annotations

import json
from collections.abc import Mapping

from podwright.engine.kubernetes_port import (
    AlreadyExistsError,
    ConflictError,
    ForbiddenError,
    GoneError,
    InvalidError,
    KubernetesError,
    NotFoundError,
    QuotaExceededError,
    ServerError,
    ThrottledError,
    TooLargeError,
)


def error_from_status(
    code: int, body: bytes | str | Mapping[str, object], headers: Mapping[str, str] | None = None
) -> KubernetesError:
    """The error for an HTTP status ``code`` and its ``Status`` body."""
    status = _status(body)
    reason = str(status.get("reason") or "")
    message = str(status.get("message") or f"HTTP {code}")
    if code == 404:
        return NotFoundError(message, status=code, reason=reason)
    if code == 410:
        return GoneError(message, status=code, reason=reason)
    if code == 409:
        if reason == "AlreadyExists":
            return AlreadyExistsError(message, status=code, reason=reason)
        return ConflictError(message, status=code, reason=reason)
    if code in (401, 403):
        if "exceeded quota" in message:
            return QuotaExceededError(message, status=code, reason=reason)
        return ForbiddenError(message, status=code, reason=reason)
    if code in (400, 422):
        return InvalidError(message, status=code, reason=reason)
    if code == 413:
        return TooLargeError(message, status=code, reason=reason)
    if code == 429:
        return ThrottledError(
            message, status=code, reason=reason, retry_after=_retry_after(headers or {})
        )
    return ServerError(message, status=code, reason=reason)


def _status(body: bytes | str | Mapping[str, object]) -> Mapping[str, object]:
    if isinstance(body, Mapping):
        return body
    try:
        decoded = json.loads(body) if body else {}
    except ValueError:
        text = body.decode(errors="replace") if isinstance(body, bytes) else body
        return {"message": text.strip()[:500]}
    return decoded if isinstance(decoded, dict) else {}


def _retry_after(headers: Mapping[str, str]) -> float | None:
    for key, value in headers.items():
        if key.lower() == "retry-after":
            try:
                return max(0.0, float(value))
            except ValueError:
                return None
    return None
