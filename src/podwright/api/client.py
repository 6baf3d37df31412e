"""The tasks of a backend, from Python: :class:`Client` submits, reads, watches, aborts, deletes.

``podwright run``, ``list``, ``status``, ``logs``, ``abort`` and ``delete`` are built on it (an
import-linter contract keeps them to :mod:`podwright.api`), so a notebook sees what they show::

    import podwright

    workload = podwright.load("examples/workload-local.yaml")
    client = podwright.Client(backend="local")
    submission = client.submit(workload)
    for change in client.watch(submission.task_id):
        print(change)
    client.close()

Two kinds of client, by ``backend``:

* ``None``, ``"local"`` or ``"kubernetes"``: this machine's task store (``home``, else
  ``$PODWRIGHT_HOME``), which holds the tasks of both. A submission is recorded there and an
  executor started for it when none serves its backend (``podwright executor --until-idle``, in
  the background: it outlives this process). ``submit`` runs it on the backend given, else on a
  configured cluster (a kubeconfig, or a pod's service account), else locally.
* ``"operator"``: the Workloads of the cluster's operator (``kubeconfig``, ``context``,
  ``namespace``; ``all_namespaces`` to read them all), :mod:`podwright.api.operator_tasks`.

Every failure is one of :mod:`podwright.api.errors`: an unknown task is
:class:`~podwright.api.errors.TaskNotFoundError`, an API server without answer
:class:`~podwright.api.errors.BackendUnreachableError`, a store or executor that cannot serve
:class:`~podwright.api.errors.BackendError`.
"""

from __future__ import annotations

import builtins
import contextlib
import copy
import dataclasses
import json
import math
import secrets
import shutil
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Protocol, TypeVar

from podwright.adapters.kubernetes import KubernetesClient, KubernetesConfigError, connect
from podwright.adapters.local.cluster import RECORDED, RUNNABLE
from podwright.adapters.sqlite_store import SQLiteTaskStore
from podwright.api.backends import (
    BACKENDS,
    FALLBACK_NAMESPACE,
    LOCAL,
    OPERATOR,
    ClusterAccess,
    Identity,
    access_for,
    check_reachable,
    cluster_client,
    cluster_problem,
    context_namespace,
    resolve_backend,
)
from podwright.api.errors import (
    BackendError,
    BackendUnreachableError,
    InvalidInputError,
    PodwrightError,
    TaskNotFoundError,
    TaskStoreUnavailableError,
)
from podwright.api.executors import (
    ExecutorKeeper,
    ExecutorLaunch,
    ExecutorStartError,
    load_lifecycle_config,
)
from podwright.api.loading import Workload
from podwright.api.operator_tasks import (
    WAITING,
    NoExecutor,
    OperatorTarget,
    WatchedTasks,
    WorkloadLogTail,
    WorkloadView,
    allowed,
    create_workload,
    following,
    operator_target,
    runner,
    workload_object,
    workload_tasks,
)
from podwright.api.pipeline import Prepared, prepare
from podwright.api.state import default_home, local_user, open_store, utc_now
from podwright.api.task_logs import (
    LOST_SERVER_AFTER,
    ClusterLogTail,
    LocalLogTail,
    LogTail,
    local_log_directories,
    primary_container,
)
from podwright.core.label_selectors import LabelSelector, SelectorError, parse_label_selector
from podwright.core.lifecycle.phases import Phase
from podwright.core.lifecycle.plugin_state import CorruptedPluginStateError, decode_state
from podwright.core.workload_fields import WorkloadType
from podwright.engine.config import LifecycleConfig
from podwright.engine.executor import resource_ref, workload_resource
from podwright.engine.kubernetes_port import ForbiddenError, NotFoundError, ObjectRef
from podwright.engine.plugin import PluginError
from podwright.engine.plugins import default_plugins
from podwright.engine.task_store import (
    AttachedEvent,
    HistoryEntry,
    NewTask,
    StaleRevisionError,
    TaskRecord,
    TaskStoreError,
)
from podwright.engine.task_store import TaskNotFoundError as UnrecordedTaskError
from podwright.engine.task_views import (
    SortKey,
    TaskFilter,
    in_order,
    phase_change,
    sort_tasks,
    task_event,
    task_item,
    task_list,
    task_status,
)
from podwright.engine.workload_tasks import pending_record

T = TypeVar("T")

POLL_SECONDS = 0.2
"""How often a task is looked at while it is followed (this machine's store is read again only
when another process wrote it)."""
DELETE_TIMEOUT = timedelta(minutes=2)
"""How long ``delete`` waits for an active task's abort by default."""


# What the client returns -------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class TaskStatus:
    """A task with its phase history and events, as one write of its record left them."""

    record: TaskRecord
    history: list[HistoryEntry]
    events: list[AttachedEvent]
    backend: str
    """Where it runs, as the commands show it (``local``, ``kubernetes/<context>#<server>``,
    ``operator/<cluster>``)."""

    @property
    def task_id(self) -> str:
        return self.record.task_id

    @property
    def phase(self) -> Phase:
        return self.record.phase

    @property
    def finalized(self) -> bool:
        return self.record.finalized

    def to_data(self) -> dict[str, Any]:
        """The task as ``podwright status -o json`` prints it."""
        return task_status(self.record, self.history, self.events, backend=self.backend)


@dataclasses.dataclass(frozen=True)
class TaskChange:
    """A phase the task entered, or an event attached to it: what :meth:`Client.watch`
    yields, in the order they happened."""

    task_id: str
    at: datetime
    what: HistoryEntry | AttachedEvent

    @property
    def is_phase(self) -> bool:
        return isinstance(self.what, HistoryEntry)

    @property
    def text(self) -> str:
        """The change in words, as ``podwright status --watch`` prints it: the phase and why,
        or ``event:`` and the event."""
        if isinstance(self.what, HistoryEntry):
            return history_line(self.what)
        return f"event: {self.what.reason}"

    def __str__(self) -> str:
        return f"{self.at:%H:%M:%S}  {self.text}"

    def to_data(self) -> dict[str, Any]:
        """As ``podwright status --watch -o json`` prints it: a TaskPhase or a TaskEvent."""
        if isinstance(self.what, HistoryEntry):
            return phase_change(self.task_id, self.what)
        return task_event(self.task_id, self.what)


def history_line(entry: HistoryEntry) -> str:
    """A phase and why: the error's message when it failed, else the reason."""
    why = entry.error_message or entry.reason
    return f"{entry.phase.value}  {why}" if why else entry.phase.value


class Keeper(Protocol):
    """Keeps whatever runs a task serving it while someone waits on it."""

    pid: int | None
    started: bool

    def keep(self, task_id: str, revision: int, *, now: bool = False) -> None: ...


