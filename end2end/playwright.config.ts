// Playwright runs the release binary on a fresh SQLite database in a temporary directory and
// drives Debian's chromium (never a downloaded browser).
import { defineConfig } from "@playwright/test";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";

const port = Number(process.env.WB_E2E_PORT ?? 3217);
const providerPort = port + 3;
const apiPort = port + 4;
export const upstreamURL = `http://127.0.0.1:${port + 5}`;
export const providerURL = `http://127.0.0.1:${providerPort}`;
// The SMTP server, DNS server and their control port of the email test.
const smtpPort = port + 6;
const dnsPort = port + 7;
export const mailControlURL = `http://127.0.0.1:${port + 8}`;
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "wb-e2e-"));
export const baseURL = `http://127.0.0.1:${port}`;
// A second workbench, the remote MCP server each user signs in to. Another loopback address,
// so that browser cookies of the two instances stay apart.
const remotePort = port + 9;
export const remoteURL = `http://127.0.0.2:${remotePort}`;
// The company identity provider of the single sign-on spec (its control endpoint on the same port).
const idpPort = port + 10;
export const idpURL = `http://127.0.0.1:${idpPort}`;

export default defineConfig({
  testDir: "./tests",
  timeout: 60_000,
  fullyParallel: false,
  workers: 1,
  reporter: [["list"]],
  // The portal spec starts from an empty instance; the connect spec reuses its admin.
  projects: [
    { name: "portal", testMatch: /portal\.spec\.ts/ },
    { name: "connect", testMatch: /connect\.spec\.ts/, dependencies: ["portal"] },
    { name: "governance", testMatch: /governance\.spec\.ts/, dependencies: ["connect"] },
    { name: "mcp-oauth", testMatch: /mcp_oauth\.spec\.ts/, dependencies: ["governance"] },
    { name: "upstream-sign-in", testMatch: /upstream_sign_in\.spec\.ts/, dependencies: ["mcp-oauth"] },
    { name: "tool-sets", testMatch: /tool_sets\.spec\.ts/, dependencies: ["upstream-sign-in"] },
    { name: "sso", testMatch: /sso\.spec\.ts/, dependencies: ["tool-sets"] },
  ],
  use: {
    baseURL,
    launchOptions: {
      executablePath: process.env.CHROMIUM_PATH ?? "/usr/bin/chromium",
      args: [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
      ],
    },
  },
  webServer: [
    {
      // An upstream MCP server whose tool changes on request (the review of a changed tool).
      command: `node upstream/changeable.mjs ${port + 5}`,
      url: `${upstreamURL}/health`,
      reuseExistingServer: false,
      timeout: 30_000,
    },
    {
      // An SMTP server that records messages and a DNS server for sender-domain verification.
      command: `node mail/fakes.mjs ${smtpPort} ${dnsPort} ${port + 8}`,
      url: `${mailControlURL}/health`,
      reuseExistingServer: false,
      timeout: 30_000,
    },
    {
      // A real OAuth authorization server and a fake GitHub API for the connect flow.
      command: `node oauth/provider.mjs ${providerPort} ${apiPort} ${baseURL}`,
      url: `${providerURL}/.well-known/openid-configuration`,
      reuseExistingServer: false,
      timeout: 30_000,
    },
    {
      // The company's OpenID Connect identity provider for single sign-on, with a control
      // endpoint that changes a person's groups.
      command: `node oauth/idp.mjs ${idpPort} ${baseURL}`,
      url: `${idpURL}/.well-known/openid-configuration`,
      reuseExistingServer: false,
      timeout: 30_000,
    },
    {
      command: [
        "../target/release/workbench serve",
        `--bind 127.0.0.1:${port}`,
        `--database-url sqlite://${dir}/e2e.db`,
        `--data-dir ${dir}/data`,
        "--site-root ../target/site",
        `--public-url ${baseURL}`,
        "--egress-allow-private 127.0.0.0/8",
        `--smtp-url smtp://127.0.0.1:${smtpPort}`,
        `--dns-resolver 127.0.0.1:${dnsPort}`,
      ].join(" "),
      env: {
        WB_INTEGRATION_GITHUB_BASE_URL: `http://127.0.0.1:${apiPort}`,
        WB_INTEGRATION_LINEAR_BASE_URL: `http://127.0.0.1:${apiPort}`,
        WB_INTEGRATION_GITHUB_AUTHORIZE_URL: `${providerURL}/auth`,
        WB_INTEGRATION_GITHUB_TOKEN_URL: `${providerURL}/token`,
        WB_INTEGRATION_GITHUB_CLIENT_ID: "wb-e2e-client",
        WB_INTEGRATION_GITHUB_CLIENT_SECRET: "wb-e2e-client-secret-0123456789",
        WB_INTEGRATION_GITHUB_ISSUER: providerURL,
      },
      url: `${baseURL}/healthz`,
      reuseExistingServer: false,
      timeout: 60_000,
      stdout: "pipe",
      stderr: "pipe",
    },
    {
      command: [
        "../target/release/workbench serve",
        `--bind 127.0.0.2:${remotePort}`,
        `--database-url sqlite://${dir}/remote.db`,
        `--data-dir ${dir}/remote-data`,
        "--site-root ../target/site",
        `--public-url ${remoteURL}`,
        // It fetches workbench's client ID metadata document from 127.0.0.1.
        "--egress-allow-private 127.0.0.0/8",
      ].join(" "),
      url: `${remoteURL}/healthz`,
      reuseExistingServer: false,
      timeout: 60_000,
      stdout: "ignore",
      stderr: "pipe",
    },
  ],
});
