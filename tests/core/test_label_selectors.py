"""Kubernetes label selectors: parsed, printed and matched as k8s.io/apimachinery's
``pkg/labels/selector.go`` does, and refused where the API server refuses them, saying where."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from podwright.core.label_selectors import (
    LabelSelector,
    Operator,
    Requirement,
    SelectorError,
    parse_label_selector,
)

# Parsing: the canonical form each selector prints as (requirements by key, values sorted). ------


@pytest.mark.parametrize(
    ("selector", "canonical"),
    [
        pytest.param("", "", id="empty"),
        pytest.param("   ", "", id="blank"),
        pytest.param("env=prod", "env=prod", id="equals"),
        pytest.param("env==prod", "env==prod", id="double-equals"),
        pytest.param("env!=prod", "env!=prod", id="not-equals"),
        pytest.param("env=", "env=", id="equals-empty-value"),
        pytest.param(" env = prod ", "env=prod", id="blanks-around"),
        pytest.param("env in (prod, dev)", "env in (dev,prod)", id="in-sorted"),
        pytest.param("env notin(a,b)", "env notin (a,b)", id="notin-no-blank"),
        pytest.param("env in (a,a)", "env in (a)", id="in-duplicates"),
        pytest.param("env in ()", "env in ()", id="in-empty"),
        pytest.param("env in (a,)", "env in (,a)", id="in-trailing-comma"),
        pytest.param("env in (,a)", "env in (,a)", id="in-leading-comma"),
        pytest.param("env in (a,,b)", "env in (,a,b)", id="in-double-comma"),
        pytest.param("gpu", "gpu", id="exists"),
        pytest.param("!gpu", "!gpu", id="does-not-exist"),
        pytest.param("! gpu", "!gpu", id="does-not-exist-blank"),
        pytest.param("replicas>2", "replicas>2", id="greater-than"),
        pytest.param("replicas<10", "replicas<10", id="less-than"),
        pytest.param("b=1,a", "a,b=1", id="by-key"),
        pytest.param("in=notin", "in=notin", id="keywords-as-key-and-value"),
        pytest.param("k in (in,notin)", "k in (in,notin)", id="keywords-as-values"),
        pytest.param(
            "example.com/team=vision,tier!=web",
            "example.com/team=vision,tier!=web",
            id="prefixed-key",
        ),
        pytest.param("a=b\t,\nc", "a=b,c", id="tabs-and-newlines"),
    ],
)
def test_a_selector_parses_to_its_canonical_form(selector: str, canonical: str) -> None:
    assert str(parse_label_selector(selector)) == canonical


def test_requirements_are_read_with_their_operators_and_values() -> None:
    assert parse_label_selector("tier notin (web, db),!legacy,gpu>0,team") == LabelSelector(
        (
            Requirement("gpu", Operator.GREATER_THAN, ("0",)),
            Requirement("legacy", Operator.DOES_NOT_EXIST),
            Requirement("team", Operator.EXISTS),
            Requirement("tier", Operator.NOT_IN, ("db", "web")),
        )
    )


# Refusals: what is wrong, and where (the column, from 1). ------------------------------------


@pytest.mark.parametrize(
    ("selector", "column", "problem"),
    [
        pytest.param("env in prod", 8, "found 'prod', expected: '('", id="in-without-parens"),
        pytest.param("env in", 7, "found end of string, expected: '('", id="in-at-end"),
        pytest.param("env in (a b)", 11, "found 'b', expected: ',' or ')'", id="in-no-comma"),
        pytest.param("env in (a", 10, "found end of string, expected: ',' or ')'", id="in-open"),
        pytest.param(
            "env in (=)", 9, "found '=', expected: ',', ')' or identifier", id="in-operator"
        ),
        pytest.param("a=b c", 5, "found 'c', expected: ',' or end of string", id="two-values"),
        pytest.param("a b", 3, "found 'b', expected: in, notin, =, ==, !=, >, <", id="no-op"),
        pytest.param("a!b", 2, "found '!', expected: in, notin, =, ==, !=, >, <", id="bang-op"),
        pytest.param(
            "a,", 3, "found end of string, expected: !, or identifier after ','", id="trail"
        ),
        pytest.param(
            ",a", 1, "found ',', expected: !, identifier, or end of string", id="leading-comma"
        ),
        pytest.param("a=(b)", 3, "found '(', expected: identifier", id="paren-value"),
        pytest.param("!a=b", 3, "found '=', expected: ',' or end of string", id="not-with-value"),
        pytest.param("!", 2, "found end of string, expected: identifier", id="bare-bang"),
        pytest.param("n>x", 3, "> takes an integer, not 'x'", id="gt-not-integer"),
        pytest.param("n<", 3, "< takes an integer, not ''", id="lt-empty"),
        pytest.param("n>99999999999999999999", 3, "> takes an integer", id="gt-beyond-int64"),
        pytest.param("Bad_-=x", 1, "label key 'Bad_-' name part must consist", id="bad-key"),
        pytest.param("/a=x", 1, "label key '/a' has an empty prefix", id="empty-prefix"),
        pytest.param("a=-x", 3, "label value '-x' must consist of", id="bad-value"),
        pytest.param("a in (ok, b@d)", 11, "label value 'b@d'", id="bad-value-in-set"),
        pytest.param(
            f"a={'v' * 64}",
            3,
            f"label value '{'v' * 64}' must be at most 63 characters",
            id="value-too-long",
        ),
    ],
)
def test_a_malformed_selector_is_refused_saying_where(
    selector: str, column: int, problem: str
) -> None:
    with pytest.raises(SelectorError) as raised:
        parse_label_selector(selector)
    assert raised.value.column == column
    assert raised.value.problem.startswith(problem), raised.value.problem
    assert str(raised.value) == f"at column {column}: {raised.value.problem}"


# Matching. -------------------------------------------------------------------------------------

LABELS = {"env": "prod", "team": "vision", "replicas": "3", "note": "x3"}


@pytest.mark.parametrize(
    ("selector", "matches"),
    [
        pytest.param("", True, id="empty-matches-everything"),
        pytest.param("env=prod", True, id="equals"),
        pytest.param("env==dev", False, id="equals-other"),
        pytest.param("gone=x", False, id="equals-absent"),
        pytest.param("env!=dev", True, id="not-equals"),
        pytest.param("env!=prod", False, id="not-equals-same"),
        pytest.param("gone!=x", True, id="not-equals-absent"),
        pytest.param("env in (dev,prod)", True, id="in"),
        pytest.param("env in (dev)", False, id="in-other"),
        pytest.param("gone in (x)", False, id="in-absent"),
        pytest.param("env notin (dev)", True, id="notin"),
        pytest.param("env notin (prod)", False, id="notin-listed"),
        pytest.param("gone notin (x)", True, id="notin-absent"),
        pytest.param("team", True, id="exists"),
        pytest.param("gone", False, id="exists-absent"),
        pytest.param("!gone", True, id="does-not-exist"),
        pytest.param("!team", False, id="does-not-exist-present"),
        pytest.param("replicas>2", True, id="gt"),
        pytest.param("replicas>3", False, id="gt-equal"),
        pytest.param("replicas<4", True, id="lt"),
        pytest.param("note>1", False, id="gt-not-an-integer-label"),
        pytest.param("gone<9", False, id="lt-absent"),
        pytest.param("env=prod,team=vision", True, id="and"),
        pytest.param("env=prod,team=nlp", False, id="and-one-fails"),
        pytest.param("gone=", False, id="empty-value-absent"),
    ],
)
def test_matching(selector: str, matches: bool) -> None:
    assert parse_label_selector(selector).matches(LABELS) is matches


# Properties. -----------------------------------------------------------------------------------

_NAME = st.from_regex(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,8}[A-Za-z0-9])?", fullmatch=True)
_PREFIX = st.from_regex(
    r"[a-z0-9]([-a-z0-9]{0,6}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,6}[a-z0-9])?){0,2}", fullmatch=True
)
_KEY = st.one_of(_NAME, st.builds(lambda prefix, name: f"{prefix}/{name}", _PREFIX, _NAME))
_VALUE = st.one_of(st.just(""), _NAME)


@st.composite
def requirements(draw: st.DrawFn) -> Requirement:
    key = draw(st.from_regex(r"[a-z][a-z0-9]{0,6}", fullmatch=True))
    operator = draw(st.sampled_from(Operator))
    if operator in (Operator.EXISTS, Operator.DOES_NOT_EXIST):
        values: tuple[str, ...] = ()
    elif operator in (Operator.GREATER_THAN, Operator.LESS_THAN):
        values = (str(draw(st.integers(0, 2**63 - 1))),)
    elif operator in (Operator.IN, Operator.NOT_IN):
        values = tuple(sorted(set(draw(st.lists(_VALUE, min_size=1, max_size=4)))))
    else:
        values = (draw(_VALUE),)
    return Requirement(key, operator, values)


_SELECTORS = st.lists(requirements(), max_size=5).map(
    lambda found: LabelSelector(tuple(sorted(found, key=lambda requirement: requirement.key)))
)
_LABELS = st.dictionaries(
    st.from_regex(r"[a-z][a-z0-9]{0,6}", fullmatch=True),
    st.one_of(_VALUE, st.integers(-5, 5).map(str)),
    max_size=6,
)


@given(_SELECTORS)
def test_the_canonical_form_parses_back_to_the_same_selector(selector: LabelSelector) -> None:
    assert parse_label_selector(str(selector)) == selector


@given(_SELECTORS, st.sampled_from([" ", "  ", "\t"]))
def test_blanks_around_symbols_change_nothing(selector: LabelSelector, blank: str) -> None:
    spaced = str(selector)
    for symbol in ("!=", "==", ",", "(", ")", ">", "<"):
        spaced = spaced.replace(symbol, f"{blank}{symbol}{blank}")
    assert parse_label_selector(spaced) == selector


@given(_SELECTORS, _LABELS)
def test_a_selector_matches_when_each_of_its_requirements_does(
    selector: LabelSelector, labels: dict[str, str]
) -> None:
    assert selector.matches(labels) is all(
        parse_label_selector(str(requirement)).matches(labels)
        for requirement in selector.requirements
    )


_OPPOSITES = [
    (Operator.EQUALS, Operator.NOT_EQUALS),
    (Operator.DOUBLE_EQUALS, Operator.NOT_EQUALS),
    (Operator.IN, Operator.NOT_IN),
    (Operator.EXISTS, Operator.DOES_NOT_EXIST),
]


@given(requirements(), _LABELS)
def test_each_negated_operator_matches_exactly_where_its_positive_does_not(
    requirement: Requirement, labels: dict[str, str]
) -> None:
    for positive, negative in _OPPOSITES:
        if requirement.operator is positive:
            opposite = Requirement(requirement.key, negative, requirement.values)
            assert opposite.matches(labels) is not requirement.matches(labels)


@given(_KEY, _VALUE, _LABELS)
def test_a_valid_key_and_value_make_a_selector_of_each_operator(
    key: str, value: str, labels: dict[str, str]
) -> None:
    for operator in ("=", "==", "!="):
        parsed = parse_label_selector(f"{key}{operator}{value}")
        assert parsed.requirements == (Requirement(key, Operator(operator), (value,)),)
        labelled = {**labels, key: value}
        assert parsed.matches(labelled) is (operator != "!=")


def _parsed(text: str) -> LabelSelector | SelectorError:
    try:
        return parse_label_selector(text)
    except SelectorError as error:
        return error


@given(st.text(alphabet=st.sampled_from(list("ab=!(),<> \t1in-/._")), max_size=24))
def test_any_text_parses_or_is_refused_with_a_column_inside_it(text: str) -> None:
    parsed = _parsed(text)
    if isinstance(parsed, SelectorError):
        assert 1 <= parsed.column <= len(text) + 1
    else:
        assert parse_label_selector(str(parsed)) == parsed
