#!/usr/bin/env bash
# Builds the release binary and the portal's assets (`cargo leptos build --release`) unless
# nothing they are made from changed since the last successful build: the toolchain,
# cargo-leptos, and every file of the checkout git does not ignore (hashed in well under a
# second). Building again would only redo the minute of wasm-bindgen and wasm-opt cargo-leptos
# repeats every time. Outside a git checkout it always builds. Used by run.sh and test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
stamp=target/.release-build-inputs
inputs() {
  git rev-parse --is-inside-work-tree >/dev/null 2>&1 || return 1
  {
    rustc -V
    cargo leptos --version
    git ls-files -co --exclude-standard -z | xargs -0 sha256sum 2>/dev/null
  } | sha256sum | cut -d' ' -f1
}
now=$(inputs || true)
if [ -n "$now" ] && [ -x target/release/workbench ] && [ -d target/site/pkg ] \
  && [ "$(cat "$stamp" 2>/dev/null)" = "$now" ]; then
  echo "build-release.sh: nothing changed since the last release build; not building again" >&2
  exit 0
fi
rm -f "$stamp"
cargo leptos build --release
if [ -n "$now" ]; then echo "$now" > "$stamp"; fi
