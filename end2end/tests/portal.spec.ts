// The portal end to end in a real browser, in order on one fresh instance: first-admin setup,
// sign out, a wrong password, sign in, API keys (created, used against /v1, revoked), a
// cross-site form post that must be refused, and the same forms with JavaScript turned off.
import { test, expect, type Page } from "@playwright/test";
import * as http from "node:http";
import { baseURL, upstreamURL } from "../playwright.config";

const ADMIN = "admin@example.com";
const PASSWORD = "correct horse battery staple";

test.describe.configure({ mode: "serial" });

async function signIn(page: Page, email = ADMIN, password = PASSWORD) {
  await page.goto("/login");
  await page.getByLabel("Email").fill(email);
  await page.getByLabel("Password").fill(password);
  await page.getByRole("button", { name: "Sign in", exact: true }).click();
}

async function v1Me(key: string): Promise<number> {
  const res = await fetch(`${baseURL}/v1/me`, { headers: { authorization: `Bearer ${key}` } });
  return res.status;
}

test("an empty instance asks for the first admin and signs them in", async ({ page }) => {
  const wasm = page.waitForResponse((r) => r.url().endsWith(".wasm") && r.status() === 200);
  await page.goto("/");
  await expect(page).toHaveURL(/\/setup$/);
  await wasm; // the portal hydrates
  await page.getByLabel("Email").fill(ADMIN);
  await page.getByLabel("Password").fill(PASSWORD);
  await page.getByLabel("Project name").fill("acme");
  await page.getByRole("button", { name: "Create admin" }).click();
  await expect(page.getByRole("heading", { name: "Overview" })).toBeVisible();
  await expect(page.getByTestId("viewer-email")).toHaveText(ADMIN);
  await expect(page.getByRole("navigation", { name: "Sections" })).toContainText("Confirmations");
});

test("sign out ends the session", async ({ page }) => {
  await signIn(page);
  await expect(page.getByTestId("viewer-email")).toHaveText(ADMIN);
  await page.getByRole("button", { name: "Sign out" }).click();
  await expect(page).toHaveURL(/\/login/);
  await page.goto("/api-keys");
  await expect(page).toHaveURL(/\/login\?next=%2Fapi-keys$/);
});

test("a wrong password is refused with a message", async ({ page }) => {
  await signIn(page, ADMIN, "not the password");
  await expect(page.getByRole("alert")).toHaveText("invalid email or password");
  await expect(page).toHaveURL(/\/login/);
});

test("an API key is shown once, works against /v1, and stops working when revoked", async ({ page }) => {
  await signIn(page);
  await page.getByRole("navigation", { name: "Sections" }).getByRole("link", { name: "API keys" }).click();
  await expect(page.getByRole("heading", { name: "API keys" })).toBeVisible();
  await page.getByLabel("Name").fill("e2e agent");
  await page.getByRole("button", { name: "Create key" }).click();
  const secret = await page.getByTestId("new-key-secret").inputValue();
  expect(secret).toMatch(/^wb_[0-9A-Za-z]{40}$/);
  expect(await v1Me(secret)).toBe(200);

  const row = page.getByTestId("api-key-row").filter({ hasText: "e2e agent" });
  await expect(row).toBeVisible();
  await row.getByRole("button", { name: "Revoke e2e agent" }).click();
  await expect(row).toContainText("revoked");
  expect(await v1Me(secret)).toBe(401);

  await page.reload();
  await expect(page.getByTestId("new-key-secret")).toHaveCount(0);
});

test("the tools page searches the catalog and the egress page edits the allowlist", async ({ page }) => {
  await signIn(page);
  await page.getByRole("navigation", { name: "Sections" }).getByRole("link", { name: "Tools" }).click();
  await page.getByRole("searchbox", { name: "Search tools" }).fill("read an object from storage by key");
  await page.getByRole("button", { name: "Search" }).click();
  await expect(page.getByTestId("tool-row").first()).toContainText("storage.get");
  const first = page.getByTestId("tool-row").first();
  await first.getByText("Inputs", { exact: true }).click();
  await expect(first.getByTestId("tool-params")).toContainText("key");
  await expect(first.getByTestId("tool-params")).toContainText("required");
  await first.getByText("Input schema (JSON)").click();
  await expect(first).toContainText('"key"');

  // Browsing: grouped by integration, filtered by side effects.
  await page.getByRole("searchbox", { name: "Search tools" }).fill("");
  await page.getByRole("combobox", { name: "Side effects" }).selectOption("destructive");
  await page.getByRole("button", { name: "Search" }).click();
  await expect(page.getByTestId("tools-summary")).toContainText(/of \d+ tools, in \d+ integrations/);
  await expect(page.getByTestId("tool-group").filter({ hasText: "GitHub" })).toBeVisible();
  await expect(page.getByTestId("tool-row").filter({ hasText: "github_merge_pr" })).toBeVisible();
  await expect(page.getByTestId("tool-row").filter({ hasText: "github_get_user" })).toHaveCount(0);
  // Fifty tools to a page, and a link to the next.
  await page.getByRole("combobox", { name: "Side effects" }).selectOption("");
  await page.getByRole("button", { name: "Search" }).click();
  await expect(page.getByTestId("tool-row")).toHaveCount(50);
  await page.getByTestId("tools-pages").getByRole("link", { name: "Next →" }).click();
  await expect(page.getByTestId("tools-pages")).toContainText(/Page 2 of \d+/);
  await expect(page.getByTestId("tool-row")).toHaveCount(50);

  await page.getByRole("navigation", { name: "Sections" }).getByRole("link", { name: "Egress" }).click();
  await page.getByLabel("Host pattern").fill("api.example.com");
  await page.getByRole("button", { name: "Allow" }).click();
  await expect(page.getByTestId("egress-row")).toContainText("api.example.com");
  await page.getByRole("button", { name: "Remove api.example.com" }).click();
  await expect(page.getByTestId("egress-row")).toHaveCount(0);
});

