"""Where the admission webhooks' TLS comes from: podwright's own CA, or cert-manager's files.

The API server calls admission webhooks over HTTPS only, and trusts nothing but the CA bundle of
their configuration (``clientConfig.caBundle``). Two ways to give the webhook server a certificate
that bundle vouches for:

* podwright is its own certificate authority (out of the cluster, as ``kopf run`` is; or in a
  cluster without cert-manager). :class:`CertificateKeeper` makes a CA, issues the serving
  certificate from it, renews that at :attr:`~CertificateSettings.renewal_fraction` of its life,
  and rotates the CA itself with an overlap: the bundle given to the API server holds the old and
  the new CA from before the first certificate of the new CA is served until no served
  certificate is the old CA's, so no request is refused during a rotation. What to do when is
  decided by the pure :func:`next_step` and :func:`issuing_authority`; the keeper carries it out
  in a background thread and tells its ``publish_bundle`` callback each bundle to put into the
  webhook configurations.
* Several processes serve the webhooks behind one Service (the operator's replicas): they must
  all serve certificates of one CA, which must outlive any of them. The keeper is then given an
  :class:`AuthorityStore` (a Secret: ``podwright.adapters.kubernetes.ca_secret``) that keeps the
  CAs for all of them. At every look the keeper reads the store, which first makes the change
  :func:`shared_authority_step` decides (the first CA, a rotation, an expired CA dropped; the
  first process to write wins, the others adopt what it wrote), and the keeper only issues its
  own serving certificate (its key never leaves the process) and publishes the bundle
  (:func:`serving_step`). A CA leaves the shared bundle only once it has expired, not as soon as
  this process's certificate is of its successor: another process may still serve one of its
  certificates, and none of them outlives it.
* cert-manager issues the certificate into a Secret that the pod mounts (``tls.crt``,
  ``tls.key``, ``ca.crt``) and its CA injector fills ``caBundle``. :class:`CertificateDirectory`
  serves those files and reloads them when they change.

Both hand the webhook server an :class:`ssl.SSLContext` for each new handshake
(``server_context()``) and say what is wrong with the certificate they serve (``problem()``).
Time is never read here: a clock is passed in (``Clock``), so tests move it.

Exceptions::

    CertificateError
    ├── CertificateRequestError      bad arguments: hosts, validity periods, settings
    ├── UnreadableCertificateError   PEM that is not a certificate and its key
    └── CaSecretError                the CA Secret cannot be read or written (names it;
        │                            podwright.adapters.kubernetes.ca_secret)
        └── UnreadableCaSecretError  the Secret holds no CA podwright can use
"""

from __future__ import annotations

import abc
import datetime
import enum
import ipaddress
import logging
import ssl
import tempfile
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol, Self

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from podwright.core.k8s_names import dns1123_subdomain_problem

LOG = logging.getLogger("podwright.webhook")

Clock = Callable[[], datetime.datetime]
"""The current time, timezone-aware."""

ServingKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey
"""A serving certificate's key: EC (podwright's) or RSA (cert-manager's default)."""
CLOCK_SKEW = datetime.timedelta(minutes=5)
"""How far back a certificate's validity starts, for API servers whose clock is a little behind."""


class CertificateError(Exception):
    """A certificate could not be made or read."""


class CertificateRequestError(CertificateError, ValueError):
    """Arguments no certificate can be made from (names the argument and what is allowed)."""


class UnreadableCertificateError(CertificateError):
    """PEM data that is not a certificate and its private key."""


# Certificates ------------------------------------------------------------------------------


def _aware(now: datetime.datetime, argument: str = "now") -> datetime.datetime:
    if now.tzinfo is None:
        raise CertificateRequestError(f"{argument}: a timezone-aware time is needed, got {now}")
    return now


def _positive(validity: datetime.timedelta, argument: str) -> datetime.timedelta:
    if validity <= datetime.timedelta(0):
        raise CertificateRequestError(f"{argument}: must be a positive duration, got {validity}")
    return validity


def _pem(certificate: x509.Certificate) -> bytes:
    return certificate.public_bytes(serialization.Encoding.PEM)


def _key_id(certificate: x509.Certificate) -> bytes:
    return certificate.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value.digest


def _public_der(holder: x509.Certificate | ServingKey) -> bytes:
    """The public key of a certificate or of a private key (DER): equal when they pair."""
    public = holder.public_key()
    return public.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


