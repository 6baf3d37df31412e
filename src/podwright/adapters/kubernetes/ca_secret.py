"""podwright's webhook CA kept in a Secret, shared by every process that serves the webhooks.

The operator runs as several replicas behind one Service, and the API server may call any of
them: all must serve certificates of one CA, which must outlive every replica. :class:`CaSecret`
is the certificate keeper's :class:`~podwright.adapters.certificates.AuthorityStore` for that:
the CAs live in a Secret, and each replica issues its own serving certificate from them (its key
never leaves the process).

The Secret (``type: Opaque``; other keys are left as they are)::

    ca.crt        the current CA's certificate (PEM): the CA every replica issues from
    ca.key        its private key (PKCS#8 PEM, unencrypted; EC)
    bundle.crt    the CA bundle the webhook configurations carry (``clientConfig.caBundle``):
                  ca.crt first, then the older CAs of a rotation, each until it expires
    retiring.key  the private keys of those older CAs (PKCS#8 PEM), in bundle.crt's order;
                  absent when bundle.crt holds ca.crt alone

A Secret with ``ca.crt`` and ``ca.key`` alone (a CA of one's own, made by hand) is read as a
bundle of that CA; a Secret with none of the four keys (created empty, as a chart may) is
filled in.

Each read decides what is due (:func:`~podwright.adapters.certificates.updated_authorities`: the
first CA, a rotation, an expired CA dropped) and writes it, a create when there is no Secret and
otherwise a replace conditional on the resourceVersion read: when another replica wrote first
(409 AlreadyExists or Conflict), its CAs are read and used instead. The API requests are
``get``, ``create`` and ``update`` of Secrets in the Secret's namespace (the operator's RBAC:
``create``, and ``get`` and ``update`` of this one name). The Secret's content is never logged,
nor put into an error message.

Deleting the Secret makes the next replica to look create a new CA, with no overlap: the other
replicas' certificates are refused until each has looked again (``certificate_check_seconds``).
"""

from __future__ import annotations

import base64
import binascii
import datetime
import logging
import re
from collections.abc import Mapping
from typing import Any

from cryptography import x509

from podwright.adapters.certificates import (
    CertificateAuthority,
    CertificateError,
    CertificateSettings,
    TrustedAuthorities,
    UnreadableCertificateError,
    updated_authorities,
)
from podwright.core.lifecycle.objects import section
from podwright.engine.kubernetes_port import (
    ConflictError,
    KubernetesError,
    KubernetesPort,
    NotFoundError,
    ObjectRef,
)

LOG = logging.getLogger("podwright.webhook")

SECRET_TYPE = "Opaque"
CA_CERTIFICATE = "ca.crt"
CA_KEY = "ca.key"
BUNDLE = "bundle.crt"
RETIRING_KEYS = "retiring.key"
LAYOUT = (CA_CERTIFICATE, CA_KEY, BUNDLE, RETIRING_KEYS)
"""The Secret's keys that are podwright's."""
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"

_PEM_BLOCK = re.compile(rb"-----BEGIN ([A-Z0-9 ]+)-----.+?-----END \1-----\r?\n?", re.DOTALL)


class CaSecretError(CertificateError):
    """The CA Secret could not be read or written (the message names it)."""


class UnreadableCaSecretError(CaSecretError):
    """The CA Secret holds no CA podwright can use (the message names it and the key)."""


# The layout: pure ----------------------------------------------------------------------------


def secret_data(authorities: TrustedAuthorities) -> dict[str, str]:
    """The Secret's ``data`` (base64) for ``authorities``."""
    data = {
        CA_CERTIFICATE: authorities.current.pem,
        CA_KEY: authorities.current.key_pem,
        BUNDLE: authorities.bundle,
    }
    if authorities.retiring:
        data[RETIRING_KEYS] = b"".join(authority.key_pem for authority in authorities.retiring)
    return {key: base64.b64encode(value).decode("ascii") for key, value in data.items()}


def authorities_from_data(data: Mapping[str, Any]) -> TrustedAuthorities | None:
    """The CAs a Secret's ``data`` holds; None when it has none of :data:`LAYOUT`'s keys.
    Raises :class:`~podwright.adapters.certificates.UnreadableCertificateError` naming the
    key that cannot be read (never its content)."""
    if not any(key in data for key in LAYOUT):
        return None
    decoded = {key: _decoded(data, key) for key in LAYOUT if key in data}
    for key in (CA_CERTIFICATE, CA_KEY):
        if key not in decoded:
            raise UnreadableCertificateError(f"{key}: missing")
    current = CertificateAuthority.from_pem(
        decoded[CA_CERTIFICATE], decoded[CA_KEY], certificate_name=CA_CERTIFICATE, key_name=CA_KEY
    )
    bundle = _blocks(decoded.get(BUNDLE, current.pem), BUNDLE)
    if _authority_certificate(bundle[0], BUNDLE) != current.certificate:
        raise UnreadableCertificateError(f"{BUNDLE}: does not begin with {CA_CERTIFICATE}")
    keys = _blocks(decoded[RETIRING_KEYS], RETIRING_KEYS) if RETIRING_KEYS in decoded else []
    if len(keys) != len(bundle) - 1:
        raise UnreadableCertificateError(
            f"{RETIRING_KEYS}: {len(keys)} key(s) for the {len(bundle) - 1} CA(s) after "
            f"{CA_CERTIFICATE} in {BUNDLE}"
        )
    retiring = tuple(
        CertificateAuthority.from_pem(
            certificate,
            key,
            certificate_name=f"{BUNDLE}[{index + 1}]",
            key_name=f"{RETIRING_KEYS}[{index}]",
        )
        for index, (certificate, key) in enumerate(zip(bundle[1:], keys, strict=True))
    )
    return TrustedAuthorities(current, retiring)