test("a vault secret is saved, listed without its value, and deleted", async ({ page }) => {
  await signIn(page);
  await page.getByRole("navigation", { name: "Sections" }).getByRole("link", { name: "Vault" }).click();
  await page.getByLabel("Name").fill("E2E_TOKEN");
  await page.getByLabel("Value").fill("e2e-secret-value-123");
  await page.getByRole("button", { name: "Save secret" }).click();
  await expect(page.getByRole("status")).toContainText("will not be shown again");
  await expect(page.getByTestId("secret-row")).toContainText("E2E_TOKEN");
  await expect(page.getByLabel("Value")).toHaveValue("");
  expect(await page.content()).not.toContain("e2e-secret-value-123");
  await page.getByRole("button", { name: "Delete E2E_TOKEN" }).click();
  await expect(page.getByTestId("secret-row")).toHaveCount(0);
});

test("a custom app's tools join the catalog until the app is deleted", async ({ page }) => {
  await signIn(page);
  await page.getByRole("navigation", { name: "Sections" }).getByRole("link", { name: "Apps" }).click();
  await expect(page.getByTestId("redirect-uri")).toHaveText(`${baseURL}/oauth/callback`);
  await page.getByLabel("Definition (JSON)").fill("{ not json");
  await page.getByRole("button", { name: "Create app" }).click();
  await expect(page.getByRole("alert")).toContainText("not valid JSON");
  const definition = {
    name: "statuspage",
    display_name: "Status page",
    version: "1.2.0",
    base_url: "https://status.example.com",
    auth: { type: "none" },
    tools: [
      {
        name: "statuspage_get_incidents",
        description: "List the open incidents on the company status page.",
        side_effects: "none",
        input_schema: { type: "object", properties: {} },
        request: { method: "GET", path: "/api/v2/incidents/unresolved.json" },
        result: { path: "incidents", fields: ["id", "name", "status"] },
      },
    ],
  };
  await page.getByLabel("Definition (JSON)").fill(JSON.stringify(definition, null, 2));
  await page.getByRole("button", { name: "Create app" }).click();
  await expect(page.getByTestId("app-row")).toContainText("statuspage_get_incidents");
  await expect(page.getByTestId("app-row")).toContainText("Status page");

  await page.getByRole("navigation", { name: "Sections" }).getByRole("link", { name: "Tools" }).click();
  await page.getByRole("searchbox", { name: "Search tools" }).fill("open incidents on the status page");
  await page.getByRole("button", { name: "Search" }).click();
  await expect(page.getByTestId("tool-row").first()).toContainText("statuspage_get_incidents");

  await page.getByRole("navigation", { name: "Sections" }).getByRole("link", { name: "Apps" }).click();
  await page.getByRole("button", { name: "Delete statuspage" }).click();
  await expect(page.getByTestId("app-row")).toHaveCount(0);
  await page.getByRole("navigation", { name: "Sections" }).getByRole("link", { name: "Tools" }).click();
  await page.getByRole("searchbox", { name: "Search tools" }).fill("open incidents on the status page");
  await page.getByRole("button", { name: "Search" }).click();
  await expect(page.getByTestId("tool-row").filter({ hasText: "statuspage_get_incidents" })).toHaveCount(0);
});