@dataclass(frozen=True)
class ServingCertificate:
    """A server certificate and its private key (and the intermediate CAs to send with it)."""

    certificate: x509.Certificate
    key: ServingKey
    chain: tuple[x509.Certificate, ...] = ()

    @classmethod
    def from_pem(cls, certificate_pem: bytes, key_pem: bytes) -> ServingCertificate:
        """Read a certificate (followed by its chain, as ``tls.crt`` may be) and its key."""
        try:
            certificates = x509.load_pem_x509_certificates(certificate_pem)
        except ValueError as error:
            raise UnreadableCertificateError(f"not a PEM certificate: {error}") from error
        try:
            key = serialization.load_pem_private_key(key_pem, password=None)
        except (ValueError, TypeError) as error:
            raise UnreadableCertificateError(
                f"not an unencrypted PEM private key: {error}"
            ) from error
        if not isinstance(key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
            raise UnreadableCertificateError(
                f"unsupported private key type {type(key).__name__}: EC or RSA keys are served"
            )
        leaf = certificates[0]
        if _public_der(leaf) != _public_der(key):
            raise UnreadableCertificateError("the private key is not the certificate's")
        return cls(leaf, key, tuple(certificates[1:]))

    @property
    def certificate_pem(self) -> bytes:
        """The certificate and its chain, in PEM (``tls.crt``)."""
        return b"".join(_pem(certificate) for certificate in (self.certificate, *self.chain))

    @property
    def key_pem(self) -> bytes:
        """The private key, in unencrypted PKCS#8 PEM (``tls.key``)."""
        return self.key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )

    @property
    def not_before(self) -> datetime.datetime:
        return self.certificate.not_valid_before_utc

    @property
    def not_after(self) -> datetime.datetime:
        return self.certificate.not_valid_after_utc

    @property
    def hosts(self) -> tuple[str, ...]:
        """The DNS names and IP addresses it is valid for (its subject alternative names)."""
        try:
            names = self.certificate.extensions.get_extension_for_class(
                x509.SubjectAlternativeName
            ).value
        except x509.ExtensionNotFound:
            return ()
        return (
            *names.get_values_for_type(x509.DNSName),
            *(str(address) for address in names.get_values_for_type(x509.IPAddress)),
        )

    def renewal_time(self, fraction: float) -> datetime.datetime:
        """When ``fraction`` of its life since it was issued has passed: time to renew it."""
        return _renewal_time(self.certificate, fraction)

    def issued_by(self, authority: CertificateAuthority) -> bool:
        """Whether ``authority`` signed it (its issuer and authority key identifier match)."""
        if self.certificate.issuer != authority.certificate.subject:
            return False
        try:
            identifier = self.certificate.extensions.get_extension_for_class(
                x509.AuthorityKeyIdentifier
            ).value.key_identifier
        except x509.ExtensionNotFound:
            return True
        return identifier == _key_id(authority.certificate)

    def server_context(self) -> ssl.SSLContext:
        """A TLS server context that serves this certificate (TLS 1.2 or later, HTTP/1.1)."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.set_alpn_protocols(["http/1.1"])
        # The ssl module loads a certificate and key only from files: a private directory (0700)
        # that is gone as soon as they are read.
        with tempfile.TemporaryDirectory(prefix="podwright-tls-") as directory:
            certificate_file, key_file = Path(directory, "tls.crt"), Path(directory, "tls.key")
            certificate_file.write_bytes(self.certificate_pem)
            key_file.touch(mode=0o600)
            key_file.write_bytes(self.key_pem)
            try:
                context.load_cert_chain(certificate_file, key_file)
            except ssl.SSLError as error:
                raise UnreadableCertificateError(f"cannot be served: {error}") from error
        return context


def _key_usage(*, signs_certificates: bool) -> x509.KeyUsage:
    """Signatures only: a CA's also sign certificates and CRLs."""
    return x509.KeyUsage(
        digital_signature=True,
        key_cert_sign=signs_certificates,
        crl_sign=signs_certificates,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        encipher_only=False,
        decipher_only=False,
    )


def _expired(authority: CertificateAuthority, now: datetime.datetime) -> bool:
    """Whether ``authority`` had expired :data:`CLOCK_SKEW` before ``now``."""
    return authority.not_after + CLOCK_SKEW <= _aware(now)


