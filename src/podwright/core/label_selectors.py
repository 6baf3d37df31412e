"""Kubernetes label selectors (``podwright list -l``), parsed and matched as the API server does.

A selector is a comma-separated list of requirements, all of which a set of labels must meet:
``k=v`` and ``k==v`` (the label is there with that value), ``k!=v`` (absent, or another value),
``k in (a,b)``, ``k notin (a,b)`` (absent, or none of them), ``k`` (there), ``!k`` (absent),
``k>1`` and ``k<1`` (there, an integer, greater or less). The grammar, the checks of keys and
values (:mod:`podwright.core.k8s_names`) and the matching are those of k8s.io/apimachinery's
``pkg/labels/selector.go``, so that the same selector selects the same tasks here as the API server
selects Workloads, and a selector is sent to it in the canonical form it prints
(:meth:`LabelSelector.__str__`). What the API server would refuse is a :class:`SelectorError`
that says where in the text the problem is, which the API server's message does not.

The empty selector matches everything.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Mapping

from podwright.core.k8s_names import label_value_problem, qualified_name_problem


class Operator(enum.StrEnum):
    """How a requirement compares a label (the value is how the canonical form writes it)."""

    EQUALS = "="
    DOUBLE_EQUALS = "=="
    NOT_EQUALS = "!="
    IN = "in"
    NOT_IN = "notin"
    EXISTS = "exists"
    DOES_NOT_EXIST = "!"
    GREATER_THAN = ">"
    LESS_THAN = "<"


_BINARY = "in, notin, =, ==, !=, >, <"
"""The operators that may follow a key, as an error lists them."""

_INT64 = re.compile(r"[+-]?[0-9]+")
_INT64_RANGE = range(-(2**63), 2**63)


def _integer(value: str) -> int | None:
    """``value`` as Go's ``strconv.ParseInt(value, 10, 64)`` reads it, or None."""
    if not _INT64.fullmatch(value):
        return None
    number = int(value)
    return number if number in _INT64_RANGE else None


@dataclasses.dataclass(frozen=True)
class Requirement:
    """One requirement of a selector: ``key``, ``operator`` and its ``values`` (none for exists
    and does-not-exist, one for the equality and integer operators, a sorted set for in and
    notin)."""

    key: str
    operator: Operator
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether ``labels`` meet the requirement."""
        present = self.key in labels
        match self.operator:
            case Operator.EQUALS | Operator.DOUBLE_EQUALS | Operator.IN:
                return present and labels[self.key] in self.values
            case Operator.NOT_EQUALS | Operator.NOT_IN:
                return not present or labels[self.key] not in self.values
            case Operator.EXISTS:
                return present
            case Operator.DOES_NOT_EXIST:
                return not present
            case Operator.GREATER_THAN | Operator.LESS_THAN:
                have = _integer(labels[self.key]) if present else None
                bound = _integer(self.values[0]) if len(self.values) == 1 else None
                if have is None or bound is None:
                    return False
                return have > bound if self.operator is Operator.GREATER_THAN else have < bound

    def __str__(self) -> str:
        """The requirement as ``selector.go``'s ``Requirement.String`` writes it."""
        match self.operator:
            case Operator.EXISTS:
                return self.key
            case Operator.DOES_NOT_EXIST:
                return f"!{self.key}"
            case Operator.IN | Operator.NOT_IN:
                return f"{self.key} {self.operator.value} ({','.join(self.values)})"
            case _:
                return f"{self.key}{self.operator.value}{','.join(self.values)}"


@dataclasses.dataclass(frozen=True)
class LabelSelector:
    """Requirements that must all be met, by key (as the API server sorts them)."""

    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(requirement.matches(labels) for requirement in self.requirements)

    def __str__(self) -> str:
        """The canonical form, which parses back to this selector ("" for the empty one)."""
        return ",".join(str(requirement) for requirement in self.requirements)

    def __bool__(self) -> bool:
        """Whether it selects anything less than everything."""
        return bool(self.requirements)


