"""Reading the effective workload by field, and the errors rendering reports.

The renderer reads an effective workload that the field catalogue has already checked, so every
value has its field's type; :class:`Values` hands them out typed and knows each one's dotted path
(``worker.storage.s3[data].bucket``), so that a value the cluster cannot honour is reported at the
field the user or the policy wrote. Every problem is collected; rendering fails with all of them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from decimal import Decimal

from podwright.core import quantities
from podwright.core.evaluation import SUBMISSION
from podwright.core.problems import summary


@dataclasses.dataclass(frozen=True)
class RenderProblem:
    """A field the chosen cluster profile cannot honour, or a combination that cannot render."""

    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message


class RenderError(ValueError):
    """The workload cannot be rendered on this profile; ``problems`` lists every reason."""

    def __init__(self, problems: Sequence[RenderProblem]) -> None:
        if not problems:
            raise ValueError("a RenderError needs at least one problem")
        self.problems = tuple(problems)
        super().__init__(summary(self.problems))


def refusal_lines(
    profile_name: str, problems: Sequence[RenderProblem], sources: Mapping[str, str]
) -> list[str]:
    """What a workload that cannot be rendered on profile ``profile_name`` is told: a head, then
    each problem, naming where a value the submission did not give came from (``sources``: an
    evaluation's, by dotted path). The CLI prints a line each; the validating webhook joins them
    (:func:`refusal_message`), so ``kubectl apply`` says what ``podwright render`` says."""
    return [
        f"cannot render on cluster profile {profile_name!r}:",
        *(
            f"{problem} (value from {sources[problem.field]})"
            if sources.get(problem.field, SUBMISSION) != SUBMISSION
            else str(problem)
            for problem in problems
        ),
    ]


def refusal_message(lines: Sequence[str]) -> str:
    """:func:`refusal_lines` on one line: ``cannot render on cluster profile 'default': image:
    required: …; …``."""
    head, *reasons = lines
    return f"{head} {'; '.join(reasons)}"


class Problems:
    """Collects render problems, once each, in the order found."""

    def __init__(self) -> None:
        self._problems: dict[RenderProblem, None] = {}

    def add(self, field: str, message: str) -> None:
        self._problems[RenderProblem(field, message)] = None

    def __bool__(self) -> bool:
        return bool(self._problems)

    @property
    def count(self) -> int:
        return len(self._problems)

    def raise_if_any(self) -> None:
        if self._problems:
            raise RenderError(list(self._problems))


@dataclasses.dataclass(frozen=True)
class Values:
    """One section of a checked effective workload, and the dotted path it sits at."""

    data: Mapping[str, object]
    prefix: str = ""

    def path(self, name: str = "") -> str:
        """The dotted path of field ``name`` of this section (of the section when empty)."""
        return f"{self.prefix}{name}" if name else self.prefix.removesuffix(".")

    def has(self, name: str) -> bool:
        return self.data.get(name) is not None

    def text(self, name: str) -> str | None:
        value = self.data.get(name)
        assert value is None or isinstance(value, str), (name, value)
        return value

    def flag(self, name: str, default: bool = False) -> bool:
        value = self.data.get(name, default)
        assert isinstance(value, bool), (name, value)
        return value

    def count(self, name: str) -> int | None:
        value = self.data.get(name)
        assert value is None or (isinstance(value, int) and not isinstance(value, bool))
        return value

    def amount(self, name: str) -> Decimal | None:
        """A number or quantity, exactly."""
        value = self.data.get(name)
        return None if value is None else quantities.parse(value)

    def texts(self, name: str) -> list[str]:
        value = self.data.get(name) or []
        assert isinstance(value, list)
        return [str(item) for item in value]

    def integers(self, name: str) -> list[int]:
        value = self.data.get(name) or []
        assert isinstance(value, list)
        return [int(item) for item in value]

    def section(self, name: str) -> Values:
        value = self.data.get(name) or {}
        assert isinstance(value, Mapping)
        return Values(value, f"{self.prefix}{name}.")

    def objects(self, name: str) -> Iterator[Values]:
        """The entries of an array of objects, each at ``name[index]``."""
        value = self.data.get(name) or []
        assert isinstance(value, list)
        for index, entry in enumerate(value):
            assert isinstance(entry, Mapping)
            yield Values(entry, f"{self.prefix}{name}[{index}].")

    def instances(self, name: str, key: str = "name") -> Iterator[Values]:
        """The instances of an itemized field, each at ``name[key]``."""
        value = self.data.get(name) or []
        assert isinstance(value, list)
        for entry in value:
            assert isinstance(entry, Mapping)
            yield Values(entry, f"{self.prefix}{name}[{entry.get(key)}].")

    def key(self, name: str = "name") -> str:
        value = self.data.get(name)
        assert isinstance(value, str)
        return value
