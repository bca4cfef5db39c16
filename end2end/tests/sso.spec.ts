// Single sign-on with a real OpenID Connect identity provider (oauth/idp.mjs, oidc-provider with
// its development login page): the admin sets up the Acme provider over REST (its client secret
// in the vault, the group eng mapped to member under a policy that allows one tool); alice of
// eng signs in through the provider, makes a key on the API keys page, and that key runs only
// what her group's policy allows. The SSO page lists the provider and previews a mapping;
// mallory of contractors is refused; after the provider rotates its signing key alice still signs
// in; alice, taken out of eng at the provider, is refused at her next sign-in and her key stops
// working at once.
import { test, expect, type Page } from "@playwright/test";
import { baseURL, idpURL } from "../playwright.config";
import { createKey, signIn } from "./helpers";

test.describe.configure({ mode: "serial" });

// What oauth/idp.mjs registers for workbench.
const CLIENT_ID = "wb-sso";
const CLIENT_SECRET = "wb-sso-secret-0123456789abcdef";
const REDIRECT_URI = `${baseURL}/sso/acme/callback`;
// The one tool eng's policy allows, and one it does not.
const ALLOWED = "storage.get";
const REFUSED = "storage.put";
const NOTE = "sso-e2e-note";

// Shared by the tests below, in order.
let adminKey = "";
let policyId = "";
let aliceKey = "";

