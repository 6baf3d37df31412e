"""podwright's webhook CA kept in a Secret for the operator's replicas
(``podwright.adapters.kubernetes.ca_secret``), over real HTTP against the API-server emulator,
with clocks the tests move:

* the Secret's layout, read back, and every way it can hold no usable CA (named, never shown);
* two replicas on one Secret share one CA, each serving a certificate of its own that a client
  holding the webhook configurations' bundle accepts (a TLS handshake), here and through
  :class:`~podwright.adapters.admission_webhooks.AdmissionWebhooks` serving on sockets;
* the races: two replicas creating the Secret, two rotating the CA (the interleavings made
  certain, and replicas started at once): one CA wins, every replica uses it;
* a restart keeps the CA; a rotation by one replica is adopted by the other at its next look,
  the bundle overlapping so that whatever is served is trusted by an API server that has the
  old bundle as well as by one that has the new; the old CA leaves the bundle when it expires;
* a Secret that cannot be read stops a start, naming it, and a running replica serves on; an
  empty Secret (a chart's) is filled, its other keys kept; the Secret is never logged.
"""

from __future__ import annotations

import base64
import datetime
import http.client
import logging
import ssl
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from cryptography import x509
from cryptography.x509.verification import PolicyBuilder, Store, VerificationError

from podwright.adapters.admission_webhooks import AdmissionWebhooks, SecretRef, WebhookSettings
from podwright.adapters.certificates import (
    CLOCK_SKEW,
    CertificateAuthority,
    CertificateKeeper,
    CertificateRequestError,
    CertificateSettings,
    ServingCertificate,
    TrustedAuthorities,
    UnreadableCertificateError,
)
from podwright.adapters.kubernetes import KubernetesClient
from podwright.adapters.kubernetes.ca_secret import (
    BUNDLE,
    CA_CERTIFICATE,
    CA_KEY,
    MANAGED_BY_LABEL,
    RETIRING_KEYS,
    CaSecret,
    CaSecretError,
    UnreadableCaSecretError,
    authorities_from_data,
    secret_data,
)
from podwright.adapters.kubernetes.webhook_configurations import publish_ca_bundle
from podwright.core.crds import custom_resource_definitions
from podwright.core.webhook_configurations import (
    ADMISSION_API_VERSION,
    CONFIGURATION_NAME,
    MUTATING_KIND,
    VALIDATING_KIND,
    ServiceEndpoint,
    webhook_configurations,
)
from podwright.engine.kubernetes_port import ObjectRef
from tests.k8s_emulator import Emulator
from tests.webhook_server import ManualClock, utc_now

DAY = datetime.timedelta(days=1)
T0 = datetime.datetime(2026, 3, 1, tzinfo=datetime.UTC)
SETTINGS = CertificateSettings(
    authority_validity=300 * DAY,
    serving_validity=30 * DAY,
    renewal_fraction=2 / 3,
    bundle_settle=datetime.timedelta(minutes=1),
)
"""The CA is rotated at 200 days and expires at 300; serving certificates are renewed at 20."""
NAMESPACE, NAME = "podwright-system", "podwright-webhook-ca"
SECRET = ObjectRef("v1", "Secret", NAMESPACE, NAME)
SERVICE = ServiceEndpoint(NAMESPACE, "podwright-webhook")
HOSTS = [f"{SERVICE.name}.{NAMESPACE}.svc", f"{SERVICE.name}.{NAMESPACE}.svc.cluster.local"]


@pytest.fixture
def client() -> Iterator[KubernetesClient]:
    """A client of an emulator with the operator's namespace, and podwright's webhook
    configurations naming the Service, trusting a CA of nobody's yet."""
    with Emulator() as emulator:
        client = KubernetesClient.for_host(emulator.url)
        client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        nobody = CertificateAuthority.create(now=utc_now(), validity=DAY)
        for configuration in webhook_configurations(SERVICE, ca_bundle=nobody.pem):
            client.apply(configuration, field_manager="test")
        try:
            yield client
        finally:
            client.close()


def replica(
    client: KubernetesClient, clock: ManualClock, port: Any = None, hosts: list[str] = HOSTS
) -> CertificateKeeper:
    """One replica's keeper: the CAs in the Secret (read and written through ``port``, the
    client by default), the bundle published into the configurations."""
    return CertificateKeeper(
        hosts,
        clock=clock,
        publish_bundle=lambda bundle: publish_ca_bundle(client, bundle),
        settings=SETTINGS,
        authority_store=CaSecret(port or client, NAMESPACE, NAME),
    )


