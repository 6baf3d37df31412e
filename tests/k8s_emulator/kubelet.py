"""A stand-in kubelet for the emulator: it "runs" podwright's pods by writing their status.

Every pod of the watched namespace with podwright's managed-by label is, once seen: scheduled (an
event), Running (its containers running, one log line), then Succeeded, or Failed when the pod's
``test.podwright.dev/outcome`` annotation says ``fail`` (exit code 1); ``hang`` keeps it running.
Pods being deleted are left alone. It keeps a record of every pod name it saw created (by uid), so tests can tell whether one
was created twice. It talks to the API over HTTP like any other client.
"""

from __future__ import annotations

import contextlib
import threading
from datetime import UTC, datetime
from typing import Any

from podwright.adapters.kubernetes import KubernetesClient
from podwright.engine.config import MANAGED_BY, MANAGED_BY_LABEL
from podwright.engine.kubernetes_port import KubernetesError, ObjectRef, PatchType

OUTCOME_ANNOTATION = "test.podwright.dev/outcome"


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
        if metadata.get("deletionTimestamp"):
            return
        stage = self._stage.get(uid, 0)
        ref = ObjectRef("v1", "Pod", self._namespace, name)
        containers = [c["name"] for c in pod["spec"]["containers"]]
        if stage == 0:
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
                    "note": f"Successfully assigned {self._namespace}/{name} to node-1",
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
