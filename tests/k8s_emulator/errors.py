"""An API error as the API server reports it: an HTTP status and a ``Status`` object."""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        *,
        details: dict[str, Any] | None = None,
        retry_after: int | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details or {}
        self.retry_after = retry_after

    def status(self) -> dict[str, Any]:
        status: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "code": self.code,
        }
        if self.reason:  # an error the server does not classify has none (StatusReasonUnknown)
            status["reason"] = self.reason
        if self.details:
            status["details"] = self.details
        return status