class ReadThen:
    """A replica's way to the API server (the real client) that, right after its next read of
    the Secret once :meth:`then` armed it, lets another replica act: the interleaving of a race,
    made certain."""

    def __init__(self, client: KubernetesClient) -> None:
        self._client = client
        self._meanwhile: Callable[[], object] | None = None

    def then(self, meanwhile: Callable[[], object]) -> ReadThen:
        self._meanwhile = meanwhile
        return self

    def get(self, ref: ObjectRef) -> dict[str, Any]:
        try:
            return self._client.get(ref)
        finally:
            meanwhile, self._meanwhile = self._meanwhile, None
            if meanwhile is not None:
                meanwhile()

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        return self._client.create(obj)

    def replace(self, ref: ObjectRef, obj: dict[str, Any]) -> dict[str, Any]:
        return self._client.replace(ref, obj)


def configurations_bundle(client: KubernetesClient) -> bytes:
    """The CA bundle of every webhook of both configurations (one bundle: they agree)."""
    bundles = {
        hook["clientConfig"]["caBundle"]
        for kind in (MUTATING_KIND, VALIDATING_KIND)
        for hook in client.get(ObjectRef(ADMISSION_API_VERSION, kind, "", CONFIGURATION_NAME))[
            "webhooks"
        ]
    }
    (bundle,) = bundles
    return base64.b64decode(bundle)


def stored(client: KubernetesClient) -> dict[str, bytes]:
    """The Secret's data, decoded."""
    data = client.get(SECRET)["data"]
    return {key: base64.b64decode(value) for key, value in data.items()}


def certificates(bundle: bytes) -> list[x509.Certificate]:
    return x509.load_pem_x509_certificates(bundle)


def serving(keeper: CertificateKeeper) -> ServingCertificate:
    certificate = keeper.state.serving
    assert certificate is not None
    return certificate


def trusts(bundle: bytes, keeper: CertificateKeeper, at: datetime.datetime) -> bool:
    """Whether a client trusting ``bundle`` alone accepts, at ``at``, the certificate the keeper
    serves, for its first host (path validation, as a TLS client does it, at a time of the
    test's clock)."""
    verifier = (
        PolicyBuilder()
        .store(Store(certificates(bundle)))
        .time(at)
        .build_server_verifier(x509.DNSName(HOSTS[0]))
    )
    try:
        verifier.verify(serving(keeper).certificate, [])
    except VerificationError:
        return False
    return True


def handshake_verifies(keeper: CertificateKeeper, bundle: bytes, host: str = HOSTS[0]) -> bool:
    """Whether a TLS client trusting ``bundle`` (and nothing else) accepts what the keeper
    serves for ``host``: a whole handshake, in memory, at the time of the machine's clock (the
    keeper's clock must be near it)."""
    client_context = ssl.create_default_context(cadata=bundle.decode())
    to_server, to_client = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls_client = client_context.wrap_bio(to_client, to_server, server_hostname=host)
    tls_server = keeper.server_context().wrap_bio(to_server, to_client, server_side=True)
    done = {"client": False, "server": False}
    for _round in range(10):
        for side, tls in (("client", tls_client), ("server", tls_server)):
            if done[side]:
                continue
            try:
                tls.do_handshake()
                done[side] = True
            except ssl.SSLWantReadError:
                pass
            except ssl.SSLCertVerificationError:
                return False
        if all(done.values()):
            return True
    raise AssertionError("the handshake did not finish")


def look(*keepers: CertificateKeeper) -> None:
    for keeper in keepers:
        keeper.refresh()


def advance_daily(
    clock: ManualClock, until: datetime.datetime, *keepers: CertificateKeeper
) -> None:
    """Each day until ``until``, every keeper looks (in the order given)."""
    while clock() < until:
        clock.advance(min(DAY, until - clock()))
        look(*keepers)


# The Secret's layout ----------------------------------------------------------------------------


