"""Quantities are exact: parsed as decimals, formatted back without loss."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kubernetes.utils.quantity import parse_quantity

from podwright.core.quantities import QUANTITY_PATTERN, QuantityError, format_quantity, parse


@pytest.mark.parametrize(
    ("text", "amount"),
    [
        ("500m", Decimal("0.5")),
        ("2Gi", Decimal(2**31)),
        ("1G", Decimal(10**9)),
        ("5M", Decimal(5 * 10**6)),
        (10, Decimal(10)),
        (0.1, Decimal("0.1")),
        ("1.5", Decimal("1.5")),
    ],
)
def test_parse(text: object, amount: Decimal) -> None:
    assert parse(text) == amount


# The API server refuses these (apimachinery's grammar); the official client's parser accepts
# the last five, which is one reason podwright parses quantities itself.
@pytest.mark.parametrize(
    "bad",
    [
        "abc",
        "1Gb",
        "",
        "1e",
        "ki",
        "1ki",
        " 1",
        True,
        None,
        [1],
        float("nan"),
        float("inf"),
        Decimal("NaN"),
        "NaN",
        "Infinity",
        "1_000",
        "1e3k",
        "1e9999999",
        "1e999999999999999999",
    ],
)
def test_not_quantities(bad: object) -> None:
    with pytest.raises(QuantityError):
        parse(bad)


@pytest.mark.parametrize(
    ("amount", "text"),
    [
        (Decimal(2**31), "2Gi"),
        (Decimal("0.5"), "500m"),
        (Decimal(10**9), "1G"),
        (Decimal(3), "3"),
        (Decimal("0.0005"), "0.0005"),
        (Decimal(1536 * 2**20), "1536Mi"),
    ],
)
def test_format(amount: Decimal, text: str) -> None:
    assert format_quantity(amount) == text


@given(st.decimals(min_value=0, max_value=10**15, places=4, allow_nan=False, allow_infinity=False))
def test_format_then_parse_is_exact(amount: Decimal) -> None:
    assert parse(format_quantity(amount)) == amount


_NUMBERS = st.one_of(
    st.from_regex(r"[+-]?[0-9]{1,12}", fullmatch=True),
    st.from_regex(r"[+-]?[0-9]{1,9}\.[0-9]{0,6}", fullmatch=True),
    st.from_regex(r"[+-]?\.[0-9]{1,6}", fullmatch=True),
)
_SUFFIXES = st.one_of(
    st.sampled_from(["", "n", "u", "m", "k", "M", "G", "T", "P", "E"]),
    st.sampled_from(["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]),
    st.from_regex(r"[eE][+-]?[0-9]{1,2}", fullmatch=True),
)


@given(_NUMBERS, _SUFFIXES)
def test_every_quantity_of_the_api_servers_grammar_is_what_the_official_client_reads(
    number: str, suffix: str
) -> None:
    text = number + suffix
    assert parse(text) == parse_quantity(text)


@given(
    st.one_of(
        st.builds(str.__add__, _NUMBERS, _SUFFIXES),
        st.text(alphabet="0123456789+-.eEimkKMGTPnu ", max_size=8),
    )
)
def test_the_pattern_of_a_quantity_is_the_grammar_parse_reads(text: str) -> None:
    """``QUANTITY_PATTERN`` (a CRD's ``pattern`` for quantities) matches exactly the strings
    ``parse`` reads (a grammar, not a range: no generated exponent is out of range)."""
    try:
        parse(text)
    except QuantityError:
        parsed = False
    else:
        parsed = True
    assert (re.search(QUANTITY_PATTERN, text) is not None) == parsed
