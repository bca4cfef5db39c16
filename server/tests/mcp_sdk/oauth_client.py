"""Proves that the official MCP Python SDK's OAuth client (package `mcp`) can authorize itself
against workbench's /mcp with nothing but the server's URL and a person's portal sign-in:

  * the SDK learns where to authorize from the 401 on /mcp (WWW-Authenticate resource_metadata,
    RFC 9728 protected resource metadata, RFC 8414 authorization server metadata);
  * it registers itself dynamically (RFC 7591) and runs the authorization code flow with PKCE;
  * the consent is given the way a browser without JavaScript gives it: an anonymous visit to the
    authorize page goes to the login page, sign-in returns there, the page names the client, and
    the consent form's post answers with the redirect carrying the code (plus state and iss);
  * with the token it obtained, tools/list shows the nine meta-tools and whoami names the person;
  * a refresh (grant_type=refresh_token at the token endpoint) rotates both tokens, the new access
    token works, and presenting the old refresh token again is refused with invalid_grant and
    revokes the whole family: the newest access token is then refused on /mcp.

Usage: oauth_client.py BASE_URL EMAIL PASSWORD

BASE_URL is the public URL of the server (no trailing slash); EMAIL and PASSWORD are a portal
user's. Prints one JSON report of what it saw to stdout. Every failed check is also listed under
"failures" and on stderr, and makes the exit status 1. server/tests/api/mcp_oauth_sdk.rs runs it.
"""

import asyncio
import html
import json
import re
import sys
import traceback
from urllib.parse import parse_qs, urlsplit

import httpx2
from mcp.client.auth import OAuthClientProvider
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

META_TOOLS = [
    "search_tools",
    "get_tool_schema",
    "execute_tools",
    "whoami",
    "list_integrations",
    "connect",
    "wait_for_connection",
    "get_auth_url",
    "curl_session",
]
CLIENT_NAME = "Python SDK MCP client"
# Never contacted: the redirect handler reads the consent form's redirect instead of following it.
REDIRECT_HOST = "127.0.0.1:8976"
REDIRECT_URI = f"http://{REDIRECT_HOST}/callback"
CONSENT_TEXT = re.compile(r"act as you on /mcp with your project.s policies")
REDIRECTS = (301, 302, 303, 307, 308)


class Checks:
    """Collects failed checks instead of stopping at the first one."""

    def __init__(self) -> None:
        self.failures: list[str] = []

    def __call__(self, ok: bool, what: str) -> bool:
        if not ok:
            self.failures.append(what)
        return ok


