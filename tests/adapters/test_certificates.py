"""The webhooks' certificates: what a CA and a serving certificate contain, when they are renewed,
and a CA rotation that never leaves the served certificate untrusted (the keeper's decisions as a
named matrix, its runs on a clock the test moves, and a property over any run of that clock);
the decisions over CAs that several processes share (when one is made, rotated, dropped), a CA
read back from PEM; certificates read from cert-manager's files and read again when they change.
The shared CAs kept in a Secret are tests/adapters/test_ca_secret.py's."""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Callable
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from hypothesis import given
from hypothesis import strategies as st

from podwright.adapters.certificates import (
    CLOCK_SKEW,
    CertificateAuthority,
    CertificateDirectory,
    CertificateKeeper,
    CertificateRequestError,
    CertificateSettings,
    KeeperState,
    ServingCertificate,
    Step,
    TrustedAuthorities,
    UnreadableCertificateError,
    issuing_authority,
    next_step,
    serving_step,
    shared_authority_step,
    updated_authorities,
)
from tests.webhook_server import ManualClock, PublishedBundles

DAY = datetime.timedelta(days=1)
T0 = datetime.datetime(2026, 3, 1, tzinfo=datetime.UTC)
SETTINGS = CertificateSettings(
    authority_validity=300 * DAY,
    serving_validity=30 * DAY,
    renewal_fraction=2 / 3,
    bundle_settle=datetime.timedelta(minutes=1),
)
HOSTS = ["webhook.podwright.svc", "127.0.0.1", "::1"]


def authority(at: datetime.datetime = T0) -> CertificateAuthority:
    return CertificateAuthority.create(now=at, validity=SETTINGS.authority_validity)


def serving_of(ca: CertificateAuthority, at: datetime.datetime = T0) -> ServingCertificate:
    return ca.issue(HOSTS, now=at, validity=SETTINGS.serving_validity)


def signed_by(certificate: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        certificate.verify_directly_issued_by(ca)
    except (InvalidSignature, ValueError, TypeError):
        return False
    return True


def trusts(bundle: bytes, serving: ServingCertificate) -> bool:
    """Whether a client with ``bundle`` accepts ``serving`` (signed by one of its CAs)."""
    return any(signed_by(serving.certificate, ca) for ca in x509.load_pem_x509_certificates(bundle))


# What a CA and a serving certificate are --------------------------------------------------------


def test_a_ca_is_a_ca_valid_for_its_validity() -> None:
    ca = authority()
    certificate = ca.certificate
    constraints = certificate.extensions.get_extension_for_class(x509.BasicConstraints)
    assert constraints.critical
    assert constraints.value.ca
    usage = certificate.extensions.get_extension_for_class(x509.KeyUsage).value
    assert usage.key_cert_sign
    assert certificate.not_valid_before_utc == T0 - CLOCK_SKEW
    assert certificate.not_valid_after_utc == T0 + 300 * DAY
    assert signed_by(certificate, certificate)
    assert ca.pem.startswith(b"-----BEGIN CERTIFICATE-----")


def test_a_serving_certificate_names_its_hosts_and_serves_tls_servers_only() -> None:
    ca = authority()
    serving = serving_of(ca, T0 + DAY)
    certificate = serving.certificate
    names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["webhook.podwright.svc"]
    assert names.get_values_for_type(x509.IPAddress) == [
        ipaddress.ip_address("127.0.0.1"),
        ipaddress.ip_address("::1"),
    ]
    assert serving.hosts == ("webhook.podwright.svc", "127.0.0.1", "::1")
    usage = certificate.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usage) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert not certificate.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert serving.not_before == T0 + DAY - CLOCK_SKEW
    assert serving.not_after == T0 + DAY + 30 * DAY
    assert signed_by(certificate, ca.certificate)
    assert serving.issued_by(ca)
    assert not serving.issued_by(authority())


def test_a_serving_certificate_never_outlives_its_ca() -> None:
    ca = authority()
    late = serving_of(ca, T0 + 290 * DAY)
    assert late.not_after == ca.not_after


def test_renewal_is_due_at_the_fraction_of_the_life_since_the_issue() -> None:
    """The validity starts :data:`CLOCK_SKEW` before the issue, which the life does not count:
    a certificate of minutes would otherwise be due as soon as it is issued."""
    assert serving_of(authority()).renewal_time(2 / 3) == T0 + 20 * DAY
    assert authority().renewal_time(0.5) == T0 + 150 * DAY
    minutes = authority().issue(HOSTS, now=T0, validity=datetime.timedelta(minutes=3))
    assert minutes.renewal_time(2 / 3) == T0 + datetime.timedelta(minutes=2)


