// The whole connect flow with real parts: the official MCP TypeScript SDK calls connect, the
// browser opens the link, signs in to workbench, signs in and consents at a real OAuth 2
// authorization server (oidc-provider), wait_for_connection answers CONNECTED, execute_tools
// runs a GitHub tool whose request reaches the fake API with the issued token, and a
// curl_session token reaches the same API through /c. Then the API-key form for Linear.
import { test, expect } from "@playwright/test";
import { baseURL, providerURL } from "../playwright.config";
import { createKey, mcpClient, signIn, structured } from "./helpers";

test.describe.configure({ mode: "serial" });

test("an agent connects GitHub through a real OAuth server and uses the token", async ({ page }) => {
  await signIn(page);
  const key = await createKey(page, "mcp e2e");
  const mcp = await mcpClient(key);

  const tools = await mcp.listTools();
  expect(tools.tools.map((t) => t.name)).toEqual([
    "search_tools", "get_tool_schema", "execute_tools", "whoami", "list_integrations",
    "connect", "wait_for_connection", "get_auth_url", "curl_session",
  ]);

  const before = structured(await mcp.callTool({ name: "execute_tools", arguments: { executions: [{ tool: "github_get_user", args: {} }] } }));
  expect(before.results[0].code).toBe("NOT_CONNECTED");

  const link = structured(await mcp.callTool({ name: "connect", arguments: { integration: "github" } }));
  expect(link.url).toBe(`${baseURL}/connect/${link.connectionId}`);
  const waiting = mcp.callTool({ name: "wait_for_connection", arguments: { connectionId: link.connectionId, timeoutSec: 60 } }, undefined, { timeout: 90_000 });

  // The person opens the link: off to the authorization server's login and consent pages.
  await page.goto(link.url);
  await expect(page).toHaveURL(new RegExp(`^${providerURL}/interaction/`));
  await page.locator("input[name=login]").fill("octo-e2e");
  await page.locator("input[name=password]").fill("any password");
  await page.locator("button[type=submit]").click();
  await page.locator("button[type=submit]").click(); // consent
  await expect(page.getByTestId("connect-done")).toHaveText("GitHub is connected");

  expect(structured(await waiting)).toEqual({ status: "CONNECTED" });
  const listed = structured(await mcp.callTool({ name: "list_integrations", arguments: {} }));
  expect(listed.integrations.find((i: any) => i.name === "github").connected).toBe(true);

  const run = structured(await mcp.callTool({ name: "execute_tools", arguments: { executions: [{ tool: "github_get_user", args: {} }] } }));
  expect(run.results[0].result.login).toBe("octo-e2e");

  const session = structured(await mcp.callTool({ name: "curl_session", arguments: { integrations: ["github"], expiresInSeconds: 300 } }));
  expect(session.expiresIn).toBe(300);
  const viaProxy = await fetch(`${session.proxyBaseUrl}/github/user`, { headers: { Authorization: `Bearer ${session.token}` } });
  expect(viaProxy.status).toBe(200);
  expect((await viaProxy.json()).login).toBe("octo-e2e");

  // The Connections page shows it, and disconnecting revokes the proxy token.
  await page.goto("/connections");
  const row = page.getByTestId("integration-row").filter({ hasText: "GitHub" });
  await expect(row.getByTestId("integration-status")).toHaveText("connected");
  await row.getByRole("button", { name: "Disconnect GitHub" }).click();
  await expect(row.getByTestId("integration-status")).toHaveText("revoked");
  const revoked = await fetch(`${session.proxyBaseUrl}/github/user`, { headers: { Authorization: `Bearer ${session.token}` } });
  expect(revoked.status).toBe(401);
  await mcp.close();
});

test("a person pastes a Linear API key on the connect page; a wrong key is refused first", async ({ page }) => {
  await signIn(page);
  const key = await createKey(page, "mcp e2e");
  const mcp = await mcpClient(key);
  const link = structured(await mcp.callTool({ name: "connect", arguments: { integration: "linear" } }));
  expect(link.authType).toBe("api_key");
  const waiting = mcp.callTool({ name: "wait_for_connection", arguments: { connectionId: link.connectionId, timeoutSec: 60 } }, undefined, { timeout: 90_000 });

  await page.goto(link.url);
  await page.getByLabel("Personal API key").fill("lin_api_wrong_key_000000");
  await page.getByRole("button", { name: "Connect" }).click();
  await expect(page.getByRole("alert")).toContainText("Linear did not accept it");
  await page.getByLabel("Personal API key").fill("lin_api_e2e_key_0123456789");
  await page.getByRole("button", { name: "Connect" }).click();
  await expect(page.getByTestId("connect-done")).toHaveText("Linear is connected");
  expect(await page.content()).not.toContain("lin_api_e2e_key_0123456789");

  expect(structured(await waiting)).toEqual({ status: "CONNECTED" });
  const run = structured(await mcp.callTool({ name: "execute_tools", arguments: { executions: [{ tool: "linear_get_viewer", args: {} }] } }));
  expect(run.results[0].result).toEqual({ id: "u-e2e", name: "Lin E2E", email: "lin@example.test" });
  await mcp.close();
});
