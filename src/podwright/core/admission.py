"""The decisions of podwright's admission webhooks, as functions of what they are sent.

The API server sends each create or update of a ``Workload``, ``WorkloadPolicy`` or
``ClusterWorkloadPolicy`` to podwright's webhooks as an ``admission.k8s.io/v1`` AdmissionReview.
Whatever serves them (``podwright webhook`` out of the cluster, the operator in it) reads the
cluster's policies and hands them here with the request; this module decides, and says why:

* **mutating, Workloads**: the effective workload (defaults, ``defaultFrom``, imposed assets) is
  written into ``spec`` by a JSON patch, so what ``kubectl get -o yaml`` shows is what runs, and a
  later policy change never silently changes an admitted workload; a new Workload is held with
  podwright's finalizer, and who submitted it is recorded in the annotation
  ``podwright.dev/submitted-by``: the user the API server authenticated for the create (the
  request's ``userInfo.username``), over whatever the creator wrote, and put back when an update
  changes or removes it, so that nobody may claim another's name;
* **validating, Workloads**: in enforce mode a workload that breaks a rule is refused, the message
  listing *every* issue (field, what is wrong, the rule, and the policy and scope that own it),
  in the field catalogue's order; so is one that cannot run: the effective workload is rendered
  on the operator's cluster profile as the operator will render it, and what cannot be rendered
  (no image, a GPU fraction without the KAI scheduler…) is refused with the message ``podwright
  render`` gives, policies or none; warn-mode issues come back as warnings, audit-mode ones as an
  audit annotation; a workload's
  ``spec`` cannot change after admission except for the fields that scale it
  (:data:`UPDATABLE_FIELDS`);
* **validating, policies**: a malformed policy is refused with field-level errors, and so is one
  that conflicts with the policies of its branch of scopes (a second rule on a field another scope
  rules, a default another scope's rule forbids), naming the owner.

Only the request's object is trusted: the decision verifies nothing it is not sent.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import json
from collections.abc import Callable, Iterable, Mapping, Sequence

from podwright.core.assets import AssetCatalogue
from podwright.core.cluster_resources import (
    SUBMITTED_BY_ANNOTATION,
    WORKLOAD_FINALIZER,
    policy_from_resource,
    resource_source,
    submission_from_resource,
)
from podwright.core.effective_policy import EffectivePolicy, effective_policy
from podwright.core.evaluation import (
    Evaluation,
    PreparedPolicy,
    Violation,
    evaluate,
    without_exclusions,
)
from podwright.core.json_patch import json_pointer
from podwright.core.policies import Policy, PolicyError, Scope
from podwright.core.problems import FieldProblem, ProblemsError
from podwright.core.render import (
    ClusterProfile,
    RenderError,
    check_renders,
    refusal_lines,
    refusal_message,
)
from podwright.core.workload_fields import WorkloadType

REVIEW_API_VERSION = "admission.k8s.io/v1"
FINDINGS_ANNOTATION = "podwright.dev/compliance-findings"
"""The audit annotation that records audit-mode findings in the API server's audit log (users
see them in the Workload's ``status.compliance``, which the compliance status writer keeps)."""

UPDATABLE_FIELDS: Mapping[WorkloadType, frozenset[str]] = {
    WorkloadType.INFERENCE: frozenset({"autoscaling"}),
}
"""The top-level ``spec`` fields an admitted Workload may still change: the one that scales a
serving workload (its replicas and their metric, as a Knative Service may change them). All else is
fixed at admission: a running job cannot change its image or resources under the scheduler."""


@dataclasses.dataclass(frozen=True)
class Decision:
    """An admission webhook's answer: allowed or refused (with a code and message), and, when
    allowed, a JSON patch, warnings and audit annotations."""

    allowed: bool
    message: str = ""
    code: int = 200
    reason: str = ""
    patch: tuple[Mapping[str, object], ...] = ()
    warnings: tuple[str, ...] = ()
    audit_annotations: Mapping[str, str] = dataclasses.field(default_factory=dict)

    @classmethod
    def refuse(cls, code: int, reason: str, message: str) -> Decision:
        return cls(False, message, code, reason)


