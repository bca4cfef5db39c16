//! workbench-core: the domain of workbench and its storage. No web framework lives here: the
//! surfaces in `server` and `app` only translate shapes and call into this crate.
//!
//! Statuses (call, confirmation, connection, breaker, review, …) and the views the portal shows
//! are declared in `workbench-model`, below this crate, re-exported as `model` and where each
//! enum used to live.
//!
//! Modules are layered and import only modules below them (checked by `tests/layers.rs`; the
//! picture is in `core/README.md`), bottom first:
//! - foundation: `error`, `crypto`, `ids`, `clock`, `args`, `store` (all SQL), `auth`, `vault`,
//!   `egress`, `audit` (reading the log, and the record writer), `metering`, `policy` (tool
//!   allowlists), `delivery` (the outbox every outbound delivery goes through: signing, retries,
//!   history), `notify` (the project webhook);
//! - `catalog`: tool specs, names, search, and the handler seam (`ToolHandler`, `CallContext`,
//!   `HandlerError`, `ConnectionSource`, `Credential`);
//! - `integrations`: integrations as data (definitions, request templates, the outbound
//!   client, the loaded plugins, the registry of custom apps);
//! - `sso` (portal sign-in through OpenID Connect providers, group mapping);
//! - `connections` (credentials, connect flow, refresh, curl_session rules), `builtin`
//!   (in-process tools) and `upstream` (registered MCP servers: their sessions, breakers and
//!   tools);
//! - `engine` (the one execution pipeline) and `plugins` (the plugin/app tool handler and the
//!   app service);
//! - `workbench`: the wiring every surface holds;
//! - `config_file`: a project's configuration as a file (export, plan, apply through the
//!   services), above the wiring because it drives the whole project.

pub mod args;
pub mod audit;
pub mod auth;
pub mod builtin;
pub mod catalog;
pub mod clock;
pub mod config_file;
pub mod connections;
pub mod crypto;
pub mod delivery;
pub mod egress;
pub mod email;
pub mod engine;
pub mod error;
pub mod ids;
pub mod integrations;
pub mod limits;
pub mod mcp_sessions;
pub mod metering;
pub mod metrics;
pub mod notify;
pub mod oauth;
pub mod plugins;
pub mod policy;
pub mod schedule;
pub mod sso;
pub mod store;
pub mod toolsets;
pub mod upstream;
pub mod vault;
mod workbench;

pub use error::{Error, Result};
pub use workbench::{Workbench, WorkbenchOptions};
/// The vocabulary core shares with the portal: typed statuses and the portal's views.
pub use workbench_model as model;
