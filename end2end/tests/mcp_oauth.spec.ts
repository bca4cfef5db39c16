// MCP authorization with real parts: an agent on the official MCP TypeScript SDK is given only
// workbench's /mcp URL. Its 401 leads the SDK to the metadata and to dynamic registration; the
// browser is sent to the consent page, lands on the login page, signs in, sees which client asks
// and where it returns, and approves; a loopback server (the client's redirect URI) receives the
// code; the SDK exchanges it and then lists and calls the meta-tools as the person who approved.
// A refresh through the SDK's refreshAuthorization gives a working new token, and revoking the
// refresh token ends it. A second client is denied: its redirect URI gets error=access_denied.
// Runs after the governance spec: it signs in as the portal spec's admin and expects the policy
// the governance spec created to be offered on the consent page.
import { test, expect, type Page } from "@playwright/test";
import { randomBytes } from "node:crypto";
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  UnauthorizedError,
  discoverAuthorizationServerMetadata,
  refreshAuthorization,
  type OAuthClientProvider,
  type OAuthDiscoveryState,
} from "@modelcontextprotocol/sdk/client/auth.js";
import { InvalidGrantError } from "@modelcontextprotocol/sdk/server/auth/errors.js";
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from "@modelcontextprotocol/sdk/shared/auth.js";
import { baseURL } from "../playwright.config";
import { ADMIN, PASSWORD, mcpClient, structured } from "./helpers";

const CLIENT_NAME = "Playwright MCP client";
const META_TOOLS = [
  "search_tools", "get_tool_schema", "execute_tools", "whoami", "list_integrations",
  "connect", "wait_for_connection", "get_auth_url", "curl_session",
];

/** The client's redirect URI: a loopback server that records what the browser brings back. */
interface RedirectTarget {
  url: string;
  host: string;
  /** The query of the first visit to /callback. */
  visit: Promise<URLSearchParams>;
  close(): Promise<void>;
}

async function redirectTarget(): Promise<RedirectTarget> {
  let arrived!: (query: URLSearchParams) => void;
  const visit = new Promise<URLSearchParams>((resolve) => (arrived = resolve));
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://127.0.0.1");
    if (url.pathname !== "/callback") {
      res.writeHead(404).end();
      return;
    }
    arrived(url.searchParams);
    res.writeHead(200, { "content-type": "text/html" }).end("<p>You can close this window.</p>");
  });
  await new Promise<void>((ok) => server.listen(0, "127.0.0.1", () => ok()));
  const host = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url: `http://${host}/callback`,
    host,
    visit,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((ok) => server.close(() => ok()));
    },
  };
}

/** An in-memory OAuthClientProvider whose user agent is the Playwright page. */
class PageOAuthProvider implements OAuthClientProvider {
  client?: OAuthClientInformationMixed;
  saved?: OAuthTokens;
  discovery?: OAuthDiscoveryState;
  verifier = "";
  authorizationUrl?: URL;
  readonly stateValue = randomBytes(16).toString("hex");

  readonly redirectUrl: string;
  private readonly page: Page;

  constructor(page: Page, redirectUrl: string) {
    this.page = page;
    this.redirectUrl = redirectUrl;
  }

  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: CLIENT_NAME,
      redirect_uris: [this.redirectUrl],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    };
  }
  state() { return this.stateValue; }
  clientInformation() { return this.client; }
  saveClientInformation(info: OAuthClientInformationMixed) { this.client = info; }
  tokens() { return this.saved; }
  saveTokens(tokens: OAuthTokens) { this.saved = tokens; }
  saveCodeVerifier(verifier: string) { this.verifier = verifier; }
  codeVerifier() { return this.verifier; }
  saveDiscoveryState(state: OAuthDiscoveryState) { this.discovery = state; }
  discoveryState() { return this.discovery; }
  async redirectToAuthorization(url: URL) {
    this.authorizationUrl = url;
    await this.page.goto(url.href);
  }
}

function mcpTransport(provider: OAuthClientProvider) {
  return new StreamableHTTPClientTransport(new URL(`${baseURL}/mcp`), { authProvider: provider });
}

function sameQuery(a: URL, b: URL) {
  expect(Object.fromEntries(a.searchParams)).toEqual(Object.fromEntries(b.searchParams));
}

/**
 * The agent connects without a token: the SDK discovers, registers and sends the browser to the
 * authorize page, which asks the signed-out person to sign in first and then shows the consent
 * page. Returns the transport that must finish the authorization.
 */
async function connectAndReachConsent(page: Page, provider: PageOAuthProvider, redirect: RedirectTarget) {
  const transport = mcpTransport(provider);
  const client = new Client({ name: "workbench-oauth-e2e", version: "1.0.0" });
  await expect(client.connect(transport)).rejects.toBeInstanceOf(UnauthorizedError);

  // Discovery started from the 401's resource_metadata and found this deployment's own server.
  expect(provider.discovery?.resourceMetadataUrl).toBe(`${baseURL}/.well-known/oauth-protected-resource/mcp`);
  expect(provider.discovery?.authorizationServerUrl).toBe(baseURL);
  expect(provider.discovery?.resourceMetadata).toMatchObject({ resource: `${baseURL}/mcp`, authorization_servers: [baseURL], scopes_supported: ["mcp"] });
  expect(provider.client?.client_id).toMatch(/^mcpc_/);

  const authorize = provider.authorizationUrl!;
  expect(authorize.origin + authorize.pathname).toBe(`${baseURL}/oauth/authorize`);
  expect(authorize.searchParams.get("code_challenge_method")).toBe("S256");
  expect(authorize.searchParams.get("state")).toBe(provider.stateValue);
  expect(authorize.searchParams.get("redirect_uri")).toBe(redirect.url);
  expect(authorize.searchParams.get("resource")).toBe(`${baseURL}/mcp`);

  // Signed out: the login page, remembering the whole authorization request.
  await page.waitForURL((u) => u.pathname === "/login");
  const next = new URL(new URL(page.url()).searchParams.get("next") ?? "", baseURL);
  expect(next.pathname).toBe("/oauth/authorize");
  sameQuery(next, authorize);
  await page.getByLabel("Email").fill(ADMIN);
  await page.getByLabel("Password").fill(PASSWORD);
  await page.getByRole("button", { name: "Sign in", exact: true }).click();

  // Back on the authorize page, now the consent page.
  await page.waitForURL((u) => u.pathname === "/oauth/authorize");
  sameQuery(new URL(page.url()), authorize);
  await expect(page.getByText(CLIENT_NAME).first()).toBeVisible();
  await expect(page.getByText(redirect.host).first()).toBeVisible();
  await expect(page.getByText(/act as you on \/mcp with your project.s policies/).first()).toBeVisible();
  // The admin may pick the policy the client acts under (the governance spec made one); the
  // project default is preselected.
  const policy = page.locator("select[name=policy_id]");
  await expect(policy).toBeVisible();
  await expect(policy).toHaveValue("");
  return transport;
}