def review_response(review: Mapping[str, object], decision: Decision) -> dict[str, object]:
    """The AdmissionReview that answers ``review`` with ``decision``."""
    request = review.get("request")
    uid = request.get("uid") if isinstance(request, Mapping) else None
    response: dict[str, object] = {"uid": uid, "allowed": decision.allowed}
    if not decision.allowed:
        response["status"] = {
            "code": decision.code,
            "reason": decision.reason,
            "message": decision.message,
        }
    if decision.patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(list(decision.patch)).encode()).decode()
    if decision.warnings:
        response["warnings"] = list(decision.warnings)
    if decision.audit_annotations:
        response["auditAnnotations"] = dict(decision.audit_annotations)
    return {"apiVersion": REVIEW_API_VERSION, "kind": "AdmissionReview", "response": response}


class BadReviewError(ValueError):
    """A body that is not an AdmissionReview request this webhook serves."""


@dataclasses.dataclass(frozen=True)
class Request:
    """The parts of an AdmissionReview request the decisions read."""

    operation: str
    obj: Mapping[str, object]
    old: Mapping[str, object] | None
    namespace: str
    dry_run: bool
    user: str = ""
    """Who asks: the user name the API server authenticated (``userInfo.username``; empty when
    the review names none)."""

    @classmethod
    def of(cls, review: Mapping[str, object]) -> Request:
        """Read ``review``'s request; :class:`BadReviewError` says what is missing."""
        if review.get("apiVersion") != REVIEW_API_VERSION or review.get("kind") != (
            "AdmissionReview"
        ):
            raise BadReviewError(f"expected an {REVIEW_API_VERSION} AdmissionReview")
        request = review.get("request")
        if not isinstance(request, Mapping) or not isinstance(request.get("uid"), str):
            raise BadReviewError("request: expected a mapping with a uid")
        operation = request.get("operation")
        obj = request.get("object")
        old = request.get("oldObject")
        if operation not in ("CREATE", "UPDATE") or not isinstance(obj, Mapping):
            raise BadReviewError("request: expected a CREATE or UPDATE with its object")
        user_info = request.get("userInfo")
        user = user_info.get("username") if isinstance(user_info, Mapping) else None
        return cls(
            str(operation),
            obj,
            old if isinstance(old, Mapping) else None,
            str(request.get("namespace") or ""),
            bool(request.get("dryRun")),
            user if isinstance(user, str) else "",
        )


# Workloads ---------------------------------------------------------------------------------------


PolicyFor = Callable[[WorkloadType], EffectivePolicy | PreparedPolicy]
"""The effective policy of the request's scope for a workload type (the webhook keeps them
prepared, per scope and type, until a policy changes); raises :class:`PolicyError` when the
scope's policies cannot be combined."""


def policies_of(policies: Sequence[Policy], scope: Scope) -> PolicyFor:
    """Combine ``policies`` for ``scope`` on each call (what a caller without a cache uses)."""
    return lambda workload_type: effective_policy(policies, scope, workload_type)


def mutate_workload(request: Request, policy_for: PolicyFor, catalogue: AssetCatalogue) -> Decision:
    """The effective workload written into ``spec``. A workload the policies refuse, or that
    is malformed, is let through unchanged: the validating webhook refuses it with every
    reason. An update that only restates what was admitted (``kubectl replace`` of the original
    file) keeps the admitted spec."""
    evaluated = _evaluation_of(request, policy_for, catalogue)
    return Decision(True, patch=_mutation(request, _mutated_spec(request, evaluated)))


