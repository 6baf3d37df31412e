"""Storage: each ``storage`` instance becomes volumes, mounts, and the containers that fill them.

- ``pvc``: an existing claim; a new claim (its own PersistentVolumeClaim manifest); or, with
  ``ephemeral``, a generic ephemeral volume that lives and dies with the pod.
- ``nfs``, ``hostPath``, ``configMapVolumes``, ``secretVolume``, ``emptyDir``: the volume of
  that kind, mounted where the instance says.
- ``git``: an init container clones ``repository`` (``branch``, then ``revision``) into an
  emptyDir that the workload container mounts at ``path``; credentials come from a secret.
- ``s3``: a FUSE adapter runs as a native sidecar (an init container that keeps running), mounts
  the bucket into an emptyDir and shares the mount with the workload container by mount
  propagation. Kubernetes allows Bidirectional propagation only for a privileged container, so
  this needs the profile's ``fuse.grant: privileged``; every other grant is refused with why.
- ``dataVolume``: the asset of that id in the catalogue, rendered as its kind.

Every value a shell or program reads comes through the environment or an argument vector, never
spliced into a script, so a repository URL or branch name cannot inject commands. Every container
added here takes the profile's ``helperResources`` as its requests and limits, so that a
namespace's ResourceQuota on cpu or memory admits the pod (:mod:`podwright.core.helper_resources`).
"""

from __future__ import annotations

import dataclasses
import posixpath
from decimal import Decimal

from podwright.core.assets import STORAGE_FIELDS, AssetCatalogue
from podwright.core.k8s_names import derived_label
from podwright.core.quantities import format_quantity
from podwright.core.render.fields import Problems, Values
from podwright.core.render.profile import ClusterProfile, FuseGrantMode, S3Adapter

Manifest = dict[str, object]

GIT_DESTINATION = "/podwright/git"
S3_MOUNTPOINT = "/podwright/s3"

GIT_CLONE_SCRIPT = """\
set -eu
if [ -n "${GIT_PASSWORD:-}" ]; then
  git config --global credential.helper \\
    '!f() { echo "username=${GIT_USERNAME:-git}"; echo "password=${GIT_PASSWORD}"; }; f'
fi
git clone ${GIT_BRANCH:+--branch "$GIT_BRANCH"} -- "$GIT_REPOSITORY" "$GIT_DESTINATION"
if [ -n "${GIT_REVISION:-}" ]; then
  git -C "$GIT_DESTINATION" checkout --detach "$GIT_REVISION"
fi
"""
"""The clone script: constant; the repository, branch and revision reach it as variables."""

S3_DEFAULT_ACCESS_KEY_ID_KEY = "AccessKeyId"
S3_DEFAULT_SECRET_KEY_KEY = "SecretKey"

MOUNT_ATTRIBUTE = {
    "pvc": "path",
    "nfs": "mountPath",
    "s3": "path",
    "git": "path",
    "hostPath": "mountPath",
    "configMapVolumes": "mountPath",
    "secretVolume": "mountPath",
    "emptyDir": "mountPath",
}
"""The attribute of each storage field that says where the workload container sees it."""

_SHORT_KIND = {
    "pvc": "pvc",
    "nfs": "nfs",
    "s3": "s3",
    "git": "git",
    "hostPath": "host",
    "configMapVolumes": "cm",
    "secretVolume": "secret",
    "emptyDir": "empty",
}

_FUSE_REFUSALS = {
    FuseGrantMode.NONE: "the cluster profile grants no FUSE (fuse.grant: none)",
    FuseGrantMode.DEVICE_PLUGIN: (
        "the profile grants FUSE by device plugin (fuse.grant: device-plugin), which gives the "
        "adapter /dev/fuse but cannot share its mount with the workload container: that takes "
        "Bidirectional mount propagation, which Kubernetes allows only in a privileged container"
    ),
    FuseGrantMode.PROXY: (
        "the profile grants FUSE through the podwright FUSE proxy (fuse.grant: proxy), which "
        "mounts in the adapter's own mount namespace; sharing the mount with the workload "
        "container takes Bidirectional mount propagation, allowed only in a privileged container"
    ),
}


