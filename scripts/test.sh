#!/usr/bin/env bash
# Sets everything up (plus chromium) and runs every test: unit tests, the API tests on SQLite
# and PostgreSQL, and the Playwright browser tests against the release binary. PostgreSQL is
# required: set WB_TEST_POSTGRES_URL to point elsewhere than postgres://postgres@127.0.0.1:5432/test.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
scripts/setup.sh --with-browser

export WB_TEST_POSTGRES=required
export WB_TEST_MCP_SDK=required
export WB_TEST_SERVER_EVERYTHING=required
export WB_TEST_POSTGRES_URL="${WB_TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test}"
pg_up() { pg_isready -q -d "$WB_TEST_POSTGRES_URL" 2>/dev/null; }
if ! pg_up && command -v pg_ctlcluster >/dev/null && [ -d /etc/postgresql ]; then
  echo "==> starting the local PostgreSQL cluster" >&2
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start || true
  for _ in 1 2 3 4 5 6 7 8 9 10; do pg_up && break; sleep 1; done
fi
if ! pg_up; then
  echo "test.sh: PostgreSQL is required but unreachable at $WB_TEST_POSTGRES_URL" >&2
  exit 1
fi

log=$(mktemp)
echo "==> cargo test (core, server: unit + API tests on SQLite and PostgreSQL)" >&2
set +e
cargo test -p workbench-core -p workbench-server 2>&1 | tee "$log"
rust_status=${PIPESTATUS[0]}
set -e

e2e_status=0
conformance_status=skipped
if [ "$rust_status" = 0 ]; then
  echo "==> release build for the browser tests" >&2
  cargo leptos build --release
  echo "==> MCP conformance suite (server scenarios)" >&2
  if end2end/conformance/run.sh target/release/workbench 2>&1 | tee "$log.conformance" | tail -n 12; then
    conformance_status=passed
  else
    conformance_status=failed
  fi
  echo "==> Playwright (chromium)" >&2
  set +e
  (cd end2end && npx playwright test) 2>&1 | tee -a "$log"
  e2e_status=${PIPESTATUS[0]}
  set -e
fi

count() { # sum of the numbers in field $2 of lines matching $1
  { grep -Eo "$1" "$log" || true; } | awk -v f="$2" '{s+=$f} END {print s+0}'
}
passed=$(count 'test result: [a-zA-Z]+\. [0-9]+ passed' 4)
failed=$(count '[0-9]+ failed;' 1)
e2e_passed=$(count '^ +[0-9]+ passed' 1)
e2e_failed=$(count '^ +[0-9]+ failed' 1)
echo
echo "==================== test summary ===================="
echo "rust (unit + API, SQLite + PostgreSQL): ${passed} passed, ${failed} failed"
if [ "$rust_status" = 0 ]; then
  echo "browser (Playwright, chromium):         ${e2e_passed} passed, ${e2e_failed} failed"
else
  echo "browser (Playwright, chromium):         not run (rust tests failed)"
fi
if [ -f "$log.conformance" ]; then
  echo "MCP conformance suite:                  $conformance_status ($(grep -Eo 'Total: [0-9]+ passed' "$log.conformance" | grep -Eo '[0-9]+' || echo 0) checks passed; the rest are listed with reasons in end2end/conformance/expected-failures.yml)"
fi
echo "total time: $(( $(date +%s) - start )) s"
echo "======================================================"
rm -f "$log" "$log.conformance"
[ "$rust_status" = 0 ] && [ "$e2e_status" = 0 ] && [ "$conformance_status" != failed ]