@dataclasses.dataclass(frozen=True)
class SubmittedTask:
    """A task just submitted: its record, its backend and who runs it."""

    record: TaskRecord
    backend: str
    """The backend key (``local``, ``kubernetes/<context>#<server>``, ``operator/<cluster>``)."""
    keeper: Keeper
    """The executor serving it (its ``pid``, whether it was ``started`` for it); for the
    operator's tasks nothing here runs them."""
    runner: str
    """Who runs it, as messages name it."""
    again: str = ""
    """The options of the commands that find the task again (``--backend operator -n x``)."""
    workload: Mapping[str, Any] | None = None
    """The Workload created, for the operator's tasks."""

    @property
    def task_id(self) -> str:
        return self.record.task_id


@dataclasses.dataclass(frozen=True)
class TaskOutcome:
    """What became of one task of an ``abort`` or a ``delete``: ``message`` says it in one
    line. ``error`` is set when a ``delete`` could not delete it (it deletes the others all
    the same; an ``abort`` that cannot be done raises)."""

    task_id: str
    message: str
    error: PodwrightError | None = None


class TaskRecords(Protocol):
    """A task's record, history and events, as the store or a watched Workload gives them."""

    def get(self, task_id: str) -> TaskRecord: ...

    def history(self, task_id: str) -> list[HistoryEntry]: ...

    def events(self, task_id: str) -> list[AttachedEvent]: ...


class TaskReader(TaskRecords, Protocol):
    """:class:`TaskRecords` that also take an abort request."""

    def request_abort(self, task_id: str, now: datetime) -> TaskRecord: ...


@dataclasses.dataclass(frozen=True)
class Following:
    """What follows a task as it runs (``podwright run``'s display): its record, read afresh
    (``view``), its primary container's output (``logs``), and its ``keeper``."""

    view: TaskReader
    logs: LogTail
    keeper: Keeper


# The client -------------------------------------------------------------------------------------


