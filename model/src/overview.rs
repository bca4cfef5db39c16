//! What the portal's Overview shows first: today's calls by outcome and what waits for someone.

use serde::{Deserialize, Serialize};

/// The Overview's figures, each narrowed to what the viewer may see.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OverviewData {
    /// Whether the figures are the project's (an admin) or the viewer's own calls.
    pub project_wide: bool,
    /// Tool calls since midnight UTC by status (`succeeded`, `failed`, ...), and in all.
    pub calls_today: Vec<(String, i64)>,
    pub calls_today_total: i64,
    /// Calls a rate limit refused today.
    pub rate_limited_today: i64,
    /// Held calls waiting for a decision the viewer may make.
    pub pending_confirmations: i64,
    /// Upstream MCP servers whose breaker is not closed: `(name, id, breaker state)`.
    pub open_breakers: Vec<(String, String, String)>,
    /// Upstream MCP servers with tools held for review: `(name, id, how many)`.
    pub awaiting_review: Vec<(String, String, usize)>,
    /// The viewer's connections that need connecting again: `(integration, status)`.
    pub reconnect: Vec<(String, String)>,
}