def _renewal_time(certificate: x509.Certificate, fraction: float) -> datetime.datetime:
    """``fraction`` of the life since the certificate was issued (its validity starts
    :data:`CLOCK_SKEW` before that, which is no part of the life to renew by)."""
    issued = certificate.not_valid_before_utc + CLOCK_SKEW
    return issued + (certificate.not_valid_after_utc - issued) * fraction


@dataclass(frozen=True)
class CertificateAuthority:
    """A CA (EC P-256) that issues serving certificates."""

    certificate: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    @classmethod
    def create(
        cls,
        *,
        now: datetime.datetime,
        validity: datetime.timedelta,
    ) -> CertificateAuthority:
        """A new self-signed CA valid from ``now`` (less :data:`CLOCK_SKEW`) for ``validity``,
        named after its creation time (so that the CAs of a rotation read apart)."""
        now = _aware(now)
        _positive(validity, "validity")
        key = ec.generate_private_key(ec.SECP256R1())
        common_name = f"podwright webhook CA {now.astimezone(datetime.UTC):%Y-%m-%dT%H:%M:%SZ}"
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        certificate = (
            _builder(name, name, key.public_key(), now - CLOCK_SKEW, now + validity)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(_key_usage(signs_certificates=True), critical=True)
            .sign(key, hashes.SHA256())
        )
        return cls(certificate, key)

    @classmethod
    def from_pem(
        cls,
        certificate_pem: bytes,
        key_pem: bytes,
        *,
        certificate_name: str = "certificate",
        key_name: str = "key",
    ) -> CertificateAuthority:
        """Read a CA back (:attr:`pem`, :attr:`key_pem`): one CA certificate, with a subject key
        identifier, and its EC private key. An error names the part (``certificate_name``,
        ``key_name``) that is wrong, never its content."""
        try:
            certificates = x509.load_pem_x509_certificates(certificate_pem)
        except ValueError as error:
            raise UnreadableCertificateError(
                f"{certificate_name}: not a PEM certificate: {error}"
            ) from error
        if len(certificates) != 1:
            raise UnreadableCertificateError(
                f"{certificate_name}: one CA certificate is needed, got {len(certificates)}"
            )
        certificate = certificates[0]
        try:
            is_ca = certificate.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
            _key_id(certificate)
        except x509.ExtensionNotFound as error:
            raise UnreadableCertificateError(
                f"{certificate_name}: not a CA certificate: {error}"
            ) from error
        if not is_ca:
            raise UnreadableCertificateError(
                f"{certificate_name}: not a CA certificate: its basic constraints say so"
            )
        try:
            key = serialization.load_pem_private_key(key_pem, password=None)
        except (ValueError, TypeError) as error:
            raise UnreadableCertificateError(
                f"{key_name}: not an unencrypted PEM private key: {error}"
            ) from error
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise UnreadableCertificateError(
                f"{key_name}: unsupported private key type {type(key).__name__}: a CA's key is an "
                "EC key"
            )
        if _public_der(certificate) != _public_der(key):
            raise UnreadableCertificateError(
                f"{key_name}: not the private key of {certificate_name}"
            )
        return cls(certificate, key)

    @property
    def pem(self) -> bytes:
        """The CA certificate in PEM: what a CA bundle holds."""
        return _pem(self.certificate)

    @property
    def key_pem(self) -> bytes:
        """The private key, in unencrypted PKCS#8 PEM."""
        return self.key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )

    @property
    def not_after(self) -> datetime.datetime:
        return self.certificate.not_valid_after_utc

    def renewal_time(self, fraction: float) -> datetime.datetime:
        """When ``fraction`` of its life since it was made has passed: time to rotate it."""
        return _renewal_time(self.certificate, fraction)

    def issue(
        self,
        hosts: Sequence[str],
        *,
        now: datetime.datetime,
        validity: datetime.timedelta,
    ) -> ServingCertificate:
        """A serving certificate (``serverAuth``) for ``hosts``, DNS names and IP addresses,
        valid from ``now`` for ``validity`` but never beyond the CA itself."""
        now = _aware(now)
        _positive(validity, "validity")
        names = subject_alternative_names(hosts)
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0][:64])])
        not_after = min(now + validity, self.not_after)
        certificate = (
            _builder(
                subject, self.certificate.subject, key.public_key(), now - CLOCK_SKEW, not_after
            )
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(_key_usage(signs_certificates=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()),
                critical=False,
            )
            .sign(self.key, hashes.SHA256())
        )
        return ServingCertificate(certificate, key)


