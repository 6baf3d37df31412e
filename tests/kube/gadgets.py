"""The custom kind the kubectl tests work with: ``Gadget``, in a group unique to the test, with
printer columns, a status subresource, a short name and a category of its own (a short name is
cluster-wide: a fixed one could clash with another CRD of a real cluster)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import yaml

from tests.kube.support import ApiServer, eventually, installed_crd

GADGET_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "properties": {
                "size": {"type": "integer"},
                "color": {"type": "string", "default": "red"},
                "fragile": {"type": "boolean"},
            },
        },
        "status": {"type": "object", "properties": {"phase": {"type": "string"}}},
    },
}
PRINTER_COLUMNS = [
    {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
    {"name": "Color", "type": "string", "jsonPath": ".spec.color", "description": "Its color."},
    {"name": "Fragile", "type": "boolean", "jsonPath": ".spec.fragile"},
    {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


@dataclass
class Gadgets:
    """The test's custom kind, served by ``api``."""

    api: ApiServer
    group: str
    short_name: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/v1"

    @property
    def resource(self) -> str:
        """``gadgets.<group>``: how kubectl names the kind unambiguously."""
        return f"gadgets.{self.group}"

    @property
    def category(self) -> str:
        return self.short_name

    @property
    def collection(self) -> str:
        return f"/apis/{self.api_version}/namespaces/{self.api.namespace}/gadgets"

    def body(self, name: str, **spec: Any) -> dict[str, Any]:
        return {
            "apiVersion": self.api_version,
            "kind": "Gadget",
            "metadata": {"name": name, "labels": {"test": self.short_name}},
            "spec": spec,
        }

    def manifest(self, name: str, **spec: Any) -> str:
        return yaml.safe_dump(self.body(name, **spec))


def gadget_crd(group: str, short_name: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"gadgets.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {
                "plural": "gadgets",
                "singular": "gadget",
                "kind": "Gadget",
                "shortNames": [short_name],
                "categories": [short_name],
            },
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": GADGET_SCHEMA},
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": PRINTER_COLUMNS,
                }
            ],
        },
    }


@contextlib.contextmanager
def installed_gadgets(api: ApiServer) -> Iterator[Gadgets]:
    """The Gadget CRD installed and served, deleted afterwards (also on failure)."""
    suffix = uuid.uuid4().hex[:8]
    kind = Gadgets(api, f"g{suffix}.test.podwright.dev", f"gd{suffix}")
    with installed_crd(api, gadget_crd(kind.group, kind.short_name)):
        # Established: the kind is served; the first request may still race its handler.
        eventually(lambda: api.request("GET", kind.collection)[0] == 200)
        yield kind
