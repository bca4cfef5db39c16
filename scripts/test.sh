#!/usr/bin/env bash
# Sets everything up (plus chromium), checks formatting and clippy (no warnings allowed), and
# runs every test: unit tests, the API tests on SQLite and PostgreSQL, the MCP SDK clients, the
# conformance suite and the Playwright browser tests against the release binary. PostgreSQL is
# required: set WB_TEST_POSTGRES_URL to point elsewhere than postgres://postgres@127.0.0.1:5432/test.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
# Where the minutes went, said in the summary: each phase's name and seconds.
phases="" phase_name=setup phase_start=$start
phase() { # name, headline
  local now
  now=$(date +%s)
  phases="${phases}${phase_name} $((now - phase_start)) s, "
  phase_name=$1 phase_start=$now
  [ -n "${2:-}" ] && echo "==> $2" >&2
  return 0
}
scripts/setup.sh --with-browser

export WB_TEST_POSTGRES=required
export WB_TEST_MCP_SDK=required
export WB_TEST_SERVER_EVERYTHING=required
export WB_TEST_FAULTS=required
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

# Style and deployment gates first: a minute, and a red one stops the run before the long part.
phase fmt "cargo fmt --check"
if ! cargo fmt --all --check >/dev/null; then
  echo "test.sh: code is not formatted; run: cargo fmt --all" >&2
  exit 1
fi
phase deploy-checks "deployment files (hadolint, kustomize + Kubernetes schemas)"
scripts/check-deploy.sh

# Clippy lints while the tests compile: clippy-driver wraps rustc for the workspace's own
# crates (what `cargo clippy` does) but compiles them for real, so the dependencies are built
# once instead of being checked for clippy and then built again for the tests (from nothing:
# 342 s instead of 225 s + 264 s, docs/benchmarks.md). Any warning fails the build. The
# variables stay set for `cargo test` below, which selects the same packages and so has nothing
# to rebuild (selecting workbench-app too would resolve its features apart and rebuild it and
# the server: 141 s). The wrapper lints every workspace member it compiles, so the portal
# crate, built as the server's dependency, is linted; it has no test code of its own. A plain
# `cargo test` afterwards rebuilds the workspace's crates (not the dependencies) once.
export RUSTC_WORKSPACE_WRAPPER=clippy-driver
export CLIPPY_ARGS=-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__
phase build-and-clippy "building the tests with clippy (--all-targets, -D warnings)"
if ! cargo test --no-run --all-targets -p workbench-model -p workbench-core -p workbench-server; then
  echo "test.sh: the build failed: a compile error or a clippy warning (above); the gate allows none" >&2
  exit 1
fi

log=$(mktemp)
# Every test that skips itself writes "<test>\t<reason>" here (tests/api/helpers.rs `skipped`).
export WB_TEST_SKIP_LOG="$log.skips"
: > "$WB_TEST_SKIP_LOG"
phase cargo-test "cargo test (model, core, server: unit + API tests on SQLite and PostgreSQL)"
# 6 test threads on 2 cores: the API tests mostly wait on their servers, databases and
# subprocesses (the API suite: 483 s on 2 threads, 343 s on 6; running it beside core's tests
# instead gained nothing, both are CPU-bound together: docs/benchmarks.md).
set +e
cargo test -p workbench-model -p workbench-core -p workbench-server -- --test-threads 6 2>&1 | tee "$log"
rust_status=${PIPESTATUS[0]}
set -e

e2e_status=0
conformance_status=skipped
if [ "$rust_status" = 0 ]; then
  phase release-build "release build for the browser tests"
  # Unwrapped, like README command 1's build, so its artifacts are reused.
  env -u RUSTC_WORKSPACE_WRAPPER -u CLIPPY_ARGS scripts/build-release.sh
  phase conformance "MCP conformance suite (server scenarios)"
  if end2end/conformance/run.sh target/release/workbench 2>&1 | tee "$log.conformance" | tail -n 12; then
    conformance_status=passed
  else
    conformance_status=failed
  fi
  phase playwright "Playwright (chromium)"
  set +e
  (cd end2end && npx playwright test) 2>&1 | tee -a "$log"
  e2e_status=${PIPESTATUS[0]}
  set -e
