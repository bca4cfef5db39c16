// Issue 31 in a real browser: a remote MCP server each user signs in to. The remote is a second
// workbench (a real MCP OAuth 2.1 server) on another loopback address. The admin registers it
// from the portal's MCP server form; an agent on the official MCP TypeScript SDK asks for a
// connect link; the person opens it, signs in at the remote and approves its consent page;
// wait_for_connection answers CONNECTED, the remote's tools are listed with that connection,
// and a call carries the person's own token: the remote's whoami names its own user.
import { test, expect } from "@playwright/test";
import { baseURL, remoteURL } from "../playwright.config";
import { PASSWORD, createKey, mcpClient, signIn, structured } from "./helpers";

const REMOTE_USER = "remote-admin@example.com";

test("a person signs in to a remote MCP server from a connect link and the agent calls it as them", async ({ page }) => {
  // The remote workbench's first admin: the account the person has there.
  const wasm = page.waitForResponse((r) => r.url().endsWith(".wasm") && r.status() === 200);
  await page.goto(`${remoteURL}/`);
  await expect(page).toHaveURL(/\/setup$/);
  await wasm;
  await page.getByLabel("Email").fill(REMOTE_USER);
  await page.getByLabel("Password").fill(PASSWORD);
  await page.getByLabel("Project name").fill("remote");
  await page.getByRole("button", { name: "Create admin" }).click();
  await expect(page.getByTestId("viewer-email")).toHaveText(REMOTE_USER);
  // Signed out there, so that the connect flow meets the remote's sign-in page.
  await page.getByRole("button", { name: "Sign out" }).click();
  await expect(page).toHaveURL(/\/login/);

  // The admin registers it with "each user signs in": discovery runs, it awaits their sign-in.
  await signIn(page);
  await page.getByRole("navigation", { name: "Sections" }).getByRole("link", { name: "MCP servers" }).click();
  await expect(page.getByRole("heading", { name: "MCP servers" })).toBeVisible();
  const help = page.getByTestId("user-oauth-help");
  await expect(async () => {
    await page.getByLabel("Authentication").selectOption("user_oauth");
    await expect(help).toBeVisible({ timeout: 1_000 });
  }).toPass();
  await expect(page.getByLabel("Token URL")).toBeHidden();
  await page.getByLabel("Name").fill("remote");
  await page.getByLabel("URL", { exact: true }).fill(`${remoteURL}/mcp`);
  await page.getByRole("button", { name: "Register" }).click();
  const row = page.getByTestId("mcp-server-row").filter({ hasText: "remote" });
  await expect(row).toContainText("awaiting_sign_in");
  await expect(row.getByTestId("mcp-server-awaiting")).toBeVisible();

  // The agent asks for a connect link and waits.
  const key = await createKey(page, "remote e2e");
  const mcp = await mcpClient(key);
  const link = structured(await mcp.callTool({ name: "connect", arguments: { integration: "remote" } }));
  const waiting = mcp.callTool(
    { name: "wait_for_connection", arguments: { connectionId: link.connectionId, timeoutSec: 60 } },
    undefined,
    { timeout: 90_000 },
  );

  // The person opens it: the remote's sign-in page (its own session), then its consent page.
  await page.goto(link.url);
  await page.waitForURL((u) => u.origin === remoteURL && u.pathname === "/login");
  await page.getByLabel("Email").fill(REMOTE_USER);
  await page.getByLabel("Password").fill(PASSWORD);
  await page.getByRole("button", { name: "Sign in", exact: true }).click();
  await page.waitForURL((u) => u.origin === remoteURL && u.pathname === "/oauth/authorize");
  // The remote's consent page names workbench by its client ID metadata document.
  await expect(page.getByText(`${baseURL}/oauth/client-metadata`).first()).toBeVisible();
  await page.getByTestId("oauth-approve").click();
  await expect(page.getByTestId("connect-done")).toContainText("is connected");
  expect(structured(await waiting)).toEqual({ status: "CONNECTED" });

  // The tools are listed with that connection; the call runs as the person at the remote.
  await expect
    .poll(async () => {
      const out = structured(
        await mcp.callTool({ name: "execute_tools", arguments: { executions: [{ tool: "remote.whoami", args: {} }] } }),
      );
      return out.results[0].result?.email ?? out.results[0].code;
    }, { timeout: 30_000 })
    .toBe(REMOTE_USER);
  const listed = structured(await mcp.callTool({ name: "list_integrations", arguments: {} }));
  expect(listed.integrations.find((i: { name: string }) => i.name === "remote").connected).toBe(true);
  await mcp.close();
});
