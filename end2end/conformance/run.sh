#!/usr/bin/env bash
# Runs the official MCP conformance suite (server scenarios that apply to a gateway) against
# the workbench binary: a fresh SQLite instance, an admin and an API key made with the CLI, and
# a header-adding proxy in front of /mcp. Scenarios that do not apply are listed, each with its
# reason, in expected-failures.yml (expected-failures-set.yml for the set). It runs twice: against /mcp, and against a tool set's own
# endpoint (/mcp/sets/conformance). Usage: run.sh [path/to/workbench]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$(realpath "${1:-$here/../../target/release/workbench}")
port=${WB_CONFORMANCE_PORT:-3218}
proxy_port=$((port + 1))
dir=$(mktemp -d)
db="sqlite://$dir/conformance.db"
cleanup() { kill "${server_pid:-}" "${proxy_pid:-}" 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT

"$bin" migrate --database-url "$db" >/dev/null 2>&1
echo "conformance-password-1" | "$bin" admin create-user --database-url "$db" --email conformance@example.com --password-stdin --admin >/dev/null 2>&1
key=$("$bin" admin create-api-key --database-url "$db" --email conformance@example.com --name conformance 2>/dev/null)
WB_LOG=warn "$bin" serve --bind "127.0.0.1:$port" --database-url "$db" --data-dir "$dir/data" \
  --public-url "http://127.0.0.1:$proxy_port" >"$dir/server.log" 2>&1 &
server_pid=$!
node "$here/auth-proxy.mjs" "$proxy_port" "$port" "$key" 2>/dev/null &
proxy_pid=$!
for _ in $(seq 1 50); do
  curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
  sleep 0.2
done
# A tool set (issue 33) for its own endpoint's run: the same scenarios apply to it.
curl -fsS "http://127.0.0.1:$port/v1/tool-sets" -H "Authorization: Bearer $key" -H 'content-type: application/json' \
  -d '{"slug": "conformance", "name": "Conformance", "tools": [{"tool": "vault_list"}, {"tool": "storage.get", "name": "read_object"}]}' >/dev/null
cd "$here/.."
for run in "/mcp expected-failures.yml" "/mcp/sets/conformance expected-failures-set.yml"; do
  set -- $run
  echo "==> $1" >&2
  npx conformance server --url "http://127.0.0.1:$proxy_port$1" --suite all ${WB_CONFORMANCE_ARGS:-} \
    --expected-failures "$here/$2"
done
