//! Server functions of the Audit page: one filtered page of the audit log.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::AppError;

#[cfg(feature = "ssr")]
use crate::ssr;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditRowView {
    pub at: String,
    pub action: String,
    pub tool: String,
    pub status: String,
    pub error_code: String,
    pub duration_ms: Option<i64>,
    pub key: String,
    pub surface: String,
    pub call_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditData {
    pub rows: Vec<AuditRowView>,
    pub next: Option<String>,
    /// (id, label) of the keys the filter offers.
    pub keys: Vec<(String, String)>,
    pub is_admin: bool,
}

/// A page of the audit log, newest first; admins see the project, members their own calls.
#[server(endpoint = "audit_page")]
pub async fn audit_page(
    tool: Option<String>,
    status: Option<String>,
    key: Option<String>,
    cursor: Option<String>,
) -> Result<AuditData, AppError> {
    use workbench_core::audit::AuditQuery;
    use workbench_core::clock::display_time;
    let p = ssr::principal().await?;
    let wb = ssr::wb()?;
    let keys = wb.accounts().list_api_keys(&p).await?;
    let label = |id: &Option<String>| match id {
        Some(id) => keys.iter().find(|k| &k.id == id).map(|k| format!("{} ({})", k.name, k.prefix)).unwrap_or_else(|| id.clone()),
        None => "portal".to_owned(),
    };
    let page = wb.audit().page(&p, &AuditQuery { tool, status, api_key_id: key, cursor }).await?;
    let rows = page
        .entries
        .into_iter()
        .map(|e| AuditRowView {
            at: display_time(e.at_ms),
            key: label(&e.api_key_id),
            action: e.action,
            tool: e.tool.unwrap_or_default(),
            status: e.status,
            error_code: e.error_code.unwrap_or_default(),
            duration_ms: e.duration_ms,
            surface: e.surface,
            call_id: e.tool_call_id.unwrap_or_default(),
        })
        .collect();
    Ok(AuditData {
        rows,
        next: page.next,
        keys: keys.iter().map(|k| (k.id.clone(), format!("{} ({})", k.name, k.prefix))).collect(),
        is_admin: p.is_admin(),
    })
}