def _decoded(data: Mapping[str, Any], key: str) -> bytes:
    value = data[key]
    if not isinstance(value, str):
        raise UnreadableCertificateError(f"{key}: not a base64 string")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as error:
        raise UnreadableCertificateError(f"{key}: not base64: {error}") from error


def _blocks(pem: bytes, key: str) -> list[bytes]:
    blocks = [match.group(0) for match in _PEM_BLOCK.finditer(pem)]
    if not blocks:
        raise UnreadableCertificateError(f"{key}: no PEM block in it")
    return blocks


def _authority_certificate(pem: bytes, where: str) -> x509.Certificate:
    try:
        return x509.load_pem_x509_certificate(pem)
    except ValueError as error:
        raise UnreadableCertificateError(f"{where}: not a PEM certificate: {error}") from error


# The store ------------------------------------------------------------------------------------


class CaSecret:
    """The CAs of every process that serves the webhooks, in the Secret ``namespace/name``
    (an :class:`~podwright.adapters.certificates.AuthorityStore`)."""

    def __init__(self, client: KubernetesPort, namespace: str, name: str) -> None:
        self._client = client
        self._ref = ObjectRef("v1", "Secret", namespace, name)

    def __str__(self) -> str:
        return f"Secret {self._ref.namespace}/{self._ref.name}"

    def load(self, now: datetime.datetime, settings: CertificateSettings) -> TrustedAuthorities:
        """The CAs in the Secret, once the changes due at ``now`` are written (the Secret
        created when absent); another replica's when it wrote first."""
        current = self._read()
        held = None if current is None else self._authorities(current)
        wanted = updated_authorities(held, now, settings)
        if wanted is None:
            assert held is not None, "updated_authorities makes the first CA"
            return held
        try:
            self._write(current, wanted)
        except ConflictError:  # AlreadyExists is a Conflict too
            LOG.info("%s was written by another replica first: its CAs are used", self)
            return self._written_by_another()
        except KubernetesError as error:
            verb = "created" if current is None else "updated"
            raise CaSecretError(f"{self}: could not be {verb}: {error}") from error
        LOG.info("%s: %s", self, _change(held, wanted, existed=current is not None))
        return wanted

    def _read(self) -> dict[str, Any] | None:
        try:
            return self._client.get(self._ref)
        except NotFoundError:
            return None
        except KubernetesError as error:
            raise CaSecretError(f"{self}: could not be read: {error}") from error

    def _authorities(self, secret: Mapping[str, Any]) -> TrustedAuthorities | None:
        try:
            return authorities_from_data(section(secret, "data"))
        except UnreadableCertificateError as error:
            raise UnreadableCaSecretError(
                f"{self} holds no CA podwright can use: {error}; correct it, or delete it to "
                "have a new CA made"
            ) from error

    def _written_by_another(self) -> TrustedAuthorities:
        secret = self._read()
        authorities = None if secret is None else self._authorities(secret)
        if authorities is None:
            raise CaSecretError(
                f"{self}: changed by another process while being written, and now holds no CA: "
                "tried again at the next look"
            )
        return authorities

    def _write(self, current: Mapping[str, Any] | None, authorities: TrustedAuthorities) -> None:
        data = secret_data(authorities)
        if current is None:
            self._client.create(
                {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": {
                        "name": self._ref.name,
                        "namespace": self._ref.namespace,
                        "labels": {MANAGED_BY_LABEL: "podwright"},
                    },
                    "type": SECRET_TYPE,
                    "data": data,
                }
            )
            return
        metadata = section(current, "metadata")
        kept = {key: value for key, value in section(current, "data").items() if key not in LAYOUT}
        replacement: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                key: metadata[key]
                for key in (
                    "name",
                    "namespace",
                    "resourceVersion",  # the precondition: 409 Conflict when it changed
                    "labels",
                    "annotations",
                    "ownerReferences",
                    "finalizers",
                )
                if key in metadata
            },
            "type": current.get("type") or SECRET_TYPE,
            "data": {**kept, **data},
        }
        if "immutable" in current:
            replacement["immutable"] = current["immutable"]
        self._client.replace(self._ref, replacement)


def _change(before: TrustedAuthorities | None, after: TrustedAuthorities, *, existed: bool) -> str:
    """What was written, for the log (dates only)."""
    if before is None:
        verb = "filled in" if existed else "created"
        return f"{verb} with a new webhook CA, valid until {after.current.not_after.isoformat()}"
    if after.current.certificate != before.current.certificate:
        return (
            "a new webhook CA issues from now on; the CA(s) before it stay trusted until they "
            "expire"
        )
    return "the expired CA(s) dropped from the bundle"
