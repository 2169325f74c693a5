"""The guard in front of every request of `torchcode serve`.

The server runs the learner's code and reads and writes their files, so nobody else may reach it:
- another local user: every request needs the token printed at start (in the URL once, then an
  HttpOnly SameSite=Strict cookie, or an ``Authorization: Bearer`` header for scripts);
- a web page the learner visits: its requests carry a foreign ``Origin`` (refused) and never the
  cookie (SameSite=Strict); a DNS-rebinding page reaches us under its own name: a ``Host`` that is
  not this server's is refused before anything else. Requests that change something must also
  carry ``X-Torchcode: 1``, which no cross-site form can send. No CORS header is ever sent.
"""

from __future__ import annotations

import hmac
import json
from urllib.parse import parse_qsl, quote, urlencode

SAFE_METHODS = ("GET", "HEAD")
HEADERS = [  # on every answer
    (b"content-security-policy", b"default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
                                 b"img-src 'self' data:; font-src 'self'; connect-src 'self'; object-src 'none'; "
                                 b"base-uri 'none'; form-action 'self'; frame-ancestors 'none'"),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
]
NO_STORE = (b"cache-control", b"no-store")  # pages and answers: never kept
REVALIDATE = (b"cache-control", b"private, no-cache")  # the vendored files: kept, re-validated by ETag
IMMUTABLE = (b"cache-control", b"private, max-age=31536000, immutable")  # ...named by their content (?v=hash)


def cookie_name(port: int) -> str:
    return f"torchcode_token_{port}"  # cookies ignore ports: one name per server


class Guard:
    def __init__(self, app, token: str, hosts: set[str], port: int):
        self.app = app
        self.token = token
        self.hosts = {h.lower() for h in hosts}  # "127.0.0.1:8765", "localhost:8765", ...
        self.origins = {f"http://{h}" for h in self.hosts}
        self.cookie = cookie_name(port)

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            return await self.app(scope, receive, send)
        if scope["type"] != "http":  # no websockets here
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        refusal = self._refusal(scope, headers)
        if refusal:
            return await _answer(send, *refusal)
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        if "token" in query and scope["method"] in SAFE_METHODS:  # the URL printed at start: swap it for a cookie
            rest = urlencode({k: v for k, v in query.items() if k != "token"})
            location = "/" + quote(scope["path"].lstrip("/")) + (f"?{rest}" if rest else "")  # never //elsewhere
            cookie = f"{self.cookie}={self.token}; Path=/; HttpOnly; SameSite=Strict"
            return await _answer(send, 303, "", [(b"location", location.encode()), (b"set-cookie", cookie.encode())])

        cache = NO_STORE
        if scope["path"].startswith("/static/"):
            cache = IMMUTABLE if "v" in query else REVALIDATE

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *HEADERS, cache]}
            await send(message)

        return await self.app(scope, receive, send_with_headers)

    def _refusal(self, scope, headers: dict) -> tuple[int, str] | None:
        host = headers.get("host", "").lower()
        if host not in self.hosts:
            return 403, (f"refused: this is torchcode serve, reachable only as {' or '.join(sorted(self.hosts))} "
                         "(a foreign Host header is what a DNS-rebinding page sends)")
        origin = headers.get("origin")
        if origin is not None and origin.lower() not in self.origins:
            return 403, "refused: a request from another site (foreign Origin); torchcode serve answers only its own pages"
        if headers.get("sec-fetch-site") == "cross-site" and scope["method"] not in SAFE_METHODS:
            return 403, "refused: a request from another site"
        if not self._has_token(scope, headers):
            return 401, ("refused: no valid token. Open the URL `torchcode serve` printed (it ends in ?token=...), "
                         "or pass `Authorization: Bearer TOKEN`")
        if scope["method"] not in SAFE_METHODS and headers.get("x-torchcode") != "1":
            return 403, "refused: a request that changes something must carry the header X-Torchcode: 1"
        return None

    def _has_token(self, scope, headers: dict) -> bool:
        given = []
        auth = headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            given.append(auth[7:].strip())
        for part in headers.get("cookie", "").split(";"):
            name, _, value = part.strip().partition("=")
            if name == self.cookie:
                given.append(value)
        if scope["method"] in SAFE_METHODS:
            given.append(dict(parse_qsl(scope.get("query_string", b"").decode("latin-1"))).get("token", ""))
        return any(hmac.compare_digest(g.encode(), self.token.encode()) for g in given if g)


async def _answer(send, status: int, text: str, extra: list[tuple[bytes, bytes]] = ()) -> None:
    body = json.dumps({"error": text}).encode() if text else b""
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
               *extra, *HEADERS, NO_STORE]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