class MemoryStorage:
    """The SDK's TokenStorage, in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


def same_target(a: str | None, b: str) -> bool:
    """Whether two path-and-query strings name the same request (query order and encoding aside)."""
    if a is None:
        return False
    x, y = urlsplit(a), urlsplit(b)
    return x.path == y.path and parse_qs(x.query) == parse_qs(y.query)


def page_text(markup: str) -> str:
    """The text of an HTML page: tags and comments dropped, entities decoded, spaces collapsed."""
    text = re.sub(r"<!--.*?-->|<[^>]+>", " ", markup, flags=re.S)
    return re.sub(r"\s+", " ", html.unescape(text))


def cookie_header(res: httpx2.Response) -> str:
    return "; ".join(c.split(";", 1)[0].strip() for c in res.headers.get_list("set-cookie"))


class PortalConsent:
    """The SDK's redirect and callback handlers: a person signs in to the portal and approves."""

    def __init__(self, base: str, email: str, password: str, check: Checks, report: dict) -> None:
        self.base, self.email, self.password, self.check = base, email, password, check
        self.report = report.setdefault("consent", {})
        self.result: AuthorizationCodeResult | None = None

    async def redirect(self, authorization_url: str) -> None:
        check, report = self.check, self.report
        url = urlsplit(authorization_url)
        target = f"{url.path}?{url.query}"
        params = {k: v[0] for k, v in parse_qs(url.query).items()}
        report["authorization_endpoint"] = f"{url.scheme}://{url.netloc}{url.path}"
        report["authorization_params"] = sorted(params)
        check(report["authorization_endpoint"] == f"{self.base}/oauth/authorize", "the SDK sends the person to <public>/oauth/authorize")
        check(params.get("code_challenge_method") == "S256", "the SDK asks for PKCE S256")
        check(params.get("resource") == f"{self.base}/mcp", "the SDK names <public>/mcp as the resource")
        html_get = {"Accept": "text/html,application/xhtml+xml;q=0.9,*/*;q=0.8"}
        async with httpx2.AsyncClient(base_url=self.base, headers={"Origin": self.base}, follow_redirects=False) as browser:
            # Not signed in: the authorize page sends the visitor to the login page, keeping the request.
            res = await browser.get(target, headers=html_get)
            login = urlsplit(res.headers.get("location", ""))
            next_target = parse_qs(login.query).get("next", [None])[0]
            report["anonymous"] = {"status": res.status_code, "location_path": login.path, "next_keeps_request": same_target(next_target, target)}
            check(res.status_code in REDIRECTS and login.path == "/login", "an anonymous visit to the authorize page goes to /login")
            check(same_target(next_target, target), "the login redirect's next is the whole authorize request")

            # Signing in (the login form's post) returns to the authorize page.
            res = await browser.post(
                "/api/sign_in",
                data={"email": self.email, "password": self.password, "next": next_target or target},
                headers=html_get,
            )
            cookie = cookie_header(res)
            report["sign_in"] = {"status": res.status_code, "returns_to_authorize": same_target(res.headers.get("location"), target)}
            check(res.status_code in REDIRECTS and same_target(res.headers.get("location"), target), "sign-in returns to the authorize page")
            if not check(bool(cookie), "sign-in sets a session cookie"):
                raise RuntimeError(f"sign-in failed: {res.status_code} {res.text[:500]}")

            # The consent page names the client, where the person is sent back to and what it may do.
            res = await browser.get(target, headers={**html_get, "Cookie": cookie})
            text = page_text(res.text)
            report["page"] = {
                "status": res.status_code,
                "shows_client_name": CLIENT_NAME in text,
                "shows_redirect_host": REDIRECT_HOST in text,
                "shows_what_it_may_do": bool(CONSENT_TEXT.search(text)),
                "admin_sees_policy_select": 'name="policy_id"' in res.text,
            }
            check(res.status_code == 200, "the signed-in person gets the consent page")
            check(report["page"]["shows_client_name"], "the consent page shows the client's name")
            check(report["page"]["shows_redirect_host"], "the consent page shows the redirect host")
            check(report["page"]["shows_what_it_may_do"], "the consent page says the client acts as you on /mcp")
            # Not checked here: the policy chooser appears only when the project has policies.

            # Approving: the consent form posts the request back with the decision.
            form = {**params, "decision": "approve", "policy_id": ""}
            res = await browser.post("/api/oauth_decide", data=form, headers={**html_get, "Cookie": cookie})
            location = res.headers.get("location", "")
            back = urlsplit(location)
            query = {k: v[0] for k, v in parse_qs(back.query).items()}
            report["decision"] = {
                "status": res.status_code,
                "redirect": f"{back.scheme}://{back.netloc}{back.path}",
                "params": sorted(query),
                "state_echoed": query.get("state") == params.get("state"),
                "iss": query.get("iss"),
            }
            check(res.status_code in (302, 303), "approving answers a redirect")
            check(report["decision"]["redirect"] == REDIRECT_URI, "approving sends the browser to the registered redirect URI")
            check(query.get("iss") == self.base, "the redirect names the issuer (RFC 9207)")
            if not check("code" in query, "the redirect carries an authorization code"):
                raise RuntimeError(f"no code in the consent redirect: {res.status_code} {location!r} {res.text[:500]}")
            self.result = AuthorizationCodeResult(code=query["code"], state=query.get("state"), iss=query.get("iss"))

    async def callback(self) -> AuthorizationCodeResult:
        assert self.result is not None, "the redirect handler ran first"
        return self.result


