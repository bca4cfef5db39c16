// Playwright runs the release binary on a fresh SQLite database in a temporary directory and
// drives Debian's chromium (never a downloaded browser).
import { defineConfig } from "@playwright/test";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";

const port = Number(process.env.WB_E2E_PORT ?? 3217);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "wb-e2e-"));
export const baseURL = `http://127.0.0.1:${port}`;

export default defineConfig({
  testDir: "./tests",
  timeout: 60_000,
  fullyParallel: false,
  workers: 1,
  reporter: [["list"]],
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
  webServer: {
    command: [
      "../target/release/workbench serve",
      `--bind 127.0.0.1:${port}`,
      `--database-url sqlite://${dir}/e2e.db`,
      `--data-dir ${dir}/data`,
      "--site-root ../target/site",
    ].join(" "),
    url: `${baseURL}/healthz`,
    reuseExistingServer: false,
    timeout: 60_000,
    stdout: "pipe",
    stderr: "pipe",
  },
});