def subject_alternative_names(hosts: Sequence[str]) -> list[x509.GeneralName]:
    """``hosts`` as subject alternative names: IP addresses, else DNS names (RFC 1123, a
    leading ``*.`` wildcard allowed)."""
    if isinstance(hosts, str) or not hosts:
        raise CertificateRequestError(
            f"hosts: a non-empty list of DNS names and IP addresses is needed, got {hosts!r}"
        )
    names: list[x509.GeneralName] = []
    for index, host in enumerate(hosts):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
            continue
        except ValueError:
            pass
        problem = dns1123_subdomain_problem(host.removeprefix("*."))
        if problem:
            raise CertificateRequestError(
                f"hosts[{index}]: {host!r} is neither an IP address nor a DNS name: a DNS name "
                f"{problem}"
            )
        names.append(x509.DNSName(host))
    return names


def _builder(
    subject: x509.Name,
    issuer: x509.Name,
    public_key: ec.EllipticCurvePublicKey,
    not_before: datetime.datetime,
    not_after: datetime.datetime,
) -> x509.CertificateBuilder:
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
    )


# Renewal and rotation: what to do when -------------------------------------------------------


@dataclass(frozen=True)
class CertificateSettings:
    """How long certificates live and when they are replaced."""

    authority_validity: datetime.timedelta = datetime.timedelta(days=3650)
    """A CA's life. Long: rotating it takes a round trip through the webhook configurations."""
    serving_validity: datetime.timedelta = datetime.timedelta(days=30)
    """A serving certificate's life (never beyond its CA's). Short: it is renewed in place."""
    renewal_fraction: float = 2 / 3
    """The part of a certificate's life after which it is replaced; the rest is the margin for
    a renewal that fails and is tried again."""
    bundle_settle: datetime.timedelta = datetime.timedelta(seconds=30)
    """How long the API servers are given to load a CA bundle that adds a new CA before a
    certificate of that CA is served (a kube-apiserver reloads webhook configurations from a
    watch, within a second or two)."""

    def __post_init__(self) -> None:
        _positive(self.authority_validity, "authority_validity")
        _positive(self.serving_validity, "serving_validity")
        if not 0 < self.renewal_fraction < 1:
            raise CertificateRequestError(
                f"renewal_fraction: must be between 0 and 1 (exclusive), got "
                f"{self.renewal_fraction}"
            )
        if self.bundle_settle < datetime.timedelta(0):
            raise CertificateRequestError(
                f"bundle_settle: must not be negative, got {self.bundle_settle}"
            )
        margin = self.serving_validity * (1 - self.renewal_fraction)
        if margin <= self.bundle_settle:
            raise CertificateRequestError(
                f"serving_validity: the part of it left at renewal ({margin}) must exceed "
                f"bundle_settle ({self.bundle_settle}), or a certificate expires while its "
                "successor waits for the API servers to trust a new CA"
            )
        if self.serving_validity >= self.authority_validity * (1 - self.renewal_fraction):
            raise CertificateRequestError(
                f"serving_validity: must be shorter than the part of authority_validity left at "
                f"its rotation ({self.authority_validity * (1 - self.renewal_fraction)}), got "
                f"{self.serving_validity}"
            )


@dataclass(frozen=True)
class TrustedAuthorities:
    """The CAs the API server is told to trust: the one that issues, and older ones kept in the
    bundle until no served certificate is theirs."""

    current: CertificateAuthority
    retiring: tuple[CertificateAuthority, ...] = ()

    @property
    def bundle(self) -> bytes:
        """The CA bundle (PEM, the current CA first) for ``clientConfig.caBundle``."""
        return b"".join(authority.pem for authority in (self.current, *self.retiring))

    def rotated(self, successor: CertificateAuthority) -> TrustedAuthorities:
        """``successor`` issues from now on; the current CA stays trusted beside it."""
        return TrustedAuthorities(successor, (self.current, *self.retiring))

    def without_unused(self, served: Iterable[ServingCertificate]) -> TrustedAuthorities:
        """The retiring CAs that issued none of the ``served`` certificates dropped."""
        served = list(served)
        kept = tuple(
            authority
            for authority in self.retiring
            if any(certificate.issued_by(authority) for certificate in served)
        )
        return replace(self, retiring=kept)

    def without_expired(self, now: datetime.datetime) -> TrustedAuthorities:
        """The retiring CAs that expired :data:`CLOCK_SKEW` or more before ``now`` dropped: no
        certificate of theirs is valid any more (none outlives its CA), even by a clock that is
        a little behind."""
        return replace(self, retiring=tuple(ca for ca in self.retiring if not _expired(ca, now)))


