"""What every request to ``harness serve`` passes before a route sees it (an ASGI middleware).

Session files hold secrets (commands, file contents, keys pasted into prompts), and a browser
runs pages from anywhere, so the guard refuses:

* **a foreign Host** (DNS rebinding: a hostile page whose name resolves to 127.0.0.1 would be
  same-origin with us): on a loopback address only ``127.0.0.1``, ``localhost`` and ``[::1]``
  at our port are served; on another address (which needs a token), any Host, since the
  token guards;
* **a request without the token**, when one is set (``harness serve`` makes one at every
  start unless told ``--no-token``: the machine's other processes, a sandboxed command too,
  reach a loopback port): ``Authorization: Bearer <token>``, the ``harness_token`` cookie
  (HttpOnly, SameSite=Strict, its ``Path`` a random prefix new at each start, under which
  every page is served: a browser sends a cookie to every port of its host, so a server on
  another port of 127.0.0.1 would get it from any link; it gets it only from a link under a
  path it does not know), or ``?token=`` once, which sets the cookie and redirects to the
  same URL under the prefix without the token, so no page is ever served at a URL holding
  it. Compared in constant time;
* **a state-changing request from another origin** (CSRF): a POST needs an ``Origin`` (or,
  without one, a ``Referer``) that is this server's own origin, a ``Sec-Fetch-Site`` that is
  not ``cross-site``/``same-site``, and the page's CSRF token in its form (checked by the
  routes, :func:`csrf_ok`).

Every response gets a Content-Security-Policy allowing only the page's own script and style
(by hash), ``data:`` images and connections to this origin, plus ``nosniff``, ``DENY`` framing,
a same-origin referrer policy and ``no-store``.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode

__all__ = ["Guard", "csrf_ok", "is_loopback", "new_secret"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

COOKIE = "harness_token"
_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def new_secret() -> str:
    """A random token (256 bits, URL-safe)."""
    return secrets.token_urlsafe(32)


def csrf_ok(expected: str, given: str | None) -> bool:
    """Whether a form's CSRF field is this server's token (constant time)."""
    return given is not None and hmac.compare_digest(expected.encode(), given.encode())


def _same(expected: str, given: str) -> bool:
    return hmac.compare_digest(expected.encode(), given.encode())


class Guard:
    """The ASGI middleware described in the module doc.

    Args:
        app: the application behind it.
        port: the port served (Host headers must name it).
        bound: the address bound (also an allowed Host, with the port).
        token: the access token, or None (loopback only).
        csp: the Content-Security-Policy of every response.
    """

    def __init__(self, app: App, *, port: int, bound: str, token: str | None, csp: str) -> None:
        self.app = app
        self.port = port
        self.token = token
        # Every page is served under a random path, new at each start, and the token's
        # cookie is scoped to it: a browser sends a host's cookies to every port of it
        # (RFC 6265), so a server a sandboxed command starts on another port of 127.0.0.1
        # got the cookie when the user opened its link (review 10, finding 7). It cannot
        # name a link under this path without knowing it.
        self.base = f"/h-{secrets.token_urlsafe(16)}" if token is not None else ""
        hosts = {*_LOOPBACK_NAMES, f"[{bound}]" if ":" in bound else bound}
        self.hosts = frozenset(f"{h}:{port}" for h in hosts)
        # With a token on a loopback address the Host is still checked: no other name is
        # ours, and a check more costs nothing.
        self.any_host = token is not None and not is_loopback(bound)
        self.headers = [
            (b"content-security-policy", csp.encode()),
            (b"x-content-type-options", b"nosniff"),
            (b"x-frame-options", b"DENY"),
            (b"referrer-policy", b"same-origin"),
            (b"cache-control", b"no-store"),
        ]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        host = headers.get("host", "")
        if not self.any_host and host not in self.hosts:
            await _plain(send, 421, "this server answers only to 127.0.0.1, localhost or [::1]")
            return
        if self.base:
            path = str(scope.get("path", "/"))
            if path == self.base or path.startswith(self.base + "/"):
                inner = path[len(self.base) :] or "/"
                scope = {**scope, "path": inner, "raw_path": inner.encode(), "root_path": self.base}
        if self.token is not None:
            query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
            given = query.get("token")
            if given is not None:
                if not _same(self.token, given):
                    await _plain(send, 401, "wrong token")
                    return
                rest = urlencode([(k, v) for k, v in query.items() if k != "token"])
                # One leading slash: `//evil.example/x` (or `/\evil`) is another host to a
                # browser, an open redirect from the token URL (review 5, finding 9).
                path = "/" + str(scope.get("path", "/")).lstrip("/\\")
                where = quote(self.base + path) + (f"?{rest}" if rest else "")
                await _redirect(send, where, cookie=self.token, path=self.base)
                return
            if not self._authorised(headers):
                await _plain(send, 401, "a token is needed: open the URL harness serve printed")
                return
        if scope["method"] not in ("GET", "HEAD") and not _same_origin(headers, host):
            await _plain(send, 403, "cross-origin request refused")
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *self.headers]
            await send(message)

        await self.app(scope, receive, send_with_headers)

    def _authorised(self, headers: dict[str, str]) -> bool:
        assert self.token is not None
        bearer = headers.get("authorization", "")
        if bearer.startswith("Bearer ") and _same(self.token, bearer[7:]):
            return True
        for part in headers.get("cookie", "").split(";"):
            name, _, value = part.strip().partition("=")
            if name == COOKIE and _same(self.token, value):
                return True
        return False


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (``127.0.0.0/8``, ``::1``) or ``localhost``.
    Other names are not resolved: they count as not loopback."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _same_origin(headers: dict[str, str], host: str) -> bool:
    """Whether a state-changing request comes from a page of this origin."""
    if headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
        return False
    own = f"http://{host}"
    origin = headers.get("origin")
    if origin is not None:
        return _same(own, origin)
    referer = headers.get("referer")
    return referer is not None and (referer == own or referer.startswith(own + "/"))


async def _plain(send: Send, status: int, text: str) -> None:
    body = (text + "\n").encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
                (b"x-content-type-options", b"nosniff"),
                (b"cache-control", b"no-store"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _redirect(send: Send, where: str, *, cookie: str, path: str) -> None:
    value = f"{COOKIE}={cookie}; HttpOnly; SameSite=Strict; Path={quote(path or '/')}"
    await send(
        {
            "type": "http.response.start",
            "status": 303,
            "headers": [
                (b"location", where.encode("latin-1", "replace")),
                (b"set-cookie", value.encode()),
                (b"content-length", b"0"),
                (b"cache-control", b"no-store"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": b""})
