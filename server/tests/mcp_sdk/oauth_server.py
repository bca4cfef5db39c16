"""An OAuth-protected MCP server built on the official MCP Python SDK (package `mcp`), for
workbench's tests of remote MCP servers that each user signs in to ("per-user OAuth upstreams").

Why it exists: workbench is an MCP OAuth *client* towards such upstreams. Its own fake providers
prove it follows the specs as workbench reads them; this script proves it interoperates with the
reference implementation. Everything OAuth here is the SDK's own machinery -
`MCPServer(auth_server_provider=..., auth=AuthSettings(...))` mounts the SDK's handlers for

  * RFC 9728 protected resource metadata  GET  /.well-known/oauth-protected-resource/mcp
  * RFC 8414 authorization server metadata GET  /.well-known/oauth-authorization-server
  * the authorization endpoint             GET|POST /authorize  (code flow, PKCE S256 only)
  * the token endpoint                     POST /token  (authorization_code, refresh_token)
  * RFC 7591 dynamic client registration   POST /register
  * RFC 7009 token revocation              POST /revoke
  * the bearer-protected MCP endpoint      /mcp  (streamable HTTP; 401 carries
                                           WWW-Authenticate: Bearer ... resource_metadata="...")

- and this file only supplies what the SDK leaves to the application: an in-memory
`OAuthAuthorizationServerProvider` (clients, codes, tokens), a sign-in page, one tool, and two
test-only control endpoints:

  * GET  /login?request=ID   a tiny HTML form (the SDK's /authorize redirects the browser here;
                             nothing is auto-approved)
  * POST /login              form fields `request`, `username`: issues an authorization code for
                             that username and answers 302 to redirect_uri?code=...&state=...
  * GET  /test/live?user=U   {"live": N}: unrevoked, unexpired access + refresh tokens held for U
  * POST /test/expire        makes every current access token expired, so the next /mcp call is
                             answered 401 and the client has to refresh
  * tool `whoami`            structured {"user", "scopes", "client_id"} of the calling token
  * tool `admin_report`      the same, but only for a token holding the scope `mcp:admin`: a
                             call without it is answered HTTP 403 with
                             WWW-Authenticate: Bearer error="insufficient_scope",
                             scope="mcp:tools mcp:admin", resource_metadata="..." - the MCP
                             authorization spec's scope challenge, which the SDK has no per-tool
                             switch for, so `ScopeChallenge` (an ASGI shim in front of the SDK's
                             app) answers it; the client is expected to step up (authorize again
                             asking for those scopes)
  * prompt `greeting`        "Hello, <user>!" for the user of the calling token
  * resource `whoami://me`   the user of the calling token, as text

Usage: .venv/bin/python server/tests/mcp_sdk/oauth_server.py PORT [--fix-sdk-client-auth]

Listens on 127.0.0.1:PORT (the issuer is http://127.0.0.1:PORT, the resource
http://127.0.0.1:PORT/mcp), prints one line `READY` to stdout once it accepts connections and
nothing else to stdout (logs go to stderr), and exits with status 0 on SIGTERM or SIGINT.

Deliberately strict where the MCP authorization spec says MUST: the authorization request has to
carry `resource` equal to this server's /mcp URL (RFC 8707), or /authorize answers with an error;
tokens are bound to that resource and /mcp refuses tokens bound elsewhere.

Known SDK quirks a client meets here (mcp 2.3.0; see `FixSdkClientAuth`, which
--fix-sdk-client-auth installs to work around the first two):

  * /token and /revoke require `client_id` in the form body even with HTTP Basic
    (client_secret_basic); Basic alone is refused with 401 "Missing client_id".
  * /revoke requires a `client_secret` form field even for a public client; without it, 400.
  * A client registered with client_secret_post must send its secret in the body; one
    registered with client_secret_basic must send it as Basic. The SDK does not accept the other.
  * redirect_uri must equal a registered one exactly (no RFC 8252 loopback port leeway).
  * The metadata advertises token_endpoint_auth_methods_supported
    ["client_secret_post", "client_secret_basic"] only, yet registering and using a public
    client ("none") works.
  * The protected resource metadata is only at the path-specific
    /.well-known/oauth-protected-resource/mcp (the root one is 404); the 401 names it.
"""

import asyncio
import base64
import html
import json
import secrets
import signal
import sys
import time
from urllib.parse import parse_qsl, unquote, urlencode

import uvicorn
from pydantic import AnyHttpUrl, BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    AuthorizeError,
    RefreshToken,
    TokenError,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions, RevocationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