@dataclasses.dataclass
class Storage:
    """What one role's storage adds to its pod, and the claims to create beside it."""

    volumes: list[Manifest] = dataclasses.field(default_factory=list)
    mounts: list[Manifest] = dataclasses.field(default_factory=list)
    """The workload container's volume mounts."""
    init_containers: list[Manifest] = dataclasses.field(default_factory=list)
    """Git clones, then FUSE adapter sidecars (init containers with restartPolicy Always)."""
    claims: list[Manifest] = dataclasses.field(default_factory=list)
    """PersistentVolumeClaim manifests for new, non-ephemeral claims."""
    knative_features: dict[str, str] = dataclasses.field(default_factory=dict)
    """Knative feature flag → the first field that needs it."""
    knative_refusals: dict[str, str] = dataclasses.field(default_factory=dict)
    """Field → why Knative cannot run it at all."""
    mount_paths: dict[str, str] = dataclasses.field(default_factory=dict)
    """Mount path (normalized) → the field that mounts there."""

    def occupant(self, path: str) -> str | None:
        """The field already mounted at ``path`` (however it is spelled), or None."""
        return self.mount_paths.get(posixpath.normpath(path))

    def add_mount(self, mount: Manifest, field: str) -> None:
        """Mount a volume in the workload container, recording that ``field`` owns the path."""
        path = mount["mountPath"]
        assert isinstance(path, str)
        self.mount_paths[posixpath.normpath(path)] = field
        self.mounts.append(mount)


def add_claim(claims: list[Manifest], claim: Manifest) -> bool:
    """Add a new claim to ``claims`` once; False when a claim of its name asks for another spec."""
    twin = next((known for known in claims if known["metadata"] == claim["metadata"]), None)
    if twin is None:
        claims.append(claim)
    return twin is None or twin == claim


@dataclasses.dataclass(frozen=True)
class StorageContext:
    profile: ClusterProfile
    catalogue: AssetCatalogue
    problems: Problems
    needs_user_for_helpers: bool
    """The pod must run as non-root but names no user: helper containers pick one."""


HELPER_USER = 65534
"""The user (``nobody``) helper containers run as when the pod must not run as root."""


def render_storage(storage: Values, context: StorageContext) -> Storage:
    """The volumes, mounts, init containers and claims of a role's ``storage`` section."""
    result = Storage()
    for field, render_instance in _RENDERERS.items():
        for instance in storage.instances(field):
            render_instance(instance, _volume_name(field, instance.key()), result, context)
    for data_volume in storage.instances("dataVolume", key="id"):
        _render_data_volume(data_volume, result, context)
    return result


def _render_data_volume(entry: Values, result: Storage, context: StorageContext) -> None:
    asset_id = entry.key("id")
    asset = context.catalogue.assets.get(asset_id)
    if asset is None:
        known = ", ".join(sorted(context.catalogue.assets)) or "none: no catalogue was given"
        context.problems.add(
            entry.path(), f"no asset with id {asset_id!r} in the catalogue (known: {known})"
        )
        return
    field = STORAGE_FIELDS[asset.kind]
    attributes = dict(asset.instance())
    if entry.has("mountPath"):
        attributes[MOUNT_ATTRIBUTE[field]] = entry.text("mountPath")
    if entry.has("readOnly") and field in ("pvc", "nfs", "hostPath"):
        attributes["readOnly"] = entry.flag("readOnly")
    if asset.credentials is not None:
        credential_attribute = {"s3": "accessKeySecret", "git": "secretName"}.get(field)
        if credential_attribute is None:
            context.problems.add(
                entry.path(),
                f"asset {asset_id!r} ({asset.kind.value}) names credentials, "
                "which only s3 and git assets use",
            )
            return
        attributes.setdefault(credential_attribute, asset.credentials)
    instance = Values(attributes, entry.prefix)
    _RENDERERS[field](instance, _volume_name("data", asset_id), result, context)


def _volume_name(kind: str, key: str) -> str:
    return derived_label(_SHORT_KIND.get(kind, kind), key)