async function rest(key: string, method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(`${baseURL}${path}`, {
    method,
    headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: await res.json().catch(() => null) };
}

function invoke(key: string, tool: string, args: Record<string, unknown>) {
  return rest(key, "POST", "/v1/tools/invoke", { tool, arguments: args });
}

/**
 * From the login page through "Sign in with Acme" and the provider's login page as `login`, back
 * to workbench: signed in, or on the login page with the refusal. While the provider's own
 * session lasts it may skip its login page, and a consent page may follow the login.
 */
async function ssoSignIn(page: Page, login: string) {
  await page.goto("/login");
  await page.getByTestId("sso-acme").click();
  const idpLogin = page.locator("input[name=login]");
  const back = page.getByTestId("viewer-email").or(page.getByTestId("sso-error"));
  await expect(idpLogin.or(back).first()).toBeVisible({ timeout: 20_000 });
  if (await idpLogin.isVisible()) {
    expect(page.url().startsWith(`${idpURL}/interaction/`)).toBe(true);
    await idpLogin.fill(login);
    await page.locator("input[name=password]").fill("any password");
    await page.getByRole("button", { name: "Sign-in" }).click();
    const consent = page.getByRole("button", { name: "Continue" });
    await expect(consent.or(back).first()).toBeVisible({ timeout: 20_000 });
    if (page.url().startsWith(`${idpURL}/`) && (await consent.isVisible())) {
      await consent.click();
    }
  }
  await expect(back.first()).toBeVisible({ timeout: 20_000 });
  expect(page.url().startsWith(`${baseURL}/`)).toBe(true);
}

async function setGroups(login: string, groups: string[]) {
  const res = await fetch(`${idpURL}/control/groups/${login}`, { method: "POST", body: JSON.stringify(groups) });
  expect(res.status).toBe(204);
}

/** The key ids the provider publishes now (its discovery document's jwks_uri). */
async function publishedKids(): Promise<string[]> {
  const discovery = await (await fetch(`${idpURL}/.well-known/openid-configuration`)).json();
  const jwks = await (await fetch(discovery.jwks_uri)).json();
  return jwks.keys.map((k: { kid: string }) => k.kid);
}

test("the admin sets up Acme single sign-on over REST, the client secret in the vault", async ({ page }) => {
  await signIn(page);
  adminKey = await createKey(page, "sso e2e admin");

  // Something for the allowed tool to read.
  const put = await invoke(adminKey, "storage.put", { key: NOTE, content: "for the eng group" });
  expect(put.status).toBe(200);

  const policy = await rest(adminKey, "POST", "/v1/policies", {
    name: "eng reads notes",
    tool_allowlist: { mode: "allowlist", allow: [ALLOWED] },
  });
  expect(policy.status).toBe(201);
  policyId = policy.body.id;

  await page.goto("/vault");
  await page.getByLabel("Name").fill("OIDC_SECRET");
  await page.getByLabel("Value").fill(CLIENT_SECRET);
  await page.getByRole("button", { name: "Save secret" }).click();
  await expect(page.getByTestId("secret-row").filter({ hasText: "OIDC_SECRET" })).toHaveCount(1);

  const provider = {
    name: "Acme",
    issuer: idpURL,
    client_id: CLIENT_ID,
    client_secret_ref: "vault:OIDC_SECRET",
    scopes: ["openid", "email", "profile", "groups"],
    groups_claim: "groups",
    mappings: [{ group: "eng", role: "member", policy_id: policyId }],
    default_role: null,
  };
  const created = await rest(adminKey, "PUT", "/v1/sso/providers/acme", provider);
  expect(created.status).toBe(201);
  expect(created.body).toMatchObject({
    object: "sso_provider",
    slug: "acme",
    name: "Acme",
    issuer: idpURL,
    client_id: CLIENT_ID,
    client_secret_ref: "vault:OIDC_SECRET",
    groups_claim: "groups",
    mappings: [{ group: "eng", role: "member", policy_id: policyId }],
    default_role: null,
    redirect_uri: REDIRECT_URI,
  });
  expect(JSON.stringify(created.body)).not.toContain(CLIENT_SECRET);

  const list = await rest(adminKey, "GET", "/v1/sso/providers");
  expect(list.status).toBe(200);
  expect(list.body.data.map((p: any) => p.slug)).toContain("acme");
  expect(JSON.stringify(list.body)).not.toContain(CLIENT_SECRET);

  const eng = await rest(adminKey, "POST", "/v1/sso/providers/acme/preview", { groups: ["eng", "x"] });
  expect(eng.status).toBe(200);
  expect(eng.body).toMatchObject({ object: "sso_preview", signs_in: true, role: "member", policy_id: policyId, matched: "eng" });
  const contractors = await rest(adminKey, "POST", "/v1/sso/providers/acme/preview", { groups: ["contractors"] });
  expect(contractors.body).toMatchObject({ signs_in: false, role: null, policy_id: null });
});

test("alice of eng signs in through the identity provider, and her key runs only what eng may", async ({ page }) => {
  // A fresh browser: no workbench session, no session at the provider.
  await ssoSignIn(page, "alice");
  await expect(page.getByTestId("viewer-email")).toHaveText("alice@example.test");
  await expect(page.getByTestId("sso-error")).toHaveCount(0);

  aliceKey = await createKey(page, "alice agent");
  expect(aliceKey).toMatch(/^wb_/);
  const me = await rest(aliceKey, "GET", "/v1/me");
  expect(me.status).toBe(200);
  expect(me.body).toMatchObject({ email: "alice@example.test", role: "member", user_policy_id: policyId });

  // The key has no policy of its own: the policy her group gave her decides.
  const read = await invoke(aliceKey, ALLOWED, { key: NOTE });
  expect(read.status).toBe(200);
  expect(read.body.result.content).toBe("for the eng group");
  const write = await invoke(aliceKey, REFUSED, { key: "sso-e2e-refused", content: "no" });
  expect(write.status).toBe(403);
  expect(write.body.error.code).toBeTruthy();
  // It never ran.
  expect((await invoke(adminKey, ALLOWED, { key: "sso-e2e-refused" })).status).not.toBe(200);

  // A member does not manage sign-in providers.
  expect((await rest(aliceKey, "GET", "/v1/sso/providers")).status).toBe(403);
});

test("the SSO page shows the provider and its mapping, and previews who signs in as what", async ({ page }) => {
  await signIn(page);
  await page.goto("/sso");
  await page.waitForLoadState("networkidle"); // the portal hydrates before the preview is used
  const provider = page.getByTestId("sso-provider").filter({ hasText: "acme" });
  await expect(provider).toHaveCount(1);
  await expect(provider).toContainText(idpURL);
  await expect(provider).toContainText(REDIRECT_URI);
  const mapping = provider.getByTestId("sso-mapping");
  await expect(mapping).toHaveCount(1);
  await expect(mapping).toContainText("eng");
  await expect(mapping).toContainText("member");

  const groups = provider.getByTestId("sso-preview-groups");
  const result = provider.getByTestId("sso-preview-result");
  await groups.fill("eng");
  await provider.getByTestId("sso-preview").click();
  await expect(result).toContainText("member");
  await expect(result).toContainText("eng");
  await expect(result).not.toContainText("cannot sign in");

  await groups.fill("contractors");
  await provider.getByTestId("sso-preview").click();
  await expect(result).toContainText("cannot sign in");
});

test("mallory of contractors is refused at sign-in", async ({ page }) => {
  await ssoSignIn(page, "mallory");
  await expect(page.getByTestId("sso-error")).toBeVisible();
  await expect(page.getByTestId("sso-error")).not.toBeEmpty();
  await expect(page.getByTestId("viewer-email")).toHaveCount(0);
  expect(new URL(page.url()).pathname).toBe("/login");
  // Not signed in.
  await page.goto("/api-keys");
  await expect(page).toHaveURL(/\/login\?next=%2Fapi-keys$/);
});

test("a sign-in after the provider rotates its signing key still works", async ({ page }) => {
  // Two sign-ins and the wait below.
  test.setTimeout(90_000);
  const res = await fetch(`${idpURL}/control/groups/alice`);
  expect(await res.json()).toEqual(["eng"]);

  // A sign-in with the current key: workbench has the provider's keys cached.
  await ssoSignIn(page, "alice");
  await expect(page.getByTestId("viewer-email")).toHaveText("alice@example.test");
  await page.getByRole("button", { name: "Sign out" }).click();
  await expect(page).toHaveURL(/\/login/);

  const before = await publishedKids();
  const rotated = await fetch(`${idpURL}/control/rotate-keys`, { method: "POST" });
  expect(rotated.status).toBe(200);
  const { kid } = await rotated.json();
  expect(before).not.toContain(kid);
  // The new key is the only one published: a token signed with it names a kid workbench has
  // not seen.
  expect(await publishedKids()).toEqual([kid]);

  // Workbench fetches a provider's keys again for an unknown key id at most every 10 s
  // (counted from its last fetch): past that, the next token's kid makes it re-read them.
  await page.waitForTimeout(11_000);

  // The provider lost its sessions with the rotation; ssoSignIn logs in again if asked.
  await ssoSignIn(page, "alice");
  await expect(page.getByTestId("sso-error")).toHaveCount(0);
  await expect(page.getByTestId("viewer-email")).toHaveText("alice@example.test");
  expect((await rest(aliceKey, "GET", "/v1/me")).status).toBe(200);
});

test("alice, taken out of eng at the provider, is refused at her next sign-in and her key stops working", async ({ page }) => {
  await ssoSignIn(page, "alice");
  await expect(page.getByTestId("viewer-email")).toHaveText("alice@example.test");
  expect((await rest(aliceKey, "GET", "/v1/me")).status).toBe(200);

  try {
    await setGroups("alice", []);
    await page.getByRole("button", { name: "Sign out" }).click();
    await expect(page).toHaveURL(/\/login/);

    // The provider's session may still be there and skip its login page; either way workbench
    // gets a token without eng.
    await ssoSignIn(page, "alice");
    await expect(page.getByTestId("sso-error")).toBeVisible();
    await expect(page.getByTestId("viewer-email")).toHaveCount(0);
    await page.goto("/api-keys");
    await expect(page).toHaveURL(/\/login\?next=%2Fapi-keys$/);

    // The membership the provider gave her is gone, and with it her key.
    expect((await rest(aliceKey, "GET", "/v1/me")).status).toBe(401);
    expect((await invoke(aliceKey, ALLOWED, { key: NOTE })).status).toBe(401);
  } finally {
    await setGroups("alice", ["eng"]);
  }
});