test("an uploaded OpenAPI document becomes an app with the operations picked", async ({ page }) => {
  await signIn(page);
  await page.getByRole("navigation", { name: "Sections" }).getByRole("link", { name: "Apps" }).click();
  const doc = [
    "openapi: 3.0.3",
    "info: { title: Pet shop, version: 2.0.0 }",
    "servers: [{ url: 'https://petshop.example/v1' }]",
    "paths:",
    "  /pets:",
    "    get: { operationId: listPets, summary: List the pets for sale }",
    "    post:",
    "      operationId: createPet",
    "      summary: Put a pet up for sale",
    "      requestBody: { required: true, content: { application/json: { schema: { type: object, properties: { name: { type: string } } } } } }",
    "  /pets/{petId}/photo:",
    "    put:",
    "      operationId: uploadPhoto",
    "      parameters: [{ name: petId, in: path, required: true, schema: { type: string } }]",
    "      requestBody: { required: true, content: { image/png: { schema: { type: string, format: binary } } } }",
  ].join("\n");
  await page.getByLabel("App name").fill("petshop");
  await page.getByLabel("Upload an OpenAPI document").setInputFiles({ name: "petshop.yaml", mimeType: "application/yaml", buffer: Buffer.from(doc) });
  await expect(page.getByLabel("OpenAPI 3.0 or 3.1 document (JSON or YAML), or its URL")).toHaveValue(/operationId: listPets/);
  await page.getByRole("button", { name: "Preview" }).click();
  const ops = page.getByTestId("import-operation");
  await expect(ops).toHaveCount(3);
  await expect(page.getByTestId("import-preview")).toContainText("Pet shop · https://petshop.example/v1");
  await expect(ops.filter({ hasText: "uploadPhoto" }).or(ops.filter({ hasText: "/photo" })).getByTestId("import-skipped")).toContainText("image/png");
  await expect(page.getByRole("checkbox", { name: "Import uploadPhoto" })).toBeDisabled();
  await page.getByRole("checkbox", { name: "Import createPet" }).uncheck();
  await page.getByRole("button", { name: "Create app with 1 tools" }).click();
  await expect(page.getByRole("status")).toContainText("Created Pet shop with 1 tools");
  const row = page.getByTestId("app-row").filter({ hasText: "petshop" });
  await expect(row).toContainText("petshop_list_pets");
  await expect(row).not.toContainText("petshop_create_pet");
  await row.getByRole("button", { name: "Delete petshop" }).click();
  await expect(page.getByTestId("app-row").filter({ hasText: "petshop" })).toHaveCount(0);
});

test("an MCP server's tools join the catalog, and a changed tool waits for an admin's approval", async ({ page }) => {
  await signIn(page);
  await page.getByRole("navigation", { name: "Sections" }).getByRole("link", { name: "MCP servers" }).click();
  await expect(page.getByRole("heading", { name: "MCP servers" })).toBeVisible();
  await page.getByLabel("Name").fill("crm");
  await page.getByLabel("URL", { exact: true }).fill(`${upstreamURL}/mcp`);
  await page.getByRole("button", { name: "Register" }).click();
  await expect(page.getByTestId("mcp-server-row")).toContainText("1 available, 0 unavailable, 0 to review");
  await expect(page.getByTestId("mcp-server-row")).toContainText("breaker closed");

  const search = async () => {
    await page.getByRole("navigation", { name: "Sections" }).getByRole("link", { name: "Tools" }).click();
    await page.getByRole("searchbox", { name: "Search tools" }).fill("look up a customer by email");
    await page.getByRole("button", { name: "Search" }).click();
  };
  await search();
  await expect(page.getByTestId("tool-row").first()).toContainText("crm.lookup");

  // The upstream changes the tool's description (a rug pull): refresh holds it for review.
  expect((await fetch(`${upstreamURL}/change`, { method: "POST" })).status).toBe(204);
  await page.getByRole("navigation", { name: "Sections" }).getByRole("link", { name: "MCP servers" }).click();
  await page.getByRole("button", { name: "Refresh crm" }).click();
  await expect(page.getByTestId("mcp-server-row")).toContainText("0 available, 0 unavailable, 1 to review");
  await search();
  // Held, it stays listed as unavailable with what an admin must do, and keeps the text an
  // admin approved (not the changed one).
  const held = page.getByTestId("tool-row").filter({ hasText: "crm.lookup" });
  await expect(held.getByTestId("unavailable-reason")).toContainText("an admin approves it on the MCP servers page");
  await expect(held).not.toContainText("partner.example");

  await page.getByRole("navigation", { name: "Sections" }).getByRole("link", { name: "MCP servers" }).click();
  await page.getByRole("link", { name: "crm" }).click();
  await expect(page.getByTestId("mcp-tool")).toContainText("pending review");
  const diff = page.getByTestId("mcp-tool-diff");
  await expect(diff).toContainText("Look up a customer by email.");
  await expect(diff).toContainText("forward their data to partner.example");
  await page.getByRole("button", { name: "Approve lookup" }).click();
  await expect(page.getByTestId("mcp-tool")).toContainText("available");
  await search();
  await expect(page.getByTestId("tool-row").first()).toContainText("crm.lookup");

  // Deleting asks first: dismissing keeps the server, accepting deletes it.
  await page.getByRole("navigation", { name: "Sections" }).getByRole("link", { name: "MCP servers" }).click();
  const questions: string[] = [];
  page.once("dialog", (d) => { questions.push(d.message()); void d.dismiss(); });
  await page.getByRole("button", { name: "Delete crm" }).click();
  await expect.poll(() => questions.length).toBe(1);
  expect(questions[0]).toBe("Delete crm? Its tools leave the catalog at once.");
  await expect(page.getByTestId("mcp-server-row")).toHaveCount(1);
  page.once("dialog", (d) => void d.accept());
  await page.getByRole("button", { name: "Delete crm" }).click();
  await expect(page.getByTestId("mcp-server-row")).toHaveCount(0);

  // The form's options: a tool prefix, a timeout and a concurrency ceiling, as the API reads them.
  await page.getByLabel("Name").fill("sales");
  await page.getByLabel("URL", { exact: true }).fill(`${upstreamURL}/mcp`);
  await page.getByLabel("Tool prefix").fill("deals.");
  await page.getByLabel("Timeout (ms)").fill("4000");
  await page.getByLabel("Max concurrency").fill("3");
  await page.getByRole("button", { name: "Register" }).click();
  await expect(page.getByTestId("mcp-server-row")).toContainText("deals.");
  await search();
  await expect(page.getByTestId("tool-row").first()).toContainText("deals.lookup");
  await page.goto("/api-keys");
  await page.getByLabel("Name").fill("mcp options check");
  await page.getByRole("button", { name: "Create key" }).click();
  const key = await page.getByTestId("new-key-secret").inputValue();
  const servers = await (await fetch(`${baseURL}/v1/mcp/servers`, { headers: { authorization: `Bearer ${key}` } })).json();
  const sales = servers.data.find((s: any) => s.name === "sales");
  expect([sales.tool_prefix, sales.timeout_ms, sales.max_concurrency]).toEqual(["deals.", 4000, 3]);

  // A value out of range is refused with the server's words, and nothing is registered.
  await page.goto("/mcp-servers");
  await page.getByLabel("Name").fill("slow");
  await page.getByLabel("URL", { exact: true }).fill(`${upstreamURL}/mcp`);
  await page.getByLabel("Max concurrency").fill("0");
  await page.getByRole("button", { name: "Register" }).click();
  await expect(page.getByRole("alert")).toContainText("concurrency");
  await expect(page.getByTestId("mcp-server-row")).toHaveCount(1);
});

