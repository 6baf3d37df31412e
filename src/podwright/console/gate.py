"""Who may use the console, checked before any page: its token, or a trusted proxy's word.

Two ways in:

* **The token** ``podwright console`` prints in its URL (``?token=``, then kept in a cookie of
  this console's port alone, ``HttpOnly``, ``SameSite=Strict``, ``Secure`` over TLS), or sent as
  ``Authorization: Bearer``. The operator's console reads it from a file (a Secret's key,
  mounted), again whenever the file changes, so a Secret created or rotated later takes effect
  without a restart.
* **An authenticating proxy** in front of the console (oauth2-proxy) that names the person
  (``X-Forwarded-User``, ``X-Forwarded-Groups``) *and proves it is the proxy*, with a secret it
  alone holds (``X-Podwright-Proxy-Secret``): a client that reaches the console around the
  proxy cannot claim to be anybody. The console then acts as that person through Kubernetes
  impersonation, so Kubernetes' own identities (``system:``, such as ``system:masters``) are
  refused: no proxy is trusted to grant them.

Changes (every method but GET and HEAD) are also refused from another site: a browser's
``Sec-Fetch-Site`` or ``Origin`` must say the request comes from the console's own pages, so
that a page elsewhere cannot make a signed-in browser submit or delete a workload.
"""

from __future__ import annotations

import dataclasses
import hmac
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlencode, urlsplit

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from podwright import api

TOKEN_COOKIE = "podwright_console_token"
"""The cookie's name, followed by the console's port: two consoles on one host keep theirs."""
USER_HEADER = "x-forwarded-user"
GROUPS_HEADER = "x-forwarded-groups"
"""The identity an authenticating proxy sends (oauth2-proxy's ``--pass-user-headers``): the user
as the cluster's authenticator names them, and their groups, comma-separated."""
PROXY_SECRET_HEADER = "x-podwright-proxy-secret"
"""The secret a trusted proxy sends with every request it forwards."""
SYSTEM_PREFIX = "system:"
SAFE_METHODS = frozenset({"GET", "HEAD"})

Secret = Callable[[], str | None]
"""The current value of a secret (None: none is accepted)."""


def fixed(value: str | None) -> Secret:
    """A secret that never changes (``podwright console``'s token)."""
    return lambda: value


class SecretFile:
    """A secret kept in a file (a Secret's key, mounted): read again when the file changes;
    None while it is missing or empty."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._seen: tuple[float, int] | None = None
        self._value: str | None = None

    def __call__(self) -> str | None:
        try:
            stat = self.path.stat()
        except OSError:
            self._seen, self._value = None, None
            return None
        seen = (stat.st_mtime, stat.st_size)
        if seen != self._seen:
            try:
                self._value = self.path.read_text().strip() or None
            except OSError:
                self._value = None
            self._seen = seen
        return self._value


@dataclasses.dataclass(frozen=True)
class Access:
    """How requests get in: the token, and the trusted proxy's secret (None: no proxy is
    trusted); ``secure``: the console is served over TLS (its cookie only travels over it)."""

    token: Secret
    proxy_secret: Secret | None = None
    secure: bool = False


class Gate:
    """The ASGI middleware that lets a request in as the module's docstring says; the person a
    trusted proxy names goes on in ``scope["state"]["identity"]``."""

    def __init__(self, app: ASGIApp, access: Access) -> None:
        self._app, self._access = app, access

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] == "/healthz":
            await self._app(scope, receive, send)
            return
        request = Request(scope)
        refusal = self._refusal(request)
        if refusal is None:
            await self._app(scope, receive, send)
            return
        await refusal(scope, receive, send)

    def _refusal(self, request: Request) -> Response | None:
        """None when ``request`` may go on, else the answer that refuses (or redirects) it."""
        if request.method not in SAFE_METHODS and not _from_here(request):
            return _refused(403, "a change to this console must come from its own pages")
        proxied = self._proxied(request)
        if isinstance(proxied, Response):
            return proxied
        if proxied is not None:
            request.scope.setdefault("state", {})["identity"] = proxied
            return None
        token = self._access.token()
        cookie = f"{TOKEN_COOKIE}_{_port(request)}"
        given = request.query_params.get("token")
        if given is not None and _matches(given, token):
            rest = [(key, value) for key, value in request.query_params.multi_items()]
            query = urlencode([(key, value) for key, value in rest if key != "token"])
            path = "/" + request.url.path.lstrip("/")  # never //host: another site
            response = RedirectResponse(path + (f"?{query}" if query else ""), status_code=303)
            response.set_cookie(
                cookie,
                given,
                httponly=True,
                samesite="strict",
                secure=self._access.secure,
                path="/",
            )
            return response
        header = request.headers.get("authorization", "")
        bearer = header[7:] if header.lower().startswith("bearer ") else None
        if any(_matches(candidate, token) for candidate in (request.cookies.get(cookie), bearer)):
            return None
        return _refused(
            401,
            "this console needs its token: open the URL 'podwright console' printed (it ends "
            "in ?token=...), or send 'Authorization: Bearer TOKEN'",
        )

    def _proxied(self, request: Request) -> api.Identity | Response | None:
        """The person a trusted proxy names (a refusal when it names a Kubernetes identity),
        or None when the request does not come from the trusted proxy."""
        if self._access.proxy_secret is None:
            return None
        user = request.headers.get(USER_HEADER, "").strip()
        if not user or not _matches(
            request.headers.get(PROXY_SECRET_HEADER), self._access.proxy_secret()
        ):
            return None
        groups = request.headers.get(GROUPS_HEADER, "")
        named = tuple(group.strip() for group in groups.split(",") if group.strip())
        system = [name for name in (user, *named) if name.startswith(SYSTEM_PREFIX)]
        if system:
            return _refused(
                403,
                f"the proxy named {', '.join(system)}: Kubernetes' own identities are not "
                "granted through this console",
            )
        return api.Identity(user, named)


def _matches(given: str | None, expected: str | None) -> bool:
    return (
        given is not None
        and expected is not None
        and hmac.compare_digest(given.encode(), expected.encode())
    )


def _from_here(request: Request) -> bool:
    """Whether a browser says the request comes from the console's own pages. Its
    ``Sec-Fetch-Site`` decides when it sends one (every browser of the last years does); else
    its ``Origin`` must name the host the request was sent to (a TLS front or a proxy may have
    changed the scheme, so only the host and port are compared, as the browser saw them). A
    client that is no browser says nothing, and is judged by its credentials alone."""
    site = request.headers.get("sec-fetch-site")
    if site is not None:
        return site in ("same-origin", "none")
    origin = request.headers.get("origin")
    if origin is None:
        return True
    seen = request.headers.get("x-forwarded-host") or request.headers.get("host", "")
    return urlsplit(origin).netloc == seen


def _port(request: Request) -> int:
    server = request.scope.get("server")
    return int(server[1]) if server and server[1] is not None else 0


def _refused(status: int, message: str) -> PlainTextResponse:
    return PlainTextResponse(f"{status}: {message}\n", status_code=status)