def admit_workload(
    request: Request,
    scope: Scope,
    policy_for: PolicyFor,
    catalogue: AssetCatalogue,
    profile: ClusterProfile,
) -> Decision:
    """The mutating and the validating decisions in one, for a mutating webhook that the API
    server calls alone: the effective workload written into ``spec`` (as
    :func:`mutate_workload`), and the object so patched judged as the validating webhook would
    judge it (:func:`validate_workload`): refused with every reason, or admitted with the patch,
    the warnings and the audit annotation. One call per create instead of two, for a cluster
    where no other webhook changes a Workload after podwright's.

    One evaluation serves both: the written spec (:attr:`Evaluation.written`) evaluated again
    gives the same workload and the same issues (``tests/core/test_evaluation_properties.py``),
    so the evaluation of the workload as submitted judges the patched object; its issues name
    where each value came from (a default, an imposed asset), which the patched object no longer
    tells."""
    evaluated = _evaluation_of(request, policy_for, catalogue)
    spec = _mutated_spec(request, evaluated)
    patched = (
        request if spec is None else dataclasses.replace(request, obj={**request.obj, "spec": spec})
    )
    validation = _validated(patched, scope, profile, catalogue, evaluated)
    if not validation.allowed:
        return validation
    return dataclasses.replace(validation, patch=_mutation(request, spec))


Evaluated = Callable[[], "Evaluation | ProblemsError"]
"""The evaluation of a request's workload, made on the first call, or why it cannot be made
(:class:`PolicyError`: the policies cannot be applied; else a malformed workload)."""


def _evaluation_of(request: Request, policy_for: PolicyFor, catalogue: AssetCatalogue) -> Evaluated:
    """The evaluation of ``request``'s workload (:func:`evaluate_workload`), made once when
    first asked for."""

    @functools.cache
    def evaluated() -> Evaluation | ProblemsError:
        try:
            return evaluate_workload(request.obj, policy_for, catalogue)
        except ProblemsError as error:
            return error

    return evaluated


def _mutated_spec(request: Request, evaluated: Evaluated) -> Mapping[str, object] | None:
    """The ``spec`` the mutating webhook writes (None: the request's stays)."""
    spec = request.obj.get("spec")
    old_spec = request.old.get("spec") if request.old is not None else None
    if isinstance(spec, Mapping) and isinstance(old_spec, Mapping) and _restates(old_spec, spec):
        return old_spec if spec != old_spec else None
    evaluation = evaluated()
    if isinstance(evaluation, ProblemsError) or not evaluation.accepted:
        return None
    written = {"type": evaluation.workload_type.value, **evaluation.written}
    if isinstance(old_spec, Mapping) and without_exclusions(written) == without_exclusions(
        old_spec
    ):
        # The workload admitted, its exclusions said another way (an admission before they were
        # written down): the admitted spec stays.
        return old_spec if spec != old_spec else None
    return None if written == spec else written


def validate_workload(
    request: Request,
    scope: Scope,
    policy_for: PolicyFor,
    catalogue: AssetCatalogue,
    profile: ClusterProfile,
) -> Decision:
    """Refuse a malformed or non-compliant workload (enforce mode), and one that cannot be
    rendered on ``profile`` (the operator's), with every reason; admit with warnings (warn mode)
    and an audit annotation (audit mode)."""
    evaluated = _evaluation_of(request, policy_for, catalogue)
    return _validated(request, scope, profile, catalogue, evaluated)