HOST = "127.0.0.1"
ACCESS_TOKEN_SECONDS = 3600
CODE_SECONDS = 300  # an authorization code is good for five minutes, and only once
LOGIN_SECONDS = 600  # a pending sign-in (between /authorize and POST /login) lasts ten minutes
VALID_SCOPES = ["mcp:tools", "mcp:admin", "offline_access"]
ADMIN_SCOPE = "mcp:admin"
ADMIN_TOOL = "admin_report"
DEFAULT_SCOPES = ["mcp:tools"]
REQUIRED_SCOPES = ["mcp:tools"]


def same_resource(a: str, b: str) -> bool:
    """RFC 8707 resource comparison the way the SDK's bearer middleware does it: as parsed URLs
    (case and default port spelling do not matter), ignoring one trailing slash."""
    try:
        return str(AnyHttpUrl(a)).removesuffix("/") == str(AnyHttpUrl(b)).removesuffix("/")
    except ValidationError:
        return False


class PendingLogin(BaseModel):
    """An authorization request the SDK's /authorize validated, waiting for the person to sign in."""

    client_id: str
    params: AuthorizationParams
    scopes: list[str]
    created_at: float


class InMemoryProvider:
    """The SDK's `OAuthAuthorizationServerProvider` protocol, in memory.

    Every token remembers its `subject` (the username typed on the login page): the SDK carries
    `AccessToken.subject` into the request context, where `whoami` reads it, and uses it with
    the client_id to tie a streamable-HTTP session to its principal.

    Access and refresh tokens are issued, rotated and revoked in pairs (`pair` maps each to the
    other): revoking either revokes both, and a refresh retires the old pair entirely.
    """

    def __init__(self, issuer: str, resource: str) -> None:
        self.issuer = issuer
        self.resource = resource
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.pending: dict[str, PendingLogin] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}
        self.pair: dict[str, str] = {}  # access token <-> refresh token, both directions

    # -- clients (RFC 7591 registration; the SDK's /register mints client_id and secret) --

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        self.clients[client_info.client_id] = client_info

    # -- authorization: hand the browser to our own login page, never auto-approve --

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        # The SDK passes `resource` through unchecked; the MCP authorization spec says clients
        # MUST send it, and that it names this server's MCP endpoint.
        if params.resource is None:
            raise AuthorizeError("invalid_request", "the resource parameter (RFC 8707) is required")
        if not same_resource(params.resource, self.resource):
            raise AuthorizeError("invalid_target", f"unknown resource; this server is {self.resource}")
        # The SDK has already checked requested scopes against the client's registered ones;
        # without a scope parameter it passes None, and we grant what the client registered.
        scopes = params.scopes or (client.scope.split() if client.scope else list(DEFAULT_SCOPES))
        self._forget_stale_logins()
        request_id = secrets.token_urlsafe(24)
        self.pending[request_id] = PendingLogin(
            client_id=client.client_id, params=params, scopes=scopes, created_at=time.time()
        )
        return construct_redirect_uri(f"{self.issuer}/login", request=request_id)

    def _forget_stale_logins(self) -> None:
        cutoff = time.time() - LOGIN_SECONDS
        for request_id in [r for r, p in self.pending.items() if p.created_at < cutoff]:
            del self.pending[request_id]

    def complete_login(self, request_id: str, username: str) -> str | None:
        """The person signed in as `username`: issue a code, return the client's redirect URL
        (None for an unknown or already used request)."""
        self._forget_stale_logins()
        pending = self.pending.pop(request_id, None)
        if pending is None:
            return None
        p = pending.params
        code = secrets.token_urlsafe(32)
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=pending.scopes,
            expires_at=time.time() + CODE_SECONDS,
            client_id=pending.client_id,
            code_challenge=p.code_challenge,
            redirect_uri=p.redirect_uri,
            redirect_uri_provided_explicitly=p.redirect_uri_provided_explicitly,
            resource=p.resource,
            subject=username,
        )
        return construct_redirect_uri(str(p.redirect_uri), code=code, state=p.state)

    # -- the authorization_code grant (the SDK checks client auth, expiry, redirect_uri, PKCE) --

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        code = self.codes.get(authorization_code)
        return code if code is not None and code.client_id == client.client_id else None

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        if self.codes.pop(authorization_code.code, None) is None:
            raise TokenError("invalid_grant", "authorization code already used")
        return self._issue(
            client.client_id, authorization_code.scopes, authorization_code.resource, authorization_code.subject
        )

    # -- the refresh_token grant: rotate both tokens --

    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str) -> RefreshToken | None:
        token = self.refresh.get(refresh_token)
        return token if token is not None and token.client_id == client.client_id else None

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        if refresh_token.token not in self.refresh:
            raise TokenError("invalid_grant", "refresh token already used")
        self._drop(refresh_token.token)  # the old refresh token and its access token end here
        return self._issue(client.client_id, scopes, refresh_token.resource, refresh_token.subject)

    # -- bearer tokens on /mcp --

    async def load_access_token(self, token: str) -> AccessToken | None:
        access = self.access.get(token)
        if access is None or (access.expires_at is not None and access.expires_at <= time.time()):
            return None
        return access

    # -- RFC 7009 revocation (the SDK checks the token belongs to the authenticated client) --

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self._drop(token.token)

    # -- bookkeeping --

    def _issue(self, client_id: str, scopes: list[str], resource: str | None, subject: str | None) -> OAuthToken:
        access = secrets.token_urlsafe(32)
        refresh = secrets.token_urlsafe(32)
        self.access[access] = AccessToken(
            token=access,
            client_id=client_id,
            scopes=scopes,
            expires_at=int(time.time()) + ACCESS_TOKEN_SECONDS,
            resource=resource,
            subject=subject,
            claims={"iss": self.issuer},
        )
        self.refresh[refresh] = RefreshToken(
            token=refresh, client_id=client_id, scopes=scopes, resource=resource, subject=subject
        )
        self.pair[access] = refresh
        self.pair[refresh] = access
        return OAuthToken(
            access_token=access,
            token_type="Bearer",
            expires_in=ACCESS_TOKEN_SECONDS,
            scope=" ".join(scopes),
            refresh_token=refresh,
        )

    def _drop(self, token: str) -> None:
        """Forget a token and its pair, whichever kind it is."""
        for t in (token, self.pair.get(token)):
            if t is None:
                continue
            self.access.pop(t, None)
            self.refresh.pop(t, None)
            self.pair.pop(t, None)

    def live(self, username: str) -> int:
        now = time.time()
        access = sum(
            1
            for t in self.access.values()
            if t.subject == username and (t.expires_at is None or t.expires_at > now)
        )
        refresh = sum(
            1
            for t in self.refresh.values()
            if t.subject == username and (t.expires_at is None or t.expires_at > now)
        )
        return access + refresh

    def expire_access_tokens(self) -> int:
        past = int(time.time()) - 1
        for token, access in self.access.items():
            self.access[token] = access.model_copy(update={"expires_at": past})
        return len(self.access)