@dataclass(frozen=True)
class KeeperState:
    """What a :class:`CertificateKeeper` holds: its CAs, the certificate it serves, and the CA
    bundle it last published (and when)."""

    authorities: TrustedAuthorities | None = None
    serving: ServingCertificate | None = None
    published: bytes | None = None
    published_at: datetime.datetime | None = None


class Step(enum.Enum):
    """What the keeper does next (:func:`next_step`)."""

    CREATE_AUTHORITY = "create the first CA"
    ISSUE = "issue a serving certificate from the current CA"
    PUBLISH = "publish the CA bundle"
    ROTATE_AUTHORITY = "create a new CA, trusted beside the current one"
    RETIRE_AUTHORITIES = "drop the CAs of no served certificate from the bundle"


def next_step(
    state: KeeperState, now: datetime.datetime, settings: CertificateSettings
) -> Step | None:
    """What to do at ``now`` (None: nothing until time passes). A purely computational
    function: the keeper carries the step out and asks again.

    The order keeps every request trusted. A server without a certificate gets one at once.
    Certificates are issued by :func:`issuing_authority`: a new CA issues only once the bundle
    holding it has been published for ``bundle_settle``; until then the served certificate's CA
    goes on renewing it, so a bundle that cannot be published never lets it expire. A
    certificate is renewed when due, unless its renewal would not live longer (it ends with its
    CA, which is then rotated; or it was issued this very moment). An old CA leaves the bundle
    once the served certificate is the new CA's; a CA is rotated when due, one at a time.
    """
    now = _aware(now)
    if state.authorities is None:
        return Step.CREATE_AUTHORITY
    step = serving_step(state, now, settings)
    if step is not None:
        return step
    authorities = state.authorities
    if authorities.retiring:
        issuer = issuing_authority(state, now, settings)
        return Step.RETIRE_AUTHORITIES if issuer is authorities.current else None
    if now >= authorities.current.renewal_time(settings.renewal_fraction):
        return Step.ROTATE_AUTHORITY
    return None


def serving_step(
    state: KeeperState, now: datetime.datetime, settings: CertificateSettings
) -> Step | None:
    """:func:`next_step` for the serving certificate and the bundle alone: :attr:`Step.ISSUE`,
    :attr:`Step.PUBLISH` or None. All a keeper does when an :class:`AuthorityStore` keeps its
    CAs (and creates, rotates and retires them: :func:`shared_authority_step`)."""
    now = _aware(now)
    authorities, serving = state.authorities, state.serving
    if authorities is None:
        raise CertificateError("no CA yet: the keeper creates or reads one first")
    if serving is None:
        return Step.ISSUE
    issuer = issuing_authority(state, now, settings)
    if not serving.issued_by(issuer):
        return Step.ISSUE
    renewal_ends = min(now + settings.serving_validity, issuer.not_after)
    if now >= serving.renewal_time(settings.renewal_fraction) and renewal_ends > serving.not_after:
        return Step.ISSUE
    if state.published != authorities.bundle:
        return Step.PUBLISH
    return None