def _mount(
    instance: Values,
    field: str,
    volume: str,
    result: Storage,
    context: StorageContext,
    **extra: object,
) -> None:
    attribute = MOUNT_ATTRIBUTE[field]
    path = instance.text(attribute)
    where = instance.path(attribute)
    if not path:
        context.problems.add(where, "required: where the workload container sees this volume")
        return
    if not path.startswith("/"):
        context.problems.add(where, f"must be an absolute path, got {path!r}")
        return
    occupant = result.occupant(path)
    if occupant is not None:
        context.problems.add(where, f"{path!r} is already the mount path of {occupant}")
        return
    mount: Manifest = {"name": volume, "mountPath": path, **extra}
    if instance.flag("readOnly"):
        mount["readOnly"] = True
    result.add_mount(mount, where)


def _required(instance: Values, name: str, context: StorageContext, why: str) -> str | None:
    value = instance.text(name)
    if not value:
        context.problems.add(instance.path(name), f"required: {why}")
    return value


def _render_pvc(instance: Values, volume: str, result: Storage, context: StorageContext) -> None:
    claim_info = instance.section("claimInfo")
    size = claim_info.amount("size")
    ephemeral = instance.flag("ephemeral")
    existing = instance.data.get("existingPvc")
    if existing is None:
        existing = size is None and not ephemeral
    if ephemeral and existing:
        context.problems.add(
            instance.path("existingPvc"), "an ephemeral claim is new by nature; it cannot exist"
        )
        return
    claim_name = instance.text("claimName")
    if not existing and size is None:
        context.problems.add(claim_info.path("size"), "required: a new claim needs a size")
        return
    if ephemeral:
        result.volumes.append(
            {"name": volume, "ephemeral": {"volumeClaimTemplate": {"spec": _claim_spec(instance)}}}
        )
        result.knative_refusals[instance.path("ephemeral")] = (
            "Knative Serving does not run pods with ephemeral volumes"
        )
    else:
        claim_name = _required(instance, "claimName", context, "the claim to mount")
        if claim_name is None:
            return
        if not existing:
            claim: Manifest = {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {"name": claim_name},
                "spec": _claim_spec(instance),
            }
            if not add_claim(result.claims, claim):
                context.problems.add(
                    instance.path("claimName"),
                    f"another instance asks for a new claim {claim_name!r} with another spec",
                )
                return
        source: Manifest = {"claimName": claim_name}
        if instance.flag("readOnly"):
            source["readOnly"] = True
        result.volumes.append({"name": volume, "persistentVolumeClaim": source})
        result.knative_features.setdefault(
            "kubernetes.podspec-persistent-volume-claim", instance.path()
        )
        if not instance.flag("readOnly"):
            result.knative_features.setdefault(
                "kubernetes.podspec-persistent-volume-write", instance.path("readOnly")
            )
    _mount(instance, "pvc", volume, result, context)


def _claim_spec(instance: Values) -> Manifest:
    claim_info = instance.section("claimInfo")
    modes = claim_info.section("accessModes")
    access = [
        mode
        for flag, mode in (
            ("readWriteOnce", "ReadWriteOnce"),
            ("readOnlyMany", "ReadOnlyMany"),
            ("readWriteMany", "ReadWriteMany"),
        )
        if modes.flag(flag)
    ] or ["ReadWriteOnce"]
    size = claim_info.amount("size")
    assert size is not None
    spec: Manifest = {
        "accessModes": access,
        "resources": {"requests": {"storage": format_quantity(size)}},
    }
    if claim_info.has("storageClass"):
        spec["storageClassName"] = claim_info.text("storageClass")
    if claim_info.has("volumeMode"):
        spec["volumeMode"] = claim_info.text("volumeMode")
    return spec


