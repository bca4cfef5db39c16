//! Upstream MCP servers' words (server state, breaker state, a tool's review status) and the
//! MCP servers pages' views.

use serde::{Deserialize, Serialize};

use crate::catalog::SideEffects;

text_enum! {
    /// A registered server's health as the API shows it.
    pub enum ServerState ("mcp server state") {
        Connected = "connected",
        /// Its circuit breaker is open.
        Degraded = "degraded",
        /// The last refresh failed.
        Error = "error",
        /// Each user signs in to it, and the admin who registered it has not connected yet:
        /// its tools are listed once they have.
        AwaitingSignIn = "awaiting_sign_in",
    }
}

text_enum! {
    /// A server's circuit breaker (D16).
    pub enum BreakerState ("breaker state") {
        Closed = "closed",
        Open = "open",
        /// Open time is over: one probe call decides.
        HalfOpen = "half_open",
    }
}

text_enum! {
    /// A local (stdio) server's process on one instance.
    pub enum ProcessState ("process state") {
        /// Never started, idle or removed.
        Stopped = "stopped",
        Running = "running",
        /// Waiting out the backoff after an exit or a failed start.
        Restarting = "restarting",
    }
}

text_enum! {
    /// Whether agents may run an upstream tool: its review status.
    pub enum ToolState ("mcp tool status") {
        Available = "available",
        /// Vanished from the upstream's list (kept, never removed).
        Unavailable = "unavailable",
        /// New, or changed since an admin last approved it: not runnable, not shown to agents.
        PendingReview = "pending_review",
    }
}

text_enum! {
    /// What an upstream MCP server offers besides tools, each reviewed like a tool.
    pub enum ItemKind ("mcp item kind") {
        Prompt = "prompt",
        Resource = "resource",
        /// A parameterised resource (an RFC 6570 URI template).
        ResourceTemplate = "resource_template",
    }
}

/// One prompt, resource or resource template of an upstream server as an admin reviews it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpItemView {
    pub kind: ItemKind,
    /// The prompt's name, the resource's URI or the template's URI template, as the upstream
    /// gives it.
    pub key: String,
    /// What set endpoints show it as: `<tool_prefix><name>` for a prompt, `wb://<server>/<uri>`
    /// for a resource or template.
    pub exposed: String,
    pub status: ToolState,
    /// What the upstream last listed of it (JSON text).
    pub body: String,
    /// What an admin last approved, when it changed since.
    pub approved_body: Option<String>,
}

/// One server as the MCP servers pages show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpServerView {
    pub id: String,
    pub name: String,
    pub url: String,
    pub auth_type: String,
    pub tool_prefix: String,
    pub state: ServerState,
    pub breaker: BreakerState,
    pub available: usize,
    pub unavailable: usize,
    pub pending_review: usize,
    pub last_refresh_at: Option<String>,
    pub last_error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpServersData {
    pub servers: Vec<McpServerView>,
    /// Vault secret names, for the credential picker.
    pub secrets: Vec<String>,
    pub can_manage: bool,
}

/// One upstream tool on a server's review page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpToolView {
    pub name: String,
    pub catalog_name: String,
    pub status: ToolState,
    pub side_effects: SideEffects,
    pub side_effects_overridden: bool,
    pub description: String,
    pub input_schema: String,
    pub approved_description: Option<String>,
    pub approved_input_schema: Option<String>,
    /// Why the tool is held although nothing of it changed: its name belongs to another server.
    pub collision: Option<String>,
    /// An admin's project-wide name (after the server's prefix) and description, which agents
    /// see instead of the upstream's (`description` stays the upstream's, as reviewed).
    #[serde(default)]
    pub name_override: Option<String>,
    #[serde(default)]
    pub description_override: Option<String>,
}

/// One process of a local (stdio) server on the instance answering, for its page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpProcessView {
    pub state: ProcessState,
    pub pid: Option<u32>,
    pub restarts: u64,
    pub uptime_ms: Option<i64>,
    pub memory_bytes: Option<u64>,
    pub last_exit: Option<String>,
    pub next_start_in_ms: Option<i64>,
    pub confinement: Vec<String>,
    /// Empty for whoever may not edit servers.
    pub stderr_tail: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpServerDetail {
    pub server: McpServerView,
    pub tools: Vec<McpToolView>,
    pub can_manage: bool,
    /// A local server's command line (for whoever may edit servers), else None.
    pub command_line: Option<String>,
    pub processes: Vec<McpProcessView>,
    /// The server's prompts, resources and resource templates (held and vanished ones for
    /// reviewers only).
    #[serde(default)]
    pub items: Vec<McpItemView>,
}