def test_the_layout_holds_the_ca_its_key_the_bundle_and_the_keys_of_a_rotation() -> None:
    old = CertificateAuthority.create(now=T0, validity=SETTINGS.authority_validity)
    new = CertificateAuthority.create(now=T0 + 200 * DAY, validity=SETTINGS.authority_validity)
    authorities = TrustedAuthorities(old).rotated(new)
    data = secret_data(authorities)
    assert set(data) == {CA_CERTIFICATE, CA_KEY, BUNDLE, RETIRING_KEYS}
    decoded = {key: base64.b64decode(value) for key, value in data.items()}
    assert decoded[CA_CERTIFICATE] == new.pem
    assert decoded[CA_KEY] == new.key_pem
    assert decoded[BUNDLE] == new.pem + old.pem
    assert decoded[RETIRING_KEYS] == old.key_pem
    read = authorities_from_data(data)
    assert read is not None
    assert read.bundle == authorities.bundle
    assert [ca.key_pem for ca in (read.current, *read.retiring)] == [new.key_pem, old.key_pem]
    assert set(secret_data(TrustedAuthorities(new))) == {CA_CERTIFICATE, CA_KEY, BUNDLE}


def test_a_ca_made_by_hand_is_read_as_a_bundle_of_it_alone_and_an_empty_secret_as_none() -> None:
    ca = CertificateAuthority.create(now=T0, validity=SETTINGS.authority_validity)
    data = {
        CA_CERTIFICATE: base64.b64encode(ca.pem).decode(),
        CA_KEY: base64.b64encode(ca.key_pem).decode(),
    }
    read = authorities_from_data(data)
    assert read is not None
    assert read.bundle == ca.pem
    assert read.current.key_pem == ca.key_pem
    assert read.retiring == ()
    assert authorities_from_data({}) is None
    assert authorities_from_data({"other": "eA=="}) is None


def _b64(value: bytes) -> str:
    return base64.b64encode(value).decode()


def _garbled(**changes: Any) -> dict[str, Any]:
    old = CertificateAuthority.create(now=T0, validity=SETTINGS.authority_validity)
    new = CertificateAuthority.create(now=T0 + 200 * DAY, validity=SETTINGS.authority_validity)
    data: dict[str, Any] = dict(secret_data(TrustedAuthorities(old).rotated(new)))
    for argument, value in changes.items():
        key = argument.replace("_", ".")
        if value is None:
            del data[key]
        else:
            data[key] = value(old, new) if callable(value) else value
    return data


@pytest.mark.parametrize(
    ("data", "message"),
    [
        pytest.param(_garbled(ca_key=None), "ca.key: missing", id="no key"),
        pytest.param(
            _garbled(ca_crt=_b64(b"garbage")), "ca.crt: not a PEM certificate", id="not PEM"
        ),
        pytest.param(_garbled(ca_crt="not base64!"), "ca.crt: not base64", id="not base64"),
        pytest.param(_garbled(ca_crt=42), "ca.crt: not a base64 string", id="not a string"),
        pytest.param(
            _garbled(ca_key=lambda old, _new: _b64(old.key_pem)),
            "ca.key: not the private key of ca.crt",
            id="another CA's key",
        ),
        pytest.param(
            _garbled(bundle_crt=lambda old, _new: _b64(old.pem)),
            "bundle.crt: does not begin with ca.crt",
            id="a bundle of another CA",
        ),
        pytest.param(
            _garbled(retiring_key=None),
            r"retiring.key: 0 key\(s\) for the 1 CA\(s\) after ca.crt in bundle.crt",
            id="a rotation without the old CA's key",
        ),
        pytest.param(
            _garbled(retiring_key=lambda _old, new: _b64(new.key_pem)),
            r"retiring.key\[0\]: not the private key of bundle.crt\[1\]",
            id="the old CA with another key",
        ),
        pytest.param(_garbled(bundle_crt=_b64(b"x")), "bundle.crt: no PEM block", id="no bundle"),
    ],
)
def test_data_that_holds_no_usable_ca_names_the_key(data: dict[str, Any], message: str) -> None:
    with pytest.raises(UnreadableCertificateError, match=message):
        authorities_from_data(data)


# Replicas on one Secret -------------------------------------------------------------------------


def test_two_replicas_share_one_ca_and_each_serves_its_own_certificate_the_bundle_trusts(
    client: KubernetesClient,
) -> None:
    clock = ManualClock()  # the machine's time: TLS handshakes check it
    first, second = replica(client, clock), replica(client, clock)
    look(first, second)
    secret = client.get(SECRET)
    assert secret["type"] == "Opaque"
    assert secret["metadata"]["labels"] == {MANAGED_BY_LABEL: "podwright"}
    data = stored(client)
    assert first.ca_bundle == second.ca_bundle == data[BUNDLE] == data[CA_CERTIFICATE]
    bundle = configurations_bundle(client)
    assert bundle == data[BUNDLE]
    assert serving(first).certificate != serving(second).certificate
    assert serving(first).key_pem != serving(second).key_pem  # each key its process's own
    for keeper in (first, second):
        assert serving(keeper).hosts == tuple(HOSTS)
        assert handshake_verifies(keeper, bundle)
        assert handshake_verifies(keeper, bundle, HOSTS[1])
    unrelated = CertificateAuthority.create(now=utc_now(), validity=DAY)
    assert not handshake_verifies(first, unrelated.pem)


