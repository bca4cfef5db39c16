#!/usr/bin/env bash
# Builds the release binary and the portal's assets into target/release/workbench and
# target/site, unless nothing they are made from changed since the last successful build: the
# toolchain, wasm-bindgen, and the files of the checkout they are built from (the crates,
# migrations, style, public assets, the lockfiles and this script; hashed in well under a
# second; docs and tests do not count). Used by run.sh, test.sh and the Dockerfile.
#
# It does what `cargo leptos build --release` does (with the settings in Cargo.toml's
# [workspace.metadata.leptos]) with the tools setup.sh installs, so a fresh machine need not
# compile cargo-leptos first (7 minutes of a first run here, docs/benchmarks.md):
#   front   cargo build of workbench-frontend for wasm32 (profile wasm-release, target/front),
#           wasm-bindgen --target web without the name and producers sections, the JS glue
#           minified (terser). Not wasm-opt: its npm build runs under node on one core, 73 s
#           here for a wasm 15% smaller than the stripped one but larger once gzipped.
#   style   Tailwind, style/tailwind.css → pkg/workbench.css, minified
#   assets  public/ copied into the site root
#   gzip    a .gz beside every wasm, js, css and svg file, which the server sends to browsers
#           that accept gzip (leptos_axum serves precompressed files)
#   server  cargo build --release of the `workbench` binary
# The front and the server build at once, as cargo-leptos builds them; the LEPTOS_* variables
# are the ones cargo-leptos sets, so either way the crates compile the same. Arguments (e.g.
# --timings) go to both cargo builds.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/node_modules/.bin:$PATH"

site=target/site
pkg=$site/pkg
name=workbench
stamp=target/.release-build-inputs

inputs() {
  git rev-parse --is-inside-work-tree >/dev/null 2>&1 || return 1
  {
    rustc -V
    wasm-bindgen --version
    git ls-files -co --exclude-standard -z -- Cargo.toml Cargo.lock model core server app \
      frontend migrations style public package.json package-lock.json scripts/build-release.sh \
      | xargs -0 sha256sum 2>/dev/null
  } | sha256sum | cut -d' ' -f1
}
now=$(inputs || true)
if [ -n "$now" ] && [ -x target/release/$name ] && [ -f "$pkg/$name.wasm" ] \
  && [ "$(cat "$stamp" 2>/dev/null)" = "$now" ]; then
  echo "build-release.sh: nothing changed since the last release build; not building again" >&2
  exit 0
fi
rm -f "$stamp"

export LEPTOS_OUTPUT_NAME=$name LEPTOS_SITE_ROOT=$site LEPTOS_SITE_PKG_DIR=pkg \
  LEPTOS_SITE_ADDR=127.0.0.1:3000 LEPTOS_RELOAD_PORT=3001 LEPTOS_LIB_DIR=frontend \
  LEPTOS_BIN_DIR=server LEPTOS_JS_MINIFY=true LEPTOS_HASH_FILES=false

front() {
  cargo build --package=workbench-frontend --lib --target-dir=target/front \
    --target=wasm32-unknown-unknown --no-default-features --profile=wasm-release "$@"
  # cargo relinks the wasm on any change to the crates it is built from, the server's too;
  # when its bytes did not change, the JS and wasm made from it last time still stand.
  local wasm=target/front/wasm32-unknown-unknown/wasm-release/workbench_frontend.wasm
  local made_from=target/front/.site-made-from out sum
  sum=$( { wasm-bindgen --version; sha256sum "$wasm"; } | sha256sum | cut -d' ' -f1)
  if [ -f "$pkg/$name.wasm" ] && [ -f "$pkg/$name.js" ] && [ "$(cat "$made_from" 2>/dev/null)" = "$sum" ]; then
    echo "build-release.sh: the front end's wasm did not change; keeping $pkg" >&2
    return 0
  fi
  rm -f "$made_from"
  out=$(mktemp -d target/.front.XXXXXX)
  wasm-bindgen --target=web --remove-name-section --remove-producers-section \
    --out-name=$name --out-dir="$out" "$wasm"
  # leptos's hydration script loads pkg/<name>.wasm (cargo-leptos renames it the same way).
  mv "$out/${name}_bg.wasm" "$out/$name.wasm"
  terser "$out/$name.js" --module --compress --mangle --output "$out/$name.min.js"
  mv "$out/$name.min.js" "$out/$name.js"
  mkdir -p "$pkg"
  rm -rf "$pkg/snippets"
  cp -r "$out"/. "$pkg"/
  rm -rf "$out"
  echo "$sum" > "$made_from"
  echo "build-release.sh: front end built into $pkg" >&2
}

mkdir -p "$pkg"
cp -r public/. "$site"/
tailwindcss --input style/tailwind.css --output "$pkg/$name.css" --minify

front "$@" &
front_pid=$!
server_status=0
cargo build --release --package=workbench-server --bin=$name --no-default-features "$@" \
  || server_status=$?
front_status=0
wait "$front_pid" || front_status=$?
if [ "$server_status" != 0 ] || [ "$front_status" != 0 ]; then
  echo "build-release.sh: the build failed (server $server_status, front end $front_status)" >&2
  exit 1
fi
# Once the front end is in place: every file a browser fetches, compressed in one pass.
find "$site" -type f \( -name '*.wasm' -o -name '*.js' -o -name '*.css' -o -name '*.svg' \) \
  -exec gzip -9 -k -f -n {} +
if [ -n "$now" ]; then echo "$now" > "$stamp"; fi
