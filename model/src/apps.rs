//! The Apps page's views: custom apps and what an OpenAPI import becomes.

use serde::{Deserialize, Serialize};

use crate::catalog::SideEffects;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppView {
    pub id: String,
    pub name: String,
    pub display_name: String,
    pub auth_type: String,
    pub base_url: String,
    pub tools: Vec<String>,
    pub created_at: String,
    /// Why the stored app is not loaded (its tools are not in the catalog).
    pub load_error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppsData {
    pub apps: Vec<AppView>,
    pub can_manage: bool,
    /// What an OAuth app registers at its provider as redirect URI.
    pub redirect_uri: String,
}

/// One operation of an OpenAPI document and what it became.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImportOperation {
    pub operation_id: Option<String>,
    pub method: String,
    pub path: String,
    pub summary: Option<String>,
    pub tool: Option<String>,
    pub side_effects: Option<SideEffects>,
    pub selected: bool,
    pub skipped: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImportPreviewView {
    pub display_name: Option<String>,
    pub base_url: Option<String>,
    pub operations: Vec<ImportOperation>,
    pub warnings: Vec<String>,
    pub problem: Option<String>,
}