class Client:
    """The tasks of one backend: this machine's task store (``backend`` None, ``"local"`` or
    ``"kubernetes"``), or the Workloads of the cluster's operator (``"operator"``).

    ``kubeconfig`` and ``context`` say how to reach the cluster (a store's cluster tasks record
    their own context; ``kubeconfig`` names the file holding it). ``namespace`` is where a
    submission runs (default: the workload's ``metadata.namespace``, else the kubeconfig
    context's), and for the operator where its Workloads are read (``all_namespaces``: every
    namespace). ``home`` is podwright's state directory (default ``$PODWRIGHT_HOME``, else
    ``~/.local/state/podwright``); ``lifecycle_config`` the file of the lifecycle engine's
    settings an executor started for a submission uses. Close it (or use it as a context
    manager) to release the store.
    """

    def __init__(
        self,
        backend: str | None = None,
        *,
        kubeconfig: str | None = None,
        context: str | None = None,
        namespace: str | None = None,
        all_namespaces: bool = False,
        home: str | Path | None = None,
        lifecycle_config: str | None = None,
        identity: Identity | None = None,
    ) -> None:
        if backend is not None and backend not in BACKENDS:
            raise InvalidInputError(f"backend {backend!r}: one of {', '.join(BACKENDS)}, or None")
        self.backend = backend
        self.access = ClusterAccess(kubeconfig, context)
        self.namespace = namespace
        self.all_namespaces = all_namespaces
        self.home = Path(home if home is not None else default_home())
        self.lifecycle_config = lifecycle_config
        if backend == OPERATOR and lifecycle_config is not None:
            raise InvalidInputError(
                "lifecycle_config: the operator's lifecycle configuration applies to its "
                "Workloads; leave it out"
            )
        self._lifecycle = load_lifecycle_config(lifecycle_config)
        self._store: SQLiteTaskStore | None = None
        self._key: str | None = None
        self._reachable = False
        self._target: OperatorTarget | None = None
        if backend == OPERATOR:
            self._target = operator_target(
                kubeconfig, context, namespace, all_namespaces=all_namespaces, identity=identity
            )
        elif identity is not None:
            raise InvalidInputError(
                "identity: goes with the operator's Workloads, read and written as that user "
                "(this machine's store is this machine's user's)"
            )
        elif all_namespaces:
            raise InvalidInputError(
                "all_namespaces: goes with the operator's Workloads (this machine's store "
                "holds the tasks of every namespace)"
            )

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the task store, if it was opened."""
        if self._store is not None:
            self._store.close()
            self._store = None

    @property
    def is_operator(self) -> bool:
        return self._target is not None

    def allowed(self, verb: str, namespace: str, resource: str = "workloads") -> bool:
        """Whether this client's user may ``verb`` (get, list, watch, create, patch, delete) the
        operator's Workloads (``resource`` ``pods/log``: their pods' output) in ``namespace``,
        as the cluster's RBAC answers (``kubectl auth can-i``); on this machine's store,
        always."""
        if self._target is None:
            return True
        return allowed(self._target, verb, namespace, resource)

    @property
    def store(self) -> SQLiteTaskStore:
        """This machine's task store, opened on first use."""
        if self._target is not None:
            raise InvalidInputError("the operator's tasks are Workloads: no task store is read")
        if self._store is None:
            self._store = open_store(self.home)
        return self._store

    @property
    def where(self) -> str:
        """Where the client's tasks are, in a sentence's words."""
        if self._target is not None:
            return self._target.where()
        return str(self.store.path)

    @property
    def again(self) -> str:
        """The options a command needs to find this client's tasks again."""
        return "" if self._target is None else self._target.again()

    # Submitting ---------------------------------------------------------------------------------

    def namespace_of(self, workload: Workload) -> str | None:
        """Where ``workload`` runs: the client's ``namespace``, else the workload's own
        ``metadata.namespace``; the two must agree, as kubectl requires of a file's namespace
        and its ``--namespace``. None when neither says."""
        namespace = self.namespace
        if namespace and workload.namespace and namespace != workload.namespace:
            raise InvalidInputError(
                f"--namespace {namespace}: the workload file says metadata.namespace "
                f"{workload.namespace}; leave one out, or make them agree"
            )
        return namespace or workload.namespace

    def backend_key(self) -> str:
        """The key of the backend a submission runs on (see :mod:`podwright.api.backends`),
        once its cluster's configuration is known to load."""
        if self._target is not None:
            return self._target.backend()
        if self._key is None:
            self._key = resolve_backend(self.backend, self.access)
        return self._key

    def submission_namespace(self, workload: Workload) -> str | None:
        """Where a submission of ``workload`` runs: :meth:`namespace_of`, else on a cluster the
        kubeconfig context's namespace (None: locally, the fallback namespace)."""
        namespace = self.namespace_of(workload)
        key = self.backend_key()
        if namespace is None and key != LOCAL:
            namespace = context_namespace(self._cluster_access(key))
        return namespace

    def namespace_object(
        self, namespace: str, *, unreadable: Callable[[], None] | None = None
    ) -> Mapping[str, object] | None:
        """The cluster's Namespace ``namespace``, whose labels name its project and department
        (give it to :func:`~podwright.api.loading.load_policies` as ``namespaces``); None on
        the local backend, when there is none, or when this user may not read it (then
        ``unreadable`` is called)."""
        key = self.backend_key()
        if key == LOCAL:
            return None
        with cluster_client(self._cluster_access(key)) as client:
            try:
                return client.get(ObjectRef("v1", "Namespace", "", namespace))
            except NotFoundError:
                return None
            except ForbiddenError:
                if unreadable is not None:
                    unreadable()
                return None

    def submit(
        self,
        workload: Workload | Prepared,
        *,
        name: str | None = None,
        labels: Mapping[str, str] | None = None,
        working_dir: str | Path | None = None,
    ) -> SubmittedTask:
        """Submit a task: a :class:`~podwright.api.pipeline.Prepared` workload (through its
        policies and rendered, :func:`~podwright.api.pipeline.prepare`), or a workload taken as
        written. ``name`` renames the workload (a Prepared one is named already), ``labels``
        (default: the workload's) select the task in :meth:`list`. On the local backend the
        containers without a ``workingDir`` run in ``working_dir`` (default: the current
        directory). To the operator a Workload is submitted as it is: the cluster's policies,
        assets and profile apply there.

        The task records who submitted it: this machine's user
        (:func:`~podwright.api.state.local_user`); for the operator, the user the API server
        authenticated, as podwright's mutating webhook records it on the Workload.

        Nothing is recorded unless the backend can run it: a manifest the local backend cannot
        run, or a cluster that does not answer, is refused first."""
        if self._target is not None:
            if labels is not None or working_dir is not None:
                given = "labels" if labels is not None else "working_dir"
                raise InvalidInputError(
                    f"{given}: the operator takes the Workload as it is (its own labels; its "
                    f"containers run in their images); leave {given} out"
                )
            return self._submit_to_operator(workload, name)
        if isinstance(workload, Prepared):
            if name is not None:
                raise InvalidInputError(
                    "name: a prepared workload is named already; give the name to prepare()"
                )
            prepared = workload
        else:
            prepared = prepare(workload, namespace=self.submission_namespace(workload), name=name)
        key = self.backend_key()
        namespace = self._prepared_namespace(prepared, key)
        manifests: Sequence[Mapping[str, Any]] = prepared.rendering.manifests
        if key == LOCAL:
            refuse_unrunnable_locally(prepared)
            directory = Path(working_dir) if working_dir is not None else Path.cwd()
            manifests = with_working_dir(manifests, directory.resolve(), namespace)
        self.check_reachable()
        task = NewTask(
            task_id=f"{prepared.name}-{secrets.token_hex(3)}",
            workload_type=str(prepared.workload.type.value),
            name=prepared.name,
            namespace=namespace,
            backend=key,
            workload=_plain(prepared.workload.spec),
            effective=_plain(prepared.effective),
            manifests=tuple(_plain(manifest) for manifest in manifests),
            submitted_at=utc_now(),
            labels=dict(prepared.workload.labels if labels is None else labels),
            submitted_by=local_user(),
        )
        keeper = ExecutorKeeper(self._launch(key))
        record = _stored(lambda: self.store.submit(task))
        keeper.keep(task.task_id, record.revision, now=True)
        return SubmittedTask(record, key, keeper, _executor_runner(keeper))

    def check_reachable(self) -> None:
        """That the API server of the backend a submission runs on answers (``GET /version``,
        a few bounded retries with backoff; once per client):
        :class:`~podwright.api.errors.BackendUnreachableError` naming the server and the cause
        when it does not. Nothing to check locally, nor for the operator (the create says)."""
        if self._target is not None or self._reachable:
            return
        check_reachable(self.backend_key(), self.access.kubeconfig)
        self._reachable = True

    def _prepared_namespace(self, prepared: Prepared, key: str) -> str:
        """Where a prepared workload runs: the namespace it was judged and rendered for, which
        the client's (or its file's) must not contradict; else as :meth:`submission_namespace`
        says. A workload judged without a namespace, in the policies' deepest scope, runs so
        only on this machine: a cluster's namespace has a scope of its own."""
        wanted = self.namespace_of(prepared.workload)
        if prepared.namespace and wanted and wanted != prepared.namespace:
            raise InvalidInputError(
                f"namespace {wanted}: the workload was prepared for namespace "
                f"{prepared.namespace}; prepare it for {wanted} (prepare(..., namespace=...))"
            )
        namespace = (
            prepared.namespace or self.submission_namespace(prepared.workload) or FALLBACK_NAMESPACE
        )
        evaluation = prepared.evaluation
        if evaluation is not None and prepared.namespace is None and key != LOCAL:
            raise InvalidInputError(
                f"the workload was judged without a namespace, in {evaluation.scope} (the "
                f"policies' deepest scope), and on the cluster it runs in namespace {namespace}, "
                f"whose scope is its own: prepare it with namespace={namespace!r}"
            )
        return namespace

    def _submit_to_operator(self, workload: Workload | Prepared, name: str | None) -> SubmittedTask:
        target = self._require_target()
        if isinstance(workload, Prepared):
            raise InvalidInputError(
                "the operator renders a Workload under the cluster's policies, assets and "
                "profile: submit the workload itself, not a prepared one"
            )
        namespace = self.namespace_of(workload) or target.namespace or target.default_namespace
        target = dataclasses.replace(target, namespace=namespace)
        document = workload_object(workload, str(namespace), name)
        with cluster_client(target.access) as client:
            created = create_workload(client, document, target)
        record = pending_record(created, WAITING, utc_now())
        return SubmittedTask(
            record, target.backend(), NoExecutor(), runner(record), target.again(), created
        )

    @contextlib.contextmanager
    def following(self, submission: SubmittedTask | TaskRecord) -> Iterator[Following]:
        """What follows a task as it runs, until the block ends: its record read afresh, its
        primary container's output, and what keeps it served (a submission's own keeper)."""
        record = submission.record if isinstance(submission, SubmittedTask) else submission
        if self._target is not None:
            with self._workload_view(submission) as view:
                task_id = record.task_id
                workload_logs = WorkloadLogTail(self._target.access, lambda: view.get(task_id))
                with contextlib.closing(workload_logs):
                    yield Following(view, workload_logs, NoExecutor())
            return
        keeper: Keeper = (
            submission.keeper
            if isinstance(submission, SubmittedTask)
            else ExecutorKeeper(self._launch(record.task.backend))
        )
        try:
            logs = self._log_tail(record, every_container=False)
        except InvalidInputError as error:  # it loaded when the task was submitted
            raise BackendError(
                f"{error} (task {record.task_id} goes on with the executor)"
            ) from error
        with contextlib.closing(logs):
            yield Following(_StoreReader(self.store), logs, keeper)

    @contextlib.contextmanager
    def _workload_view(self, submission: SubmittedTask | TaskRecord) -> Iterator[WorkloadView]:
        """The task's Workload, kept current by a watch of it, until the block ends."""
        target = self._require_target()
        if isinstance(submission, SubmittedTask) and submission.workload is not None:
            with (
                cluster_client(target.access) as client,
                following(client, submission.workload) as view,
            ):
                yield view
            return
        record = submission.record if isinstance(submission, SubmittedTask) else submission
        there = dataclasses.replace(target, namespace=record.task.namespace)
        with workload_tasks(there) as tasks, tasks.following(tasks.find(record.task_id)) as view:
            yield view

    # Reading ------------------------------------------------------------------------------------

    def get(self, task_id: str | None = None) -> TaskStatus:
        """The task (a task id; for the operator also a Workload's name), else the latest one,
        with its history and events."""
        if self._target is not None:
            with workload_tasks(self._target) as tasks:
                record = tasks.find(task_id)
                return TaskStatus(
                    record, tasks.history(record), tasks.events(record), self._target.backend()
                )
        found = self._find(task_id)
        return _read_status(_StoreReader(self.store), found.task_id)

    def list(
        self,
        *,
        phases: Iterable[Phase | str] = (),
        types: Iterable[str] = (),
        selector: LabelSelector | str = "",
        active: bool = False,
        sort_by: SortKey | str = SortKey.SUBMITTED,
    ) -> list[TaskRecord]:
        """The tasks the filters select (each given: any of its values; none: every task), in
        the order of ``sort_by`` (submitted, updated, name, phase, type)."""
        selection = Selection.of(phases, types, selector, active, sort_by)
        if self._target is not None:
            with workload_tasks(self._target, label_selector=selection.label_selector) as tasks:
                return selection.select(tasks.records())
        return selection.select(_stored(self.store.list_tasks))

    def item(self, record: TaskRecord) -> dict[str, Any]:
        """A task as ``podwright list -o json`` shows it (and ``list -w`` each change)."""
        return task_item(record, backend=self.shown_backend)

    def list_document(self, records: Iterable[TaskRecord]) -> dict[str, Any]:
        """Tasks as ``podwright list -o json`` prints them: a TaskList."""
        return task_list(self.item(record) for record in records)

    @property
    def shown_backend(self) -> str | None:
        """The backend every task of the client shows (the operator's), else None: each its
        own."""
        return None if self._target is None else self._target.backend()

    # Watching -----------------------------------------------------------------------------------

    def watch(self, task_id: str, *, since: TaskStatus | None = None) -> Iterator[TaskChange]:
        """Each phase the task enters and each event attached to it, in the order they
        happened, until it is finalized: those after ``since`` (a :meth:`get` of it), else all
        of them from its submission on. An unknown task is refused here, before iterating;
        close the iterator to stop early."""
        if since is None:
            shown_phases, shown_events = 0, []
        else:
            shown_phases, shown_events = len(since.history), list(since.events)
        if self._target is not None:
            found = self.get(task_id)
            if found.finalized:
                return iter(_news(found, shown_phases, shown_events))
            return self._watch_workload(found.record, shown_phases, shown_events)
        changes = _StoreChanges(self.store)  # before the first read: no change is missed
        found_id = self._find(task_id).task_id
        reader = _StoreReader(self.store)
        return _changes(reader, found_id, changes, shown_phases, shown_events)

    def _watch_workload(
        self, record: TaskRecord, shown_phases: int, shown_events: builtins.list[AttachedEvent]
    ) -> Iterator[TaskChange]:
        with self._workload_view(record) as view:
            yield from _changes(view, record.task_id, view.changes, shown_phases, shown_events)

    def watch_list(
        self,
        *,
        phases: Iterable[Phase | str] = (),
        types: Iterable[str] = (),
        selector: LabelSelector | str = "",
        active: bool = False,
        sort_by: SortKey | str = SortKey.SUBMITTED,
        since: Sequence[TaskRecord] | None = None,
    ) -> Iterator[TaskRecord]:
        """Each task the filters select (see :meth:`list`) as it appears, changes phase or is
        finalized, forever (close the iterator to stop): those that differ from ``since`` (a
        :meth:`list`) first, else every one there is."""
        selection = Selection.of(phases, types, selector, active, sort_by)
        shown = {record.task_id: (record.phase, record.finalized) for record in since or ()}
        if self._target is not None:
            with (
                workload_tasks(self._target, label_selector=selection.label_selector) as tasks,
                tasks.watching() as watched,
            ):
                yield from _list_changes(watched.records, watched.changes, selection, shown)
            return
        changes = _StoreChanges(self.store)
        yield from _list_changes(lambda: _stored(self.store.list_tasks), changes, selection, shown)

    @contextlib.contextmanager
    def feed(self) -> Iterator[TaskFeed]:
        """Every task of the client, kept current until the block ends: for a process that
        shows them to many readers (the console), so that one watch (the operator's
        Workloads) or one reader of the store serves them all. Read it from one thread."""
        if self._target is not None:
            with workload_tasks(self._target) as tasks, tasks.watching() as watched:
                yield _WorkloadFeed(watched, self._target.backend())
            return
        yield _StoreFeed(self.store)

    # Output -------------------------------------------------------------------------------------

    def logs(
        self, task_id: str, *, follow: bool = False, stop: Callable[[], bool] | None = None
    ) -> Iterator[str]:
        """The task's output, line by line: every container of a local task's pods, in order;
        the primary container of a cluster task's primary pod. With ``follow``, until the task
        is finalized, or until ``stop()`` says so (asked between reads). An unknown task is
        refused here, before iterating;
        :class:`~podwright.api.errors.BackendUnreachableError` when its API server does not
        answer (following: for ``LOST_SERVER_AFTER``)."""
        stopped = stop or _never
        if self._target is not None:
            return self._workload_logs(self.get(task_id).record, follow=follow, stop=stopped)
        record = self._find(task_id)
        tail = self._log_tail(record, every_container=True)
        return self._store_logs(tail, record.task_id, follow=follow, stop=stopped)

    def _store_logs(
        self, tail: LogTail, task_id: str, *, follow: bool, stop: Callable[[], bool]
    ) -> Iterator[str]:
        with contextlib.closing(tail):
            current = _StoreReader(self.store).get
            yield from _output(tail, lambda: current(task_id), task_id, follow, stop)

    def _workload_logs(
        self, record: TaskRecord, *, follow: bool, stop: Callable[[], bool]
    ) -> Iterator[str]:
        access = self._require_target().access
        if not follow:
            tail = WorkloadLogTail(access, lambda: record)
            with contextlib.closing(tail):
                yield from _output(tail, lambda: record, record.task_id, False, stop)
            return
        with self._workload_view(record) as view:
            task_id = record.task_id
            tail = WorkloadLogTail(access, lambda: view.get(task_id))
            with contextlib.closing(tail):
                yield from _output(tail, lambda: view.get(task_id), task_id, True, stop)

    # Aborting and deleting ----------------------------------------------------------------------

    def abort(self, task_id: str) -> TaskOutcome:
        """Ask for the task to be aborted: its executor (started when none runs) stops its
        resources and ends it Aborted; for the operator's tasks, the operator does."""
        if self._target is not None:
            with workload_tasks(self._target) as tasks:
                record = tasks.find(task_id)
                return TaskOutcome(record.task_id, tasks.abort(record))
        record = self._find(task_id)
        if record.phase.is_terminal:
            return TaskOutcome(task_id, f"task {task_id} already ended: {record.phase.value}")
        launch = self._launch(record.task.backend)
        problem = _unreachable(launch)
        if problem is not None:
            raise BackendError(
                f"task {task_id} cannot be aborted: its backend {record.task.backend} cannot be "
                f"reached from here: {problem}; 'podwright delete {task_id}' removes its record"
            )
        _stored(lambda: self.store.request_abort(task_id, utc_now()))
        try:
            serving = launch.ensure()
        except ExecutorStartError as error:
            raise BackendError(f"abort of task {task_id} recorded, but {error}") from error
        who = "a background executor" if serving.started else "the executor"
        return TaskOutcome(
            task_id, f"abort requested for task {task_id}: {who} (pid {serving.pid}) stops it"
        )

    def delete(
        self,
        task_ids: str | Iterable[str] = (),
        *,
        all_finished: bool = False,
        force: bool = False,
        timeout: timedelta | float = DELETE_TIMEOUT,
        wait: bool = False,
        progress: Callable[[str], None] | None = None,
        report: Callable[[TaskOutcome], None] | None = None,
    ) -> builtins.list[TaskOutcome]:
        """Delete tasks (and every finalized one, ``all_finished``), each on its own: an
        outcome each, in order, with its ``error`` when it could not be deleted (an unknown id
        is a :class:`~podwright.api.errors.TaskNotFoundError`).

        From this machine's store an active task is aborted first and removed once its
        executor finalized it (within ``timeout``), with its history, events and local log
        files. A task whose backend cannot be reached from here is removed only when its
        resource was never created there, unless ``force``. For the operator, its Workload is
        deleted (the operator aborts and finalizes the task first); ``wait`` waits until it is
        gone, within ``timeout`` (a timedelta, or seconds). ``progress`` hears what is being
        waited for, ``report`` each outcome as it comes."""
        ids = [task_ids] if isinstance(task_ids, str) else list(task_ids)
        limit = timeout if isinstance(timeout, timedelta) else timedelta(seconds=timeout)
        outcomes = _Outcomes(report)
        if self._target is not None:
            if force:
                raise InvalidInputError(
                    "--force: with --backend operator the operator finalizes every Workload "
                    "deleted (podwright's finalizer holds it until then); leave --force out"
                )
            self._delete_workloads(ids, all_finished, outcomes, wait=wait, timeout=limit)
            return outcomes.all
        if wait:
            raise InvalidInputError(
                "--wait: goes with --backend operator (a task of this machine's store is "
                "deleted once its abort ended)"
            )
        records: dict[str, TaskRecord] = {}
        for task_id in dict.fromkeys(ids):
            try:
                records[task_id] = self.store.get(task_id)
            except UnrecordedTaskError:
                outcomes.append(
                    _failed(task_id, TaskNotFoundError(f"no task {task_id!r} in {self.where}"))
                )
            except TaskStoreError as error:
                raise BackendError(str(error)) from error
        if all_finished:
            for record in _stored(self.store.list_tasks):
                if record.finalized:
                    records.setdefault(record.task_id, record)
        deleter = _Deleter(
            self.store, self.home, self._launch, force=force, timeout=limit, progress=progress
        )
        for task_id, record in records.items():
            try:
                outcomes.append(TaskOutcome(task_id, deleter.delete(record)))
            except PodwrightError as error:
                outcomes.append(_failed(task_id, error))
        return outcomes.all

    def _delete_workloads(
        self,
        task_ids: builtins.list[str],
        all_finished: bool,
        outcomes: _Outcomes,
        *,
        wait: bool,
        timeout: timedelta,
    ) -> None:
        target = self._require_target()
        with workload_tasks(target) as tasks:
            records: dict[str, TaskRecord] = {}
            for task_id in dict.fromkeys(task_ids):
                try:
                    record = tasks.find(task_id)
                except TaskNotFoundError as error:
                    outcomes.append(_failed(task_id, error))
                    continue
                records.setdefault(record.task_id, record)
            if all_finished:
                for record in tasks.records():
                    if record.finalized:
                        records.setdefault(record.task_id, record)
            deleted: builtins.list[TaskRecord] = []
            for record in records.values():
                try:
                    outcomes.append(TaskOutcome(record.task_id, tasks.delete(record)))
                except PodwrightError as error:
                    outcomes.append(_failed(record.task_id, error))
                else:
                    deleted.append(record)
            if not wait or not deleted:
                return
            left = {record.task_id for record in tasks.wait_gone(deleted, timeout)}
        for record in deleted:
            if record.task_id not in left:
                outcomes.append(
                    TaskOutcome(record.task_id, f"task {record.task_id}: its Workload is gone")
                )
                continue
            outcomes.append(
                _failed(
                    record.task_id,
                    BackendError(
                        f"task {record.task_id}: its Workload {record.task.namespace}/"
                        f"{record.task.name} is still there after {duration_text(timeout)}: the "
                        f"operator has not finalized it (podwright status {record.task_id}"
                        f"{target.again(record.task.namespace)})"
                    ),
                )
            )

    # Helpers ------------------------------------------------------------------------------------

    def _require_target(self) -> OperatorTarget:
        assert self._target is not None  # the callers checked
        return self._target

    def _cluster_access(self, key: str) -> ClusterAccess:
        return access_for(key, self.access.kubeconfig)

    def _launch(self, key: str) -> ExecutorLaunch:
        return ExecutorLaunch(
            self.home, self.store.path, key, self.access.kubeconfig, self.lifecycle_config
        )

    def _find(self, task_id: str | None) -> TaskRecord:
        """The store's task of ``task_id``, else its latest one."""
        if task_id is not None:
            return _stored(lambda: self.store.get(task_id))
        records = _stored(self.store.list_tasks)
        if not records:
            raise TaskNotFoundError(f"no tasks in {self.store.path}")
        return records[-1]

    def _log_tail(self, record: TaskRecord, *, every_container: bool) -> LogTail:
        """The task's output: from the local log files (every container's, or the primary
        container's), or the cluster's (its primary container's)."""
        ref = resource_ref(record, default_plugins(), self._lifecycle)
        backend = record.task.backend
        if backend == LOCAL:
            container = None
            if not every_container:
                container = primary_container(workload_resource(record, default_plugins()))
            return LocalLogTail(self.home / LOCAL, ref, container)
        problem = cluster_problem(backend, self.access.kubeconfig)
        if problem is not None:
            raise InvalidInputError(f"task {record.task_id} runs on {backend}: {problem}")
        access = access_for(backend, self.access.kubeconfig)
        try:
            client = KubernetesClient(connect(access.kubeconfig, access.context))
        except KubernetesConfigError as error:
            raise InvalidInputError(f"task {record.task_id} runs on {backend}: {error}") from error
        return ClusterLogTail(client, ref)