def shared_authority_step(
    authorities: TrustedAuthorities | None, now: datetime.datetime, settings: CertificateSettings
) -> Step | None:
    """What changes at ``now`` in CAs that several processes share (an :class:`AuthorityStore`):
    :attr:`Step.CREATE_AUTHORITY` when there are none, :attr:`Step.RETIRE_AUTHORITIES` when a
    retiring CA has expired (:data:`CLOCK_SKEW` ago: :meth:`TrustedAuthorities.without_expired`),
    :attr:`Step.ROTATE_AUTHORITY` when the current CA is at ``renewal_fraction`` of its life;
    None: nothing. Pure, as :func:`next_step`.

    Unlike a keeper on its own, no process knows which certificates the others serve: a retiring
    CA stays in the bundle until it expires, so a process that has not yet looked again (or
    cannot publish, and renews from the old CA) is trusted throughout. A rotation does not wait
    for that: with a ``renewal_fraction`` of 1/2 or more the bundle holds at most two CAs.
    """
    now = _aware(now)
    if authorities is None:
        return Step.CREATE_AUTHORITY
    if any(_expired(authority, now) for authority in authorities.retiring):
        return Step.RETIRE_AUTHORITIES
    if now >= authorities.current.renewal_time(settings.renewal_fraction):
        return Step.ROTATE_AUTHORITY
    return None


def updated_authorities(
    authorities: TrustedAuthorities | None, now: datetime.datetime, settings: CertificateSettings
) -> TrustedAuthorities | None:
    """The shared CAs to keep at ``now``: every change :func:`shared_authority_step` asks for
    made (a new CA created for a first CA or a rotation); None when none is due."""
    changed = False
    while (step := shared_authority_step(authorities, now, settings)) is not None:
        if step is Step.RETIRE_AUTHORITIES and authorities is not None:
            authorities = authorities.without_expired(now)
        else:
            created = CertificateAuthority.create(now=now, validity=settings.authority_validity)
            authorities = (
                TrustedAuthorities(created) if authorities is None else authorities.rotated(created)
            )
        changed = True
    return authorities if changed else None


class AuthorityStore(Protocol):
    """Where the CAs that several processes share are kept (a Secret:
    ``podwright.adapters.kubernetes.ca_secret.CaSecret``); its ``str`` names it."""

    def load(self, now: datetime.datetime, settings: CertificateSettings) -> TrustedAuthorities:
        """The CAs kept now, once the changes due at ``now`` (:func:`updated_authorities`) are
        written; when another process wrote first, the CAs it wrote. Raises a
        :class:`CertificateError` when they can be neither read nor written."""
        ...


def issuing_authority(
    state: KeeperState, now: datetime.datetime, settings: CertificateSettings
) -> CertificateAuthority:
    """The CA a certificate is issued from at ``now``: the current CA once the API servers have
    had ``bundle_settle`` to load a published bundle that holds it (or when nothing is served
    yet: any certificate beats none), else the served certificate's CA."""
    authorities, serving = state.authorities, state.serving
    if authorities is None:
        raise CertificateError("no CA yet: the keeper creates one first")
    current = authorities.current
    settled = (
        state.published is not None
        and state.published_at is not None
        and current.pem in state.published
        and now >= state.published_at + settings.bundle_settle
    )
    if serving is None or settled:
        return current
    return next((ca for ca in (current, *authorities.retiring) if serving.issued_by(ca)), current)


# Looking again and again ----------------------------------------------------------------------


class _LookingAgain(abc.ABC):
    """A background thread that calls :meth:`_look` every ``check_interval_seconds`` until
    stopped; a ``with`` block starts and stops it."""

    def __init__(self, check_interval_seconds: float, thread_name: str) -> None:
        if check_interval_seconds <= 0:
            raise CertificateRequestError(
                f"check_interval_seconds: must be positive, got {check_interval_seconds}"
            )
        self._interval = check_interval_seconds
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=thread_name, daemon=True)

    @abc.abstractmethod
    def _look(self) -> None:
        """One look (its failures are the subclass's to log)."""

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stopping.wait(self._interval):
            self._look()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()


# The keeper -----------------------------------------------------------------------------------


