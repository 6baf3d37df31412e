"""A stand-in scheduler and kubelet for the emulator: it "runs" podwright's pods by binding them to
a node and writing their status.

Every pod of the watched namespace with podwright's managed-by label is, once seen: bound to
``node-1`` through the binding subresource (as the scheduler does) with a Scheduled event, Running
(its containers running, one log line), then Succeeded, or Failed when the pod's
``test.podwright.dev/outcome`` annotation says ``fail`` (exit code 1); ``hang`` keeps it running.
A pod being deleted has its containers stopped, as the kubelet would after SIGTERM (exit code 143,
the pod Failed), then is deleted with a grace period of 0, the kubelet's confirmation that
removes it once no finalizer is left; :meth:`FakeKubelet.hold_deletions` makes it wait before
stopping them, as containers that take their grace period would. It keeps a record of every pod
name it saw created (by uid), so tests can tell whether one was created twice. It talks to the API
over HTTP like any other client.
"""

from __future__ import annotations

import contextlib
import threading
from datetime import UTC, datetime
from typing import Any

from kubernetes import client as k8s_client

from podwright.adapters.kubernetes import KubernetesClient
from podwright.adapters.kubernetes.errors import error_from_status
from podwright.engine.config import MANAGED_BY, MANAGED_BY_LABEL
from podwright.engine.kubernetes_port import KubernetesError, NotFoundError, ObjectRef, PatchType

OUTCOME_ANNOTATION = "test.podwright.dev/outcome"
NODE = "node-1"
SIGTERM_EXIT_CODE = 143


def bind_pod(api: k8s_client.ApiClient, namespace: str, name: str, node: str) -> None:
    """Bind a pod to a node, as the scheduler does (``POST pods/<name>/binding``)."""
    method, url, headers, body, _post = api.param_serialize(
        method="POST",
        resource_path=f"/api/v1/namespaces/{namespace}/pods/{name}/binding",
        header_params={"Content-Type": "application/json", "Accept": "application/json"},
        body={
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        },
        auth_settings=["BearerToken"],
    )
    response = api.call_api(method, url, header_params=headers, body=body)
    answer = response.read()
    if response.status >= 300:
        raise error_from_status(response.status, answer)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _container_status(name: str, state: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "ready": "running" in state,
        "restartCount": 0,
        "image": "x",
        "imageID": "",
        "state": state,
    }


class FakeKubelet:
    """Drives podwright's pods in ``namespace`` to their end, a step per poll."""

    def __init__(
        self,
        url: str,
        namespace: str,
        *,
        poll_seconds: float = 0.05,
        write_log: Any = None,
    ) -> None:
        self._client = KubernetesClient.for_host(url)
        self._binder = k8s_client.ApiClient(k8s_client.Configuration(host=url))
        self._deletions_allowed = threading.Event()
        self._deletions_allowed.set()
        self._namespace = namespace
        self._poll = poll_seconds
        self._write_log = write_log
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fake-kubelet", daemon=True)
        self._stage: dict[str, int] = {}
        self.created: dict[str, set[str]] = {}
        """Pod name → the uids seen under it (two uids: the pod was created twice)."""
        self.lock = threading.Lock()

    def __enter__(self) -> FakeKubelet:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self._client.close()
        self._binder.close()

    def hold_deletions(self) -> None:
        """Leave deleted pods' containers running (until :meth:`release_deletions`)."""
        self._deletions_allowed.clear()

    def release_deletions(self) -> None:
        """Stop deleted pods' containers again, and confirm their deletion."""
        self._deletions_allowed.set()

    def _run(self) -> None:
        while not self._stop.wait(self._poll):
            with contextlib.suppress(KubernetesError):
                pods, _ = self._client.list_objects(
                    "v1",
                    "Pod",
                    namespace=self._namespace,
                    label_selector=f"{MANAGED_BY_LABEL}={MANAGED_BY}",
                )
                for pod in pods:
                    self._advance(pod)

    def _advance(self, pod: dict[str, Any]) -> None:
        metadata = pod["metadata"]
        name, uid = metadata["name"], metadata["uid"]
        with self.lock:
            self.created.setdefault(name, set()).add(uid)
        ref = ObjectRef("v1", "Pod", self._namespace, name)
        containers = [c["name"] for c in pod["spec"]["containers"]]
        if metadata.get("deletionTimestamp"):
            if self._deletions_allowed.is_set():
                self._stop_deleted(pod, ref, containers)
            return
        stage = self._stage.get(uid, 0)
        if stage == 0:
            bind_pod(self._binder, self._namespace, name, NODE)
            self._client.create(
                {
                    "apiVersion": "events.k8s.io/v1",
                    "kind": "Event",
                    "metadata": {"generateName": f"{name}.", "namespace": self._namespace},
                    "eventTime": _now(),
                    "reportingController": "default-scheduler",
                    "reportingInstance": "fake-kubelet",
                    "action": "Binding",
                    "reason": "Scheduled",
                    "type": "Normal",
                    "note": f"Successfully assigned {self._namespace}/{name} to {NODE}",
                    "regarding": {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "name": name,
                        "namespace": self._namespace,
                        "uid": uid,
                    },
                }
            )
            running = {"running": {"startedAt": _now()[:19] + "Z"}}
            status = {
                "phase": "Running",
                "containerStatuses": [_container_status(c, running) for c in containers],
            }
            self._client.patch_status(ref, {"status": status}, PatchType.MERGE)
            if self._write_log is not None:
                self._write_log(self._namespace, name, containers[0], f"hello from {name}")
        elif stage == 1:
            outcome = (metadata.get("annotations") or {}).get(OUTCOME_ANNOTATION)
            if outcome == "hang":
                return
            failed = outcome == "fail"
            code = 1 if failed else 0
            ended = {"terminated": {"exitCode": code, "reason": "Error" if failed else "Completed"}}
            status = {
                "phase": "Failed" if failed else "Succeeded",
                "containerStatuses": [_container_status(c, ended) for c in containers],
            }
            self._client.patch_status(ref, {"status": status}, PatchType.MERGE)
        else:
            return
        self._stage[uid] = stage + 1

    def _stop_deleted(self, pod: dict[str, Any], ref: ObjectRef, containers: list[str]) -> None:
        """Stop a deleted pod's containers, then confirm the deletion (grace period 0)."""
        status = pod.get("status") or {}
        if status.get("phase") not in ("Succeeded", "Failed"):
            stopped = {"terminated": {"exitCode": SIGTERM_EXIT_CODE, "reason": "Error"}}
            self._client.patch_status(
                ref,
                {
                    "status": {
                        "phase": "Failed",
                        "containerStatuses": [_container_status(c, stopped) for c in containers],
                    }
                },
                PatchType.MERGE,
            )
        if pod["metadata"].get("deletionGracePeriodSeconds") != 0:  # not confirmed yet
            with contextlib.suppress(NotFoundError):
                self._client.delete(ref, grace_period_seconds=0)