# Submitting ---------------------------------------------------------------------------------------


def refuse_unrunnable_locally(prepared: Prepared) -> None:
    """:class:`InvalidInputError`, before anything is recorded: a manifest the local backend
    cannot run."""
    handled = RUNNABLE | RECORDED
    for manifest in prepared.rendering.manifests:
        api_version, kind = str(manifest.get("apiVersion")), str(manifest.get("kind"))
        if (api_version, kind) in handled:
            continue
        group = api_version.partition("/")[0]
        workload_type = str(prepared.workload.type.value)
        if group == "kubeflow.org":
            what = f"a {workload_type} ({kind.removesuffix('Job')}) workload renders a {kind}"
        elif group == "serving.knative.dev":
            what = f"an {workload_type} workload renders a Knative {kind}"
        else:
            what = f"a {workload_type} workload renders a {kind} ({api_version})"
        runs = " and ".join(f"{runnable}s" for _, runnable in sorted(RUNNABLE, reverse=True))
        plugin = default_plugins().get((api_version, kind))
        needs = plugin.properties.served_by if plugin is not None else ""
        where = f"a cluster with {needs}" if needs else "a cluster"
        raise InvalidInputError(
            f"{what}; the local backend runs {runs} only: run it with --backend kubernetes on "
            f"{where}"
        )


