//! Tool sets as the portal's Tool sets page shows them.

use serde::{Deserialize, Serialize};

/// The project's tool sets, and whether the viewer may change them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolSetsData {
    pub sets: Vec<ToolSetItem>,
    pub can_manage: bool,
}

/// One set: its endpoint, its tools as listed there, and the keys limited to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolSetItem {
    pub id: String,
    pub slug: String,
    pub name: String,
    pub description: String,
    /// The set's MCP endpoint, `<public url>/mcp/sets/<slug>`.
    pub endpoint: String,
    pub tools: Vec<SetToolItem>,
    /// Names of the live keys limited to this set.
    pub keys: Vec<String>,
    pub updated_at: String,
    /// Whether it also publishes its MCP servers' prompts and resources.
    #[serde(default)]
    pub prompts_and_resources: bool,
}

/// One tool of a set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetToolItem {
    /// The catalog tool.
    pub tool: String,
    /// The name the endpoint lists it under.
    pub name: String,
    /// The set's own description of it, if it has one.
    pub description: Option<String>,
    /// The arguments the set fixes (names only).
    pub fixed: Vec<String>,
    /// The tool is no longer in the project's catalog (the endpoint leaves it out).
    pub missing: bool,
}
