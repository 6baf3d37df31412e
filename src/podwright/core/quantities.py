"""Kubernetes quantities ("500m", "2Gi", "1G", "5M", 10) as exact decimals, and back.

Policies compare memory and CPU amounts written in any unit ("1G" against "1000M", "0.5" against
"500m"); a float would make such comparisons, and a factor applied to them, inexact. Parsing is
the official client's (``kubernetes.utils.quantity``), which returns :class:`~decimal.Decimal`;
this module adds the reverse direction, for values podwright computes (a ``defaultFrom`` factor).
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from kubernetes.utils.quantity import parse_quantity

_BINARY_SUFFIXES = tuple(
    (f"{prefix}i", 2 ** (10 * power)) for power, prefix in enumerate("KMGTPE", 1)
)
_DECIMAL_SUFFIXES = tuple((suffix, 10 ** (3 * power)) for power, suffix in enumerate("kMGTPE", 1))


class QuantityError(ValueError):
    """The text is not a Kubernetes quantity."""


def parse(value: object) -> Decimal:
    """The exact amount a quantity spells: ``"2Gi"`` → 2147483648, ``"500m"`` → 0.5.

    Accepts what kubectl accepts: a quantity string or a YAML number (an integer, or a float
    read back through its shortest decimal spelling, so ``0.1`` is exactly one tenth).
    """
    if isinstance(value, bool) or not isinstance(value, str | int | float | Decimal):
        raise QuantityError(f"expected a quantity such as '500m', '2Gi' or 10, got {value!r}")
    text = repr(value) if isinstance(value, float) else value
    try:
        amount: Decimal = parse_quantity(text)
    except (ValueError, InvalidOperation) as error:
        raise QuantityError(
            f"{value!r} is not a quantity (a number with an optional suffix such as "
            "m, k, M, G, T, Ki, Mi, Gi, Ti)"
        ) from error
    if not amount.is_finite():
        raise QuantityError(f"{value!r} is not a finite quantity")
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