def _validated(
    request: Request,
    scope: Scope,
    profile: ClusterProfile,
    catalogue: AssetCatalogue,
    evaluated: Evaluated,
) -> Decision:
    """:func:`validate_workload`'s decision, the workload judged by ``evaluated``."""
    if request.operation == "UPDATE" and request.old is not None:
        changed = _changed_fixed_fields(request.old, request.obj)
        if changed:
            return Decision.refuse(
                422,
                "Invalid",
                "; ".join(
                    f"spec.{field}: cannot change after the workload was admitted"
                    for field in changed
                )
                + _updatable_phrase(request.obj),
            )
    if not _spec_is_new(request):
        # The spec was judged when it came; today's policies judge it in the compliance status,
        # not here: a policy tightened since must not keep the operator from writing its
        # finalizer, or anyone from aborting, labelling or letting go of the Workload.
        return Decision(True)
    evaluation = evaluated()
    if isinstance(evaluation, PolicyError):
        return Decision.refuse(
            403,
            "Forbidden",
            f"the policies of {scope} cannot be applied, so no workload is admitted there: "
            + problem_lines(evaluation.problems),
        )
    if isinstance(evaluation, ProblemsError):
        return Decision.refuse(
            422, "Invalid", f"the workload is not valid: {problem_lines(evaluation.problems)}"
        )
    if not evaluation.accepted:
        count = len(evaluation.violations)
        return Decision.refuse(
            403,
            "Forbidden",
            f"{count} compliance issue{'s' if count > 1 else ''} with the policies of {scope}: "
            + "; ".join(violation_text(violation) for violation in evaluation.violations),
        )
    try:
        unrenderable = render_refusal(request, evaluation, profile, catalogue)
    except ProblemsError as error:
        return Decision.refuse(
            422, "Invalid", f"the workload is not valid: {problem_lines(error.problems)}"
        )
    if unrenderable is not None:
        return Decision.refuse(422, "Invalid", unrenderable)
    annotations = {}
    if evaluation.audited:
        annotations[FINDINGS_ANNOTATION] = json.dumps(
            [finding(violation) for violation in evaluation.audited], separators=(",", ":")
        )
    return Decision(
        True,
        warnings=tuple(violation_text(violation) for violation in evaluation.warnings),
        audit_annotations=annotations,
    )


def evaluate_workload(
    obj: Mapping[str, object], policy_for: PolicyFor, catalogue: AssetCatalogue
) -> Evaluation:
    """A Workload object evaluated under the effective policy of its scope (the one pipeline
    the webhooks, ``policy report`` and the compliance status use). Raises
    :class:`~podwright.core.workloads.WorkloadInputError` for a malformed workload and
    :class:`PolicyError` when the policies cannot be combined or applied."""
    submission = submission_from_resource(obj)
    policy = policy_for(submission.workload_type)
    return evaluate(policy, submission, submission.workload_type, catalogue)


def render_refusal(
    request: Request, evaluation: Evaluation, profile: ClusterProfile, catalogue: AssetCatalogue
) -> str | None:
    """Why the effective workload of an accepted ``evaluation`` cannot run on ``profile``, as
    ``podwright render`` says it (:func:`~podwright.core.render.refusal_lines`, on one line), or
    None when it renders: rendered as the operator renders the admitted Workload, under its name
    in its namespace, with the assets of its namespace
    (:func:`~podwright.core.render.check_renders`: the same decisions, no manifests built).

    A create that leaves its name to the server (``generateName``) is rendered under a name of
    the length the server gives it: the base, at most 58 characters, and 5 random ones
    (``GenerateName`` in k8s.io/apiserver/pkg/storage/names/generate.go)."""
    metadata = request.obj.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    name = str(metadata.get("name") or "")
    if not name:
        name = str(metadata.get("generateName") or "")[:58] + "x" * 5
    try:
        check_renders(
            evaluation.workload_type,
            name,
            evaluation.workload,
            profile=profile,
            catalogue=catalogue,
            namespace=request.namespace or None,
        )
    except RenderError as error:
        return refusal_message(refusal_lines(profile.name, error.problems, evaluation.sources))
    return None


def _spec_is_new(request: Request) -> bool:
    """Whether ``request`` brings a spec not judged before: a create, or an update of a field
    that may change. An update of the metadata alone (the operator's own finalizer, an abort
    annotation, a label) is never refused, for the policies or the profile: that spec was
    judged when it came, and a Workload must still be held, aborted and let go."""
    return request.old is None or request.old.get("spec") != request.obj.get("spec")


def violation_text(violation: Violation) -> str:
    """One issue, as a webhook message or warning lists it: ``spec.compute.gpuDevicesRequest:
    16 is above the maximum 8 (rule max, policy 'prod-training' of cluster prod)``."""
    owner = (
        f", policy {violation.policy.name!r} of {violation.policy.scope}"
        if violation.policy is not None
        else ""
    )
    return f"spec.{violation.field}: {violation.details} (rule {violation.rule}{owner})"


