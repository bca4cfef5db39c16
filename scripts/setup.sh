#!/usr/bin/env bash
# Installs what building and testing workbench needs, skipping whatever is already there:
# the wasm32 target, wasm-bindgen-cli matching Cargo.lock, the npm build tools (Tailwind,
# terser; scripts/build-release.sh runs them), the search model and, with
# --with-browser, the test tools: Playwright, the MCP conformance suite, the official MCP Python
# SDK and the deployment checkers (hadolint, kubernetes-validate; in .venv) and Debian's
# chromium. cargo-leptos is not needed (build-release.sh does its steps); install it only for
# `cargo leptos watch` while working on the portal (CONTRIBUTING.md).
# Nothing here downloads from GitHub.
set -euo pipefail
cd "$(dirname "$0")/.."

with_browser=0
[ "${1:-}" = "--with-browser" ] && with_browser=1

# Each step says how long the one before it took, and the last one's time is said on exit, so a
# first run shows where its minutes went.
step_name="" step_start=0
step_done() {
  [ -n "$step_name" ] && printf '    (%s: %ds)\n' "$step_name" "$(( $(date +%s) - step_start ))" >&2
  step_name=""
}
step() {
  step_done
  printf '\033[1m==> %s\033[0m\n' "$*" >&2
  step_name=${1%% (*} step_start=$(date +%s)
}
trap step_done EXIT

if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-unknown-unknown; then
  step "adding the wasm32-unknown-unknown target"
  rustup target add wasm32-unknown-unknown
fi

wbv=$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/"/, "", $3); print $3; exit }' Cargo.lock)
if ! wasm-bindgen --version 2>/dev/null | grep -q " ${wbv}\$"; then
  # Unoptimised: 55 s to build here against 122 s at opt-level 1 and about 240 s at the
  # release profile's 3, and it still makes the portal's JS bindings in 2 s (against 0.9 s).
  step "installing wasm-bindgen-cli ${wbv} (matches Cargo.lock; once per machine, ~1 min)"
  CARGO_PROFILE_RELEASE_OPT_LEVEL=0 CARGO_PROFILE_RELEASE_DEBUG=0 \
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

# The search model (docs/search.md): WordLlama l2_supercat static embeddings, two files out of
# PyPI's wordllama 0.4.0.post1 wheel, each checked by SHA-256. Without it tool search matches
# words only.
model=models/wordllama
model_sums="64b47a2dc493cb8e85944076601189739852d7b64e0e1eedcb1937a251cd9fd5  $model/l2_supercat_256.safetensors
93248f2a9ec36c7b35f700a033d5f36228aae48db61aee31007fa49062cdeb68  $model/l2_supercat_tokenizer_config.json"
if ! echo "$model_sums" | sha256sum -c --status 2>/dev/null; then
  step "installing the search model (WordLlama l2_supercat, 18 MB, from PyPI's wordllama 0.4.0.post1)"
  tmp=$(mktemp -d)
  python3 -m pip download --no-deps --only-binary=:all: --python-version 3.11 --implementation cp \
    --abi cp311 --platform manylinux_2_17_x86_64 -q --disable-pip-version-check -d "$tmp" wordllama==0.4.0.post1
  mkdir -p "$model"
  python3 - "$tmp"/wordllama-0.4.0.post1-*.whl "$model" <<'PY'
import sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    for name in ("weights/l2_supercat_256.safetensors", "tokenizers/l2_supercat_tokenizer_config.json"):
        with open(f"{out}/{name.split('/')[-1]}", "wb") as f:
            f.write(z.read(f"wordllama/{name}"))
    with open(f"{out}/LICENSE.wordllama", "wb") as f:
        f.write(next(z.read(n) for n in z.namelist() if n.endswith("LICENSE")))
PY
  rm -rf "$tmp"
  echo "$model_sums" | sha256sum -c --quiet
fi

if [ "$with_browser" = 1 ]; then
  npm_ci end2end
  req=server/tests/mcp_sdk/requirements.txt
  checks=deploy/check-requirements.txt
  if [ ! -f .venv/.installed ] || [ "$req" -nt .venv/.installed ] || [ "$checks" -nt .venv/.installed ] \
    || [ ! -x .venv/bin/hadolint ] || [ ! -x .venv/bin/kubernetes-validate ]; then
    step "installing the official MCP Python SDK and the deployment checkers into .venv"
    python3 -m venv .venv
    .venv/bin/pip install -q --disable-pip-version-check -r "$req" -r "$checks"
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
