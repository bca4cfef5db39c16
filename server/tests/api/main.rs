//! API tests: the real application on port 0, every test on SQLite and on PostgreSQL.
// Tests parse start-up flags and look at `ConfigError`s, which are large on purpose (made once).
#![allow(clippy::result_large_err)]

mod helpers;

mod api_keys;
mod apps;
mod apps_import;
mod audit_detail;
mod change_notices;
mod cli;
mod cluster;
mod compose;
mod config_file;
mod confirmations;
mod connections;
mod contract;
mod deliveries;
mod deploy;
mod email;
mod execute;
mod fake_mail;
mod fake_provider;
mod fake_upstream;
mod fakes;
mod faults;
mod health;
mod http_fetch;
mod idempotency;
#[cfg(target_os = "linux")]
mod import_bombs;
mod mcp;
mod mcp_oauth;
mod mcp_oauth_sdk;
mod mcp_sdk;
mod members;
mod multi_instance;
mod observability;
mod outbound_secrets;
mod permissions;
mod policies;
mod portal_auth;
mod portal_mcp_servers;
mod portal_tools;
mod portal_usage;
mod protections;
mod proxy_hardening;
mod scale_out;
mod schedules;
mod search_web;
mod secrets;
mod tool_sets;
mod tracing;
mod unconfigured;
mod upstream;
mod upstream_discovery;
mod upstream_everything;
mod upstream_identity;
mod upstream_python_sdk;
mod upstream_sign_in;
mod upstream_stdio;
mod upstream_stdio_faults;
mod v1_auth;
mod v1_tools;
mod vault;
mod vectors;
mod webhooks;