def with_working_dir(
    manifests: Sequence[Mapping[str, Any]], directory: Path, namespace: str
) -> list[Mapping[str, Any]]:
    """The manifests, in ``namespace`` unless they name one, with ``directory`` as the
    ``workingDir`` of every container of their pods (a Pod's, a Job's template's) that has
    none: the executor that runs them may have been started anywhere."""
    result: list[Mapping[str, Any]] = []
    for manifest in manifests:
        changed = copy.deepcopy(dict(manifest))
        changed.setdefault("metadata", {}).setdefault("namespace", namespace)
        spec = changed.get("spec") or {}
        if changed.get("kind") != "Pod":
            spec = (spec.get("template") or {}).get("spec") or {}
        for field in ("initContainers", "containers"):
            for container in spec.get(field) or []:
                container.setdefault("workingDir", str(directory))
        result.append(changed)
    return result


def _plain(data: object) -> dict[str, Any]:
    plain: dict[str, Any] = json.loads(json.dumps(data, default=str))
    return plain


def _executor_runner(keeper: Keeper) -> str:
    who = "a background executor" if keeper.started else "the running executor"
    return f"{who} (pid {keeper.pid})"


# Reading the store --------------------------------------------------------------------------------


def _stored(read: Callable[[], T]) -> T:
    """A store operation: an unknown task is :class:`TaskNotFoundError`, a store that cannot be
    read or written :class:`TaskStoreUnavailableError`."""
    try:
        return read()
    except UnrecordedTaskError as error:
        raise TaskNotFoundError(str(error)) from error
    except TaskStoreError as error:
        raise TaskStoreUnavailableError(str(error)) from error


