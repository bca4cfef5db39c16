#!/usr/bin/env bash
# Sets everything up, builds the release binary and portal assets, and serves workbench on its
# embedded SQLite default at http://127.0.0.1:3000. Extra arguments go to `workbench serve`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

scripts/build-release.sh
export WB_SITE_ROOT="${WB_SITE_ROOT:-target/site}"
echo "workbench: open http://${WB_BIND:-127.0.0.1:3000} (Ctrl-C stops it)" >&2
exec target/release/workbench serve "$@"