def _render_nfs(instance: Values, volume: str, result: Storage, context: StorageContext) -> None:
    server = _required(instance, "server", context, "the NFS server's host name or address")
    path = _required(instance, "path", context, "the path the NFS server exports")
    if server is None or path is None:
        return
    source: Manifest = {"server": server, "path": path}
    if instance.flag("readOnly"):
        source["readOnly"] = True
    result.volumes.append({"name": volume, "nfs": source})
    result.knative_refusals[instance.path()] = "Knative Serving does not run pods with NFS volumes"
    _mount(instance, "nfs", volume, result, context)


def _render_host_path(
    instance: Values, volume: str, result: Storage, context: StorageContext
) -> None:
    path = _required(instance, "path", context, "the directory on the node")
    if path is None:
        return
    result.volumes.append({"name": volume, "hostPath": {"path": path}})
    result.knative_features.setdefault("kubernetes.podspec-volumes-hostpath", instance.path())
    propagation = instance.text("mountPropagation")
    extra = {"mountPropagation": propagation} if propagation else {}
    _mount(instance, "hostPath", volume, result, context, **extra)


def _render_config_map(
    instance: Values, volume: str, result: Storage, context: StorageContext
) -> None:
    config_map = _required(instance, "configMap", context, "the ConfigMap to mount")
    if config_map is None:
        return
    result.volumes.append({"name": volume, "configMap": {"name": config_map}})
    sub_path = instance.text("subPath")
    _mount(instance, "configMapVolumes", volume, result, context, **_sub_path(sub_path))


def _sub_path(sub_path: str | None) -> Manifest:
    return {"subPath": sub_path} if sub_path else {}


def _render_secret(instance: Values, volume: str, result: Storage, context: StorageContext) -> None:
    secret = _required(instance, "secret", context, "the Secret to mount")
    if secret is None:
        return
    source: Manifest = {"secretName": secret}
    if instance.has("defaultMode"):
        source["defaultMode"] = instance.count("defaultMode")
    result.volumes.append({"name": volume, "secret": source})
    _mount(instance, "secretVolume", volume, result, context)


def _render_empty_dir(
    instance: Values, volume: str, result: Storage, context: StorageContext
) -> None:
    result.volumes.append(
        {
            "name": volume,
            "emptyDir": empty_dir(instance.text("medium"), instance.amount("sizeLimit")),
        }
    )
    result.knative_features.setdefault("kubernetes.podspec-volumes-emptydir", instance.path())
    _mount(instance, "emptyDir", volume, result, context)


def empty_dir(medium: str | None, size_limit: Decimal | None) -> Manifest:
    """An emptyDir source; ``medium`` "Memory" keeps it in RAM."""
    source: Manifest = {}
    if medium == "Memory":
        source["medium"] = "Memory"
    if size_limit is not None:
        source["sizeLimit"] = format_quantity(size_limit)
    return source


def _render_git(instance: Values, volume: str, result: Storage, context: StorageContext) -> None:
    repository = _required(instance, "repository", context, "the repository to clone")
    if repository is None:
        return
    environment: list[Manifest] = [
        {"name": "HOME", "value": "/tmp"},
        {"name": "GIT_REPOSITORY", "value": repository},
        {"name": "GIT_DESTINATION", "value": GIT_DESTINATION},
    ]
    for attribute, variable in (("branch", "GIT_BRANCH"), ("revision", "GIT_REVISION")):
        if instance.has(attribute):
            environment.append({"name": variable, "value": instance.text(attribute)})
    secret_name, password_secret = instance.text("secretName"), instance.text("passwordSecret")
    username = instance.text("username")
    if secret_name and password_secret:
        context.problems.add(
            instance.path("passwordSecret"),
            "give the credentials either as secretName (user name and password in one secret) "
            "or as passwordSecret (the password alone), not both",
        )
        return
    if secret_name:
        environment += [
            _secret_variable("GIT_USERNAME", secret_name, username or "username"),
            _secret_variable("GIT_PASSWORD", secret_name, "password"),
        ]
    elif password_secret:
        if username:
            environment.append({"name": "GIT_USERNAME", "value": username})
        environment.append(_secret_variable("GIT_PASSWORD", password_secret, "password"))
    elif username:
        context.problems.add(
            instance.path("username"),
            "a user name without secretName or passwordSecret has no password to go with it",
        )
        return
    container: Manifest = {
        "name": derived_label("clone", volume),
        "image": context.profile.git_image,
        "command": ["/bin/sh", "-c", GIT_CLONE_SCRIPT],
        "env": environment,
        "volumeMounts": [{"name": volume, "mountPath": GIT_DESTINATION}],
        "resources": context.profile.helper_resources.manifest(),
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            **({"runAsUser": HELPER_USER} if context.needs_user_for_helpers else {}),
        },
    }
    result.init_containers.append(container)
    result.volumes.append({"name": volume, "emptyDir": {}})
    result.knative_features.setdefault("kubernetes.podspec-init-containers", instance.path())
    result.knative_features.setdefault("kubernetes.podspec-volumes-emptydir", instance.path())
    _mount(instance, "git", volume, result, context)