@pytest.mark.parametrize(
    ("hosts", "message"),
    [
        pytest.param([], "hosts: a non-empty list", id="none"),
        pytest.param("127.0.0.1", "hosts: a non-empty list", id="a string, not a list"),
        pytest.param(
            ["ok.example", "Bad_Name"],
            "hosts[1]: 'Bad_Name' is neither an IP address nor a DNS name",
            id="not a DNS name",
        ),
    ],
)
def test_bad_hosts_are_refused_naming_the_argument(hosts: list[str], message: str) -> None:
    with pytest.raises(CertificateRequestError, match=message.replace("[", r"\[")):
        authority().issue(hosts, now=T0, validity=DAY)


def test_a_wildcard_dns_name_is_a_host() -> None:
    serving = authority().issue(["*.podwright.svc"], now=T0, validity=DAY)
    assert serving.hosts == ("*.podwright.svc",)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        pytest.param(
            lambda: CertificateAuthority.create(now=T0.replace(tzinfo=None), validity=DAY),
            "now: a timezone-aware time is needed",
            id="a naive time",
        ),
        pytest.param(
            lambda: CertificateAuthority.create(now=T0, validity=datetime.timedelta(0)),
            "validity: must be a positive duration",
            id="no validity",
        ),
        pytest.param(
            lambda: CertificateSettings(renewal_fraction=1.0),
            "renewal_fraction: must be between 0 and 1",
            id="renewal at the end",
        ),
        pytest.param(
            lambda: CertificateSettings(
                serving_validity=datetime.timedelta(minutes=1),
                bundle_settle=datetime.timedelta(minutes=1),
            ),
            r"serving_validity: the part of it left at renewal \(0:00:20\) must exceed "
            r"bundle_settle",
            id="no time to wait for the API servers",
        ),
        pytest.param(
            lambda: CertificateSettings(authority_validity=60 * DAY),
            "serving_validity: must be shorter than the part of authority_validity left",
            id="a CA shorter-lived than its certificates",
        ),
        pytest.param(
            lambda: CertificateKeeper(["a.example"], clock=ManualClock(), check_interval_seconds=0),
            "check_interval_seconds: must be positive",
            id="a keeper that never looks",
        ),
    ],
)
def test_bad_arguments_are_refused_naming_them(call: Callable[[], object], message: str) -> None:
    with pytest.raises(CertificateRequestError, match=message):
        call()


def test_a_certificate_and_its_key_are_read_back_from_pem() -> None:
    serving = serving_of(authority())
    read = ServingCertificate.from_pem(serving.certificate_pem, serving.key_pem)
    assert read.certificate == serving.certificate
    assert read.key_pem == serving.key_pem


