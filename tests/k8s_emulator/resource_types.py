"""What the emulator knows of a kind of resource: where it is served and how it is stored.

A resource is stored by its group and plural, as the API server keys it in etcd
(``/registry/<group>/<resource>/...``): the version only says how it is served, and every other
attribute describes it. So two versions of one custom resource are one store of objects, served as
either version (a CRD's ``None`` conversion: only ``apiVersion`` differs).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ResourceType:
    group: str
    version: str = field(compare=False)
    plural: str
    kind: str = field(compare=False)
    namespaced: bool = field(default=True, compare=False)
    status_subresource: bool = field(default=True, compare=False)
    singular: str = field(default="", compare=False)
    short_names: tuple[str, ...] = field(default=(), compare=False)
    categories: tuple[str, ...] = field(default=(), compare=False)
    """The groups of resources it belongs to (``kubectl get all``: the ``all`` category)."""
    custom: bool = field(default=False, compare=False)
    """Defined by a CustomResourceDefinition (its objects follow the custom resource strategy)."""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_resource(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def group_kind(self) -> str:
        """``Kind.group`` as the API server's errors name it (``schema.GroupKind.String``)."""
        return f"{self.kind}.{self.group}" if self.group else self.kind
