//! The catalog's words (side effects, tool status) and the Tools page's views.

use serde::{Deserialize, Serialize};

use crate::connections::AccountState;

text_enum! {
    /// What running a tool may do (seed 004).
    pub enum SideEffects ("side effects") {
        /// Reads only; safe to retry.
        None = "none",
        /// Talks to the network but changes nothing of ours.
        Network = "network",
        /// Changes stored state.
        Write = "write",
        /// Hard or impossible to undo (sends, deletes, pays).
        Destructive = "destructive",
    }
}

text_enum! {
    /// Whether a catalog tool can run now.
    pub enum ToolStatus ("tool status") {
        Available = "available",
        Unavailable = "unavailable",
    }
}

/// One tool as the Tools page lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolView {
    pub name: String,
    pub integration: String,
    pub source: String,
    pub description: String,
    pub side_effects: SideEffects,
    pub status: ToolStatus,
    /// Why the tool cannot run, when it cannot (core's words, as agents see them).
    pub unavailable_reason: Option<String>,
    /// The person's account at the tool's integration.
    pub connection: AccountState,
    pub avg_latency_ms: Option<i64>,
    pub input_schema: String,
    pub score: Option<f64>,
}

/// One integration's heading on the Tools page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolGroupView {
    pub integration: String,
    pub display_name: String,
    pub logo: Option<String>,
    pub connection: AccountState,
    /// Tools of this integration left by the filters (on every page).
    pub count: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolsData {
    /// The tools of this page, at most [`TOOLS_PER_PAGE`].
    pub tools: Vec<ToolView>,
    /// The integrations of this page's tools, by display name (built-ins first); `count` is
    /// the integration's tools after filters, on every page.
    pub groups: Vec<ToolGroupView>,
    /// Every tool the project has, before filters.
    pub total: usize,
    /// The tools left by the search and filters, on every page.
    pub matching: usize,
    /// The integrations of those tools.
    pub integrations: usize,
    /// This page, from 1.
    pub page: usize,
    /// Pages of [`TOOLS_PER_PAGE`] tools (at least 1).
    pub pages: usize,
}

/// Tools on one page of the portal's Tools page: a catalog of ten thousand tools renders
/// fifty at a time.
pub const TOOLS_PER_PAGE: usize = 50;