fi

count() { # sum of the numbers in field $2 of lines matching $1
  { grep -Eo "$1" "$log" || true; } | awk -v f="$2" '{s+=$f} END {print s+0}'
}
# Per Rust suite: how many ran (passed + failed), how many skipped themselves and why. A test's
# suite comes from its name: the SDK tests (Python MCP SDK, server-everything), then the
# PostgreSQL halves of the API tests, then everything else (unit, core, API on SQLite).
rust_suites() {
  awk -F'\t' -v skips="$WB_TEST_SKIP_LOG" '
    function suite(name) {
      if (name ~ /^(mcp_sdk|mcp_oauth_sdk|upstream_everything)::/) return "sdk"
      if (name ~ /::postgres$/) return "postgres"
      return "sqlite"
    }
    BEGIN {
      while ((getline line < skips) > 0) {
        split(line, f, "\t"); s = suite(f[1]); skipped[s]++; why[s "\t" f[2]]++
      }
    }
    /^test .* \.\.\. (ok|FAILED|ignored)$/ {
      name = $0; sub(/^test /, "", name); sub(/ \.\.\. [a-zA-Z]+$/, "", name)
      s = suite(name)
      if ($0 ~ /ok$/) ok[s]++
      else if ($0 ~ /FAILED$/) failed[s]++
      else { ignored[s]++; why[s "\t#[ignore]"]++ }
    }
    END {
      split("sqlite postgres sdk", order, " ")
      label["sqlite"] = "rust on SQLite (unit, core, API):"
      label["postgres"] = "rust on PostgreSQL (API):"
      label["sdk"] = "MCP SDK clients (Python SDK, server-everything):"
      for (i = 1; i <= 3; i++) {
        s = order[i]; sk = skipped[s] + ignored[s]
        printf "%-50s %d ran (%d passed, %d failed), %d skipped\n", label[s], ok[s] + failed[s] - skipped[s], ok[s] - skipped[s], failed[s], sk
        for (k in why) { split(k, p, "\t"); if (p[1] == s) printf "%52s skipped %d: %s\n", "", why[k], p[2] }
      }
    }' "$log"
}
e2e_passed=$(count '^ +[0-9]+ passed' 1)
e2e_failed=$(count '^ +[0-9]+ failed' 1)
e2e_skipped=$(count '^ +[0-9]+ skipped' 1)
echo
echo "==================== test summary ===================="
rust_suites
if [ "$rust_status" = 0 ]; then
  printf '%-50s %d ran (%d passed, %d failed), %d skipped\n' "browser (Playwright, chromium):" \
    $((e2e_passed + e2e_failed)) "$e2e_passed" "$e2e_failed" "$e2e_skipped"
else
  printf '%-50s not run: the Rust tests failed\n' "browser (Playwright, chromium):"
fi
if [ -f "$log.conformance" ]; then
  printf '%-50s %s: %s checks passed; expected failures are listed with reasons in end2end/conformance/expected-failures*.yml\n' \
    "MCP conformance suite (server scenarios):" "$conformance_status" \
    "$(grep -Eo 'Total: [0-9]+ passed' "$log.conformance" | grep -Eo '[0-9]+' | awk '{ n += $1 } END { print n + 0 }')"
else
  printf '%-50s not run: the Rust tests failed\n' "MCP conformance suite (server scenarios):"
fi
phase done
echo "time by phase: ${phases%, }"
echo "total time: $(( $(date +%s) - start )) s"
echo "======================================================"
rm -f "$log" "$log.conformance" "$log.skips"
[ "$rust_status" = 0 ] && [ "$e2e_status" = 0 ] && [ "$conformance_status" != failed ]