def _secret_variable(name: str, secret: str, key: str) -> Manifest:
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}


def _render_s3(instance: Values, volume: str, result: Storage, context: StorageContext) -> None:
    bucket = _required(instance, "bucket", context, "the bucket to mount")
    grant = context.profile.fuse_grant
    if grant is not FuseGrantMode.PRIVILEGED:
        context.problems.add(instance.path(), f"cannot mount the bucket: {_FUSE_REFUSALS[grant]}")
        return
    if bucket is None:
        return
    adapter = context.profile.s3_adapter
    secret = instance.text("accessKeySecret")
    url = instance.text("url")
    environment: list[Manifest] = []
    if secret:
        id_key = instance.text("secretKeyOfAccessKeyId") or S3_DEFAULT_ACCESS_KEY_ID_KEY
        secret_key = instance.text("secretKeyOfSecretKey") or S3_DEFAULT_SECRET_KEY_KEY
        names = (
            ("AWSACCESSKEYID", "AWSSECRETACCESSKEY")
            if adapter is S3Adapter.S3FS
            else ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
        )
        environment = [
            _secret_variable(names[0], secret, id_key),
            _secret_variable(names[1], secret, secret_key),
        ]
    elif instance.has("secretKeyOfAccessKeyId") or instance.has("secretKeyOfSecretKey"):
        context.problems.add(
            instance.path("accessKeySecret"),
            "required: secretKeyOfAccessKeyId and secretKeyOfSecretKey name keys of this secret",
        )
        return
    if adapter is S3Adapter.S3FS:
        command = ["s3fs", bucket, S3_MOUNTPOINT, "-f", "-o", "allow_other"]
        command += ["-o", f"url={url}"] if url else []
        command += [] if secret else ["-o", "public_bucket=1"]
    else:
        command = ["mount-s3", bucket, S3_MOUNTPOINT, "--foreground", "--allow-other"]
        command += ["--endpoint-url", url] if url else []
        command += [] if secret else ["--no-sign-request"]
    sidecar: Manifest = {
        "name": derived_label("fuse", volume),
        "image": context.profile.s3_image,
        "command": command,
        "restartPolicy": "Always",
        "resources": context.profile.helper_resources.manifest(),
        "securityContext": {"privileged": True, "runAsUser": 0, "runAsNonRoot": False},
        "volumeMounts": [
            {"name": volume, "mountPath": S3_MOUNTPOINT, "mountPropagation": "Bidirectional"}
        ],
        "startupProbe": {
            "exec": {"command": ["/bin/sh", "-c", f"grep -q ' {S3_MOUNTPOINT} fuse' /proc/mounts"]},
            "periodSeconds": 1,
            "failureThreshold": 120,
        },
    }
    if environment:
        sidecar["env"] = environment
    result.init_containers.append(sidecar)
    result.volumes.append({"name": volume, "emptyDir": {}})
    _mount(instance, "s3", volume, result, context, mountPropagation="HostToContainer")


_RENDERERS = {
    "pvc": _render_pvc,
    "nfs": _render_nfs,
    "hostPath": _render_host_path,
    "configMapVolumes": _render_config_map,
    "secretVolume": _render_secret,
    "emptyDir": _render_empty_dir,
    "git": _render_git,
    "s3": _render_s3,
}