async def whoami_with(base: str, token: str) -> dict:
    """whoami through the SDK with a plain bearer token."""
    async with create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http:
        async with streamable_http_client(f"{base}/mcp", http_client=http, terminate_on_close=False) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                return (await session.call_tool("whoami", {})).structured_content


async def mcp_status(http: httpx2.AsyncClient, base: str, token: str) -> int:
    """The HTTP status of a bare tools/list on /mcp with `token`."""
    res = await http.post(
        f"{base}/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
        headers={"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"},
    )
    return res.status_code


async def refresh(http: httpx2.AsyncClient, base: str, client_id: str, refresh_token: str) -> tuple[int, dict]:
    res = await http.post(
        f"{base}/oauth/token",
        data={"grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": client_id, "resource": f"{base}/mcp"},
    )
    try:
        body = res.json()
    except ValueError:
        body = {"text": res.text[:500]}
    return res.status_code, body


def prefix(token: str | None) -> str | None:
    return token.split("_", 1)[0] + "_" if token and "_" in token else None


async def main(base: str, email: str, password: str, report: dict, check: Checks) -> None:
    storage = MemoryStorage()
    consent = PortalConsent(base, email, password, check, report)
    provider = OAuthClientProvider(
        server_url=f"{base}/mcp",
        client_metadata=OAuthClientMetadata(
            client_name=CLIENT_NAME,
            redirect_uris=[REDIRECT_URI],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=storage,
        redirect_handler=consent.redirect,
        callback_handler=consent.callback,
    )

    # Every request the SDK makes, its auth flow's included.
    requests: list[dict] = report.setdefault("requests", [])

    async def log(res: httpx2.Response) -> None:
        entry = {"method": res.request.method, "path": res.request.url.path, "status": res.status_code}
        if res.status_code == 401:
            entry["www_authenticate"] = res.headers.get("www-authenticate")
        requests.append(entry)

    async with create_mcp_http_client(auth=provider) as http:
        http.event_hooks = {"response": [log]}
        async with streamable_http_client(f"{base}/mcp", http_client=http, terminate_on_close=False) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                report["tools"] = [t.name for t in (await session.list_tools()).tools]
                report["whoami"] = (await session.call_tool("whoami", {})).structured_content

    # How the SDK found its way: from the 401 to the metadata, registration and the token.
    first = requests[0] if requests else {}
    check(first.get("method") == "POST" and first.get("path") == "/mcp" and first.get("status") == 401, "the first /mcp call is refused with 401")
    check(
        f'resource_metadata="{base}/.well-known/oauth-protected-resource/mcp"' in (first.get("www_authenticate") or ""),
        "the 401 points at the protected resource metadata",
    )
    steps = [
        ("GET", "/.well-known/oauth-protected-resource/mcp", 200),
        ("GET", "/.well-known/oauth-authorization-server", 200),
        ("POST", "/oauth/register", 201),
        ("POST", "/oauth/token", 200),
        ("POST", "/mcp", 200),
    ]
    seen = [(r["method"], r["path"], r["status"]) for r in requests]
    at = 0
    for step in steps:
        at = seen.index(step, at) + 1 if step in seen[at:] else -1
        if not check(at > 0, f"the SDK's flow includes {step} in order"):
            break
    prm, asm = provider.context.protected_resource_metadata, provider.context.oauth_metadata
    report["protected_resource"] = prm.model_dump(mode="json", exclude_none=True) if prm else None
    report["authorization_server"] = asm.model_dump(mode="json", exclude_none=True) if asm else None
    check(bool(prm) and str(prm.resource) == f"{base}/mcp", "the protected resource is <public>/mcp")
    check(bool(asm) and str(asm.issuer) == base, "the issuer is the public URL")
    check(bool(asm) and str(asm.token_endpoint) == f"{base}/oauth/token", "the token endpoint is <public>/oauth/token")

    client = storage.client_info
    report["client"] = {"client_id_prefix": prefix(client.client_id) if client else None, "token_endpoint_auth_method": client.token_endpoint_auth_method if client else None}
    check(bool(client) and client.client_id.startswith("mcpc_"), "dynamic registration issues an mcpc_ client id")
    tokens = storage.tokens
    report["tokens"] = {
        "access_prefix": prefix(tokens.access_token) if tokens else None,
        "refresh_prefix": prefix(tokens.refresh_token) if tokens else None,
        "token_type": tokens.token_type if tokens else None,
        "expires_in": tokens.expires_in if tokens else None,
        "scope": tokens.scope if tokens else None,
    }
    check(report["tokens"] == {"access_prefix": "wbat_", "refresh_prefix": "wbrt_", "token_type": "Bearer", "expires_in": 3600, "scope": "mcp"}, "the token response is as specified")
    check(sorted(report["tools"]) == sorted(META_TOOLS), "tools/list shows the nine meta-tools")
    check((report["whoami"] or {}).get("email") == email, "whoami names the signed-in person")
    if not (client and tokens and tokens.refresh_token):
        return

    # A refresh rotates both tokens; replaying the old refresh token revokes the family.
    out: dict = report.setdefault("refresh", {})
    async with httpx2.AsyncClient(follow_redirects=False) as plain:
        status, body = await refresh(plain, base, client.client_id, tokens.refresh_token)
        new_access, new_refresh = body.get("access_token"), body.get("refresh_token")
        out.update(
            status=status,
            access_prefix=prefix(new_access),
            refresh_prefix=prefix(new_refresh),
            access_rotated=bool(new_access) and new_access != tokens.access_token,
            refresh_rotated=bool(new_refresh) and new_refresh != tokens.refresh_token,
            expires_in=body.get("expires_in"),
        )
        check(status == 200, "a refresh succeeds")
        check(out["access_rotated"] and out["access_prefix"] == "wbat_", "a refresh issues a new access token")
        check(out["refresh_rotated"] and out["refresh_prefix"] == "wbrt_", "a refresh rotates the refresh token")
        if status != 200 or not new_access or not new_refresh:
            return
        out["new_access_whoami"] = (await whoami_with(base, new_access)).get("email")
        out["new_access_mcp_status"] = await mcp_status(plain, base, new_access)
        check(out["new_access_whoami"] == email, "the refreshed access token works through the SDK")
        check(out["new_access_mcp_status"] == 200, "the refreshed access token works on /mcp")

        status, body = await refresh(plain, base, client.client_id, tokens.refresh_token)
        out.update(replay_status=status, replay_error=body.get("error"))
        check(status == 400 and body.get("error") == "invalid_grant", "the old refresh token presented again answers invalid_grant")
        out["after_replay_mcp_status"] = await mcp_status(plain, base, new_access)
        check(out["after_replay_mcp_status"] == 401, "after the replay the newest access token is refused on /mcp")
        status, body = await refresh(plain, base, client.client_id, new_refresh)
        out.update(newest_refresh_status=status, newest_refresh_error=body.get("error"))
        check(status == 400 and body.get("error") == "invalid_grant", "after the replay the newest refresh token is refused too")


if __name__ == "__main__":
    base_url, user_email, user_password = sys.argv[1].rstrip("/"), sys.argv[2], sys.argv[3]
    observed: dict = {}
    checks = Checks()
    try:
        asyncio.run(asyncio.wait_for(main(base_url, user_email, user_password, observed, checks), timeout=120))
    except BaseException as e:  # the report is printed whatever happened
        traceback.print_exception(e, file=sys.stderr)
        checks.failures.append(f"the flow raised {type(e).__name__}: {e}")
    observed["failures"] = checks.failures
    print(json.dumps(observed))
    for failure in checks.failures:
        print(f"FAILED: {failure}", file=sys.stderr)
    sys.exit(1 if checks.failures else 0)