def self_signed_rsa(common_name: str) -> tuple[bytes, bytes]:
    """What cert-manager issues by default: an RSA key, here with a self-signed certificate."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(T0)
        .not_valid_after(T0 + DAY)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(common_name)]), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    return certificate.public_bytes(serialization.Encoding.PEM), key_pem


def test_an_rsa_certificate_with_its_chain_is_read_and_served() -> None:
    certificate_pem, key_pem = self_signed_rsa("rsa.example")
    chained = certificate_pem + authority().pem
    serving = ServingCertificate.from_pem(chained, key_pem)
    assert serving.hosts == ("rsa.example",)
    assert len(serving.chain) == 1
    assert serving.certificate_pem == chained
    serving.server_context()


@pytest.mark.parametrize(
    ("certificate", "key", "message"),
    [
        pytest.param(b"nonsense", None, "not a PEM certificate", id="no certificate"),
        pytest.param(None, b"nonsense", "not an unencrypted PEM private key", id="no key"),
        pytest.param(
            None, "other", "the private key is not the certificate's", id="a key of another"
        ),
    ],
)
def test_unreadable_pem_says_what_is_wrong(
    certificate: bytes | None, key: bytes | str | None, message: str
) -> None:
    serving = serving_of(authority())
    other = serving_of(authority())
    certificate_pem = certificate or serving.certificate_pem
    key_pem = other.key_pem if key == "other" else key or serving.key_pem
    assert isinstance(key_pem, bytes)
    with pytest.raises(UnreadableCertificateError, match=message):
        ServingCertificate.from_pem(certificate_pem, key_pem)


# The CA bundle through a rotation ---------------------------------------------------------------


def test_a_rotated_bundle_trusts_both_cas_until_the_old_one_issued_nothing_served() -> None:
    old, new = authority(), authority(T0 + DAY)
    trusted = TrustedAuthorities(old).rotated(new)
    assert trusted.current == new
    assert x509.load_pem_x509_certificates(trusted.bundle) == [new.certificate, old.certificate]
    assert trusted.without_unused([serving_of(old)]) == trusted
    assert trusted.without_unused([serving_of(new)]) == TrustedAuthorities(new)


# The keeper's decisions: a named matrix -----------------------------------------------------------

CA_A = authority()
CA_B = authority(T0 + 200 * DAY)
A_SERVING = serving_of(CA_A)
A_LATE_SERVING = serving_of(CA_A, T0 + 199 * DAY)
A_ENDING_SERVING = serving_of(CA_A, T0 + 290 * DAY)
B_SERVING = serving_of(CA_B, T0 + 200 * DAY)
ONLY_A = TrustedAuthorities(CA_A)
A_THEN_B = ONLY_A.rotated(CA_B)
SETTLED = T0 + 200 * DAY + SETTINGS.bundle_settle


@pytest.mark.parametrize(
    ("state", "now", "step"),
    [
        pytest.param(KeeperState(), T0, Step.CREATE_AUTHORITY, id="no CA yet: create one"),
        pytest.param(KeeperState(ONLY_A), T0, Step.ISSUE, id="no certificate: issue at once"),
        pytest.param(
            KeeperState(ONLY_A, A_SERVING), T0, Step.PUBLISH, id="a bundle never published"
        ),
        pytest.param(
            KeeperState(ONLY_A, A_SERVING, ONLY_A.bundle, T0), T0 + DAY, None, id="all is fresh"
        ),
        pytest.param(
            KeeperState(ONLY_A, A_SERVING, ONLY_A.bundle, T0),
            T0 + 20 * DAY,
            Step.ISSUE,
            id="the certificate at 2/3 of its life: renew",
        ),
        pytest.param(
            KeeperState(ONLY_A, A_LATE_SERVING, ONLY_A.bundle, T0),
            T0 + 200 * DAY,
            Step.ROTATE_AUTHORITY,
            id="the CA at 2/3 of its life: rotate",
        ),
        pytest.param(
            KeeperState(ONLY_A, A_LATE_SERVING, ONLY_A.bundle, T0),
            T0 + 290 * DAY,
            Step.ISSUE,
            id="CA and certificate both due: renew from the trusted CA first",
        ),
        pytest.param(
            KeeperState(ONLY_A, A_ENDING_SERVING, ONLY_A.bundle, T0),
            T0 + 299 * DAY,
            Step.ROTATE_AUTHORITY,
            id="a certificate that ends with its CA: not renewed from it, the CA rotated",
        ),
        pytest.param(
            KeeperState(A_THEN_B, A_LATE_SERVING, ONLY_A.bundle, T0),
            T0 + 200 * DAY,
            Step.PUBLISH,
            id="rotated: publish both CAs",
        ),
        pytest.param(
            KeeperState(A_THEN_B, A_LATE_SERVING, A_THEN_B.bundle, T0 + 200 * DAY),
            SETTLED - datetime.timedelta(seconds=1),
            None,
            id="both published a moment ago: keep serving the old CA's certificate",
        ),
        pytest.param(
            KeeperState(A_THEN_B, A_LATE_SERVING, A_THEN_B.bundle, T0 + 200 * DAY),
            SETTLED,
            Step.ISSUE,
            id="both published long enough: serve the new CA's certificate",
        ),
        pytest.param(
            KeeperState(A_THEN_B, B_SERVING, A_THEN_B.bundle, T0 + 200 * DAY),
            SETTLED,
            Step.RETIRE_AUTHORITIES,
            id="the new CA's certificate served: drop the old CA",
        ),
        pytest.param(
            KeeperState(TrustedAuthorities(CA_B), B_SERVING, A_THEN_B.bundle, T0 + 200 * DAY),
            SETTLED,
            Step.PUBLISH,
            id="the old CA dropped: publish",
        ),
        pytest.param(
            KeeperState(A_THEN_B, A_LATE_SERVING, ONLY_A.bundle, T0),
            T0 + 201 * DAY,
            Step.PUBLISH,
            id="a rotated bundle still unpublished: no new CA's certificate before it",
        ),
        pytest.param(
            KeeperState(A_THEN_B, A_SERVING, ONLY_A.bundle, T0),
            T0 + 201 * DAY,
            Step.ISSUE,
            id="a rotated bundle still unpublished: the old CA renews a due certificate",
        ),
    ],
)
def test_what_the_keeper_does_next(
    state: KeeperState, now: datetime.datetime, step: Step | None
) -> None:
    assert next_step(state, now, SETTINGS) is step


@pytest.mark.parametrize(
    ("state", "now", "issuer"),
    [
        pytest.param(KeeperState(ONLY_A), T0, CA_A, id="nothing served: the current CA"),
        pytest.param(
            KeeperState(A_THEN_B, A_LATE_SERVING, ONLY_A.bundle, T0),
            T0 + 201 * DAY,
            CA_A,
            id="the new CA unpublished: the served certificate's CA",
        ),
        pytest.param(
            KeeperState(A_THEN_B, A_LATE_SERVING, A_THEN_B.bundle, T0 + 200 * DAY),
            SETTLED - datetime.timedelta(seconds=1),
            CA_A,
            id="the new CA published a moment ago: the served certificate's CA",
        ),
        pytest.param(
            KeeperState(A_THEN_B, A_LATE_SERVING, A_THEN_B.bundle, T0 + 200 * DAY),
            SETTLED,
            CA_B,
            id="the new CA published long enough: the new CA",
        ),
    ],
)
def test_which_ca_issues(
    state: KeeperState, now: datetime.datetime, issuer: CertificateAuthority
) -> None:
    assert issuing_authority(state, now, SETTINGS) is issuer


@pytest.mark.parametrize(
    ("state", "now"),
    [
        pytest.param(
            KeeperState(ONLY_A, A_LATE_SERVING, ONLY_A.bundle, T0),
            T0 + 200 * DAY,
            id="the CA due: rotating it is the store's",
        ),
        pytest.param(
            KeeperState(A_THEN_B, B_SERVING, A_THEN_B.bundle, T0 + 200 * DAY),
            SETTLED,
            id="the new CA's certificate served: the old CA stays, the store drops it",
        ),
    ],
)
def test_a_keeper_sharing_its_cas_never_changes_them_itself(
    state: KeeperState, now: datetime.datetime
) -> None:
    assert next_step(state, now, SETTINGS) in {Step.ROTATE_AUTHORITY, Step.RETIRE_AUTHORITIES}
    assert serving_step(state, now, SETTINGS) is None


def test_serving_steps_are_next_steps_for_the_certificate_and_the_bundle() -> None:
    state = KeeperState(A_THEN_B, A_LATE_SERVING, ONLY_A.bundle, T0)
    assert serving_step(state, T0 + 201 * DAY, SETTINGS) is Step.PUBLISH
    assert serving_step(KeeperState(ONLY_A), T0, SETTINGS) is Step.ISSUE


# CAs shared by several processes: the store's decisions -------------------------------------------

A_THEN_B_AT_A_EXPIRY = T0 + 300 * DAY + CLOCK_SKEW
"""When the old CA of ``A_THEN_B`` is dropped: it expired at 300 days, by a clock a little behind."""


@pytest.mark.parametrize(
    ("authorities", "now", "step"),
    [
        pytest.param(None, T0, Step.CREATE_AUTHORITY, id="none yet: create one"),
        pytest.param(ONLY_A, T0 + DAY, None, id="a fresh CA: nothing"),
        pytest.param(
            ONLY_A,
            T0 + 200 * DAY - datetime.timedelta(seconds=1),
            None,
            id="a CA a moment before 2/3 of its life: nothing",
        ),
        pytest.param(ONLY_A, T0 + 200 * DAY, Step.ROTATE_AUTHORITY, id="at 2/3: rotate"),
        pytest.param(
            ONLY_A, T0 + 400 * DAY, Step.ROTATE_AUTHORITY, id="an expired CA (left for long)"
        ),
        pytest.param(
            A_THEN_B,
            T0 + 250 * DAY,
            None,
            id="rotated: the old CA stays while a certificate of it may be valid",
        ),
        pytest.param(
            A_THEN_B,
            T0 + 300 * DAY,
            None,
            id="the old CA expiring: kept while a clock a little behind still trusts it",
        ),
        pytest.param(
            A_THEN_B,
            A_THEN_B_AT_A_EXPIRY,
            Step.RETIRE_AUTHORITIES,
            id="the old CA expired: drop it",
        ),
    ],
)
def test_what_changes_in_shared_cas(
    authorities: TrustedAuthorities | None, now: datetime.datetime, step: Step | None
) -> None:
    assert shared_authority_step(authorities, now, SETTINGS) is step


def test_shared_cas_are_made_rotated_and_dropped_all_at_once_when_due() -> None:
    created = updated_authorities(None, T0, SETTINGS)
    assert created is not None
    assert created.retiring == ()
    assert created.current.not_after == T0 + SETTINGS.authority_validity
    assert updated_authorities(created, T0 + DAY, SETTINGS) is None
    rotated = updated_authorities(ONLY_A, T0 + 200 * DAY, SETTINGS)
    assert rotated is not None
    assert rotated.retiring == (CA_A,)
    assert rotated.current.not_after == T0 + 500 * DAY
    # A CA long expired (nothing looked for a year): a new one, and the expired one dropped.
    renewed = updated_authorities(ONLY_A, T0 + 400 * DAY, SETTINGS)
    assert renewed is not None
    assert renewed.retiring == ()
    assert renewed.current.not_after == T0 + 700 * DAY
    assert updated_authorities(A_THEN_B, A_THEN_B_AT_A_EXPIRY, SETTINGS) == TrustedAuthorities(CA_B)


def test_the_expired_retiring_cas_are_dropped_and_the_current_one_never() -> None:
    assert A_THEN_B.without_expired(A_THEN_B_AT_A_EXPIRY - datetime.timedelta(seconds=1)) == (
        A_THEN_B
    )
    assert A_THEN_B.without_expired(A_THEN_B_AT_A_EXPIRY) == TrustedAuthorities(CA_B)
    assert ONLY_A.without_expired(T0 + 1000 * DAY) == ONLY_A


def test_a_ca_is_read_back_from_pem() -> None:
    ca = authority()
    read = CertificateAuthority.from_pem(ca.pem, ca.key_pem)
    assert read.certificate == ca.certificate
    assert read.key_pem == ca.key_pem
    assert serving_of(read).issued_by(ca)


@pytest.mark.parametrize(
    ("certificate", "key", "message"),
    [
        pytest.param("garbage", "own", "not a PEM certificate", id="no certificate"),
        pytest.param("two", "own", "one CA certificate is needed, got 2", id="a bundle"),
        pytest.param("serving", "serving", "not a CA certificate", id="a serving certificate"),
        pytest.param("own", "garbage", "not an unencrypted PEM private key", id="no key"),
        pytest.param("own", "other", "key: not the private key of certificate", id="not its key"),
        pytest.param(
            "rsa",
            "rsa",
            "unsupported private key type RSAPrivateKey: a CA's key is an EC key",
            id="an RSA CA",
        ),
    ],
)
def test_pem_that_is_no_ca_says_what_is_wrong(certificate: str, key: str, message: str) -> None:
    ca, other, serving = authority(), authority(), serving_of(authority())
    rsa_certificate, rsa_key = self_signed_rsa_ca("rsa.example")
    certificates = {
        "own": ca.pem,
        "two": ca.pem + other.pem,
        "serving": serving.certificate_pem,
        "rsa": rsa_certificate,
        "garbage": b"garbage",
    }
    keys = {
        "own": ca.key_pem,
        "other": other.key_pem,
        "serving": serving.key_pem,
        "rsa": rsa_key,
        "garbage": b"garbage",
    }
    with pytest.raises(UnreadableCertificateError, match=message):
        CertificateAuthority.from_pem(certificates[certificate], keys[key])


def self_signed_rsa_ca(common_name: str) -> tuple[bytes, bytes]:
    """A CA of an RSA key, as one made by hand may be (podwright's CAs are EC)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(T0)
        .not_valid_after(T0 + DAY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return certificate.public_bytes(serialization.Encoding.PEM), key_pem


# The keeper on a moving clock ------------------------------------------------------------------


def keeper_on(clock: ManualClock) -> tuple[CertificateKeeper, PublishedBundles]:
    published = PublishedBundles(clock)
    keeper = CertificateKeeper(HOSTS, clock=clock, publish_bundle=published, settings=SETTINGS)
    return keeper, published


def ca_count(bundle: bytes) -> int:
    return len(x509.load_pem_x509_certificates(bundle))


def test_a_keeper_serves_at_once_and_renews_its_certificate_in_time() -> None:
    clock = ManualClock(T0)
    keeper, published = keeper_on(clock)
    keeper.refresh()
    first = keeper.state.serving
    assert first is not None
    assert first.hosts == tuple(HOSTS)
    assert published == [(T0, keeper.ca_bundle)]
    assert keeper.server_context() is not None
    clock.advance(19 * DAY)
    keeper.refresh()
    assert keeper.state.serving is first
    clock.advance(DAY)
    keeper.refresh()
    renewed = keeper.state.serving
    assert renewed is not None
    assert renewed is not first
    assert renewed.not_before == T0 + 20 * DAY - CLOCK_SKEW
    assert len(published) == 1  # the same CA: nothing to publish


def test_a_certificate_of_minutes_is_renewed_once_when_due() -> None:
    minutes = CertificateSettings(
        authority_validity=datetime.timedelta(minutes=10),
        serving_validity=datetime.timedelta(minutes=3),
        bundle_settle=datetime.timedelta(0),
    )
    clock = ManualClock(T0)
    keeper = CertificateKeeper(HOSTS, clock=clock, settings=minutes)
    keeper.refresh()
    first = keeper.state.serving
    keeper.refresh()
    assert keeper.state.serving is first
    clock.advance(datetime.timedelta(minutes=2))
    keeper.refresh()
    renewed = keeper.state.serving
    assert renewed is not first
    keeper.refresh()
    assert keeper.state.serving is renewed


def test_a_ca_rotation_keeps_the_served_certificate_trusted_throughout() -> None:
    clock = ManualClock(T0)
    keeper, published = keeper_on(clock)
    keeper.refresh()
    first_ca = keeper.state.authorities
    assert first_ca is not None
    while clock.advance(DAY) < T0 + 200 * DAY:
        keeper.refresh()
    keeper.refresh()
    assert [ca_count(bundle) for _when, bundle in published] == [1, 2]
    serving = keeper.state.serving
    assert serving is not None
    assert serving.issued_by(first_ca.current), "the old CA's certificate until the bundle settled"
    clock.advance(SETTINGS.bundle_settle)
    keeper.refresh()
    serving = keeper.state.serving
    authorities = keeper.state.authorities
    assert serving is not None
    assert authorities is not None
    assert authorities.current != first_ca.current
    assert serving.issued_by(authorities.current)
    assert authorities.retiring == ()
    assert [ca_count(bundle) for _when, bundle in published] == [1, 2, 1]
    assert published[-1] == (clock(), authorities.current.pem)


SHORT_LIVED = CertificateSettings(
    authority_validity=6 * DAY,
    serving_validity=DAY,
    renewal_fraction=2 / 3,
    bundle_settle=datetime.timedelta(minutes=1),
)
"""Lives short enough that a run of looks goes through CA rotations (the CA is due at 4 days)."""
LONGEST_GAP = datetime.timedelta(hours=7)
"""Less than the 8 hours a certificate has left when it is due."""


@given(gaps=st.lists(st.floats(min_value=0.0, max_value=1.0), min_size=40, max_size=100))
def test_whenever_the_keeper_looks_what_it_serves_is_trusted(gaps: list[float]) -> None:
    """Whatever the time between two looks (up to :data:`LONGEST_GAP`), through CA rotations:
    after each look the served certificate is valid, and trusted both by an API server that
    loaded the latest bundle and by one that loaded only what was published ``bundle_settle``
    ago; no bundle holds more than the two CAs of a rotation."""
    clock = ManualClock(T0)
    published = PublishedBundles(clock)
    keeper = CertificateKeeper(HOSTS, clock=clock, publish_bundle=published, settings=SHORT_LIVED)
    keeper.refresh()
    for gap in gaps:
        now = clock.advance(datetime.timedelta(seconds=1) + LONGEST_GAP * gap)
        keeper.refresh()
        serving = keeper.state.serving
        assert serving is not None
        assert serving.not_before <= now < serving.not_after
        latest = published.in_force(now)
        lagging = published.in_force(now - SHORT_LIVED.bundle_settle)
        assert latest is not None
        assert trusts(latest, serving)
        if lagging is not None:
            assert trusts(lagging, serving)
        assert ca_count(latest) <= 2


def test_a_bundle_that_cannot_be_published_holds_back_the_new_ca_and_is_tried_again() -> None:
    clock = ManualClock(T0)
    keeper, published = keeper_on(clock)
    keeper.refresh()
    published.failing = "the API server is down"
    first_ca = published[0][1]
    while clock.advance(5 * DAY) < T0 + 260 * DAY:  # the CA is due at 200 days
        keeper.refresh()
        serving = keeper.state.serving
        assert serving is not None
        assert serving.not_after > clock(), "renewed by the CA the API server trusts"
        assert trusts(first_ca, serving), "no certificate of a CA the API server may not trust"
    assert keeper.problem() == (
        "the CA bundle could not be published: ConnectionError: the API server is down"
    )
    published.failing = None
    keeper.refresh()
    assert keeper.problem() is None
    assert ca_count(published[-1][1]) == 2


def test_a_keeper_says_when_its_certificate_expired() -> None:
    clock = ManualClock(T0)
    keeper, _published = keeper_on(clock)
    assert keeper.problem() == "no serving certificate yet"
    keeper.refresh()
    assert keeper.problem() is None
    clock.advance(31 * DAY)
    assert keeper.problem() == (f"the serving certificate expired at {(T0 + 30 * DAY).isoformat()}")


def test_a_started_keeper_looks_again_in_the_background() -> None:
    from tests.kube.support import eventually

    clock = ManualClock(T0)
    published = PublishedBundles(clock)
    keeper = CertificateKeeper(
        HOSTS,
        clock=clock,
        publish_bundle=published,
        settings=SETTINGS,
        check_interval_seconds=0.01,
    )
    with keeper:
        first = keeper.state.serving
        clock.advance(21 * DAY)
        eventually(lambda: keeper.state.serving is not first)


def test_a_keeper_can_start_from_a_given_ca() -> None:
    ca = authority()
    keeper = CertificateKeeper(HOSTS, clock=ManualClock(T0), authority=ca, settings=SETTINGS)
    keeper.refresh()
    assert keeper.ca_bundle == ca.pem
    serving = keeper.state.serving
    assert serving is not None
    assert serving.issued_by(ca)


# Certificates from cert-manager's files ---------------------------------------------------------


def write_secret(directory: Path, serving: ServingCertificate, ca: CertificateAuthority) -> None:
    (directory / "tls.crt").write_bytes(serving.certificate_pem)
    (directory / "tls.key").write_bytes(serving.key_pem)
    (directory / "ca.crt").write_bytes(ca.pem)


def test_files_are_served_and_read_again_when_they_change(tmp_path: Path) -> None:
    first_ca, second_ca = authority(), authority()
    first = serving_of(first_ca)
    write_secret(tmp_path, first, first_ca)
    files = CertificateDirectory(tmp_path, clock=ManualClock(T0))
    assert files.serving.certificate == first.certificate
    assert files.ca_bundle == first_ca.pem
    assert not files.reload_if_changed()
    second = serving_of(second_ca)
    write_secret(tmp_path, second, second_ca)
    assert files.reload_if_changed()
    assert files.serving.certificate == second.certificate
    assert files.ca_bundle == second_ca.pem
    assert files.problem() is None


def test_files_that_cannot_be_read_keep_the_certificate_read_before(tmp_path: Path) -> None:
    ca = authority()
    first = serving_of(ca)
    write_secret(tmp_path, first, ca)
    clock = ManualClock(T0)
    files = CertificateDirectory(tmp_path, clock=clock)
    context = files.server_context()
    (tmp_path / "tls.key").write_bytes(serving_of(ca).key_pem)  # half of a new pair
    assert not files.reload_if_changed()
    assert files.server_context() is context
    problem = files.problem()
    assert problem is not None
    assert (
        "the private key is not the certificate's; serving the certificate read before" in problem
    )
    (tmp_path / "tls.key").write_bytes(first.key_pem)  # the pair whole again
    assert not files.reload_if_changed()
    assert files.problem() is None
    clock.advance(31 * DAY)
    assert files.problem() == f"the serving certificate expired at {first.not_after.isoformat()}"


def test_a_directory_without_its_files_is_refused_naming_them(tmp_path: Path) -> None:
    with pytest.raises(UnreadableCertificateError, match=f"{tmp_path}/tls.crt: No such file"):
        CertificateDirectory(tmp_path, clock=ManualClock(T0))
