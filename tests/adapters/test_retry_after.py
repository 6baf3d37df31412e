"""The policy by which the Kubernetes client retries answers that ask to be retried later, as a
decision table: which answers (client-go's ``checkWait`` and ``retryAfterSeconds``,
k8s.io/client-go/rest/request.go), how often (``maxRetries`` 10, ``NewRequest``; ``IsNextRetry``,
rest/with_retry.go), the bound on the total wait podwright adds, and what the final error says.
The client's use of it over HTTP is tests/kube/test_throttled_requests.py."""

from __future__ import annotations

import math
import re
from typing import Any

import pytest

from podwright.adapters.kubernetes.errors import error_from_status
from podwright.adapters.kubernetes.retry import DEFAULT_RETRIES, RetryAfterPolicy
from podwright.engine.kubernetes_port import ServerError, ThrottledError

STORAGE_INITIALIZING = {
    "kind": "Status",
    "apiVersion": "v1",
    "status": "Failure",
    "message": "storage is (re)initializing",
    "reason": "TooManyRequests",
    "details": {"retryAfterSeconds": 1},
    "code": 429,
}


def test_the_default_is_client_gos_ten_retries_within_a_minute() -> None:
    assert (DEFAULT_RETRIES.max_retries, DEFAULT_RETRIES.max_total_wait_seconds) == (10, 60.0)


@pytest.mark.parametrize(
    ("status", "headers", "wait"),
    [
        pytest.param(429, {"Retry-After": "3"}, 3, id="429-with-retry-after"),
        pytest.param(429, {"retry-after": "3"}, 3, id="header-name-in-any-case"),
        pytest.param(429, {"Retry-After": "0"}, 0, id="429-asking-no-wait"),
        pytest.param(429, {"Retry-After": "-2"}, 0, id="negative-is-no-wait"),
        pytest.param(429, {"Retry-After": "+2"}, 2, id="signed-as-atoi-reads-it"),
        pytest.param(503, {"Retry-After": "2"}, 2, id="503-with-retry-after"),
        pytest.param(500, {"Retry-After": "2"}, 2, id="500-with-retry-after"),
        pytest.param(504, {"Retry-After": "5"}, 5, id="504-with-retry-after"),
        pytest.param(429, {}, None, id="429-without-retry-after"),
        pytest.param(503, {}, None, id="503-without-retry-after"),
        pytest.param(429, {"Retry-After": "1.5"}, None, id="fractional-is-garbled"),
        pytest.param(429, {"Retry-After": " 2"}, None, id="spaces-are-garbled"),
        pytest.param(
            429, {"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}, None, id="http-date-unread"
        ),
        pytest.param(404, {"Retry-After": "2"}, None, id="4xx-is-never-retried"),
        pytest.param(409, {"Retry-After": "2"}, None, id="conflict-is-never-retried"),
        pytest.param(200, {"Retry-After": "2"}, None, id="success-is-not-retried"),
    ],
)
def test_which_answers_are_retried_and_after_how_long(
    status: int, headers: dict[str, str], wait: int | None
) -> None:
    assert DEFAULT_RETRIES.next_wait(status, headers, retries=0, waited=0.0) == wait


@pytest.mark.parametrize(
    ("retries", "waited", "asked", "wait"),
    [
        pytest.param(9, 9.0, "1", 1, id="the-tenth-retry-is-made"),
        pytest.param(10, 10.0, "1", None, id="no-eleventh-retry"),
        pytest.param(2, 57.0, "3", 3, id="a-wait-ending-at-the-bound-is-made"),
        pytest.param(2, 58.0, "3", None, id="a-wait-passing-the-bound-is-not"),
        pytest.param(0, 0.0, "61", None, id="one-wait-longer-than-the-bound"),
    ],
)
def test_retries_stop_at_their_number_or_at_the_bound_on_waiting(
    retries: int, waited: float, asked: str, wait: int | None
) -> None:
    headers = {"Retry-After": asked}
    assert DEFAULT_RETRIES.next_wait(429, headers, retries=retries, waited=waited) == wait


@pytest.mark.parametrize(
    ("policy", "status", "asked", "so_far", "outcome"),
    [
        pytest.param(
            DEFAULT_RETRIES,
            429,
            "1",
            (10, 12.0),
            "gave up after 10 retries over 12.0 s (Retry-After): 10 retries at most",
            id="retries-spent",
        ),
        pytest.param(
            RetryAfterPolicy(max_total_wait_seconds=5),
            429,
            "2",
            (2, 4.0),
            "gave up after 2 retries over 4.0 s (Retry-After): waiting 2 s more would pass "
            "the 5 s bound on Retry-After waits",
            id="bound-reached",
        ),
        pytest.param(
            DEFAULT_RETRIES,
            503,
            "120",
            (0, 0.0),
            "not retried: waiting the 120 s Retry-After asks for would pass the 60 s bound "
            "on Retry-After waits",
            id="one-wait-past-the-bound",
        ),
        pytest.param(
            DEFAULT_RETRIES,
            404,
            None,
            (1, 2.0),
            "after 1 retry over 2.0 s (Retry-After)",
            id="another-answer-after-retries",
        ),
        pytest.param(DEFAULT_RETRIES, 500, None, (0, 0.0), "", id="an-error-never-retried"),
        pytest.param(
            RetryAfterPolicy(max_retries=0), 429, "1", (0, 0.0), "", id="retries-switched-off"
        ),
    ],
)
def test_what_the_final_error_adds_about_the_retries(
    policy: RetryAfterPolicy,
    status: int,
    asked: str | None,
    so_far: tuple[int, float],
    outcome: str,
) -> None:
    headers = {} if asked is None else {"Retry-After": asked}
    retries, waited = so_far
    assert policy.next_wait(status, headers, retries=retries, waited=waited) is None
    assert policy.outcome(status, headers, retries=retries, waited=waited) == outcome


def test_the_final_error_keeps_the_servers_message_and_adds_the_retries() -> None:
    error = error_from_status(
        429,
        STORAGE_INITIALIZING,
        {"Retry-After": "1"},
        note="gave up after 10 retries over 10.0 s (Retry-After): 10 retries at most",
    )
    assert isinstance(error, ThrottledError)
    assert error.message == (
        "storage is (re)initializing (gave up after 10 retries over 10.0 s (Retry-After): "
        "10 retries at most)"
    )
    assert (error.reason, error.retry_after) == ("TooManyRequests", 1)
    assert isinstance(error_from_status(503, b"", {"Retry-After": "2"}), ServerError)


@pytest.mark.parametrize(
    ("headers", "retry_after"),
    [({"Retry-After": "7"}, 7), ({"Retry-After": "1.5"}, None), ({}, None)],
)
def test_a_throttled_error_says_the_wait_the_client_would_honour(
    headers: dict[str, str], retry_after: int | None
) -> None:
    """The engine waits ``retry_after`` before its next round: read as client-go reads it
    (``retryAfterSeconds``, also the ``retryAfter`` of the error ``transformResponse`` makes)."""
    error = error_from_status(429, STORAGE_INITIALIZING, headers)
    assert isinstance(error, ThrottledError)
    assert error.retry_after == retry_after


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"max_retries": -1}, "max_retries: must be 0 or more, got -1"),
        ({"max_total_wait_seconds": -1.0}, "max_total_wait_seconds: must be 0 or more, got -1.0"),
        (
            {"max_total_wait_seconds": math.nan},
            "max_total_wait_seconds: must be 0 or more, got nan",
        ),
    ],
)
def test_bad_settings_are_refused_naming_the_field(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        RetryAfterPolicy(**settings)
