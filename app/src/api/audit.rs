//! Server functions of the Audit pages: one filtered page of the audit log, one row in full,
//! and the project's retention setting.

use leptos::prelude::*;

use crate::AppError;
pub use workbench_model::audit::{AuditData, AuditDetailView, AuditRowView, AuditStatus};

#[cfg(feature = "ssr")]
use crate::ssr;

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
        Some(id) => keys
            .iter()
            .find(|k| &k.id == id)
            .map(|k| format!("{} ({})", k.name, k.prefix))
            .unwrap_or_else(|| id.clone()),
        None => "portal".to_owned(),
    };
    let page = wb
        .audit()
        .page(
            &p,
            &AuditQuery {
                tool,
                tool_set: None,
                status,
                api_key_id: key,
                cursor,
            },
        )
        .await?;
    let rows = page
        .entries
        .into_iter()
        .map(|e| {
            Ok(AuditRowView {
                id: e.id,
                at: display_time(e.at_ms),
                key: label(&e.api_key_id),
                action: e.action,
                tool: e.tool.unwrap_or_default(),
                status: e.status,
                error_code: e.error_code.unwrap_or_default(),
                duration_ms: e.duration_ms,
                surface: match e.tool_set {
                    Some(set) => format!("{} · set {set}", e.surface),
                    None => e.surface,
                },
                call_id: e.tool_call_id.unwrap_or_default(),
            })
        })
        .collect::<Result<_, AppError>>()?;
    Ok(AuditData {
        rows,
        next: page.next,
        keys: keys
            .iter()
            .map(|k| (k.id.clone(), format!("{} ({})", k.name, k.prefix)))
            .collect(),
        is_admin: p.sees_project_records(),
        retention_days: wb.audit().retention_days(&p).await?,
        can_manage: p.allows(workbench_core::auth::Operation::AuditManage),
    })
}

#[server(endpoint = "audit_detail")]
pub async fn audit_detail(id: String) -> Result<AuditDetailView, AppError> {
    let p = ssr::principal().await?;
    let d = ssr::wb()?.audit().detail(&p, &id).await?;
    let pretty = |v: &serde_json::Value| serde_json::to_string_pretty(v).unwrap_or_default();
    let (arguments, error, result_bytes, idempotency_key) = match &d.call {
        Some(c) => (
            Some(pretty(&c.arguments)),
            c.error.as_ref().map(pretty),
            c.result_bytes,
            c.idempotency_key.clone(),
        ),
        None => (None, None, None, None),
    };
    let c = d.confirmation.as_ref();
    Ok(AuditDetailView {
        at: d.at.clone(),
        action: d.action.clone(),
        tool: d.tool.clone().unwrap_or_default(),
        status: d.status,
        error_code: d.error_code.clone().unwrap_or_default(),
        duration_ms: d.duration_ms,
        surface: match &d.tool_set {
            Some(set) => format!("{} · set {set}", d.surface),
            None => d.surface.clone(),
        },
        user: d
            .user_email
            .clone()
            .or(d.user_id.clone())
            .unwrap_or_default(),
        key: match (&d.api_key_name, &d.api_key_id) {
            (Some(name), Some(id)) => format!("{name} ({id})"),
            (None, Some(id)) => id.clone(),
            _ => "portal".into(),
        },
        end_user_id: d.end_user_id.clone(),
        detail: d.detail.clone(),
        tool_call_id: d.tool_call_id.clone(),
        arguments,
        error,
        result_bytes,
        idempotency_key,
        confirmation_id: c.map(|c| c.id.clone()),
        confirmation_status: c.map(|c| c.status),
        decided_by: c.and_then(|c| c.decided_by_email.clone().or(c.decided_by.clone())),
        decided_at: c.and_then(|c| c.decided_at.clone()),
        decision_reason: c.and_then(|c| c.reason.clone()),
        id: d.id,
    })
}

/// Sets how many days audit rows are kept; empty keeps everything.
#[server(endpoint = "save_retention")]
pub async fn save_retention(days: String) -> Result<(), AppError> {
    let p = ssr::principal().await?;
    let days = match days.trim() {
        "" => None,
        d => Some(d.parse::<i64>().map_err(|_| {
            AppError::Message(
                "retention must be a whole number of days, or empty to keep everything".into(),
            )
        })?),
    };
    ssr::wb()?.audit().set_retention_days(&p, days).await?;
    Ok(())
}
