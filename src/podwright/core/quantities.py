"""Kubernetes quantities ("500m", "2Gi", "1G", "5M", "1e3", 10) as exact decimals, and back.

Policies compare memory and CPU amounts written in any unit ("1G" against "1000M", "0.5" against
"500m"); a float would make such comparisons, and a factor applied to them, inexact. Parsing follows
the grammar of apimachinery's ``resource.Quantity`` (``pkg/api/resource/quantity.go``): a signed
decimal number, then a binary suffix (Ki … Ei), a decimal one (n, u, m, k, M … E) or a decimal
exponent (``e3``, ``E-2``); anything else is refused, as the API server refuses it. It is
written here rather than taken from the official client (``kubernetes.utils.quantity``, against
which the tests check it) because that module cannot be imported without the whole client, which
would cost every command start-up a third of a second; the client's parser is also looser than
the API server (it accepts ``NaN``, ``1_000``, ``Infinity``).
"""

from __future__ import annotations

import functools
import re
from decimal import Decimal

_BINARY_SUFFIXES = tuple(
    (f"{prefix}i", 2 ** (10 * power)) for power, prefix in enumerate("KMGTPE", 1)
)
_DECIMAL_SUFFIXES = tuple((suffix, 10 ** (3 * power)) for power, suffix in enumerate("kMGTPE", 1))
_MULTIPLIERS: dict[str, Decimal] = {
    "": Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    **{suffix: Decimal(size) for suffix, size in (*_BINARY_SUFFIXES, *_DECIMAL_SUFFIXES)},
}
_NUMBER = r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
_SUFFIX = r"[KMGTPE]i|[numkMGTPE]"
_EXPONENT = r"[+-]?[0-9]+"
_QUANTITY = re.compile(
    f"(?P<number>{_NUMBER})(?:(?P<suffix>{_SUFFIX})|[eE](?P<exponent>{_EXPONENT}))?"
)
QUANTITY_PATTERN = f"^{_NUMBER}(?:{_SUFFIX}|[eE]{_EXPONENT})?$"
"""The same grammar as one anchored regular expression without named groups, which Go's RE2 (an
API server's schema ``pattern``) and JSON Schema validators read alike. It says nothing of range:
``1e999999999`` matches, and :func:`parse` refuses it."""


class QuantityError(ValueError):
    """The text is not a Kubernetes quantity."""


def parse(value: object) -> Decimal:
    """The exact amount a quantity spells: ``"2Gi"`` → 2147483648, ``"500m"`` → 0.5.

    Accepts what kubectl accepts: a quantity string or a YAML number (an integer, or a float
    read back through its shortest decimal spelling, so ``0.1`` is exactly one tenth).
    """
    if isinstance(value, bool) or not isinstance(value, str | int | float | Decimal):
        raise QuantityError(f"expected a quantity such as '500m', '2Gi' or 10, got {value!r}")
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise QuantityError(f"{value!r} is not a finite quantity")
        return value
    if isinstance(value, int):
        return Decimal(value)
    text = repr(value) if isinstance(value, float) else value
    amount = _spelled_amount(text)
    if amount is None:
        if isinstance(value, float):
            raise QuantityError(f"{value!r} is not a finite quantity")
        raise QuantityError(
            f"{value!r} is not a quantity (a number with an optional suffix such as "
            "m, k, M, G, T, Ki, Mi, Gi, Ti, or an exponent such as e3)"
        )
    return amount


@functools.lru_cache(maxsize=1024)
def _spelled_amount(text: str) -> Decimal | None:
    """The amount ``text`` spells, None if it spells no quantity; QuantityError beyond range.

    Cached: policies and submissions spell the same few amounts over and over, and each
    evaluation reads some of them twice (a value's check, then its rules).
    """
    match = _QUANTITY.fullmatch(text)
    if match is None:
        return None
    number = Decimal(match["number"])
    try:
        if match["exponent"] is not None:
            amount = number.scaleb(int(match["exponent"]))
        else:
            amount = number * _MULTIPLIERS[match["suffix"] or ""]
    except ArithmeticError:  # an exponent beyond what a decimal holds
        raise QuantityError(f"{text!r} is out of the range of a quantity") from None
    if not amount.is_finite():
        raise QuantityError(f"{text!r} is out of the range of a quantity")
    return amount


def format_quantity(amount: Decimal) -> str:
    """The shortest usual spelling of ``amount``: 2147483648 → ``"2Gi"``, 0.5 → ``"500m"``.

    Whole amounts take the largest binary suffix that divides them, else the largest decimal
    one; fractions are written in thousandths (``m``) when that is exact, else as decimals.
    """
    if amount == amount.to_integral_value():
        whole = int(amount)
        for suffix, size in (*reversed(_BINARY_SUFFIXES), *reversed(_DECIMAL_SUFFIXES)):
            if whole and whole % size == 0:
                return f"{whole // size}{suffix}"
        return str(whole)
    milli = amount * 1000
    if milli == milli.to_integral_value():
        return f"{int(milli)}m"
    return format(amount.normalize(), "f")