class CertificateKeeper(_LookingAgain):
    """The webhook server's TLS from podwright's own CA: a serving certificate for ``hosts``,
    renewed and the CA rotated (:func:`next_step`) in a background thread that looks every
    ``check_interval_seconds``. ``publish_bundle`` is told every CA bundle the webhook
    configurations must carry (the caller patches them; see
    ``podwright.adapters.kubernetes.webhook_configurations``); when it fails, the keeper serves
    on and tries again at its next look. A ``with`` block starts and stops it.

    With an ``authority_store``, the CAs are the store's, shared with every other process that
    serves the webhooks: each look reads them first (the store creates, rotates and retires
    them: :func:`updated_authorities`), and the keeper issues its own certificate from them and
    publishes their bundle (:func:`serving_step`). A store that cannot be read at a look is
    logged, and the keeper serves on (and renews) from the CAs read before, publishing nothing
    until it is read again: the store may hold a newer bundle. ``authority`` (a CA of the
    caller's) and ``authority_store`` exclude each other."""

    def __init__(
        self,
        hosts: Sequence[str],
        *,
        clock: Clock,
        publish_bundle: Callable[[bytes], None] | None = None,
        settings: CertificateSettings | None = None,
        authority: CertificateAuthority | None = None,
        authority_store: AuthorityStore | None = None,
        check_interval_seconds: float = 60.0,
    ) -> None:
        subject_alternative_names(hosts)  # bad hosts fail here, not in the thread
        if authority is not None and authority_store is not None:
            raise CertificateRequestError(
                "authority, authority_store: at most one: a CA of the caller's, or the store "
                "that keeps the CAs of every process"
            )
        super().__init__(check_interval_seconds, "certificate-keeper")
        self._store = authority_store
        self._hosts = tuple(hosts)
        self._clock = clock
        self._publish = publish_bundle
        self._settings = settings or CertificateSettings()
        self._state = KeeperState(TrustedAuthorities(authority) if authority else None)
        self._context: ssl.SSLContext | None = None
        self._publish_error: str | None = None
        self._lock = threading.Lock()

    @property
    def state(self) -> KeeperState:
        return self._state

    @property
    def ca_bundle(self) -> bytes:
        """The CA bundle (PEM) the webhook configurations must carry now."""
        authorities = self._state.authorities
        if authorities is None:
            raise CertificateError("the keeper has no CA yet: call refresh() or start() first")
        return authorities.bundle

    def server_context(self) -> ssl.SSLContext:
        """The TLS context for the next handshake: the current serving certificate's."""
        context = self._context
        if context is None:
            raise CertificateError("the keeper has no certificate yet: call refresh() or start()")
        return context

    def problem(self) -> str | None:
        """What is wrong with the certificate served, or None."""
        serving, now = self._state.serving, _aware(self._clock(), "clock()")
        if serving is None:
            return "no serving certificate yet"
        if now >= serving.not_after:
            return f"the serving certificate expired at {serving.not_after.isoformat()}"
        if self._publish_error is not None:
            return f"the CA bundle could not be published: {self._publish_error}"
        return None

    def refresh(self) -> None:
        """Take every step that is due now (:func:`next_step`; with an authority store, the
        CAs read from it first, then :func:`serving_step`)."""
        with self._lock:
            decide, publishing = next_step, True
            if self._store is not None:
                decide, publishing = serving_step, self._adopt_stored(self._store)
            while (step := decide(self._state, self._clock(), self._settings)) is not None:
                if step is Step.PUBLISH and not publishing:
                    return
                if not self._take(step):
                    return

    def _adopt_stored(self, store: AuthorityStore) -> bool:
        """Hold the store's CAs; False when it could not be read and the CAs read before are
        kept (none before: raised)."""
        try:
            stored = store.load(self._clock(), self._settings)
        except CertificateError as error:
            if self._state.authorities is None:
                raise
            LOG.warning("%s; serving on from the CA read before", error)
            return False
        held = self._state.authorities
        if held is None or held.bundle != stored.bundle:
            if held is not None:
                LOG.info(
                    "the webhook CAs in %s changed: %d CA(s) trusted, a certificate of the "
                    "current one served once the bundle is published",
                    store,
                    len(stored.retiring) + 1,
                )
            self._state = replace(self._state, authorities=stored)
        return True

    def _take(self, step: Step) -> bool:
        """Carry out ``step``; False when it failed (publishing) and is to be tried later."""
        state, now, settings = self._state, self._clock(), self._settings
        if state.authorities is None:  # Step.CREATE_AUTHORITY
            authority = CertificateAuthority.create(now=now, validity=settings.authority_validity)
            self._state = replace(state, authorities=TrustedAuthorities(authority))
            return True
        authorities = state.authorities
        if step is Step.PUBLISH:
            return self._published(authorities.bundle, now)
        if step is Step.ISSUE:
            issuer = issuing_authority(state, now, settings)
            serving = issuer.issue(self._hosts, now=now, validity=settings.serving_validity)
            self._context = serving.server_context()
            self._state = replace(state, serving=serving)
        elif step is Step.ROTATE_AUTHORITY:
            successor = CertificateAuthority.create(now=now, validity=settings.authority_validity)
            self._state = replace(state, authorities=authorities.rotated(successor))
            LOG.info("rotating the webhook CA: a new CA is trusted beside the current one")
        else:  # Step.RETIRE_AUTHORITIES: next_step asks for it only with a certificate served
            served = [state.serving] if state.serving else []
            self._state = replace(state, authorities=authorities.without_unused(served))
        return True

    def _published(self, bundle: bytes, now: datetime.datetime) -> bool:
        if self._publish is not None:
            try:
                self._publish(bundle)
            except Exception as error:  # the caller's callback: whatever it raises is logged
                self._publish_error = f"{type(error).__name__}: {error}"
                LOG.warning("could not publish the webhook CA bundle: %s", self._publish_error)
                return False
        self._publish_error = None
        self._state = replace(self._state, published=bundle, published_at=now)
        return True

    def start(self) -> Self:
        """A certificate now, then the background thread."""
        self.refresh()
        return super().start()

    def _look(self) -> None:
        try:
            self.refresh()
        except CertificateError as error:
            LOG.error("could not renew the webhook certificate: %s", error)