def finding(violation: Violation) -> dict[str, str]:
    """A violation as a compliance finding (status and audit annotation)."""
    found = {"field": f"spec.{violation.field}", "rule": violation.rule}
    found["message"] = violation.details
    found["enforcement"] = violation.enforcement.value
    if violation.policy is not None:
        found["policy"] = violation.policy.source or violation.policy.name
        found["scope"] = str(violation.policy.scope)
    return found


def _mutation(
    request: Request, spec: Mapping[str, object] | None
) -> tuple[Mapping[str, object], ...]:
    """The mutating webhook's patch: a new Workload held, who submitted it recorded (or kept),
    and ``spec`` written (None: kept)."""
    return (
        _held(request)
        + _submitter_recorded(request)
        + (() if spec is None else _replace_spec(spec))
    )


def _held(request: Request) -> tuple[Mapping[str, object], ...]:
    """The patch that holds a new Workload with podwright's finalizer, so that the operator
    need not write it before it submits the task (a write per Workload saved). Only a create:
    the finalizer the operator removes once the task is finalized is never put back."""
    if request.operation != "CREATE":
        return ()
    metadata = request.obj.get("metadata")
    finalizers = metadata.get("finalizers") if isinstance(metadata, Mapping) else None
    if not isinstance(finalizers, list) or not finalizers:
        return ({"op": "add", "path": "/metadata/finalizers", "value": [WORKLOAD_FINALIZER]},)
    if WORKLOAD_FINALIZER in finalizers:
        return ()
    return ({"op": "add", "path": "/metadata/finalizers/-", "value": WORKLOAD_FINALIZER},)


def _submitter_recorded(request: Request) -> tuple[Mapping[str, object], ...]:
    """The patch that makes the Workload's :data:`SUBMITTED_BY_ANNOTATION` say who submitted it:
    on a create, the requester, whatever the creator wrote (a requester the review does not name
    claims nobody's name either: the annotation is taken out); on an update, what it said before
    the update (a change or a removal undone; a Workload created before submitters were recorded
    stays without one). Nothing when it says so already (as when the API server calls the webhook
    again after another one's change)."""
    if request.operation == "CREATE":
        submitter = request.user or None
    else:
        submitter = _annotation(request.old, SUBMITTED_BY_ANNOTATION)
    if _annotation(request.obj, SUBMITTED_BY_ANNOTATION) == submitter:
        return ()
    path = json_pointer("metadata", "annotations", SUBMITTED_BY_ANNOTATION)
    if submitter is None:
        return ({"op": "remove", "path": path},)
    metadata = request.obj.get("metadata")
    if not isinstance(metadata, Mapping) or not isinstance(metadata.get("annotations"), Mapping):
        value = {SUBMITTED_BY_ANNOTATION: submitter}
        return ({"op": "add", "path": json_pointer("metadata", "annotations"), "value": value},)
    return ({"op": "add", "path": path, "value": submitter},)  # an add replaces a member


def _annotation(obj: Mapping[str, object] | None, key: str) -> str | None:
    """The annotation ``key`` of ``obj`` (None: it has none, or there is no object)."""
    metadata = obj.get("metadata") if obj is not None else None
    annotations = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    value = annotations.get(key) if isinstance(annotations, Mapping) else None
    return value if isinstance(value, str) else None


def _replace_spec(spec: Mapping[str, object]) -> tuple[Mapping[str, object], ...]:
    return ({"op": "replace", "path": "/spec", "value": dict(spec)},)


def _restates(admitted: Mapping[str, object], given: Mapping[str, object]) -> bool:
    """Whether every value ``given`` holds is the admitted one (it may leave defaults out)."""
    for key, value in given.items():
        if key not in admitted:
            return False
        kept = admitted[key]
        if isinstance(value, Mapping) and isinstance(kept, Mapping):
            if not _restates(kept, value):
                return False
        elif value != kept:
            return False
    return True


def _changed_fixed_fields(old: Mapping[str, object], new: Mapping[str, object]) -> list[str]:
    old_spec, new_spec = old.get("spec"), new.get("spec")
    if not isinstance(old_spec, Mapping) or not isinstance(new_spec, Mapping):
        return [] if old_spec == new_spec else ["type"]
    updatable = _updatable(old_spec)
    return [
        key
        for key in sorted(set(old_spec) | set(new_spec), key=str)
        if key not in updatable
        and without_exclusions(old_spec.get(key)) != without_exclusions(new_spec.get(key))
    ]


