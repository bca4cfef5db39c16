//! workbench-model: the vocabulary core and the portal share. Every status a row or a page
//! carries is an enum here (its words appear only in these declarations and in core's SQL), and
//! the views the portal shows are declared once, so the server and the browser build
//! (`hydrate`, WASM) agree on them. Serde only: no I/O, no framework, nothing platform-bound.
//!
//! core depends on this crate and re-exports it as `workbench_core::model` (and each moved
//! enum where it used to live); the portal (`app`) depends on it in both builds.

#[macro_use]
mod text;

pub mod accounts;
pub mod apps;
pub mod audit;
pub mod calls;
pub mod catalog;
pub mod connections;
pub mod delivery;
pub mod email;
pub mod oauth;
pub mod overview;
pub mod policy;
pub mod sso;
pub mod toolsets;
pub mod upstream;
pub mod usage;

pub use text::UnknownText;

#[cfg(test)]
mod tests;
