"""The asset catalogue: data sources that policies impose on workloads by id.

An administrator keeps data sources (a PVC of team datasets, an NFS export, a git repository) in a
catalogue file; a policy lists asset ids under ``imposedAssets`` and every workload in its scope
gets that storage instance, which the submission can neither change nor exclude::

    apiVersion: podwright.dev/v1
    kind: AssetCatalogue
    assets:
      - id: f12c965b-44e9-4ff6-8b43-01d8f9e630cc
        name: team-datasets          # becomes the storage instance's name
        kind: pvc                    # pvc | nfs | s3 | git | hostPath | configMap | secret
        spec: {claimName: datasets, path: /data, readOnly: true}
        credentials: s3-reader       # an asset referencing credentials cannot be imposed

The spec is checked against the storage field's attributes, like any other storage instance.
Every problem is reported at once: the document's envelope (``apiVersion``, ``kind``, unknown
keys), each asset's own fields, and its spec whenever its kind is known.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from enum import StrEnum
from types import MappingProxyType

from podwright.core.field_paths import FieldPath
from podwright.core.problems import FieldProblem, ProblemsError, describe, one_of, unknown_field
from podwright.core.workload_fields import SCHEMAS, Itemized, Section, WorkloadType, field_at
from podwright.core.workloads import FieldChecker

API_VERSION = "podwright.dev/v1"
KIND = "AssetCatalogue"


class AssetKind(StrEnum):
    """The kinds of data source, and (by :data:`STORAGE_FIELDS`) where each is mounted."""

    PVC = "pvc"
    NFS = "nfs"
    S3 = "s3"
    GIT = "git"
    HOST_PATH = "hostPath"
    CONFIG_MAP = "configMap"
    SECRET = "secret"


STORAGE_FIELDS: Mapping[AssetKind, str] = MappingProxyType(
    {
        AssetKind.PVC: "pvc",
        AssetKind.NFS: "nfs",
        AssetKind.S3: "s3",
        AssetKind.GIT: "git",
        AssetKind.HOST_PATH: "hostPath",
        AssetKind.CONFIG_MAP: "configMapVolumes",
        AssetKind.SECRET: "secretVolume",
    }
)
"""The ``storage`` field an asset of each kind becomes an instance of."""

CREDENTIAL_ATTRIBUTES: Mapping[AssetKind, frozenset[str]] = MappingProxyType(
    {
        AssetKind.S3: frozenset(
            {"accessKeySecret", "secretKeyOfAccessKeyId", "secretKeyOfSecretKey"}
        ),
        AssetKind.GIT: frozenset({"secretName", "passwordSecret", "username"}),
    }
)
"""Attributes that point at credentials: an asset that sets one references credentials."""

ASSET_FIELDS = ("id", "name", "kind", "spec", "credentials", "description")
"""The fields of a catalogue entry."""


def spec_fields(kind: AssetKind) -> Section:
    """The fields of an asset's ``spec``: its storage field's attributes but the instance's key
    (the asset's name)."""
    field = field_at(SCHEMAS[WorkloadType.WORKSPACE], ("storage", STORAGE_FIELDS[kind]))
    assert isinstance(field, Itemized)
    return Section(
        MappingProxyType(
            {name: child for name, child in field.attributes.fields.items() if name != field.key}
        )
    )


class AssetCatalogueError(ProblemsError):
    """The catalogue cannot be used; ``problems`` lists every reason."""


@dataclasses.dataclass(frozen=True)
class Asset:
    """One data source: its instance ``spec`` holds the storage attributes except the name."""

    id: str
    name: str
    kind: AssetKind
    spec: Mapping[str, object]
    credentials: str | None = None

    @property
    def references_credentials(self) -> bool:
        """Whether the asset points at credentials (it then cannot be imposed)."""
        return self.credentials is not None or bool(
            CREDENTIAL_ATTRIBUTES.get(self.kind, frozenset()) & set(self.spec)
        )

    @property
    def storage_field(self) -> tuple[str, str]:
        """The schema path of the storage field the asset becomes an instance of."""
        return ("storage", STORAGE_FIELDS[self.kind])

    def instance(self) -> dict[str, object]:
        """The storage instance the asset stands for, named after the asset."""
        return {"name": self.name, **self.spec}


@dataclasses.dataclass(frozen=True)
class AssetCatalogue:
    """Assets by id."""

    assets: Mapping[str, Asset] = dataclasses.field(default_factory=dict)


EMPTY_CATALOGUE = AssetCatalogue(MappingProxyType({}))


def catalogue_from_data(data: object, source: str | None = None) -> AssetCatalogue:
    """Read and check an ``AssetCatalogue`` document; raises with every problem found."""
    problems: list[FieldProblem] = []

    def problem(path: FieldPath, message: str) -> None:
        problems.append(FieldProblem(path, message, source))

    if not isinstance(data, Mapping):
        raise AssetCatalogueError(
            [FieldProblem((), f"expected a {KIND} document, got {describe(data)}", source)]
        )
    for key in data:
        if key not in ("apiVersion", "kind", "assets"):
            problem((str(key),), unknown_field(key, ("apiVersion", "kind", "assets")))
    if data.get("apiVersion") != API_VERSION:
        problem(
            ("apiVersion",), f"expected {API_VERSION!r}, got {describe(data.get('apiVersion'))}"
        )
    if data.get("kind") != KIND:
        problem(("kind",), f"expected {KIND!r}, got {describe(data.get('kind'))}")
    entries = data.get("assets")
    if not isinstance(entries, list):
        problem(("assets",), f"expected a list of assets, got {describe(entries)}")
        entries = []
    assets: dict[str, Asset] = {}
    checker = FieldChecker(None, submission=False)
    for index, entry in enumerate(entries):
        path: FieldPath = ("assets", index)
        asset = _asset(entry, path, problem, checker)
        if asset is None:
            continue
        if asset.id in assets:
            problem((*path, "id"), f"asset id {asset.id!r} is given twice")
            continue
        assets[asset.id] = asset
    problems.extend(dataclasses.replace(found, source=source) for found in checker.problems)
    if problems:
        raise AssetCatalogueError(problems)
    return AssetCatalogue(MappingProxyType(assets))


def _asset(
    entry: object,
    path: FieldPath,
    problem: Callable[[FieldPath, str], None],
    checker: FieldChecker,
) -> Asset | None:
    if not isinstance(entry, Mapping):
        problem(path, f"expected an asset (a mapping), got {describe(entry)}")
        return None
    for key in entry:
        if key not in ASSET_FIELDS:
            problem((*path, str(key)), unknown_field(key, ASSET_FIELDS))
    strings: dict[str, str] = {}
    for name in ("id", "name", "kind"):
        value = entry.get(name)
        if not isinstance(value, str) or not value:
            problem((*path, name), f"expected a non-empty string, got {describe(value)}")
        else:
            strings[name] = value
    credentials = entry.get("credentials")
    if credentials is not None and not isinstance(credentials, str):
        problem(
            (*path, "credentials"), f"expected a credential asset id, got {describe(credentials)}"
        )
    kinds = [kind.value for kind in AssetKind]
    if "kind" in strings and strings["kind"] not in kinds:
        problem((*path, "kind"), f"expected {one_of(kinds)}, got {describe(strings['kind'])}")
        return None
    if "kind" not in strings:
        return None  # the spec's attributes depend on the kind
    kind = AssetKind(strings["kind"])
    spec = checker.section(
        spec_fields(kind), entry.get("spec", {}), (*path, "spec"), ("storage", STORAGE_FIELDS[kind])
    )
    if spec is None or "id" not in strings or "name" not in strings:
        return None
    return Asset(
        strings["id"],
        strings["name"],
        kind,
        MappingProxyType(spec),
        credentials if isinstance(credentials, str) else None,
    )
