//! Server functions of the portal: thin adapters that authenticate the session, make one core
//! call and map the result to a view type. No SQL and no business rules here.

mod api_keys;
mod app_import;
mod apps;
mod audit;
mod confirmations;
mod connections;
mod egress;
mod email;
mod mcp_servers;
mod members;
mod oauth;
mod overview;
mod policies;
mod schedules;
mod session;
mod sso;
mod tool_sets;
mod tools;
mod usage;
mod vault;

pub use api_keys::*;
pub use app_import::*;
pub use apps::*;
pub use audit::*;
pub use confirmations::*;
pub use connections::*;
pub use egress::*;
pub use email::*;
pub use mcp_servers::*;
pub use members::*;
pub use oauth::*;
pub use overview::*;
pub use policies::*;
pub use schedules::*;
pub use session::*;
pub use sso::*;
pub use tool_sets::*;
pub use tools::*;
pub use usage::*;
pub use vault::*;
