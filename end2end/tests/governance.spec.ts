// Policies and human confirmations with real parts: an agent on the official MCP TypeScript
// SDK, under a policy that gates storage.put, gets AWAITING_CONFIRMATION with a link; a person
// opens the link in the browser, approves, and the agent's identical call gets the result. A
// denied call, and a policy edit that changes what search_tools shows the agent's key. A
// scheduled callback delivered to a receiver that checks its signature, and the Callbacks page.
// A sender domain proven on the Email page through DNS, then an agent's email.send arriving at
// an SMTP server.
import { test, expect } from "@playwright/test";
import { createHmac } from "node:crypto";
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import { baseURL, mailControlURL } from "../playwright.config";
import { createKey, mcpClient, signIn, structured } from "./helpers";

test.describe.configure({ mode: "serial" });

async function rest(key: string, method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(`${baseURL}${path}`, {
    method,
    headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: await res.json().catch(() => null) };
}

test("a held call is approved in the browser and the agent's identical call gets the result", async ({ page }) => {
  await signIn(page);
  const admin = await createKey(page, "governance e2e");
  const policy = await rest(admin, "POST", "/v1/policies", {
    name: "careful agent",
    tool_allowlist: { mode: "open", require_confirmation: ["storage.put"] },
  });
  expect(policy.status).toBe(201);
  const key = await rest(admin, "POST", "/v1/api-keys", { name: "careful agent", policy_id: policy.body.id });
  expect(key.status).toBe(201);
  const agent = await mcpClient(key.body.key, "workbench-governance-e2e");

  const put = { executions: [{ tool: "storage.put", args: { key: "e2e-report", content: "approved in a browser" } }] };
  const held = structured(await agent.callTool({ name: "execute_tools", arguments: put })).results[0];
  expect(held.code).toBe("AWAITING_CONFIRMATION");
  expect(held.url).toBe(`${baseURL}/confirmations/${held.confirmation_id}`);

  // The navigation counts it; the link opens the held call with its arguments.
  await page.goto("/confirmations");
  await expect(page.getByTestId("pending-count")).toHaveText("1");
  await expect(page.getByTestId("pending").getByTestId("confirmation")).toHaveCount(1);
  await page.goto(held.url);
  const card = page.getByTestId("confirmation");
  await expect(card).toContainText("storage.put");
  await expect(card.getByTestId("confirmation-arguments")).toContainText("approved in a browser");
  await card.getByLabel("Reason (optional)").fill("checked by a person");
  await card.getByTestId("approve").click();
  await expect(page.getByTestId("confirmation-status")).toHaveText("approved");

  const again = structured(await agent.callTool({ name: "execute_tools", arguments: put })).results[0];
  expect(again.result.key).toBe("e2e-report");
  const read = structured(await agent.callTool({ name: "execute_tools", arguments: { executions: [{ tool: "storage.get", args: { key: "e2e-report" } }] } })).results[0];
  expect(read.result.content).toBe("approved in a browser");

  // A denied call never runs, and the agent is told why.
  const other = { executions: [{ tool: "storage.put", args: { key: "e2e-denied", content: "no" } }] };
  const second = structured(await agent.callTool({ name: "execute_tools", arguments: other })).results[0];
  expect(second.code).toBe("AWAITING_CONFIRMATION");
  await page.goto(second.url);
  await page.getByTestId("deny").click();
  await expect(page.getByTestId("confirmation-status")).toHaveText("denied");
  const refused = structured(await agent.callTool({ name: "execute_tools", arguments: other })).results[0];
  expect(refused.code).toBe("NOT_ALLOWED");
  await page.goto("/confirmations");
  await expect(page.getByTestId("no-pending")).toBeVisible();
  await expect(page.getByTestId("history").getByTestId("confirmation")).toHaveCount(2);

  // Editing the policy on the Policies page changes what search_tools returns for the key, and
  // the preview shows the deciding rule.
  const before = structured(await agent.callTool({ name: "search_tools", arguments: { query: "fetch a web page over http", limit: 50 } }));
  expect(before.tools.map((t: any) => t.name)).toContain("http.fetch");
  await page.goto("/policies");
  const policyCard = page.locator(`[data-testid=policy][data-id="${policy.body.id}"]`);
  await policyCard.getByLabel("Deny (wins)").fill("http.*");
  await policyCard.getByRole("button", { name: "Save" }).click();
  await expect(policyCard.getByLabel("Deny (wins)")).toHaveValue("http.*");
  const after = structured(await agent.callTool({ name: "search_tools", arguments: { query: "fetch a web page over http", limit: 50 } }));
  expect(after.tools.map((t: any) => t.name)).not.toContain("http.fetch");
  await page.getByLabel("API key").selectOption(key.body.id);
  await page.getByRole("button", { name: "Preview" }).click();
  const fetchRow = page.getByTestId("preview-row").filter({ hasText: "http.fetch" });
  await expect(fetchRow).toHaveAttribute("data-decision", "denied");
  await expect(fetchRow).toContainText("deny: http.*");
  await expect(page.getByTestId("preview-row").filter({ hasText: "storage.put" })).toHaveAttribute("data-decision", "confirm");

  // Patterns are checked as they are typed, with the server's own rules.
  const newForm = page.getByTestId("policy-form").first();
  await newForm.getByLabel("Deny (wins)").fill("http.*\nbad*pattern\nnosuch.tool");
  await expect(newForm.getByTestId("pattern-problem")).toContainText("'*' that is not at the end");
  await expect(newForm.getByTestId("pattern-unmatched")).toContainText("nosuch.tool");
  await newForm.getByLabel("Deny (wins)").fill("http.*");
  await expect(newForm.getByTestId("pattern-problem")).toHaveCount(0);

  // The audit log links each row to its detail: the approved call names its confirmation and
  // who decided.
  await page.goto("/audit?tool=storage.put&status=succeeded");
  await page.getByTestId("audit-detail-link").last().click();
  await expect(page.getByTestId("detail-status")).toHaveText("succeeded");
  await expect(page.getByTestId("detail-confirmation")).toHaveText(held.confirmation_id);
  await expect(page.getByTestId("detail-reason")).toHaveText("checked by a person");
  await expect(page.getByTestId("detail-arguments")).toContainText("approved in a browser");

  // The Usage page draws the calls made above (server-rendered SVG).
  await page.goto("/usage");
  await expect(page.getByTestId("calls-chart").locator("rect").first()).toBeVisible();
  await expect(page.getByTestId("top-tool")).toContainText("storage.put");
  await agent.close();
});

test("an agent's scheduled callback arrives signed, and the Callbacks page shows and cancels them", async ({ page }) => {
  // A receiver on loopback (the server runs with --egress-allow-private 127.0.0.1).
  const got: { headers: http.IncomingHttpHeaders; body: string }[] = [];
  const receiver = http.createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      got.push({ headers: req.headers, body });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((ok) => receiver.listen(0, "127.0.0.1", () => ok()));
  const port = (receiver.address() as AddressInfo).port;

  await signIn(page);
  await page.goto("/egress");
  await page.getByLabel("Host pattern").fill(`127.0.0.1:${port}`);
  await page.getByRole("button", { name: "Allow" }).click();
  await expect(page.getByTestId("egress-row").filter({ hasText: `127.0.0.1:${port}` })).toHaveCount(1);

  const key = await createKey(page, "callbacks e2e");
  const agent = await mcpClient(key, "workbench-callbacks-e2e");
  const call = (args: unknown) => agent.callTool({ name: "execute_tools", arguments: { executions: [{ tool: "schedule.callback", args }] } });
  const soon = structured(await call({ url: `http://127.0.0.1:${port}/wake`, delay_seconds: 1, payload: { task: "follow up" } })).results[0];
  expect(soon.result.id).toMatch(/^sched_/);
  const later = structured(await call({ url: `http://127.0.0.1:${port}/later`, delay_seconds: 3600 })).results[0];
  await expect.poll(() => got.length, { timeout: 15_000 }).toBe(1);
  await agent.close();

  // The page lists both; the delivered one with its delivery.
  await page.goto("/callbacks");
  const delivered = page.locator(`[data-testid="callback"][data-id="${soon.result.id}"]`);
  await expect(delivered.getByTestId("callback-status")).toHaveText("delivered");
  await expect(delivered.getByTestId("delivery")).toContainText("204");
  // The receiver checks the signature with the secret the page shows admins.
  await page.getByTestId("reveal-signing-secret").click();
  const secret = (await page.getByTestId("signing-secret").textContent())!.trim();
  const [t, v1] = String(got[0].headers["workbench-signature"]).split(",").map((p) => p.split("=")[1]);
  expect(createHmac("sha256", secret).update(`${t}.${got[0].body}`).digest("hex")).toBe(v1);
  expect(got[0].headers["workbench-event-id"]).toBe(soon.result.id);
  expect(JSON.parse(got[0].body).payload).toEqual({ task: "follow up" });

  const waiting = page.locator(`[data-testid="callback"][data-id="${later.result.id}"]`);
  await waiting.getByTestId("cancel-callback").click();
  await expect(waiting.getByTestId("callback-status")).toHaveText("cancelled");
  receiver.close();
});

test("a sender domain is proven on the Email page and an agent's message arrives over SMTP", async ({ page }) => {
  await signIn(page);
  await page.goto("/email");
  await page.getByLabel("Sender domain").fill("Example.org");
  await page.getByRole("button", { name: "Add domain" }).click();
  const row = page.getByTestId("email-domain-row").filter({ hasText: "example.org" });
  await expect(row.getByTestId("record-name")).toHaveText("_workbench.example.org");
  const value = (await row.getByTestId("record-value").textContent())!.trim();
  expect(value).toMatch(/^workbench-verification=/);

  // Verifying before the record exists says so; after publishing it, the domain is ready.
  await row.getByRole("button", { name: "Verify example.org" }).click();
  await expect(page.getByRole("alert")).toContainText("no TXT record at _workbench.example.org");
  await expect(row).toContainText("Last check: no TXT record");
  const published = await fetch(`${mailControlURL}/txt`, { method: "POST", body: JSON.stringify({ name: "_workbench.example.org", value }) });
  expect(published.status).toBe(204);
  await row.getByRole("button", { name: "Verify example.org" }).click();
  await expect(row).toContainText("verified");
  await expect(row.getByTestId("record-name")).toHaveCount(0);

  const key = await createKey(page, "email e2e");
  const agent = await mcpClient(key, "workbench-email-e2e");
  const out = structured(
    await agent.callTool({
      name: "execute_tools",
      arguments: { executions: [{ tool: "email.send", args: { from: "Reports <reports@example.org>", to: ["ann@example.com"], bcc: ["audit@example.com"], subject: "Weekly report", text: "All green." } }] },
    }),
  ).results[0];
  await agent.close();
  expect(out.result.accepted).toEqual(["ann@example.com", "audit@example.com"]);
  const messages = await (await fetch(`${mailControlURL}/messages`)).json();
  expect(messages).toHaveLength(1);
  expect(messages[0].from).toBe("reports@example.org");
  expect(messages[0].to).toEqual(["ann@example.com", "audit@example.com"]);
  expect(messages[0].data).toContain("Subject: Weekly report");
  expect(messages[0].data).toContain(`Message-ID: ${out.result.message_id}`);
  expect(messages[0].data).not.toContain("audit@example.com");

  await page.goto("/email");
  await expect(page.getByTestId("email-status")).toHaveText("1 of 100 messages sent in the last hour.");
});

test("a policy is created, made the default for keys without one, and deleted on the Policies page", async ({ page }) => {
  await signIn(page);
  const plain = await createKey(page, "plain agent");
  const agent = await mcpClient(plain, "plain-agent");
  const names = async () =>
    structured(await agent.callTool({ name: "search_tools", arguments: { query: "fetch a web page over http", limit: 50 } })).tools.map((t: any) => t.name);
  expect(await names()).toContain("http.fetch");

  await page.goto("/policies");
  const form = page.getByTestId("policy-form").first();
  await form.getByLabel("Name").fill("no fetching");
  await form.getByLabel("Mode").selectOption("open");
  await form.getByLabel("Deny (wins)").fill("http.fetch");
  await form.getByLabel("Default: applies to keys without a policy of their own").check();
  await form.getByRole("button", { name: "Create policy" }).click();
  const card = page.getByTestId("policy").filter({ has: page.getByRole("heading", { name: "no fetching" }) });
  await expect(card).toContainText("default");
  expect(await names()).not.toContain("http.fetch");

  // Unchecking the default on its card lets keys without a policy run everything again.
  await card.getByLabel("Default: applies to keys without a policy of their own").uncheck();
  await card.getByRole("button", { name: "Save" }).click();
  await expect(card.getByText("default", { exact: true })).toHaveCount(0);
  expect(await names()).toContain("http.fetch");

  await card.getByLabel("Default: applies to keys without a policy of their own").check();
  await card.getByRole("button", { name: "Save" }).click();
  await expect(card.getByText("default", { exact: true })).toBeVisible();
  expect(await names()).not.toContain("http.fetch");
  await card.getByRole("button", { name: "Delete no fetching" }).click();
  await expect(page.getByTestId("policy").filter({ has: page.getByRole("heading", { name: "no fetching" }) })).toHaveCount(0);
  expect(await names()).toContain("http.fetch");
  await agent.close();
});

test("a limit written on the Policies page stops an agent's calls over it, and Usage shows the refusal", async ({ page }) => {
  await signIn(page);
  const admin = await createKey(page, "limits e2e admin");
  await page.goto("/policies");
  const form = page.getByTestId("policy-form").first();
  await form.getByLabel("Name").fill("two reads a month");
  await form.getByLabel("Mode").selectOption("open");
  // A line that is not a limit is refused with what to write instead; nothing is stored.
  await form.getByLabel("Rate limits and quotas").fill("2 calls per fortnight per key");
  await form.getByRole("button", { name: "Create policy" }).click();
  await expect(page.getByText("is not a period")).toBeVisible();
  await expect(page.getByTestId("policy").filter({ has: page.getByRole("heading", { name: "two reads a month" }) })).toHaveCount(0);
  await form.getByLabel("Name").fill("two reads a month");
  await form.getByLabel("Mode").selectOption("open");
  await form.getByLabel("Rate limits and quotas").fill("2 calls per month per key on storage.get");
  await form.getByRole("button", { name: "Create policy" }).click();
  const card = page.getByTestId("policy").filter({ has: page.getByRole("heading", { name: "two reads a month" }) });
  await expect(card.getByLabel("Rate limits and quotas")).toHaveValue("2 calls per month per key on storage.get");
  const policyId = await card.getAttribute("data-id");

  const key = await rest(admin, "POST", "/v1/api-keys", { name: "limited reader", policy_id: policyId });
  expect(key.status).toBe(201);
  const agent = await mcpClient(key.body.key, "workbench-limits-e2e");
  const get = { executions: [{ tool: "storage.get", args: { key: "e2e-report" } }] };
  for (let i = 0; i < 2; i++) {
    const ran = structured(await agent.callTool({ name: "execute_tools", arguments: get })).results[0];
    expect(ran.code).not.toBe("RATE_LIMITED");
  }
  const refused = structured(await agent.callTool({ name: "execute_tools", arguments: get })).results[0];
  expect(refused.code).toBe("RATE_LIMITED");
  expect(refused.limit).toBe("2 calls per month per key on storage.get");
  expect(refused.policy_id).toBe(policyId);
  expect(refused.retry_after_s).toBeGreaterThan(0);
  // Other tools are not under it.
  const other = structured(await agent.callTool({ name: "execute_tools", arguments: { executions: [{ tool: "vault_list", args: {} }] } })).results[0];
  expect(other.code).toBeUndefined();
  await agent.close();

  await page.goto("/usage");
  const people = page.getByTestId("by-user");
  await expect(people).toBeVisible();
  const row = people.locator("tr").filter({ hasText: "@" }).first();
  await expect(row).toBeVisible();
  const cells = await row.locator("td").allTextContents();
  expect(Number(cells[3])).toBeGreaterThanOrEqual(1);

  // Tidy up: the key goes, then the policy.
  expect((await rest(admin, "DELETE", `/v1/api-keys/${key.body.id}`)).status).toBe(204);
  expect((await rest(admin, "DELETE", `/v1/policies/${policyId}`)).status).toBe(204);
});