class WhoAmI(BaseModel):
    """whoami's structured result: who the calling token acts for."""

    user: str
    scopes: list[str]
    client_id: str


def build(port: int) -> tuple[MCPServer, InMemoryProvider]:
    issuer = f"http://{HOST}:{port}"
    resource = f"{issuer}/mcp"
    provider = InMemoryProvider(issuer, resource)
    server = MCPServer(
        name="oauth-test-server",
        version="1.0.0",
        instructions="An OAuth-protected MCP server of the official Python SDK, for workbench's tests.",
        auth_server_provider=provider,
        auth=AuthSettings(
            # The SDK requires https issuers except for localhost, 127.0.0.1 and [::1]. Pass plain
            # strings: AuthSettings then keeps a path-less issuer without a trailing slash
            # ("http://127.0.0.1:PORT"), while an AnyHttpUrl object made here would already have
            # been normalized to "http://127.0.0.1:PORT/" and be advertised that way.
            issuer_url=issuer,  # type: ignore[arg-type]
            resource_server_url=resource,  # type: ignore[arg-type]
            client_registration_options=ClientRegistrationOptions(
                enabled=True, valid_scopes=VALID_SCOPES, default_scopes=DEFAULT_SCOPES
            ),
            revocation_options=RevocationOptions(enabled=True),
            required_scopes=REQUIRED_SCOPES,
            # Refuse bearer tokens not bound to this /mcp (AccessToken.resource).
            validate_token_resource=True,
        ),
        log_level="WARNING",
    )

    @server.tool(description="Who the calling access token acts for: user, scopes and OAuth client.")
    def whoami() -> WhoAmI:
        token = get_access_token()  # the SDK's auth context: the AccessToken of this request
        if token is None:  # cannot happen behind the SDK's RequireAuthMiddleware
            raise ValueError("no access token in this request")
        return WhoAmI(user=token.subject or "", scopes=token.scopes, client_id=token.client_id)

    @server.tool(name=ADMIN_TOOL, description="whoami for tokens holding mcp:admin only.")
    def admin_report() -> WhoAmI:
        token = get_access_token()
        if token is None or ADMIN_SCOPE not in token.scopes:  # ScopeChallenge stops these first
            raise ValueError("mcp:admin is required")
        return WhoAmI(user=token.subject or "", scopes=token.scopes, client_id=token.client_id)

    @server.prompt(description="Greets the user the calling access token acts for.")
    def greeting() -> str:
        token = get_access_token()
        return f"Hello, {token.subject if token else 'nobody'}!"

    @server.resource("whoami://me", name="me", description="Who the calling access token acts for.", mime_type="text/plain")
    def me() -> str:
        token = get_access_token()
        return token.subject if token else ""

    # -- the sign-in page the provider's authorize() sends the browser to --

    @server.custom_route("/login", methods=["GET", "POST"])
    async def login(request: Request) -> Response:
        if request.method == "GET":
            request_id = request.query_params.get("request", "")
            pending = provider.pending.get(request_id)
            if pending is None:
                return PlainTextResponse("unknown or expired sign-in request", status_code=400)
            client = provider.clients.get(pending.client_id)
            client_name = (client.client_name if client else None) or pending.client_id
            page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>Sign in</title></head>