def test_replicas_racing_to_create_the_secret_all_use_the_ca_that_won(
    client: KubernetesClient, caplog: pytest.LogCaptureFixture
) -> None:
    """The first replica reads no Secret; the second then reads none either and creates it;
    the first's create is 409 AlreadyExists, and it reads and uses the second's CA."""
    caplog.set_level(logging.INFO, logger="podwright.webhook")
    clock = ManualClock(T0)
    second = replica(client, clock)
    first = replica(client, clock, port=ReadThen(client).then(second.refresh))
    first.refresh()
    assert first.ca_bundle == second.ca_bundle == stored(client)[BUNDLE]
    assert len(certificates(first.ca_bundle)) == 1
    authorities = second.state.authorities
    assert authorities is not None
    assert serving(first).issued_by(authorities.current)
    assert (
        f"Secret {NAMESPACE}/{NAME} was written by another replica first: its CAs are used"
        in caplog.messages
    )


def test_replicas_started_at_once_all_use_one_ca(client: KubernetesClient) -> None:
    """Whichever way their requests interleave."""
    clock = ManualClock(T0)
    keepers = [replica(client, clock) for _ in range(4)]
    barrier = threading.Barrier(len(keepers))
    failures: list[BaseException] = []

    def start(keeper: CertificateKeeper) -> None:
        barrier.wait()
        try:
            keeper.refresh()
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=start, args=(keeper,)) for keeper in keepers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert {keeper.ca_bundle for keeper in keepers} == {stored(client)[BUNDLE]}
    assert len(certificates(stored(client)[BUNDLE])) == 1


def test_a_restart_keeps_the_ca(client: KubernetesClient) -> None:
    clock = ManualClock(T0)
    before = replica(client, clock)
    before.refresh()
    clock.advance(5 * DAY)
    after = replica(client, clock)  # the same replica, restarted: nothing of it in memory
    after.refresh()
    assert after.ca_bundle == before.ca_bundle
    assert serving(after).certificate != serving(before).certificate
    assert trusts(configurations_bundle(client), after, clock())


def test_a_rotation_by_one_replica_is_adopted_by_the_other_with_the_bundle_overlapping(
    client: KubernetesClient,
) -> None:
    """Whatever is served is trusted both by an API server that has the configurations' bundle
    and by one that still has the old bundle, until the new CA's certificates are served once
    the new bundle has been published for ``bundle_settle``."""
    clock = ManualClock(T0)
    first, second = replica(client, clock), replica(client, clock)
    look(first, second)
    old_bundle = configurations_bundle(client)
    advance_daily(clock, T0 + 199 * DAY, first, second)
    assert configurations_bundle(client) == old_bundle
    clock.advance(DAY)  # the CA at 2/3 of its life: the first to look rotates it
    first.refresh()
    new_bundle = stored(client)[BUNDLE]
    assert certificates(new_bundle) == [
        certificates(stored(client)[CA_CERTIFICATE])[0],
        certificates(old_bundle)[0],
    ]
    assert configurations_bundle(client) == new_bundle
    assert second.ca_bundle == old_bundle  # it has not looked yet
    for keeper in (first, second):  # the old CA's certificates, until the new bundle settles
        assert trusts(old_bundle, keeper, clock())
        assert trusts(new_bundle, keeper, clock())
    clock.advance(datetime.timedelta(seconds=10))
    second.refresh()  # its next look: the new CAs adopted, the (same) bundle published
    assert second.ca_bundle == new_bundle
    assert configurations_bundle(client) == new_bundle
    assert trusts(old_bundle, second, clock())
    clock.advance(SETTINGS.bundle_settle)
    look(first, second)
    new_ca = stored(client)[CA_CERTIFICATE]
    for keeper in (first, second):  # the new CA's certificates, trusted by the new bundle
        assert serving(keeper).certificate.issuer == certificates(new_ca)[0].subject
        assert trusts(new_bundle, keeper, clock())
        assert not trusts(old_bundle, keeper, clock())
    # The old CA stays in the bundle until it expires: a replica that has not looked may still
    # serve a certificate of it, and none outlives it.
    advance_daily(clock, T0 + 299 * DAY, first, second)
    assert stored(client)[BUNDLE] == new_bundle
    for keeper in (first, second):
        assert trusts(configurations_bundle(client), keeper, clock())
    advance_daily(clock, T0 + 300 * DAY, first, second)  # the old CA expires...
    assert stored(client)[BUNDLE] == new_bundle
    clock.advance(CLOCK_SKEW)  # ...and is dropped once a clock a little behind agrees
    look(second, first)
    assert stored(client)[BUNDLE] == new_ca
    assert RETIRING_KEYS not in stored(client)
    assert first.ca_bundle == second.ca_bundle == configurations_bundle(client) == new_ca
    for keeper in (first, second):
        assert trusts(new_ca, keeper, clock())


