"""Credentials are checked for renewal every few seconds, not before every request: the
kubeconfig loader's hook ran a whole reconfiguration per request. A real exec credential plugin
(a script whose tokens are already expired, so each check renews) shows that a token is still
renewed, only not more often than the interval."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

from podwright.adapters.kubernetes.client import connect, throttle_credential_refresh

PLUGIN = """
import json, pathlib, sys
counter = pathlib.Path(sys.argv[1])
runs = int(counter.read_text()) + 1 if counter.exists() else 1
counter.write_text(str(runs))
print(json.dumps({
    "apiVersion": "client.authentication.k8s.io/v1beta1",
    "kind": "ExecCredential",
    "status": {"token": f"token-{runs}", "expirationTimestamp": "2000-01-01T00:00:00Z"},
}))
"""


def _exec_kubeconfig(tmp_path: Path) -> tuple[Path, Path]:
    plugin = tmp_path / "plugin.py"
    plugin.write_text(PLUGIN)
    counter = tmp_path / "runs"
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "https://10.0.0.1:6443"}}],
                "users": [
                    {
                        "name": "u",
                        "user": {
                            "exec": {
                                "apiVersion": "client.authentication.k8s.io/v1beta1",
                                "command": sys.executable,
                                "args": [str(plugin), str(counter)],
                            }
                        },
                    }
                ],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    return kubeconfig, counter


def test_an_expired_token_is_renewed_at_most_once_an_interval(tmp_path: Path) -> None:
    kubeconfig, counter = _exec_kubeconfig(tmp_path)
    configuration = k8s_client.Configuration()
    k8s_config.load_kube_config(
        config_file=str(kubeconfig), client_configuration=configuration, persist_config=False
    )
    now = [100.0]
    throttle_credential_refresh(configuration, interval=10.0, clock=lambda: now[0])

    def token() -> str:
        return str(configuration.get_api_key_with_prefix("BearerToken"))

    assert token() == "Bearer token-2"  # loaded as token-1, expired, renewed at the first check
    now[0] = 105.0
    assert token() == "Bearer token-2"
    now[0] = 110.0
    assert token() == "Bearer token-3"
    assert counter.read_text() == "3"


def test_connect_throttles_the_renewal_check(tmp_path: Path) -> None:
    kubeconfig, counter = _exec_kubeconfig(tmp_path)
    api = connect(str(kubeconfig))
    try:
        tokens = {api.configuration.get_api_key_with_prefix("BearerToken") for _ in range(5)}
    finally:
        api.close()
    assert tokens == {"Bearer token-2"}
    assert counter.read_text() == "2"


def test_a_configuration_without_a_renewal_hook_is_left_as_it_is() -> None:
    configuration = k8s_client.Configuration(host="http://127.0.0.1:1")
    throttle_credential_refresh(configuration)
    assert configuration.refresh_api_key_hook is None
