"""What a ResourceQuota refusal says: can the request ever fit, or must it wait?

The quota admission plugin refuses a create with 403 Forbidden and a message of the form::

    exceeded quota: compute, requested: limits.cpu=3,requests.cpu=3, used: requests.cpu=1,
    limited: limits.cpu=2,requests.cpu=2

A request that exceeds the quota's hard limit on its own will never be admitted, however long it
waits; anything else may fit once other workloads finish.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

from podwright.core import quantities

_QUOTA_MESSAGE = re.compile(
    r"exceeded quota: (?P<quota>[^,]+), requested: (?P<requested>.*?), used: (?P<used>.*?), "
    r"limited: (?P<limited>[^\n\"]*)"
)


@dataclass(frozen=True, slots=True)
class QuotaRefusal:
    quota: str
    requested: dict[str, str]
    used: dict[str, str]
    limited: dict[str, str]

    def exceeds_hard_limit(self) -> list[str]:
        """The resources whose request alone is above the quota's hard limit."""
        over = []
        for resource, requested in self.requested.items():
            limit = self.limited.get(resource)
            if limit is not None and _amount(requested) > _amount(limit):
                over.append(f"{resource}: requested {requested}, limit {limit}")
        return over


def is_quota_refusal(message: str) -> bool:
    return "exceeded quota" in message


def parse_quota_refusal(message: str) -> QuotaRefusal | None:
    """The refusal in a quota admission message, or None when it has not the usual form."""
    match = _QUOTA_MESSAGE.search(message)
    if match is None:
        return None
    return QuotaRefusal(
        quota=match["quota"].strip(),
        requested=_resources(match["requested"]),
        used=_resources(match["used"]),
        limited=_resources(match["limited"]),
    )


def _resources(listing: str) -> dict[str, str]:
    resources = {}
    for entry in listing.split(","):
        name, sep, value = entry.strip().partition("=")
        if sep and name:
            resources[name] = value.strip()
    return resources


def _amount(value: str) -> Decimal:
    try:
        return quantities.parse(value)
    except ValueError:
        return Decimal(0)