/** The redirect URI's first visit, or a failure naming where the browser is instead. */
async function arrival(page: Page, redirect: RedirectTarget): Promise<URLSearchParams> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, fail) => {
    timer = setTimeout(() => fail(new Error(`no visit to ${redirect.url}; the browser is at ${page.url()}`)), 20_000);
  });
  try {
    return await Promise.race([redirect.visit, late]);
  } finally {
    clearTimeout(timer);
  }
}

test("an agent on the TypeScript SDK authorizes itself through the consent page and acts as the person", async ({ page }) => {
  const metadata = await discoverAuthorizationServerMetadata(baseURL);
  expect(metadata).toMatchObject({
    issuer: baseURL,
    authorization_endpoint: `${baseURL}/oauth/authorize`,
    token_endpoint: `${baseURL}/oauth/token`,
    registration_endpoint: `${baseURL}/oauth/register`,
    revocation_endpoint: `${baseURL}/oauth/revoke`,
    code_challenge_methods_supported: ["S256"],
    grant_types_supported: ["authorization_code", "refresh_token"],
  });

  const redirect = await redirectTarget();
  try {
    const provider = new PageOAuthProvider(page, redirect.url);
    const transport = await connectAndReachConsent(page, provider, redirect);
    await page.getByTestId("oauth-approve").click();

    // The browser comes back to the client with a code, the state it sent and the issuer.
    const back = await arrival(page, redirect);
    expect(back.get("error")).toBeNull();
    expect(back.get("state")).toBe(provider.stateValue);
    expect(back.get("iss")).toBe(baseURL);
    const code = back.get("code");
    expect(code).toBeTruthy();

    await transport.finishAuth(code!);
    const first = provider.saved!;
    expect(first.access_token).toMatch(/^wbat_/);
    expect(first.refresh_token).toMatch(/^wbrt_/);
    expect(first.token_type.toLowerCase()).toBe("bearer");
    expect(first.expires_in).toBe(3600);
    expect(first.scope).toBe("mcp");

    // Reconnected with the tokens: the meta-tools, as the person who approved.
    const agent = new Client({ name: "workbench-oauth-e2e", version: "1.0.0" });
    await agent.connect(mcpTransport(provider));
    const tools = await agent.listTools();
    expect(tools.tools.map((t) => t.name).sort()).toEqual([...META_TOOLS].sort());
    expect(structured(await agent.callTool({ name: "whoami", arguments: {} })).email).toBe(ADMIN);
    await agent.close();

    // A refresh through the SDK rotates the tokens, and the new access token works.
    const refreshed = await refreshAuthorization(baseURL, {
      metadata,
      clientInformation: provider.client!,
      refreshToken: first.refresh_token!,
      resource: `${baseURL}/mcp`,
    });
    expect(refreshed.access_token).toMatch(/^wbat_/);
    expect(refreshed.access_token).not.toBe(first.access_token);
    expect(refreshed.refresh_token).toMatch(/^wbrt_/);
    expect(refreshed.refresh_token).not.toBe(first.refresh_token);
    const again = await mcpClient(refreshed.access_token, "workbench-oauth-refreshed-e2e");
    expect(structured(await again.callTool({ name: "whoami", arguments: {} })).email).toBe(ADMIN);
    await again.close();

    // Revoking the refresh token (RFC 7009) means it refreshes no more.
    const revoked = await fetch(`${baseURL}/oauth/revoke`, {
      method: "POST",
      headers: { "Content-Type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ token: refreshed.refresh_token!, client_id: provider.client!.client_id }),
    });
    expect(revoked.status).toBe(200);
    await expect(
      refreshAuthorization(baseURL, { metadata, clientInformation: provider.client!, refreshToken: refreshed.refresh_token!, resource: `${baseURL}/mcp` }),
    ).rejects.toBeInstanceOf(InvalidGrantError);
  } finally {
    await redirect.close();
  }
});

test("a person who denies sends the client back with access_denied and no token", async ({ page }) => {
  const redirect = await redirectTarget();
  try {
    const provider = new PageOAuthProvider(page, redirect.url);
    await connectAndReachConsent(page, provider, redirect);
    await page.getByTestId("oauth-deny").click();

    const back = await arrival(page, redirect);
    expect(back.get("error")).toBe("access_denied");
    expect(back.get("state")).toBe(provider.stateValue);
    expect(back.get("code")).toBeNull();
    expect(provider.saved).toBeUndefined();
  } finally {
    await redirect.close();
  }
});
