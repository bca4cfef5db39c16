//! API tests: the real application on port 0, every test on SQLite and on PostgreSQL.

mod helpers;

mod api_keys;
mod apps;
mod audit_detail;
mod fake_provider;
mod fake_upstream;
mod fakes;
mod cli;
mod compose;
mod confirmations;
mod connections;
mod execute;
mod health;
mod http_fetch;
mod idempotency;
mod mcp;
mod mcp_sdk;
mod plugin_requests;
mod policies;
mod members;
mod portal_auth;
mod portal_tools;
mod portal_usage;
mod protections;
mod proxy_hardening;
mod scale_out;
mod search_web;
mod secrets;
mod upstream;
mod upstream_everything;
mod v1_auth;
mod v1_tools;
mod vault;
mod vectors;
mod webhooks;