def test_replicas_racing_to_rotate_the_ca_all_use_the_rotation_that_won(
    client: KubernetesClient,
) -> None:
    """Both find the CA due; the second writes its rotation between the first's read and its
    replace, which is then 409 Conflict: the first reads and uses the second's."""
    clock = ManualClock(T0)
    port = ReadThen(client)
    first, second = replica(client, clock, port=port), replica(client, clock)
    look(first, second)
    clock.advance(200 * DAY)
    port.then(second.refresh)
    first.refresh()
    bundle = stored(client)[BUNDLE]
    assert len(certificates(bundle)) == 2
    assert first.ca_bundle == second.ca_bundle == bundle


# A Secret that cannot be read ---------------------------------------------------------------


def write_secret(client: KubernetesClient, data: dict[str, str]) -> None:
    client.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": NAME, "namespace": NAMESPACE},
            "type": "Opaque",
            "data": data,
        }
    )


def test_a_secret_holding_garbage_stops_a_start_naming_it(client: KubernetesClient) -> None:
    write_secret(client, {CA_CERTIFICATE: _b64(b"garbage"), CA_KEY: _b64(b"garbage")})
    keeper = replica(client, ManualClock(T0))
    with pytest.raises(UnreadableCaSecretError) as refused:
        keeper.start()
    assert str(refused.value).startswith(
        f"Secret {NAMESPACE}/{NAME} holds no CA podwright can use: ca.crt: not a PEM certificate: "
    )
    assert str(refused.value).endswith("; correct it, or delete it to have a new CA made")
    assert stored(client)[CA_CERTIFICATE] == b"garbage"  # left for a person to look at


def test_a_running_replica_serves_on_from_its_ca_when_the_secret_turns_unreadable(
    client: KubernetesClient, caplog: pytest.LogCaptureFixture
) -> None:
    clock = ManualClock(T0)
    keeper = replica(client, clock)
    keeper.refresh()
    bundle, first = keeper.ca_bundle, serving(keeper)
    secret = client.get(SECRET)
    secret["data"][CA_KEY] = _b64(b"garbage")
    client.replace(SECRET, secret)
    clock.advance(21 * DAY)
    keeper.refresh()
    assert serving(keeper) is not first  # renewed, from the CA read before
    assert keeper.ca_bundle == bundle
    assert keeper.problem() is None
    assert trusts(configurations_bundle(client), keeper, clock())
    assert any(
        message.startswith(
            f"Secret {NAMESPACE}/{NAME} holds no CA podwright can use: ca.key: not an "
            "unencrypted PEM private key: "
        )
        and message.endswith("; serving on from the CA read before")
        for message in caplog.messages
    )


def test_a_secret_the_api_server_refuses_to_give_is_an_error_naming_it(
    client: KubernetesClient,
) -> None:
    store = CaSecret(client, "no-such-namespace", NAME)
    with pytest.raises(CaSecretError, match=f"Secret no-such-namespace/{NAME}: could not be "):
        store.load(T0, SETTINGS)


def test_an_empty_secret_is_filled_and_its_other_keys_kept(
    client: KubernetesClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="podwright.webhook")
    write_secret(client, {"note": _b64(b"made by the chart")})
    keeper = replica(client, ManualClock(T0))
    keeper.refresh()
    data = stored(client)
    assert data["note"] == b"made by the chart"
    assert data[BUNDLE] == keeper.ca_bundle
    assert (
        f"Secret {NAMESPACE}/{NAME}: filled in with a new webhook CA, valid until "
        f"{(T0 + SETTINGS.authority_validity).isoformat()}"
    ) in caplog.messages