class SelectorError(ValueError):
    """A selector the API server would refuse: what is wrong (``problem``) and where (``column``,
    from 1; one past the end for what is missing at the end)."""

    def __init__(self, column: int, problem: str) -> None:
        super().__init__(f"at column {column}: {problem}")
        self.column = column
        self.problem = problem


class _Kind(enum.Enum):
    END = "end of string"
    IDENTIFIER = "identifier"
    OPEN = "("
    CLOSE = ")"
    COMMA = ","
    NOT = "!"
    EQUALS = "="
    DOUBLE_EQUALS = "=="
    NOT_EQUALS = "!="
    GREATER_THAN = ">"
    LESS_THAN = "<"
    IN = "in"
    NOT_IN = "notin"


@dataclasses.dataclass(frozen=True)
class _Token:
    kind: _Kind
    text: str
    position: int

    def shown(self) -> str:
        return "end of string" if self.kind is _Kind.END else repr(self.text)


_SYMBOLS = {
    kind.value: kind
    for kind in (
        _Kind.OPEN,
        _Kind.CLOSE,
        _Kind.COMMA,
        _Kind.NOT,
        _Kind.EQUALS,
        _Kind.DOUBLE_EQUALS,
        _Kind.NOT_EQUALS,
        _Kind.GREATER_THAN,
        _Kind.LESS_THAN,
    )
}
_KEYWORDS = {"in": _Kind.IN, "notin": _Kind.NOT_IN}
_SPECIAL = frozenset("=!(),><")
_WHITESPACE = frozenset(" \t\r\n")
_OPERATORS = {
    _Kind.EQUALS: Operator.EQUALS,
    _Kind.DOUBLE_EQUALS: Operator.DOUBLE_EQUALS,
    _Kind.NOT_EQUALS: Operator.NOT_EQUALS,
    _Kind.IN: Operator.IN,
    _Kind.NOT_IN: Operator.NOT_IN,
    _Kind.GREATER_THAN: Operator.GREATER_THAN,
    _Kind.LESS_THAN: Operator.LESS_THAN,
}


def _tokens(selector: str) -> list[_Token]:
    """The tokens of ``selector``, as ``selector.go``'s lexer cuts them: the longest symbol
    (``!=`` before ``!``), identifiers up to a symbol or a blank, ``in`` and ``notin`` as
    keywords; the last token is the end."""
    tokens = []
    position = 0
    while True:
        while position < len(selector) and selector[position] in _WHITESPACE:
            position += 1
        if position == len(selector):
            tokens.append(_Token(_Kind.END, "", position))
            return tokens
        start = position
        if selector[position] in _SPECIAL:
            pair = selector[position : position + 2]
            text = pair if pair in _SYMBOLS else selector[position]
            tokens.append(_Token(_SYMBOLS[text], text, start))
            position += len(text)
            continue
        while (
            position < len(selector)
            and selector[position] not in _SPECIAL
            and selector[position] not in _WHITESPACE
        ):
            position += 1
        text = selector[start:position]
        tokens.append(_Token(_KEYWORDS.get(text, _Kind.IDENTIFIER), text, start))


