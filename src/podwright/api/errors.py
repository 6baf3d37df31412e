"""The exceptions of podwright's public API: one tree, so a caller catches what it can handle.

::

    PodwrightError                     anything podwright's API raises on purpose
    ├── InvalidInputError              a document, option or argument cannot be used (ValueError)
    │   └── TaskNotFoundError          no task of that id (or Workload name) where it was looked for
    ├── PolicyViolationError           the policies reject the workload (``.evaluation``)
    ├── AdmissionDeniedError           the cluster's admission webhook refused it (``.issues``)
    └── BackendError                   podwright could not do its part; the input was good
        ├── TaskStoreUnavailableError  a task's record cannot be read or written
        └── BackendUnreachableError    the Kubernetes API server gave no answer, after retries

Every message names the file (``file:line:column``), the field or argument, and what is allowed.
The command line maps them to its exit statuses (2, 1, 5 and 6), so a script and a notebook see
the same refusals.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from podwright.api.pipeline import Evaluation


class PodwrightError(Exception):
    """The root of podwright's exceptions."""


class InvalidInputError(PodwrightError, ValueError):
    """Input that cannot be used: ``problems`` lists each problem on a line of its own, as
    ``file:line:column: path: message`` when it lies in a document. Input that is a form's
    fields (:func:`~podwright.api.forms.workload_from_form`) has its problems in
    ``field_problems`` too, as (dotted field path, message) pairs, for a form to show each
    beside its input; other input leaves it empty."""

    def __init__(
        self, problems: str | Sequence[str], *, field_problems: Sequence[tuple[str, str]] = ()
    ) -> None:
        self.problems: tuple[str, ...] = (
            (problems,) if isinstance(problems, str) else tuple(problems)
        )
        self.field_problems: tuple[tuple[str, str], ...] = tuple(field_problems)
        super().__init__("\n".join(self.problems))


class PolicyViolationError(PodwrightError):
    """The policies reject the workload: ``evaluation.violations`` lists every issue."""

    def __init__(self, evaluation: Evaluation) -> None:
        from podwright.api.pipeline import issue_line  # noqa: PLC0415 (it imports this module)

        self.evaluation = evaluation
        count = len(evaluation.violations)
        super().__init__(
            f"{count} violation{'s' if count != 1 else ''} of the policies of "
            f"{evaluation.scope}: "
            + "; ".join(issue_line(violation) for violation in evaluation.violations)
        )


class TaskNotFoundError(InvalidInputError):
    """No task of the id (or, with the operator, the Workload name) where it was looked for."""


class AdmissionDeniedError(PodwrightError):
    """The cluster's admission webhook refused a Workload: ``issues`` lists what it said, one
    compliance issue each (``field: details``) when it listed them, ``webhook`` names it, and
    ``summary`` says what was refused, without the issues."""

    def __init__(self, summary: str, *, webhook: str, issues: Sequence[str]) -> None:
        self.webhook, self.summary = webhook, summary
        self.issues: tuple[str, ...] = tuple(issues)
        super().__init__(f"{summary}: {'; '.join(self.issues)}")


class BackendError(PodwrightError):
    """podwright could not do its part, though the input was good: the task store cannot be
    read or written, no executor could be started, the API server refused, a file could not be
    written."""


class TaskStoreUnavailableError(BackendError):
    """A task's record cannot be read or written: this machine's task store, or the status of
    an operator's Workload."""


class BackendUnreachableError(BackendError):
    """The Kubernetes API server gave no answer, after bounded retries with backoff; the
    message names the server and the cause."""
