//! workbench-core: the domain of workbench (accounts now; catalog, engine, vault and connections
//! as they land) and its storage. No web framework lives here: the surfaces in `server` and `app`
//! only translate shapes and call into this crate.

pub mod audit;
pub mod auth;
pub mod builtin;
pub mod catalog;
pub mod clock;
pub mod connections;
pub mod crypto;
pub mod egress;
pub mod engine;
pub mod error;
pub mod ids;
pub mod plugins;
pub mod store;
pub mod vault;
mod workbench;

pub use error::{Error, Result};
pub use workbench::{Workbench, WorkbenchOptions};
