"""REST calls to the Kubernetes API with the official client's configuration and connection pool.

The generated API classes are not used: they cover only built-in kinds, and building their models
for every object would cost more than the engine's whole reconcile round. ``ApiClient`` still does
what it is good at: kubeconfig and in-cluster configuration, authentication (tokens, client
certificates, exec plugins), TLS, and a pooled HTTP connection. Objects travel as plain JSON.

The connection pool is sized for its user (:func:`connect`'s ``pool_size``): an executor holds one
connection per worker and one per watch stream at once, and a pool smaller than that opens a
connection for every request beyond it and throws it away afterwards (urllib3's "Connection pool
is full, discarding connection"). urllib3's own retries are off: a request that gets no answer
fails at once with an :class:`ApiConnectionError` that names the server and the cause, and the
engine decides whether and when to try again.

An answer that says the request was not carried out and when to ask again (429, or a 5xx, with
``Retry-After``) is retried here, below every caller, as client-go retries it (``retry.py``):
every command and the engine get the answer the server gives once it is ready, watches
included, and an error only when the retries are spent, saying how many were made.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol, cast

import urllib3
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from podwright.adapters.kubernetes.errors import connection_error, error_from_status
from podwright.adapters.kubernetes.rate_limit import TokenBucket
from podwright.adapters.kubernetes.resources import rest_resource
from podwright.adapters.kubernetes.retry import DEFAULT_RETRIES, RetryAfterPolicy
from podwright.engine.kubernetes_port import (
    ApiConnectionError,
    JsonObject,
    KubernetesError,
    ObjectRef,
    PatchType,
)

# A watch's server-side timeout; the read timeout allows this much more before the connection is
# presumed dead.
WATCH_READ_SLACK_SECONDS = 30
REQUEST_TIMEOUT_SECONDS = 30.0
CONNECTION_ERROR = "connection-error"
DEFAULT_POOL_SIZE = 34
"""Connections kept for reuse: enough for an executor of the default concurrency (16) with the
two watch streams of every plugin kind (8 kinds), the task pods' watch and one spare;
``connection_pool_size`` in
``cluster_port`` sizes a pool for any concurrency."""


RequestObserver = Callable[[str, str], None]
"""Told of every API request: its verb (create, get, list, watch, update, patch, delete) and the
answer's status code, or ``connection-error`` when there was none."""


class KubernetesConfigError(Exception):
    """No usable kubeconfig or in-cluster configuration."""


def connect(
    kubeconfig: str | None = None,
    context: str | None = None,
    *,
    in_cluster: bool | None = None,
    pool_size: int = DEFAULT_POOL_SIZE,
    impersonate: tuple[str, tuple[str, ...]] | None = None,
) -> k8s_client.ApiClient:
    """An API client from a kubeconfig (``kubeconfig``, else ``$KUBECONFIG``, else
    ``~/.kube/config``) or, in a pod, from its service account. ``in_cluster=None`` picks the
    service account when running in a pod and no kubeconfig is named. ``pool_size`` is the
    number of connections kept for reuse: the most requests (watches included) made at once.
    ``impersonate`` (a user and their groups) makes every request as that user, as ``kubectl
    --as USER --as-group GROUP`` does: the API server authorizes each as the user's, once it
    has allowed these credentials to impersonate them."""
    if pool_size < 1:
        raise ValueError(f"pool_size: must be at least 1, got {pool_size}")
    configuration = k8s_client.Configuration()
    inside = in_cluster
    if inside is None:
        inside = kubeconfig is None and "KUBERNETES_SERVICE_HOST" in os.environ
    try:
        if inside:
            k8s_config.load_incluster_config(client_configuration=configuration)
        else:
            k8s_config.load_kube_config(
                config_file=kubeconfig,
                context=context,
                client_configuration=configuration,
                persist_config=False,
            )
    except (ConfigException, OSError, TypeError, ValueError) as exc:
        source = "the pod's service account" if inside else (kubeconfig or "the kubeconfig")
        raise KubernetesConfigError(
            f"cannot configure a Kubernetes client from {source}: {exc}"
        ) from exc
    throttle_credential_refresh(configuration)
    api = _api_client(configuration, pool_size)
    if impersonate is not None:
        _impersonating(api, *impersonate)
    return api


