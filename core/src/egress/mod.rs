//! Outbound HTTP that cannot be turned against us (SSRF-safe): every destination must match
//! the project's egress allowlist, every address a name resolves to is checked against private,
//! loopback, link-local, metadata, CGNAT, multicast and translation ranges before dialling, the
//! checked address is the one dialled, and redirects are followed by hand, each hop checked
//! again. See README.md in this folder. Requests to plugin APIs and upstreams carry the trace
//! context (`trace_context`).

mod allowlist;
mod fetch;
mod ranges;
mod rules;
pub mod trace_context;

pub use allowlist::{host_matches, validate_pattern};
pub use fetch::{blocked_cause, FetchError, FetchRequest, FetchResponse, GuardedClient, MAX_REDIRECTS};
pub use ranges::{blocked_reason, AddrRange, PrivateAllowance};
pub use rules::EgressRules;