<body>
<h1>Sign in to the OAuth test MCP server</h1>
<p><b>{html.escape(client_name)}</b> asks for: {html.escape(" ".join(pending.scopes))}</p>
<form method="post" action="/login">
<input type="hidden" name="request" value="{html.escape(request_id)}">
<label>Username <input name="username" autofocus required></label>
<button type="submit">Sign in</button>
</form>
</body></html>
"""
            return HTMLResponse(page, headers={"Cache-Control": "no-store"})
        form = await request.form()
        request_id = form.get("request")
        username = form.get("username")
        if not isinstance(request_id, str) or not isinstance(username, str) or not username.strip():
            return PlainTextResponse("request and username are required", status_code=400)
        location = provider.complete_login(request_id, username.strip())
        if location is None:
            return PlainTextResponse("unknown or expired sign-in request", status_code=400)
        return RedirectResponse(location, status_code=302, headers={"Cache-Control": "no-store"})

    # -- test-only control endpoints (no auth; the server listens on loopback only) --

    def from_loopback(request: Request) -> bool:
        return request.client is not None and request.client.host in ("127.0.0.1", "::1")

    @server.custom_route("/test/live", methods=["GET"])
    async def test_live(request: Request) -> Response:
        if not from_loopback(request):
            return PlainTextResponse("loopback only", status_code=403)
        user = request.query_params.get("user")
        if not user:
            return PlainTextResponse("user is required", status_code=400)
        return JSONResponse({"live": provider.live(user)})

    @server.custom_route("/test/expire", methods=["POST"])
    async def test_expire(request: Request) -> Response:
        if not from_loopback(request):
            return PlainTextResponse("loopback only", status_code=403)
        return JSONResponse({"expired": provider.expire_access_tokens()})

    return server, provider


async def read_body(receive: Receive) -> bytes:
    """The whole body of an ASGI HTTP request, for a shim that looks at it before the app."""
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body", False):
            return body


def replaying(body: bytes, receive: Receive) -> Receive:
    """A `receive` that hands the app `body` (already read) once, then waits as usual (for the
    disconnect)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


class ScopeChallenge:
    """The scope challenge of the MCP authorization spec for one tool: a `tools/call` of
    `admin_report` (POST /mcp) whose bearer token lacks `mcp:admin` is answered 403
    insufficient_scope naming the scopes the call needs, before the SDK sees it. Requests
    without a known token pass through, for the SDK's own 401."""

    def __init__(self, app: ASGIApp, provider: InMemoryProvider, resource_metadata: str) -> None:
        self.app = app
        self.provider = provider
        self.resource_metadata = resource_metadata

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != "/mcp":
            await self.app(scope, receive, send)
            return
        body = await read_body(receive)
        try:
            rpc = json.loads(body)
        except ValueError:
            rpc = None
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        bearer = headers.get("authorization", "")
        token = self.provider.access.get(bearer[7:].strip()) if bearer[:7].lower() == "bearer " else None
        if (
            isinstance(rpc, dict)
            and rpc.get("method") == "tools/call"
            and isinstance(rpc.get("params"), dict)
            and rpc["params"].get("name") == ADMIN_TOOL
            and token is not None
            and ADMIN_SCOPE not in token.scopes
        ):
            challenge = (
                'Bearer error="insufficient_scope", '
                f'scope="{" ".join(sorted(set(token.scopes) | {ADMIN_SCOPE}))}", '
                f'resource_metadata="{self.resource_metadata}", '
                f'error_description="{ADMIN_TOOL} needs {ADMIN_SCOPE}"'
            )
            response = JSONResponse(
                {"error": "insufficient_scope", "error_description": f"{ADMIN_TOOL} needs {ADMIN_SCOPE}"},
                status_code=403,
                headers={"WWW-Authenticate": challenge},
            )
            await response(scope, receive, send)
            return
        await self.app(scope, replaying(body, receive), send)