class _StoreReader:
    """The task store, its failures as the API's exceptions."""

    def __init__(self, store: SQLiteTaskStore) -> None:
        self._store = store

    def get(self, task_id: str) -> TaskRecord:
        return _stored(lambda: self._store.get(task_id))

    def history(self, task_id: str) -> list[HistoryEntry]:
        return _stored(lambda: self._store.history(task_id))

    def events(self, task_id: str) -> list[AttachedEvent]:
        return _stored(lambda: self._store.events(task_id))

    def request_abort(self, task_id: str, now: datetime) -> TaskRecord:
        return _stored(lambda: self._store.request_abort(task_id, now))


class TaskFeed(Protocol):
    """Every task of a client, kept current (:meth:`Client.feed`)."""

    def records(self) -> list[TaskRecord]:
        """Every task now, the oldest submission first."""

    def status(self, record: TaskRecord) -> TaskStatus:
        """``record``'s task with its history and events, as last read."""

    def wait(self, timeout: float) -> bool:
        """Return once the tasks may have changed since the last return (at first: since the
        feed was opened), or after ``timeout`` seconds; whether they may have changed (False:
        they did not, and need not be read again)."""


class _StoreFeed:
    """This machine's store as a feed: read again when another process wrote it."""

    def __init__(self, store: SQLiteTaskStore) -> None:
        self._store = store
        self._changes = _StoreChanges(store)

    def records(self) -> list[TaskRecord]:
        return _stored(self._store.list_tasks)

    def status(self, record: TaskRecord) -> TaskStatus:
        return _read_status(_StoreReader(self._store), record.task_id)

    def wait(self, timeout: float) -> bool:
        return self._changes.wait_for(timeout)


class _WorkloadFeed:
    """The operator's Workloads as a feed, from one watch of them."""

    def __init__(self, watched: WatchedTasks, backend: str) -> None:
        self._watched, self._backend = watched, backend

    def records(self) -> list[TaskRecord]:
        records = self._watched.records()
        records.sort(key=lambda record: (record.task.submitted_at, record.task_id))
        return records

    def status(self, record: TaskRecord) -> TaskStatus:
        watched = self._watched
        return TaskStatus(record, watched.history(record), watched.events(record), self._backend)

    def wait(self, timeout: float) -> bool:
        return self._watched.changes.wait(timeout)