class _Parser:
    """``selector.go``'s recursive-descent parser, with the position of every token kept for the
    errors. Where a value or a key may stand (``Values`` context there), ``in`` and ``notin``
    are identifiers: ``in=x`` and ``k in (in,notin)`` are fine."""

    def __init__(self, selector: str) -> None:
        self._tokens = _tokens(selector)
        self._next = 0

    def _peek(self, *, values: bool = True) -> _Token:
        token = self._tokens[self._next]
        if values and token.kind in (_Kind.IN, _Kind.NOT_IN):
            return dataclasses.replace(token, kind=_Kind.IDENTIFIER)
        return token

    def _take(self, *, values: bool = True) -> _Token:
        token = self._peek(values=values)
        if token.kind is not _Kind.END:
            self._next += 1
        return token

    def parse(self) -> LabelSelector:
        requirements: list[Requirement] = []
        while True:
            token = self._peek()
            if token.kind is _Kind.END:
                break
            if token.kind not in (_Kind.IDENTIFIER, _Kind.NOT):
                raise _error(token, "!, identifier, or end of string")
            requirements.append(self._requirement())
            after = self._take()
            if after.kind is _Kind.END:
                break
            if after.kind is not _Kind.COMMA:
                raise _error(after, "',' or end of string")
            following = self._peek()
            if following.kind not in (_Kind.IDENTIFIER, _Kind.NOT):
                raise _error(following, "!, or identifier after ','")
        requirements.sort(key=lambda requirement: requirement.key)
        return LabelSelector(tuple(requirements))

    def _requirement(self) -> Requirement:
        negated = self._peek().kind is _Kind.NOT
        if negated:
            self._take()
        key = self._take()
        if key.kind is not _Kind.IDENTIFIER:
            raise _error(key, "identifier")
        problem = qualified_name_problem(key.text)
        if problem is not None:
            raise SelectorError(key.position + 1, f"label key {key.text!r} {problem}")
        if negated:
            return Requirement(key.text, Operator.DOES_NOT_EXIST)
        if self._peek().kind in (_Kind.END, _Kind.COMMA):
            return Requirement(key.text, Operator.EXISTS)
        operator_token = self._take(values=False)
        operator = _OPERATORS.get(operator_token.kind)
        if operator is None:
            raise _error(operator_token, _BINARY)
        values = self._set() if operator in (Operator.IN, Operator.NOT_IN) else [self._exact()]
        for value in values:
            problem = label_value_problem(value.text)
            if problem is not None:
                raise SelectorError(value.position + 1, f"label value {value.text!r} {problem}")
        if operator in (Operator.GREATER_THAN, Operator.LESS_THAN):
            bound = values[0]
            if _integer(bound.text) is None:
                raise SelectorError(
                    bound.position + 1,
                    f"{operator.value} takes an integer, not {bound.text!r}",
                )
        texts = (value.text for value in values)
        return Requirement(key.text, operator, tuple(sorted(set(texts))))

    def _exact(self) -> _Token:
        """The value after ``=``, ``==``, ``!=``, ``>`` or ``<`` (empty before a comma or the
        end)."""
        token = self._peek()
        if token.kind in (_Kind.END, _Kind.COMMA):
            return _Token(_Kind.IDENTIFIER, "", token.position)
        if token.kind is not _Kind.IDENTIFIER:
            raise _error(token, "identifier")
        return self._take()

    def _set(self) -> list[_Token]:
        """The values of ``in`` and ``notin``: ``(a,b)``, where an empty place is the empty
        value (``()``, ``(a,)``, ``(,a)``, ``(a,,b)``)."""
        opening = self._take()
        if opening.kind is not _Kind.OPEN:
            raise _error(opening, "'('")
        values: list[_Token] = []
        expect_value = True
        while True:
            token = self._take()
            if token.kind is _Kind.CLOSE:
                if expect_value:
                    values.append(_Token(_Kind.IDENTIFIER, "", token.position))
                return values
            if token.kind is _Kind.COMMA:
                if expect_value:
                    values.append(_Token(_Kind.IDENTIFIER, "", token.position))
                expect_value = True
                continue
            if token.kind is _Kind.IDENTIFIER and expect_value:
                values.append(token)
                expect_value = False
                continue
            raise _error(token, "',' or ')'" if not expect_value else "',', ')' or identifier")


def _error(token: _Token, expected: str) -> SelectorError:
    return SelectorError(token.position + 1, f"found {token.shown()}, expected: {expected}")


def parse_label_selector(selector: str) -> LabelSelector:
    """The selector written ``selector`` (Kubernetes' syntax); :class:`SelectorError` when the
    API server would refuse it."""
    return _Parser(selector).parse()
