"""Answers that say "not done, ask again after Retry-After", retried as client-go retries them.

An API server that cannot serve a request yet says so, and says when to ask again: a 429 from
priority and fairness or from a watch cache that is still starting (``storage is
(re)initializing``, right after a CRD becomes Established: ``Cacher.Watch`` in
k8s.io/apiserver/pkg/storage/cacher/cacher.go answers ``errors.NewTooManyRequests`` with
``calculateRetryAfterForUnreadyCache``'s 1 to 30 seconds), and the response writer turns the
Status's ``details.retryAfterSeconds`` into a ``Retry-After`` header (``ErrorNegotiated`` in
k8s.io/apiserver/pkg/endpoints/handlers/responsewriters/writers.go). Such an answer means the
request was not carried out, so asking again is safe for every verb, a create included.

client-go does this below every caller, and so does :class:`KubernetesClient` with this policy:

- which answers: a 429 or any 5xx whose ``Retry-After`` is a whole number of seconds
  (``checkWait`` and ``retryAfterSeconds`` in k8s.io/client-go/rest/request.go). An answer
  without the header, or with one that is not an integer (an HTTP date, ``1.5``), is not
  retried: it goes to the caller at once, as client-go's ``IsNextRetry``
  (rest/with_retry.go) returns it; the engine then backs off on its own.
- which requests: all of them, whatever the verb (client-go's ``request``, ``Watch`` and
  ``Stream`` all ask ``IsNextRetry`` with the answer).
- how often: at most ``max_retries`` times, 10 by default (``maxRetries: 10`` in client-go's
  ``NewRequest``), each after the seconds the answer asked for.

client-go bounds the whole by the request's context deadline; podwright bounds the time spent
waiting with ``max_total_wait_seconds``, so a command never hangs longer than its user can
know: a wait that would pass the bound is not begun, and the error says so. The final error
keeps the server's message and adds how many retries were made and how long they waited.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

DEFAULT_MAX_RETRIES = 10
DEFAULT_MAX_TOTAL_WAIT_SECONDS = 60.0

_WHOLE_SECONDS = re.compile(r"[+-]?[0-9]+")
"""What Go's ``strconv.Atoi`` accepts, which client-go's ``retryAfterSeconds`` parses with."""


def retry_after_seconds(headers: Mapping[str, str]) -> int | None:
    """The ``Retry-After`` header's whole seconds (a negative number as 0), or ``None`` when the
    header is missing or not an integer (client-go's ``retryAfterSeconds``)."""
    for key, value in headers.items():
        if key.lower() == "retry-after":
            if _WHOLE_SECONDS.fullmatch(value) is None:
                return None
            return max(0, int(value))
    return None


def asks_to_retry(status: int, headers: Mapping[str, str]) -> int | None:
    """The seconds to wait before asking again when the answer says the request was not
    carried out (429 or 5xx with a ``Retry-After``: client-go's ``checkWait``), else ``None``."""
    if status != 429 and status < 500:
        return None
    return retry_after_seconds(headers)


@dataclass(frozen=True)
class RetryAfterPolicy:
    """How :class:`KubernetesClient` retries an answer that asks to be retried later."""

    max_retries: int = DEFAULT_MAX_RETRIES
    """Retries of one request at most (client-go's default, 10); 0 retries nothing."""

    max_total_wait_seconds: float = DEFAULT_MAX_TOTAL_WAIT_SECONDS
    """The most time one request spends waiting between its retries. A ``Retry-After`` that
    would take the total past it is not waited for: the request fails at once, saying so."""

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError(f"max_retries: must be 0 or more, got {self.max_retries}")
        if not self.max_total_wait_seconds >= 0:  # NaN included
            raise ValueError(
                f"max_total_wait_seconds: must be 0 or more, got {self.max_total_wait_seconds}"
            )

    def next_wait(
        self, status: int, headers: Mapping[str, str], *, retries: int, waited: float
    ) -> int | None:
        """The seconds to wait before retrying a request answered ``status`` with ``headers``
        after ``retries`` retries that waited ``waited`` seconds in all; ``None``: do not."""
        seconds = asks_to_retry(status, headers)
        if seconds is None or retries >= self.max_retries:
            return None
        if waited + seconds > self.max_total_wait_seconds:
            return None
        return seconds

    def outcome(
        self, status: int, headers: Mapping[str, str], *, retries: int, waited: float
    ) -> str:
        """What the final error adds to the server's message about the retries, for an
        answer :meth:`next_wait` does not retry ("" when there is nothing to say)."""
        asked = asks_to_retry(status, headers)
        done = f"{retries} {'retry' if retries == 1 else 'retries'} over {waited:.1f} s"
        if asked is None:
            return f"after {done} (Retry-After)" if retries else ""
        if self.max_retries == 0:
            return ""
        if retries >= self.max_retries:
            return f"gave up after {done} (Retry-After): {self.max_retries} retries at most"
        bound = f"the {self.max_total_wait_seconds:g} s bound on Retry-After waits"
        if retries == 0:
            return f"not retried: waiting the {asked} s Retry-After asks for would pass {bound}"
        return f"gave up after {done} (Retry-After): waiting {asked} s more would pass {bound}"


DEFAULT_RETRIES = RetryAfterPolicy()
"""client-go's 10 retries, and at most a minute of waiting for one request."""