class _Changes(Protocol):
    def wait(self) -> object:
        """Return once something may have changed since the last return (at first: since the
        object was made)."""


class _StoreChanges:
    """The task store's changes, polled (``POLL_SECONDS``) through its data version, so that
    the tasks are read again only when another process wrote them."""

    def __init__(self, store: SQLiteTaskStore) -> None:
        self._store = store
        self._version = _stored(store.data_version)

    def wait(self) -> None:
        self.wait_for(math.inf)

    def wait_for(self, timeout: float) -> bool:
        """Whether another process wrote the store since the last change seen, waiting at most
        ``timeout`` seconds for it."""
        deadline = time.monotonic() + timeout
        while True:
            version = _stored(self._store.data_version)
            if version != self._version:
                self._version = version
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(POLL_SECONDS, left))


def _read_status(reader: TaskRecords, task_id: str, backend: str | None = None) -> TaskStatus:
    """The task with its history and events as one write left them: read again when another
    came between the reads (a phase and the events that came with it are seen together, and
    once the task is finalized its history and events are whole)."""
    while True:
        record = reader.get(task_id)
        history = reader.history(task_id)
        events = reader.events(task_id)
        if reader.get(task_id).revision == record.revision:
            return TaskStatus(record, history, events, backend or record.task.backend)


def _changes(
    reader: TaskRecords,
    task_id: str,
    changes: _Changes,
    phases_shown: int,
    events_shown: list[AttachedEvent],
) -> Iterator[TaskChange]:
    """Each phase and event of the task after those shown, in the order they happened, until
    it is finalized."""
    while True:
        status = _read_status(reader, task_id)
        yield from _news(status, phases_shown, events_shown)
        phases_shown, events_shown = len(status.history), status.events
        if status.finalized:
            return
        changes.wait()


def _news(
    status: TaskStatus, phases_shown: int, events_shown: list[AttachedEvent]
) -> list[TaskChange]:
    """The phases and events of ``status`` after those shown, in the order they happened."""
    new_events = events_after(events_shown, status.events)
    return [
        TaskChange(status.task_id, at, item)
        for at, item in in_order(status.history[phases_shown:], new_events, now=utc_now())
    ]


def events_after(shown: list[AttachedEvent], now: list[AttachedEvent]) -> list[AttachedEvent]:
    """The events of ``now`` that came after those ``shown``. A Workload keeps only its latest
    events (64), so the oldest shown may have dropped out of ``now``: ``now`` begins with the
    rest of ``shown``, then the new ones."""
    for dropped in range(len(shown) + 1):
        kept = shown[dropped:]
        if now[: len(kept)] == kept:
            return now[len(kept) :]
    return now


@dataclasses.dataclass(frozen=True)
class Selection:
    """Which tasks a listing shows (:class:`~podwright.engine.task_views.TaskFilter`), in which
    order."""

    filter: TaskFilter
    sort_by: SortKey

    @classmethod
    def of(
        cls,
        phases: Iterable[Phase | str],
        types: Iterable[str],
        selector: LabelSelector | str,
        active: bool,
        sort_by: SortKey | str,
    ) -> Selection:
        """The selection of :meth:`Client.list`'s arguments; each one that cannot be used is
        :class:`InvalidInputError` naming it and what is allowed."""
        return cls(
            TaskFilter(
                frozenset(parse_phase(phase) for phase in phases),
                frozenset(parse_type(workload_type) for workload_type in types),
                selector if isinstance(selector, LabelSelector) else parse_selector(selector),
                active,
            ),
            _sort_key(sort_by),
        )

    @property
    def label_selector(self) -> str | None:
        """The label selector, for an API server to select by too."""
        return str(self.filter.selector) or None

    def select(self, records: Iterable[TaskRecord]) -> list[TaskRecord]:
        return sort_tasks(
            (record for record in records if self.filter.matches(record)), self.sort_by
        )


def select_tasks(
    records: Iterable[TaskRecord],
    *,
    phases: Iterable[Phase | str] = (),
    types: Iterable[str] = (),
    selector: LabelSelector | str = "",
    active: bool = False,
    sort_by: SortKey | str = SortKey.SUBMITTED,
) -> list[TaskRecord]:
    """The tasks of ``records`` that :meth:`Client.list`'s filters select, in its order: for
    tasks held already (a :meth:`Client.feed`'s). Each argument that cannot be used is
    :class:`InvalidInputError` naming it and what is allowed."""
    return Selection.of(phases, types, selector, active, sort_by).select(records)


_PHASES = {phase.value.lower(): phase for phase in Phase}


def parse_phase(phase: Phase | str) -> Phase:
    """A lifecycle phase in any case (``Running``, ``running``)."""
    if isinstance(phase, Phase):
        return phase
    found = _PHASES.get(str(phase).lower())
    if found is None:
        raise InvalidInputError(f"{phase!r} is not a phase: one of {', '.join(Phase)}")
    return found


def parse_type(workload_type: str) -> str:
    """A workload type's name, checked."""
    names = [known.value for known in WorkloadType]
    value = getattr(workload_type, "value", workload_type)
    if value not in names:
        raise InvalidInputError(f"type {workload_type!r}: one of {', '.join(names)}")
    return str(value)


def parse_selector(text: str) -> LabelSelector:
    """A Kubernetes label selector (``k=v,k!=v,k in (a,b),k notin (a,b),k,!k``)."""
    try:
        return parse_label_selector(text)
    except SelectorError as error:
        raise InvalidInputError(f"label selector {text!r}: {error}") from error


def _sort_key(sort_by: SortKey | str) -> SortKey:
    try:
        return SortKey(sort_by)
    except ValueError:
        raise InvalidInputError(
            f"sort_by {sort_by!r}: one of {', '.join(key.value for key in SortKey)}"
        ) from None


def _list_changes(
    read: Callable[[], list[TaskRecord]],
    changes: _Changes,
    selection: Selection,
    shown: dict[str, tuple[Phase, bool]],
) -> Iterator[TaskRecord]:
    """Each selected task that appears (in ``read()``, or among those selected) or changes
    phase, or is finalized, since it was ``shown``; read again after each of ``changes``."""
    while True:
        now_shown: dict[str, tuple[Phase, bool]] = {}
        for record in selection.select(read()):
            state = (record.phase, record.finalized)
            if shown.get(record.task_id) != state:
                yield record
            now_shown[record.task_id] = state
        shown = now_shown
        changes.wait()


# Output ------------------------------------------------------------------------------------------


