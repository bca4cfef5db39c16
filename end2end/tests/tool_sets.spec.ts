// Tool sets in a real browser: an admin builds a set on the Tool sets page (one tool per line,
// one renamed), the page shows its endpoint and a client configuration, and an agent on the
// official MCP TypeScript SDK, with a key limited to the set, lists exactly its tools there and
// calls one; the same key is refused on /mcp.
import { test, expect } from "@playwright/test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { baseURL } from "../playwright.config";
import { createKey, mcpClient, signIn } from "./helpers";

test("a tool set built on the Tool sets page is what an SDK client sees at its endpoint", async ({ page }) => {
  await signIn(page);
  const admin = await createKey(page, "tool sets e2e");

  await page.goto("/tool-sets");
  const form = page.getByTestId("tool-set-form").first();
  await form.getByLabel("Slug (its address)").fill("e2e-desk");
  await form.getByLabel("Name").fill("E2E desk");
  await form.getByLabel("Description (the endpoint's instructions to the model)").fill("Keep notes for the desk.");
  await form.getByLabel("Tools").fill("storage.put as save_note\nstorage.get");
  await form.getByRole("button", { name: "Create tool set" }).click();

  const card = page.locator('[data-testid="tool-set"][data-slug="e2e-desk"]');
  await expect(card).toBeVisible();
  await expect(card.getByTestId("tool-set-endpoint")).toHaveText(`${baseURL}/mcp/sets/e2e-desk`);
  await expect(card.getByTestId("tool-set-tool")).toHaveCount(2);
  await card.getByText("Client configuration").click();
  await expect(card.getByTestId("tool-set-config")).toContainText(`"url": "${baseURL}/mcp/sets/e2e-desk"`);

  // A key limited to the set.
  const res = await fetch(`${baseURL}/v1/api-keys`, {
    method: "POST",
    headers: { Authorization: `Bearer ${admin}`, "Content-Type": "application/json" },
    body: JSON.stringify({ name: "desk agent", tool_sets: ["e2e-desk"] }),
  });
  expect(res.status).toBe(201);
  const key = (await res.json()).key as string;

  const client = new Client({ name: "workbench-tool-set-e2e", version: "1.0.0" });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${baseURL}/mcp/sets/e2e-desk`), {
      requestInit: { headers: { Authorization: `Bearer ${key}` } },
    }),
  );
  expect(client.getServerVersion()?.name).toBe("workbench: E2E desk");
  expect(client.getInstructions()).toBe("Keep notes for the desk.");
  const { tools } = await client.listTools();
  expect(tools.map((t) => t.name)).toEqual(["save_note", "storage.get"]);
  const saved = await client.callTool({ name: "save_note", arguments: { key: "desk-note", content: "from a set" } });
  expect(saved.isError).toBeFalsy();
  const read = await client.callTool({ name: "storage.get", arguments: { key: "desk-note" } });
  expect((read.structuredContent as { content: string }).content).toBe("from a set");
  const outside = await client.callTool({ name: "execute_tools", arguments: { executions: [] } });
  expect(outside.isError).toBe(true);
  await client.close();

  // The limited key has no business on /mcp.
  await expect(mcpClient(key, "workbench-tool-set-outside")).rejects.toThrow();
});