def test_a_keeper_of_a_given_ca_keeps_no_store_of_cas(client: KubernetesClient) -> None:
    ca = CertificateAuthority.create(now=T0, validity=SETTINGS.authority_validity)
    with pytest.raises(CertificateRequestError, match="authority, authority_store: at most one"):
        CertificateKeeper(
            HOSTS,
            clock=ManualClock(T0),
            authority=ca,
            authority_store=CaSecret(client, NAMESPACE, NAME),
        )


def test_the_secret_is_never_logged(
    client: KubernetesClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    clock = ManualClock(T0)
    second = replica(client, clock)
    first = replica(client, clock, port=ReadThen(client).then(second.refresh))
    look(first, second)  # created, a race lost
    seen = [client.get(SECRET)["data"]]
    advance_daily(clock, T0 + 201 * DAY, first, second)  # rotated, adopted
    seen.append(client.get(SECRET)["data"])
    secret = client.get(SECRET)
    secret["data"][BUNDLE] = _b64(b"garbage")
    client.replace(SECRET, secret)
    look(first, second)  # unreadable
    with pytest.raises(UnreadableCaSecretError):
        replica(client, clock).refresh()
    assert caplog.records
    logged = "\n".join(
        f"{record.getMessage()}\n{record.exc_text or ''}" for record in caplog.records
    )
    for data in seen:
        for key, value in data.items():
            assert value not in logged, key
            for line in base64.b64decode(value).decode().splitlines():
                if not line.startswith("-----"):
                    assert line not in logged, key


# Through the webhooks ---------------------------------------------------------------------------


def test_two_webhook_processes_on_one_secret_serve_certificates_the_configurations_trust(
    client: KubernetesClient,
) -> None:
    """Two :class:`AdmissionWebhooks` on sockets, as two replicas are: one CA in the Secret, in
    the configurations' bundle, and each one's certificate accepted by a client trusting that
    bundle alone."""
    for crd in custom_resource_definitions():
        client.apply(crd, field_manager="test")
    settings = WebhookSettings(
        cluster_name="test",
        webhook_host="127.0.0.1",
        listen_host="127.0.0.1",
        port=0,
        ca_secret=SecretRef(NAMESPACE, NAME),
    )
    with (
        AdmissionWebhooks(client, settings, clock=utc_now) as first,
        AdmissionWebhooks(client, settings, clock=utc_now) as second,
    ):
        bundle = configurations_bundle(client)
        assert bundle == stored(client)[BUNDLE] == first.ca_bundle == second.ca_bundle
        served = []
        for webhooks in (first, second):
            host, port = webhooks.url.removeprefix("https://").rsplit(":", 1)
            context = ssl.create_default_context(cadata=bundle.decode())
            connection = http.client.HTTPSConnection(host, int(port), context=context, timeout=10)
            try:
                connection.request("GET", "/healthz")
                answer = connection.getresponse()
                assert (answer.status, answer.read()) == (200, b"ok\n")
                assert connection.sock is not None
                served.append(connection.sock.getpeercert(binary_form=True))
            finally:
                connection.close()
        assert served[0] != served[1]


def test_the_settings_take_one_source_of_certificates_and_a_secret_by_namespace_and_name(
    tmp_path: Any,
) -> None:
    with pytest.raises(ValueError, match="certificate_directory, ca_secret: at most one"):
        WebhookSettings(
            cluster_name="test",
            webhook_host="127.0.0.1",
            certificate_directory=tmp_path,
            ca_secret=SecretRef(NAMESPACE, NAME),
        )
    assert SecretRef.parse(f"{NAMESPACE}/{NAME}") == SecretRef(NAMESPACE, NAME)
    assert str(SecretRef(NAMESPACE, NAME)) == f"{NAMESPACE}/{NAME}"
    with pytest.raises(ValueError, match="'podwright-webhook-ca' is not NAMESPACE/NAME"):
        SecretRef.parse(NAME)
    with pytest.raises(ValueError, match="namespace: 'Podwright' is not a namespace name"):
        SecretRef("Podwright", NAME)
    with pytest.raises(ValueError, match="name: 'ca_secret' is not a Secret name"):
        SecretRef(NAMESPACE, "ca_secret")