class FixSdkClientAuth:
    """Opt-in (--fix-sdk-client-auth) ASGI shim for two known bugs of the SDK's client
    authentication at /token and /revoke in mcp 2.3.0, so a test can choose to run against the
    SDK as it should behave rather than as it does:

      * modelcontextprotocol/python-sdk#3545 (also #1315): `ClientAuthenticator` reads client_id
        only from the form body, so an RFC 6749 §2.3.1 client_secret_basic request that carries
        its credentials only in `Authorization: Basic` (what Rust's oauth2 crate sends) is
        refused with 401 invalid_client "Missing client_id". The shim copies the client_id from
        the Basic header into the body when the body has none.
      * modelcontextprotocol/python-sdk#3508: `RevocationRequest.client_secret` is required (it
        may be empty, but must be present), so a public client's RFC 7009 revocation
        (token, token_type_hint, client_id) is refused with 400 "client_secret: Field
        required". The shim adds an empty client_secret to /revoke bodies that have none.

    Nothing else changes: the SDK still checks the secret (from the header for
    client_secret_basic, from the body for client_secret_post) exactly as before.
    """

    PATHS = ("/token", "/revoke")

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] not in self.PATHS:
            await self.app(scope, receive, send)
            return
        body = await read_body(receive)
        fields = parse_qsl(body.decode("latin-1"), keep_blank_values=True)
        names = {k for k, _ in fields}
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        basic = headers.get("authorization", "")
        if "client_id" not in names and basic[:6].lower() == "basic ":
            try:
                user = base64.b64decode(basic[6:].strip()).decode("utf-8").split(":", 1)[0]
                fields.append(("client_id", unquote(user)))
            except (ValueError, UnicodeDecodeError):
                pass  # leave it to the SDK to refuse
        if scope["path"] == "/revoke" and "client_secret" not in names:
            fields.append(("client_secret", ""))
        body = urlencode(fields).encode()
        scope = dict(scope)
        scope["headers"] = [(k, v) for k, v in scope["headers"] if k.lower() != b"content-length"] + [
            (b"content-length", str(len(body)).encode())
        ]
        await self.app(scope, replaying(body, receive), send)


async def serve(port: int, fix_sdk_client_auth: bool) -> None:
    server, provider = build(port)
    app: ASGIApp = server.streamable_http_app(host=HOST)  # /mcp, with the SDK's DNS-rebinding guard
    app = ScopeChallenge(app, provider, f"http://{HOST}:{port}/.well-known/oauth-protected-resource/mcp")
    if fix_sdk_client_auth:
        app = FixSdkClientAuth(app)
    config = uvicorn.Config(
        app,
        host=HOST,
        port=port,
        log_config=None,  # uvicorn's default config would send access logs to stdout
        access_log=False,
        log_level="warning",
        # An open SSE stream (GET /mcp) never finishes by itself; do not wait for it on SIGTERM.
        timeout_graceful_shutdown=1,
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():  # did not start; uvicorn has logged why (and usually exits with status 3)
            await task
            sys.exit(1)
        await asyncio.sleep(0.02)
    print("READY", flush=True)
    await task


def main() -> None:
    args = sys.argv[1:]
    fix = "--fix-sdk-client-auth" in args
    args = [a for a in args if a != "--fix-sdk-client-auth"]
    if len(args) != 1 or not args[0].isdigit():
        sys.exit(f"usage: {sys.argv[0]} PORT [--fix-sdk-client-auth]")
    # uvicorn catches SIGTERM/SIGINT, shuts down gracefully and then re-raises the signal with
    # the handler that was installed before it; make that one a no-op so we exit with status 0.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: None)
    asyncio.run(serve(int(args[0]), fix))


if __name__ == "__main__":
    main()