# Certificates from files ----------------------------------------------------------------------


class CertificateDirectory(_LookingAgain):
    """The webhook server's TLS from the files of a directory, as cert-manager's Secret is
    mounted: ``tls.crt`` (the certificate, maybe followed by its chain) and ``tls.key``; they
    are read again every ``check_interval_seconds`` and served from the next handshake on when
    they changed. ``ca.crt`` is cert-manager's CA injector's to put into the webhook
    configurations (:attr:`ca_bundle` reads it for a caller that does it itself). Files that
    cannot be read when they change are logged, and the certificate read before is served on.
    A ``with`` block starts and stops the thread."""

    CERTIFICATE_FILE = "tls.crt"
    KEY_FILE = "tls.key"
    CA_FILE = "ca.crt"

    def __init__(
        self, directory: Path, *, clock: Clock, check_interval_seconds: float = 10.0
    ) -> None:
        super().__init__(check_interval_seconds, "certificate-directory")
        self.directory = directory
        self._clock = clock
        self._reload_error: str | None = None
        self._files = self._read()
        self._serving, self._context = self._load(self._files)

    @property
    def serving(self) -> ServingCertificate:
        return self._serving

    @property
    def ca_bundle(self) -> bytes | None:
        """``ca.crt``, when the directory has one."""
        path = self.directory / self.CA_FILE
        return path.read_bytes() if path.is_file() else None

    def server_context(self) -> ssl.SSLContext:
        return self._context

    def problem(self) -> str | None:
        """What is wrong with the certificate served, or None."""
        now = _aware(self._clock(), "clock()")
        if now >= self._serving.not_after:
            return f"the serving certificate expired at {self._serving.not_after.isoformat()}"
        return self._reload_error

    def reload_if_changed(self) -> bool:
        """Read the files again; whether a changed certificate is now served."""
        try:
            files = self._read()
            if files == self._files:
                self._reload_error = None
                return False
            serving, context = self._load(files)
        except CertificateError as error:
            if self._reload_error is None:
                LOG.warning("%s; serving the certificate read before", error)
            self._reload_error = f"{error}; serving the certificate read before"
            return False
        self._context, self._serving, self._files = context, serving, files
        self._reload_error = None
        LOG.info("serving the certificate of %s anew", self.directory / self.CERTIFICATE_FILE)
        return True

    def _read(self) -> tuple[bytes, bytes]:
        files = []
        for name in (self.CERTIFICATE_FILE, self.KEY_FILE):
            path = self.directory / name
            try:
                files.append(path.read_bytes())
            except OSError as error:
                raise UnreadableCertificateError(f"{path}: {error.strerror or error}") from error
        return files[0], files[1]

    def _load(self, files: tuple[bytes, bytes]) -> tuple[ServingCertificate, ssl.SSLContext]:
        try:
            serving = ServingCertificate.from_pem(*files)
            return serving, serving.server_context()
        except UnreadableCertificateError as error:
            raise UnreadableCertificateError(
                f"{self.directory / self.CERTIFICATE_FILE}, {self.KEY_FILE}: {error}"
            ) from error

    def _look(self) -> None:
        self.reload_if_changed()
