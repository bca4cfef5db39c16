#!/usr/bin/env bash
# Installs what building and testing workbench needs, skipping whatever is already there:
# the wasm32 target, cargo-leptos 0.3.10, wasm-bindgen-cli matching Cargo.lock, the npm build
# tools (Tailwind, wasm-opt) and, with --with-browser, the test tools: Playwright, the MCP
# conformance suite, the official MCP Python SDK (in .venv) and Debian's chromium.
# Nothing here downloads from GitHub.
set -euo pipefail
cd "$(dirname "$0")/.."

with_browser=0
[ "${1:-}" = "--with-browser" ] && with_browser=1

step() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-unknown-unknown; then
  step "adding the wasm32-unknown-unknown target"
  rustup target add wasm32-unknown-unknown
fi

if ! cargo leptos --version 2>/dev/null | grep -q '0\.3\.10'; then
  step "installing cargo-leptos 0.3.10 (once per machine, ~8 min: a debug build of a build tool)"
  cargo install cargo-leptos --version 0.3.10 --locked --debug
fi

wbv=$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/"/, "", $3); print $3; exit }' Cargo.lock)
if ! wasm-bindgen --version 2>/dev/null | grep -q " ${wbv}\$"; then
  step "installing wasm-bindgen-cli ${wbv} (matches Cargo.lock)"
  cargo install wasm-bindgen-cli --version "${wbv}"
fi

npm_ci() { # dir: install from the lockfile unless node_modules already matches it
  local dir=$1
  if [ ! -f "$dir/node_modules/.package-lock.json" ] || [ "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]; then
    step "installing npm packages in $dir"
    (cd "$dir" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund)
  fi
}
npm_ci .

if [ "$with_browser" = 1 ]; then
  npm_ci end2end
  req=server/tests/mcp_sdk/requirements.txt
  if [ ! -f .venv/.installed ] || [ "$req" -nt .venv/.installed ]; then
    step "installing the official MCP Python SDK into .venv"
    python3 -m venv .venv
    .venv/bin/pip install -q --disable-pip-version-check -r "$req"
    touch .venv/.installed
  fi
  if [ ! -x /usr/bin/chromium ]; then
    step "installing Debian's chromium"
    if [ "$(id -u)" = 0 ]; then
      apt-get update -qq && apt-get install -y -qq chromium
    else
      sudo apt-get update -qq && sudo apt-get install -y -qq chromium
    fi
  fi
fi