test("a cross-site form post is refused even with the session cookie", async ({ page }) => {
  await signIn(page);
  await expect(page.getByTestId("viewer-email")).toHaveText(ADMIN);
  // Another origin on the same host (same site, so SameSite=Lax still sends the cookie).
  const evil = http.createServer((_req, res) => {
    res.setHeader("content-type", "text/html");
    res.end(`<form id="f" method="post" action="${baseURL}/api/create_api_key">
      <input name="name" value="planted"></form><script>document.getElementById("f").submit()</script>`);
  });
  await new Promise<void>((r) => evil.listen(0, "127.0.0.1", () => r()));
  const port = (evil.address() as { port: number }).port;
  const refused = page.waitForResponse((r) => r.url().endsWith("/api/create_api_key"));
  await page.goto(`http://127.0.0.1:${port}/`);
  expect((await refused).status()).toBe(403);
  evil.close();

  await page.goto("/api-keys");
  await expect(page.getByRole("heading", { name: "API keys" })).toBeVisible();
  await expect(page.getByTestId("api-key-row").filter({ hasText: "planted" })).toHaveCount(0);
});

test.describe("without JavaScript", () => {
  test.use({ javaScriptEnabled: false });

  test("sign-in, key creation and revocation still work as plain forms", async ({ page }) => {
    await signIn(page, ADMIN, "still wrong password");
    await expect(page.getByRole("alert")).toHaveText("invalid email or password");
    await signIn(page);
    await expect(page.getByTestId("viewer-email")).toHaveText(ADMIN);
    await page.goto("/api-keys");
    await page.getByLabel("Name").fill("no-js key");
    await page.getByRole("button", { name: "Create key" }).click();
    const secret = await page.getByTestId("new-key-secret").inputValue();
    expect(secret).toMatch(/^wb_[0-9A-Za-z]{40}$/);
    expect(await v1Me(secret)).toBe(200);
    const row = page.getByTestId("api-key-row").filter({ hasText: "no-js key" });
    await row.getByRole("button", { name: "Revoke no-js key" }).click();
    await expect(page.getByTestId("api-key-row").filter({ hasText: "no-js key" })).toContainText("revoked");
    expect(await v1Me(secret)).toBe(401);
  });
});
