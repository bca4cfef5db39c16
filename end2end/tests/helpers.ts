// What the specs that run after the portal spec share: its admin, signing in, a new API key
// from the API keys page, an MCP client on the official TypeScript SDK, structured results.
import { expect, type Page } from "@playwright/test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { baseURL } from "../playwright.config";

// The admin the portal spec created.
export const ADMIN = "admin@example.com";
export const PASSWORD = "correct horse battery staple";

export async function signIn(page: Page) {
  await page.goto("/login");
  await page.getByLabel("Email").fill(ADMIN);
  await page.getByLabel("Password").fill(PASSWORD);
  await page.getByRole("button", { name: "Sign in", exact: true }).click();
  await expect(page.getByTestId("viewer-email")).toHaveText(ADMIN);
}

/// Creates a key on the API keys page and returns its secret (shown once).
export async function createKey(page: Page, name: string): Promise<string> {
  await page.goto("/api-keys");
  await page.getByLabel("Name").fill(name);
  await page.getByRole("button", { name: "Create key" }).click();
  return page.getByTestId("new-key-secret").inputValue();
}

export async function mcpClient(key: string, name = "workbench-e2e"): Promise<Client> {
  const client = new Client({ name, version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(`${baseURL}/mcp`), {
    requestInit: { headers: { Authorization: `Bearer ${key}` } },
  });
  await client.connect(transport);
  return client;
}

export function structured(result: unknown): any {
  return (result as { structuredContent: unknown }).structuredContent;
}