def _updatable(spec: Mapping[str, object]) -> frozenset[str]:
    kind = spec.get("type")
    for workload_type, fields in UPDATABLE_FIELDS.items():
        if kind == workload_type.value:
            return fields
    return frozenset()


def _updatable_phrase(obj: Mapping[str, object]) -> str:
    spec = obj.get("spec")
    fields = _updatable(spec) if isinstance(spec, Mapping) else frozenset()
    if not fields:
        return " (delete it and submit a new one)"
    return f" (only {', '.join(f'spec.{name}' for name in sorted(fields))} may change)"


def problem_lines(problems: Iterable[FieldProblem]) -> str:
    """Problems on one line, each after the object it is found in."""
    return "; ".join(problem_text(problem) for problem in problems)


def problem_text(problem: FieldProblem) -> str:
    """One problem, as a message lists it: after the document it is in, when it names one."""
    return f"{problem.source}: {problem}" if problem.source else str(problem)


# Policies ----------------------------------------------------------------------------------------


def validate_policy(
    request: Request,
    scope_of: Callable[[Mapping[str, object]], Scope],
    existing: Sequence[Policy],
) -> Decision:
    """Refuse a malformed policy with every field-level error, and one that conflicts with the
    other policies of its branch of scopes (``existing``: every policy of the cluster, read as
    admitted; the one being updated is replaced by the request's object).

    ``scope_of`` gives the scope of the request's object (a ValueError names what is wrong)."""
    source = resource_source(request.obj)
    try:
        scope = scope_of(request.obj)
    except ValueError as error:
        return Decision.refuse(422, "Invalid", f"{source} is invalid: {error}")
    try:
        policy = policy_from_resource(request.obj, scope)
    except PolicyError as error:
        return Decision.refuse(
            422, "Invalid", f"{source} is invalid: " + "; ".join(map(str, error.problems))
        )
    others = [other for other in existing if other.source != source]
    problems = conflicts(policy, others)
    if problems:
        return Decision.refuse(
            422,
            "Invalid",
            f"{source} conflicts with the policies of its scopes: " + problem_lines(problems),
        )
    return Decision(True)


def conflicts(policy: Policy, others: Sequence[Policy]) -> list[FieldProblem]:
    """What goes wrong when ``policy`` joins ``others`` and did not before: the problems of
    combining the branch of each scope it governs (its own, and every scope of a policy of its
    type below it), each once."""
    scopes = {policy.scope} | {
        other.scope
        for other in others
        if other.workload_type is policy.workload_type and policy.scope.contains(other.scope)
    }
    before = _combining_problems(others, scopes, policy.workload_type)
    after = _combining_problems([*others, policy], scopes, policy.workload_type)
    by_source = {other.source: other for other in others}
    return [
        _as_conflict_of(policy, problem, by_source.get(problem.source))
        for key, problem in after.items()
        if key not in before
    ]


def _as_conflict_of(policy: Policy, problem: FieldProblem, claimant: Policy | None) -> FieldProblem:
    """A problem of combining the branch, told from ``policy``'s side: when it is another
    policy (below it) whose rules now clash with it, the field already has rules there."""
    if claimant is None:
        return problem
    return FieldProblem(
        problem.path,
        f"already has rules in {claimant.scope}: {claimant.name!r} (a field's rules are set by "
        "one scope of a branch)",
        policy.source,
    )


def _combining_problems(
    policies: Sequence[Policy], scopes: Iterable[Scope], workload_type: WorkloadType
) -> dict[str, FieldProblem]:
    found: dict[str, FieldProblem] = {}
    for scope in sorted(scopes, key=lambda s: s.names):
        try:
            effective_policy(policies, scope, workload_type)
        except PolicyError as error:
            for problem in error.problems:
                found.setdefault(f"{problem.source}: {problem}", problem)
    return found
