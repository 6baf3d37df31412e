"""The webhooks' review timings (adapters/admission_webhooks.py ``timed_routes``): each review
answered or failed is timed once, and an attempt on the server's loop that would have blocked
(and is run again on a handler thread) is not timed twice."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from podwright.adapters.admission_webhooks import timed_routes
from podwright.adapters.webhook_server import WouldBlock


class Ticking:
    """A clock that moves one second at each reading."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def answers(review: Mapping[str, object]) -> dict[str, object]:
    return {"answered": review["n"]}


def fails(review: Mapping[str, object]) -> dict[str, object]:
    raise KeyError("spec")


def would_block(review: Mapping[str, object]) -> dict[str, object]:
    raise WouldBlock("not cached yet")


def test_each_review_answered_or_failed_is_timed_and_one_that_would_block_is_not() -> None:
    timings: list[tuple[str, float]] = []
    routes = timed_routes(
        {"/answers": answers, "/fails": fails, "/would-block": would_block},
        lambda path, seconds: timings.append((path, seconds)),
        Ticking(),
    )
    assert routes["/answers"]({"n": 1}) == {"answered": 1}
    with pytest.raises(KeyError):
        routes["/fails"]({})
    with pytest.raises(WouldBlock):
        routes["/would-block"]({})
    assert timings == [("/answers", 1.0), ("/fails", 1.0)]
