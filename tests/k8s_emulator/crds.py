"""The third-party CRDs podwright renders objects for, from ``../shared/schemas``, for tests that
need their kinds served: an emulator serves no custom kind until its CRD is created, as a
cluster without the Kubeflow training operator or Knative Serving does not.

Each file is parsed once per process (they are large: the Kubeflow ones are over 600 kB).
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import yaml

from tests.k8s_emulator.custom_resources import CRD
from tests.k8s_emulator.errors import ApiError
from tests.k8s_emulator.store import ApiStore

SCHEMAS = Path(__file__).resolve().parents[2].parent / "shared" / "schemas"
"""``shared/schemas`` beside the repository: upstream CRD files, byte for byte (its README)."""

THIRD_PARTY_CRDS: dict[tuple[str, str], str] = {
    ("kubeflow.org/v1", "PyTorchJob"): "kubeflow-training-operator/kubeflow.org_pytorchjobs.yaml",
    ("kubeflow.org/v1", "MPIJob"): "kubeflow-training-operator/kubeflow.org_mpijobs.yaml",
    ("kubeflow.org/v1", "TFJob"): "kubeflow-training-operator/kubeflow.org_tfjobs.yaml",
    ("kubeflow.org/v1", "XGBoostJob"): "kubeflow-training-operator/kubeflow.org_xgboostjobs.yaml",
    ("kubeflow.org/v1", "JAXJob"): "kubeflow-training-operator/kubeflow.org_jaxjobs.yaml",
    ("serving.knative.dev/v1", "Service"): "knative-serving/service.yaml",
}
"""The CRD file that serves each third-party kind podwright renders."""

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@functools.cache
def _parsed(relative_path: str) -> dict[str, Any]:
    with (SCHEMAS / relative_path).open() as stream:
        document: dict[str, Any] = yaml.load(stream, Loader=_LOADER)
    return document


def crd_for(api_version: str, kind: str) -> dict[str, Any]:
    """The CRD that serves ``kind`` of ``api_version`` (a copy: callers may change it)."""
    path = THIRD_PARTY_CRDS.get((api_version, kind))
    if path is None:
        raise KeyError(f"no CRD file known for {api_version} {kind}")
    return copy.deepcopy(_parsed(path))


def install_crds(store: ApiStore, *kinds: tuple[str, str]) -> None:
    """Serve each ``(apiVersion, kind)`` in ``store`` by creating its CRD (once: a CRD already
    there is kept). Through HTTP, create ``crd_for(...)`` with any client instead."""
    for api_version, kind in kinds:
        try:
            store.create(CRD, "", crd_for(api_version, kind))
        except ApiError as error:
            if error.code != 409:
                raise