def _impersonating(api: k8s_client.ApiClient, user: str, groups: tuple[str, ...]) -> None:
    """Every request of ``api`` with the impersonation headers of ``user`` and ``groups``
    (k8s.io/apiserver/pkg/endpoints/filters/impersonation.go). ``Impersonate-Group`` is repeated
    once per group, which the client's default headers (a dict) cannot do: they are added to
    each request as it is sent."""
    rest: Any = api.rest_client
    send: Callable[..., Any] = rest.request

    def request(method: str, url: str, **kwargs: Any) -> Any:
        headers = urllib3.HTTPHeaderDict(kwargs.pop("headers", None) or {})
        headers["Impersonate-User"] = user
        for group in groups:
            headers.add("Impersonate-Group", group)
        return send(method, url, headers=headers, **kwargs)

    rest.request = request


CREDENTIAL_CHECK_SECONDS = 10.0


def throttle_credential_refresh(
    configuration: k8s_client.Configuration,
    interval: float = CREDENTIAL_CHECK_SECONDS,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Check the credentials for renewal at most once every ``interval`` seconds.

    The kubeconfig and in-cluster loaders install a hook the client calls before every request:
    it renews an expiring token and writes the whole connection configuration again, which was
    a twentieth of every request's time. Tokens are renewed long before they expire (the
    kubeconfig loader's five minutes of skew; a service account's token file is re-read every
    minute), so checking every few seconds renews them as surely."""
    first = _renewal_hook(configuration)
    if first is None:
        return
    hook = [first]
    checked: list[float] = []

    def throttled(config: k8s_client.Configuration) -> None:
        now = clock()
        if checked and now - checked[0] < interval:
            return
        checked[:] = [now]
        hook[0](config)
        # The loader's hook installs itself again as it runs: it stays behind the throttle.
        installed = _renewal_hook(config)
        if installed is not None and installed is not throttled:
            hook[0] = installed
            config.refresh_api_key_hook = throttled  # type: ignore[assignment]  # see _renewal_hook

    configuration.refresh_api_key_hook = throttled  # type: ignore[assignment]


def _renewal_hook(
    configuration: k8s_client.Configuration,
) -> Callable[[k8s_client.Configuration], None] | None:
    """The hook a loader installed (the client's stubs type the attribute as always None)."""
    return cast(
        "Callable[[k8s_client.Configuration], None] | None", configuration.refresh_api_key_hook
    )


def _api_client(configuration: k8s_client.Configuration, pool_size: int) -> k8s_client.ApiClient:
    configuration.connection_pool_maxsize = pool_size
    configuration.retries = False
    return k8s_client.ApiClient(configuration)


class KubernetesClient:
    """The engine's Kubernetes port, plus list and watch for the reflectors.

    ``cached`` reads from the watch caches registered with :meth:`add_cache`; ``observer`` is
    told of every request (the executor's metrics count them, each retry as a request).
    ``retries`` says how answers asking to be retried later are retried, ``sleep`` waits the
    seconds they ask for. ``rate_limit``, when given, is waited on before every request (each
    retry and each watch's start too, as client-go's throttle is).
    """

    def __init__(
        self,
        api: k8s_client.ApiClient,
        *,
        observer: RequestObserver | None = None,
        retries: RetryAfterPolicy = DEFAULT_RETRIES,
        sleep: Callable[[float], None] = time.sleep,
        rate_limit: TokenBucket | None = None,
    ) -> None:
        self._api = api
        self._caches: dict[tuple[str, str], ObjectCache] = {}
        self._observer = observer
        self._retries = retries
        self._sleep = sleep
        self._rate_limit = rate_limit

    @classmethod
    def for_host(
        cls,
        host: str,
        *,
        observer: RequestObserver | None = None,
        pool_size: int = DEFAULT_POOL_SIZE,
        retries: RetryAfterPolicy = DEFAULT_RETRIES,
        sleep: Callable[[float], None] = time.sleep,
        rate_limit: TokenBucket | None = None,
    ) -> KubernetesClient:
        """A client of an API server that needs no credentials (an emulator, a local proxy)."""
        configuration = k8s_client.Configuration(host=host)
        return cls(
            _api_client(configuration, pool_size),
            observer=observer,
            retries=retries,
            sleep=sleep,
            rate_limit=rate_limit,
        )

    @property
    def server(self) -> str:
        """The API server's URL."""
        return str(self._api.configuration.host)

    @property
    def pool_size(self) -> int:
        """The connections kept for reuse: the most requests (watches included) made at once
        without opening and discarding extra connections."""
        return int(self._api.configuration.connection_pool_maxsize)

    def connections_opened(self) -> int:
        """The connections opened so far (each reused connection counted once): compared with
        the requests made, it tells whether the pool fits the load."""
        pools = self._api.rest_client.pool_manager.pools
        # urllib3's RecentlyUsedContainer refuses iteration; keys() is its thread-safe copy.
        return sum(int(pools[key].num_connections) for key in pools.keys())  # noqa: SIM118

    def server_version(
        self,
        *,
        attempts: int = 3,
        backoff_seconds: float = 0.5,
        timeout_seconds: float = 5.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> str:
        """The API server's version (``GET /version``): a cheap check that the server answers,
        before work is recorded that would need it. A request that gets no answer is tried
        ``attempts`` times, ``backoff_seconds`` apart and doubling; then the last
        :class:`ApiConnectionError` is raised, saying how often it was tried."""
        if attempts < 1:
            raise ValueError(f"attempts: must be at least 1, got {attempts}")
        failures = 0
        while True:
            try:
                version = self._json(
                    "GET", "/version", "get", timeout=(timeout_seconds, timeout_seconds)
                )
                return str(version.get("gitVersion") or "")
            except ApiConnectionError as exc:
                failures += 1
                if failures == attempts:
                    raise ApiConnectionError(
                        f"{exc.message} (tried {attempts} times)",
                        server=exc.server,
                        cause=exc.cause,
                        may_have_reached=exc.may_have_reached,
                    ) from exc
                sleep(backoff_seconds * 2 ** (failures - 1))

    def close(self) -> None:
        self._api.close()

    def add_cache(self, api_version: str, kind: str, cache: ObjectCache) -> None:
        self._caches[(api_version, kind)] = cache

    # The port ------------------------------------------------------------------------------

    def create(self, obj: JsonObject) -> dict[str, Any]:
        resource = rest_resource(str(obj.get("apiVersion")), str(obj.get("kind")))
        metadata = obj.get("metadata") or {}
        path = resource.collection_path(metadata.get("namespace"))
        return self._json("POST", path, "create", body=dict(obj))

    def apply(
        self, obj: JsonObject, *, field_manager: str, dry_run: bool = False
    ) -> dict[str, Any]:
        """Server-side apply ``obj`` as ``field_manager`` (created, or its fields updated), taking
        over fields another manager set: what ``kubectl apply --server-side --force-conflicts``
        does. Returns the object as stored (``dry_run``: as it would be, admission included,
        with nothing stored)."""
        return self._json(
            "PATCH",
            self._path(ObjectRef.of(obj)),
            "patch",
            query={
                "fieldManager": field_manager,
                "force": "true",
                **({"dryRun": "All"} if dry_run else {}),
            },
            body=json.dumps(dict(obj)),
            content_type="application/apply-patch+yaml",
        )

    def get(self, ref: ObjectRef) -> dict[str, Any]:
        return self._json("GET", self._path(ref), "get")

    def cached(self, ref: ObjectRef) -> JsonObject | None:
        cache = self._caches.get((ref.api_version, ref.kind))
        return None if cache is None else cache.get(ref.namespace, ref.name)

    def cached_pods(self, namespace: str, label: str, value: str) -> list[JsonObject] | None:
        """None: a client keeps no watch cache of pods (a ``ClusterPort`` over it does)."""
        return None

    def patch(self, ref: ObjectRef, body: Any, patch_type: PatchType) -> dict[str, Any]:
        path = self._path(ref)
        return self._json("PATCH", path, "patch", body=body, content_type=patch_type.value)

    def patch_status(self, ref: ObjectRef, body: Any, patch_type: PatchType) -> dict[str, Any]:
        """Patch the status subresource."""
        path = self._path(ref) + "/status"
        return self._json("PATCH", path, "patch", body=body, content_type=patch_type.value)

    def replace(self, ref: ObjectRef, obj: JsonObject) -> dict[str, Any]:
        return self._json("PUT", self._path(ref), "update", body=dict(obj))

    def replace_status(self, ref: ObjectRef, obj: JsonObject) -> dict[str, Any]:
        """Update the status subresource with ``obj``'s status (client-go's ``UpdateStatus``:
        refused with a Conflict when ``obj``'s resourceVersion is not the current one)."""
        return self._json("PUT", self._path(ref) + "/status", "update", body=dict(obj))

    def delete(
        self,
        ref: ObjectRef,
        *,
        propagation: str = "Background",
        resource_version: str | None = None,
        uid: str | None = None,
        grace_period_seconds: int | None = None,
    ) -> None:
        """Delete the object at ``ref``; with ``resource_version`` or ``uid``, only if it is
        still at that version, or still that object (a Conflict otherwise)."""
        options: dict[str, Any] = {
            "kind": "DeleteOptions",
            "apiVersion": "v1",
            "propagationPolicy": propagation,
        }
        preconditions = {
            key: value
            for key, value in (("resourceVersion", resource_version), ("uid", uid))
            if value is not None
        }
        if preconditions:
            options["preconditions"] = preconditions
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        self._json("DELETE", self._path(ref), "delete", body=options)

    def read_pod_log(
        self, namespace: str, name: str, container: str, *, since_time: str | None = None
    ) -> str:
        """A container's log, each line prefixed with its RFC 3339 timestamp and a space;
        from ``since_time`` (RFC 3339, whole seconds) when given."""
        path = rest_resource("v1", "Pod").object_path(namespace, name) + "/log"
        query = {"container": container, "timestamps": "true"}
        if since_time:
            query["sinceTime"] = since_time
        return self._body("GET", path, "get", query=query).decode("utf-8", "replace")

    # Reading collections -------------------------------------------------------------------

    def list_objects(
        self,
        api_version: str,
        kind: str,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> tuple[list[dict[str, Any]], str]:
        """The matching objects and the list's resourceVersion (to watch from)."""
        resource = rest_resource(api_version, kind)
        query = _selectors(label_selector, field_selector)
        listing = self._json("GET", resource.collection_path(namespace), "list", query=query)
        items = listing.get("items") or []
        for item in items:
            # Lists of built-in kinds leave each item's apiVersion and kind out.
            item.setdefault("apiVersion", api_version)
            item.setdefault("kind", kind)
        return items, str((listing.get("metadata") or {}).get("resourceVersion") or "")

    def watch(
        self,
        api_version: str,
        kind: str,
        *,
        resource_version: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: int = 300,
        stream_holder: list[Any] | None = None,
    ) -> Iterator[dict[str, Any]]:
        """Watch events after ``resource_version``, bookmarks included, until the server ends
        the stream. An ERROR event is raised as the error it carries (410 → ``GoneError``).

        The open response is put in ``stream_holder`` so another thread can shut it down."""
        resource = rest_resource(api_version, kind)
        query = {
            **_selectors(label_selector, field_selector),
            "watch": "true",
            "allowWatchBookmarks": "true",
            "resourceVersion": resource_version,
            "timeoutSeconds": str(timeout_seconds),
        }
        response = self._request(
            "GET",
            resource.collection_path(namespace),
            "watch",
            query=query,
            timeout=(REQUEST_TIMEOUT_SECONDS, timeout_seconds + WATCH_READ_SLACK_SECONDS),
        )
        raw = response.response
        if stream_holder is not None:
            stream_holder.append(raw)
        try:
            for line in _lines(raw):
                event = json.loads(line)
                if event.get("type") == "ERROR":
                    status = event.get("object") or {}
                    raise error_from_status(int(status.get("code") or 500), status)
                obj = event.get("object") or {}
                obj.setdefault("apiVersion", api_version)
                obj.setdefault("kind", kind)
                yield event
        except ValueError as exc:
            raise KubernetesError(
                f"the watch of {kind} sent an event that is not JSON: {exc}"
            ) from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise connection_error(self.server, exc, during=f"the watch of {kind}") from exc
        finally:
            raw.release_conn()

    # HTTP ----------------------------------------------------------------------------------

    def _path(self, ref: ObjectRef) -> str:
        return rest_resource(ref.api_version, ref.kind).object_path(ref.namespace, ref.name)

    def _json(
        self,
        method: str,
        path: str,
        verb: str,
        *,
        query: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: tuple[float, float] | float = REQUEST_TIMEOUT_SECONDS,
    ) -> dict[str, Any]:
        data = self._body(
            method, path, verb, query=query, body=body, content_type=content_type, timeout=timeout
        )
        try:
            decoded = json.loads(data) if data else {}
        except ValueError as exc:
            raise KubernetesError(f"{method} {path}: the answer is not JSON: {exc}") from exc
        return decoded if isinstance(decoded, dict) else {}

    def _body(
        self,
        method: str,
        path: str,
        verb: str,
        *,
        query: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: tuple[float, float] | float = REQUEST_TIMEOUT_SECONDS,
    ) -> bytes:
        """The answer's body; an error status raised as the port's error."""
        response = self._request(
            method, path, verb, query=query, body=body, content_type=content_type, timeout=timeout
        )
        return self._read(response)

    def _read(self, response: Any) -> bytes:
        try:
            return bytes(response.read())
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise connection_error(self.server, exc) from exc

    def _request(
        self,
        method: str,
        path: str,
        verb: str,
        *,
        query: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: tuple[float, float] | float = REQUEST_TIMEOUT_SECONDS,
    ) -> Any:
        """The server's successful answer, its body unread (a watch streams it). An error
        answer is raised as the port's error once :class:`RetryAfterPolicy` retries it no more."""
        retries, waited = 0, 0.0
        while True:
            response = self._send(
                method,
                path,
                verb,
                query=query,
                body=body,
                content_type=content_type,
                timeout=timeout,
            )
            if response.status < 400:
                return response
            data = self._read(response)
            headers = dict(response.getheaders())
            seconds = self._retries.next_wait(
                response.status, headers, retries=retries, waited=waited
            )
            if seconds is None:
                note = self._retries.outcome(
                    response.status, headers, retries=retries, waited=waited
                )
                raise error_from_status(response.status, data, headers, note=note)
            self._sleep(seconds)
            retries += 1
            waited += seconds

    def _send(
        self,
        method: str,
        path: str,
        verb: str,
        *,
        query: Mapping[str, str] | None,
        body: Any,
        content_type: str,
        timeout: tuple[float, float] | float,
    ) -> Any:
        if self._rate_limit is not None:
            self._rate_limit.take()
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        # The body goes to call_api as it is, not through param_serialize: it is plain JSON
        # already, which the client's sanitize_for_serialization would only copy whole.
        method, url, headers, _body, _post = self._api.param_serialize(
            method=method,
            resource_path=path,
            query_params=list((query or {}).items()),
            header_params=headers,
            auth_settings=["BearerToken"],
        )
        try:
            response = self._api.call_api(
                method, url, header_params=headers, body=body, _request_timeout=timeout
            )
        except ApiException as exc:
            self._observe(verb, str(exc.status) if exc.status else CONNECTION_ERROR)
            if exc.status:
                raise error_from_status(
                    exc.status, exc.body or "", dict(exc.headers or {})
                ) from exc
            # Status 0: the client caught a TLS failure and re-raised it as an ApiException.
            raise connection_error(self.server, exc.__context__ or exc) from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            self._observe(verb, CONNECTION_ERROR)
            raise connection_error(self.server, exc) from exc
        self._observe(verb, str(response.status))
        return response

    def _observe(self, verb: str, code: str) -> None:
        if self._observer is not None:
            self._observer(verb, code)


class ObjectCache(Protocol):
    """What :class:`KubernetesClient` reads cached objects from (a ``WatchCache``)."""

    def get(self, namespace: str, name: str) -> JsonObject | None: ...


def _selectors(label_selector: str | None, field_selector: str | None) -> dict[str, str]:
    query = {}
    if label_selector:
        query["labelSelector"] = label_selector
    if field_selector:
        query["fieldSelector"] = field_selector
    return query


def _lines(raw: Any) -> Iterator[bytes]:
    pending = b""
    for chunk in raw.stream(amt=None, decode_content=True):
        pending += chunk
        *complete, pending = pending.split(b"\n")
        yield from (line for line in complete if line.strip())
    if pending.strip():
        yield pending
