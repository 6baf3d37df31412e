"""The console's gate: the token (URL, cookie of its port, bearer), the trusted proxy's word
only with its secret, Kubernetes' own identities refused, and changes only from its own pages."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from podwright.console.gate import TOKEN_COOKIE, Access, Gate, SecretFile, fixed

TOKEN = "token-1"
PROXY = "proxy-secret-1"
BASE = "http://127.0.0.1:8090"


def who(request: Request) -> PlainTextResponse:
    identity = request.scope.get("state", {}).get("identity")
    if identity is None:
        return PlainTextResponse("token holder")
    return PlainTextResponse(f"{identity.user} {','.join(identity.groups)}")


def gated(access: Access) -> TestClient:
    app = Starlette(routes=[Route("/{path:path}", who, methods=["GET", "POST"])])
    app.add_middleware(Gate, access=access)
    return TestClient(app, base_url=BASE, follow_redirects=False)


BEARER = {"Authorization": f"Bearer {TOKEN}"}


def test_a_change_must_come_from_the_console_s_own_pages() -> None:
    client = gated(Access(fixed(TOKEN)))
    assert client.post("/submit", headers=BEARER).status_code == 200  # no browser: credentials
    same = {**BEARER, "Origin": BASE, "Sec-Fetch-Site": "same-origin"}
    assert client.post("/submit", headers=same).status_code == 200
    for elsewhere in (
        {"Origin": "https://evil.example"},
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "same-site", "Origin": "http://127.0.0.1:9999"},  # another port
        {"Origin": "null"},
    ):
        refused = client.post("/submit", headers={**BEARER, **elsewhere})
        assert refused.status_code == 403, elsewhere
        assert "must come from its own pages" in refused.text
    assert client.get("/workloads", headers={**BEARER, "Sec-Fetch-Site": "cross-site"}).is_success
    # Behind a TLS front that sends plain HTTP on, or a proxy that rewrites Host: the browser's
    # own word decides, and the host it saw.
    behind = {"Host": "console.example.com", "Origin": "https://console.example.com"}
    assert client.post(
        "/submit", headers={**BEARER, **behind, "Sec-Fetch-Site": "same-origin"}
    ).is_success
    assert client.post("/submit", headers={**BEARER, **behind}).is_success
    rewritten = {"Host": "podwright-console.svc", "Origin": "https://console.example.com"}
    assert client.post(
        "/submit", headers={**BEARER, **rewritten, "Sec-Fetch-Site": "same-origin"}
    ).is_success
    assert client.post("/submit", headers={**BEARER, **rewritten}).status_code == 403


def test_the_token_moves_into_a_cookie_of_this_port_and_the_url_keeps_the_rest() -> None:
    client = gated(Access(fixed(TOKEN)))
    first = client.get(f"/workloads?label=a%26b%3Dc&token={TOKEN}&phase=Running")
    assert first.status_code == 303
    assert first.headers["location"] == "/workloads?label=a%26b%3Dc&phase=Running"
    cookie = first.headers["set-cookie"]
    assert cookie.startswith(f"{TOKEN_COOKIE}_8090={TOKEN};")
    assert "Secure" not in cookie
    assert client.get("/workloads").text == "token holder"
    over_tls = gated(Access(fixed(TOKEN), secure=True)).get(f"/?token={TOKEN}")
    assert "Secure" in over_tls.headers["set-cookie"]  # it travels over TLS alone
    other_port = gated(Access(fixed(TOKEN)))
    other_port.cookies.set(f"{TOKEN_COOKIE}_9999", TOKEN)
    assert other_port.get("/workloads").status_code == 401


def test_the_redirect_never_leaves_the_site() -> None:
    client = gated(Access(fixed(TOKEN)))
    answer = client.get(f"{BASE}//evil.example/x?token={TOKEN}")
    assert answer.headers["location"] == "/evil.example/x"


def test_a_proxy_is_believed_only_with_its_secret() -> None:
    client = gated(Access(fixed(TOKEN), proxy_secret=fixed(PROXY)))
    named = {"X-Forwarded-User": "alice@example.com", "X-Forwarded-Groups": "vision, research"}
    believed = client.get("/workloads", headers={**named, "X-Podwright-Proxy-Secret": PROXY})
    assert believed.text == "alice@example.com vision,research"
    assert client.get("/workloads", headers=named).status_code == 401  # around the proxy
    forged = {**named, "X-Podwright-Proxy-Secret": "guess"}
    assert client.get("/workloads", headers=forged).status_code == 401
    assert client.get("/workloads", headers={**named, **BEARER}).text == "token holder"


@pytest.mark.parametrize(
    "named",
    [
        {"X-Forwarded-User": "system:admin"},
        {"X-Forwarded-User": "mallory", "X-Forwarded-Groups": "dev,system:masters"},
    ],
)
def test_kubernetes_own_identities_are_never_granted(named: dict[str, str]) -> None:
    client = gated(Access(fixed(None), proxy_secret=fixed(PROXY)))
    refused = client.get("/workloads", headers={**named, "X-Podwright-Proxy-Secret": PROXY})
    assert refused.status_code == 403
    assert "Kubernetes' own identities are not granted" in refused.text


def test_a_secret_file_is_read_again_when_it_changes(tmp_path: Path) -> None:
    path = tmp_path / "token"
    secret = SecretFile(path)
    assert secret() is None  # not written yet: the Secret is optional
    path.write_text("first\n")
    assert secret() == "first"
    path.write_text("second-longer\n")
    os.utime(path, (1_900_000_000, 1_900_000_000))
    assert secret() == "second-longer"
    path.write_text("")
    assert secret() is None
    client = gated(Access(secret))
    assert client.get("/workloads", headers=BEARER).status_code == 401
