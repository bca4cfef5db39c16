#!/usr/bin/env bash
# Sets everything up, builds the release binary and portal assets, and serves workbench on its
# embedded SQLite default at http://127.0.0.1:3000. Extra arguments go to `workbench serve`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

# What the build is made from: the toolchain, cargo-leptos, and every file of the checkout that
# git does not ignore. When that is unchanged since the last build (and its output is still
# there), building again would only redo the ~1 min of wasm-bindgen and wasm-opt cargo-leptos
# repeats every time, so it is skipped. Outside a git checkout it always builds.
stamp=target/.run-build-inputs
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
  echo "workbench: nothing changed since the last build; not building again" >&2
else
  rm -f "$stamp"
  cargo leptos build --release
  [ -n "$now" ] && echo "$now" > "$stamp"
fi
export WB_SITE_ROOT="${WB_SITE_ROOT:-target/site}"
echo "workbench: open http://${WB_BIND:-127.0.0.1:3000} (Ctrl-C stops it)" >&2
exec target/release/workbench serve "$@"
