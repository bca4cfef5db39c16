//! Server functions of the portal: thin adapters that authenticate the session, make one core
//! call and map the result to a view type. No SQL and no business rules here.

mod session;
mod api_keys;
mod members;
mod tools;
mod egress;
mod audit;
mod vault;
mod connections;
mod apps;
mod app_import;
mod mcp_servers;
mod confirmations;
mod policies;
mod usage;
mod schedules;
mod email;
mod oauth;

pub use session::*;
pub use api_keys::*;
pub use members::*;
pub use tools::*;
pub use egress::*;
pub use audit::*;
pub use vault::*;
pub use connections::*;
pub use apps::*;
pub use app_import::*;
pub use mcp_servers::*;
pub use confirmations::*;
pub use policies::*;
pub use usage::*;
pub use schedules::*;
pub use email::*;
pub use oauth::*;