def _output(
    tail: LogTail,
    current: Callable[[], TaskRecord],
    task_id: str,
    follow: bool,
    stop: Callable[[], bool] = lambda: False,
) -> Iterator[str]:
    """What ``tail`` reads: what there is, or with ``follow`` until the task (``current``) is
    finalized or ``stop()``."""
    while True:
        ended = current().finalized
        for line in tail.rest() if ended or not follow else tail.read():
            yield line.text
        _unless_silent(tail, task_id, patience=LOST_SERVER_AFTER if follow else None)
        if ended or not follow or stop():
            return
        time.sleep(POLL_SECONDS)


def _never() -> bool:
    return False


def _unless_silent(tail: LogTail, task_id: str, *, patience: timedelta | None) -> None:
    """:class:`BackendUnreachableError` once the task's API server has given no answer for
    longer than ``patience`` (None: at all): its output cannot be read."""
    silence = tail.unanswered_for()
    if silence is None or (patience is not None and silence[0] < patience):
        return
    raise BackendUnreachableError(f"{silence[1]}: the output of task {task_id} cannot be read")


# Aborting and deleting ---------------------------------------------------------------------------


class _Outcomes:
    """The outcomes of a delete, each reported (``report``) as it comes."""

    def __init__(self, report: Callable[[TaskOutcome], None] | None) -> None:
        self.all: list[TaskOutcome] = []
        self._report = report

    def append(self, outcome: TaskOutcome) -> None:
        self.all.append(outcome)
        if self._report is not None:
            self._report(outcome)


def _failed(task_id: str, error: PodwrightError) -> TaskOutcome:
    return TaskOutcome(task_id, str(error), error)


class _Deleter:
    """Removes one task of the store after another, aborting those still active."""

    def __init__(
        self,
        store: SQLiteTaskStore,
        home: Path,
        launch: Callable[[str], ExecutorLaunch],
        *,
        force: bool,
        timeout: timedelta,
        progress: Callable[[str], None] | None,
    ) -> None:
        self._store, self._home, self._launch = store, home, launch
        self._force, self._timeout = force, timeout
        self._progress = progress or (lambda _text: None)

    def delete(self, record: TaskRecord) -> str:
        """Remove the task; what was done, in one line."""
        task_id, backend = record.task_id, record.task.backend
        if record.finalized:
            self._remove(record)
            return f"task {task_id} deleted"
        launch = self._launch(backend)
        problem = _unreachable(launch)
        if problem is None:
            ended = self._aborted(record, launch)
            self._remove(ended)
            if ended.finalized:
                return f"task {task_id} aborted and deleted"
            return (
                f"task {task_id} deleted (--force): its abort did not finish within "
                f"{duration_text(self._timeout)}; its {_resource_name(record)} may be left on "
                f"{backend}; delete it there if it is"
            )
        if not _was_created(record):
            self._remove(record)
            kept = (
                "; the claims it created stay, as claims outlive their tasks"
                if _claims_created(record)
                else ""
            )
            return (
                f"task {task_id} deleted: its backend {backend} cannot be reached ({problem}), "
                f"and its resource was never created there{kept}"
            )
        left = _resource_name(record)
        if not self._force:
            raise BackendError(
                f"task {task_id} is not deleted: its backend {backend} cannot be reached "
                f"({problem}), and its {left} may exist there; --force removes the record anyway"
            )
        self._remove(record)
        return (
            f"task {task_id} deleted (--force): its {left} may be left on {backend}; delete it "
            "there if it is"
        )

    def _aborted(self, record: TaskRecord, launch: ExecutorLaunch) -> TaskRecord:
        """The task once the executor finalized it, its abort requested if it is not over."""
        task_id = record.task_id
        if not record.phase.is_terminal:
            record = _stored(lambda: self._store.request_abort(task_id, utc_now()))
        keeper = ExecutorKeeper(launch)
        keeper.keep(task_id, record.revision, now=True)
        self._progress(
            f"task {task_id}: {record.phase.value}, aborting it: waiting for the executor "
            f"(pid {keeper.pid}) to finish, at most {duration_text(self._timeout)}"
        )
        deadline = time.monotonic() + self._timeout.total_seconds()
        while not record.finalized:
            if time.monotonic() > deadline:
                if self._force:  # the API server may be gone: the record goes all the same
                    return record
                raise BackendError(
                    f"task {task_id} is not deleted: not finalized within "
                    f"{duration_text(self._timeout)} (it is {record.phase.value}, abort "
                    f"requested); see {launch.log}; --force removes the record anyway"
                )
            time.sleep(POLL_SECONDS)
            record = _stored(lambda: self._store.get(task_id))
            keeper.keep(task_id, record.revision)
        return record

    def _remove(self, record: TaskRecord) -> None:
        """Remove the record as it was read (a task that changed meanwhile stays), and its local
        log files."""
        try:
            self._store.delete(record.task_id, record.revision)
        except StaleRevisionError as error:
            raise BackendError(
                f"task {record.task_id} is not deleted: it changed while it was being deleted "
                "(an executor serves it); try again"
            ) from error
        except TaskStoreError as error:
            raise BackendError(str(error)) from error
        if record.task.backend == LOCAL:
            with contextlib.suppress(PluginError):
                ref = resource_ref(record, default_plugins(), LifecycleConfig())
                for directory in local_log_directories(self._home / LOCAL, ref):
                    shutil.rmtree(directory, ignore_errors=True)


def _unreachable(launch: ExecutorLaunch) -> str | None:
    """Why the task's backend cannot be served from here, or None (an executor serves it, or one
    can be started)."""
    if launch.slot.serving() is not None:
        return None
    return cluster_problem(launch.key, launch.kubeconfig)


def _was_created(record: TaskRecord) -> bool:
    """Whether the task's resource may have been created (its launch started, or a create of it
    may have reached the API server)."""
    try:
        return not decode_state(record.plugin_state).never_created
    except CorruptedPluginStateError:
        return True


def _claims_created(record: TaskRecord) -> bool:
    """Whether what the task's pods need (its claims) was created, before its resource."""
    try:
        return decode_state(record.plugin_state).needs_created
    except CorruptedPluginStateError:
        return True


def _resource_name(record: TaskRecord) -> str:
    try:
        ref = resource_ref(record, default_plugins(), LifecycleConfig())
    except PluginError:
        return "resource"
    return f"{ref.kind} {ref.namespace}/{ref.name}"


def duration_text(value: timedelta) -> str:
    """A timeout as messages say it (``2m0s``, ``30s``)."""
    seconds = int(value.total_seconds())
    return f"{seconds // 60}m{seconds % 60}s" if seconds >= 60 else f"{value.total_seconds():g}s"
