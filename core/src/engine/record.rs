//! The record of an execution: one tool_calls row, one audit row and the usage counters,
//! written in one transaction at the end. A tool that changes things (`write`, `destructive`)
//! is recorded as `running` before its handler runs and does not run when that fails (the audit
//! log fails closed); a read-only tool still answers when its record cannot be written, and
//! the failure is counted.

use serde::Serialize;
use serde_json::Value;

use super::{CallOptions, CallOutcome, ToolError};
use crate::auth::Principal;
use crate::clock::rfc3339;
use crate::ids::new_id;
use crate::store::{self, audit::AuditRow, tool_calls::ToolCallRow, usage::Meter, Db};
use crate::Result;

/// A recorded call as the REST API shows it.
#[derive(Debug, Clone, Serialize)]
pub struct ToolCallView {
    pub id: String,
    pub tool: String,
    pub status: String,
    pub result: Option<Value>,
    pub error: Option<Value>,
    pub duration_ms: i64,
    pub end_user_id: Option<String>,
    pub created_at: String,
}

/// Audit rows that could not be written since start (read-only tools still ran).
pub static AUDIT_WRITE_FAILURES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn day(ms: i64) -> String {
    rfc3339(ms)[..10].to_owned()
}

fn rows(who: &Principal, args: &Value, opts: &CallOptions, id: &str, tool: &str, status: &str, o: Option<&CallOutcome>, now: i64) -> (ToolCallRow, AuditRow) {
    let (result, error) = match o.map(|o| &o.result) {
        Some(Ok(v)) => (Some(v.to_string()), None),
        Some(Err(e)) => (None, Some(e.to_mcp().to_string())),
        None => (None, None),
    };
    let error_code = o.and_then(|o| o.result.as_ref().err()).map(|e| e.code().to_owned());
    let duration_ms = o.map(|o| o.duration_ms as i64).unwrap_or(0);
    let call = ToolCallRow {
        id: id.to_owned(),
        project_id: who.project_id.clone(),
        user_id: who.user_id.clone(),
        api_key_id: who.api_key_id.clone(),
        tool: tool.to_owned(),
        status: status.to_owned(),
        arguments: args.to_string(),
        result,
        error,
        duration_ms,
        end_user_id: opts.end_user_id.clone(),
        surface: opts.surface.as_str().to_owned(),
        created_at: now,
    };
    let audit = AuditRow {
        id: new_id("aud"),
        project_id: who.project_id.clone(),
        user_id: Some(who.user_id.clone()),
        api_key_id: who.api_key_id.clone(),
        action: "tool.execute".into(),
        tool: Some(tool.to_owned()),
        tool_call_id: Some(id.to_owned()),
        status: status.to_owned(),
        error_code,
        duration_ms: Some(duration_ms),
        end_user_id: opts.end_user_id.clone(),
        surface: opts.surface.as_str().to_owned(),
        detail: None,
        created_at: now,
    };
    (call, audit)
}

/// Records a call as `running` before its handler runs (tools that change things: no record,
/// no call). The rows are finished by `write`.
pub(super) async fn begin(db: &Db, who: &Principal, args: &Value, opts: &CallOptions, id: &str, tool: &str, now: i64) -> Result<()> {
    let (call, audit) = rows(who, args, opts, id, tool, "running", None, now);
    let mut tx = db.pool().begin().await?;
    store::tool_calls::insert(&mut *tx, &call).await?;
    store::audit::insert(&mut *tx, &audit).await?;
    tx.commit().await?;
    Ok(())
}

/// The tool_calls row, the audit row and the usage counters of an execution, in one
/// transaction; `begun` when `begin` wrote the rows as running.
pub(super) async fn write(db: &Db, who: &Principal, args: &Value, opts: &CallOptions, o: &CallOutcome, now: i64, begun: bool) {
    if let Err(e) = try_write(db, who, args, opts, o, now, begun).await {
        AUDIT_WRITE_FAILURES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        tracing::error!(error = %e, call_id = %o.id, tool = %o.tool, "could not record a tool call");
    }
}

async fn try_write(db: &Db, who: &Principal, args: &Value, opts: &CallOptions, o: &CallOutcome, now: i64, begun: bool) -> Result<()> {
    let (call, audit) = rows(who, args, opts, &o.id, &o.tool, o.status(), Some(o), now);
    let key = who.api_key_id.clone().unwrap_or_default();
    // Write-only: a deferred transaction takes the write lock at its first statement.
    let mut tx = db.pool().begin().await?;
    if begun {
        store::tool_calls::finish(&mut *tx, &call).await?;
        store::audit::finish_for_call(&mut *tx, &audit).await?;
    } else {
        store::tool_calls::insert(&mut *tx, &call).await?;
        store::audit::insert(&mut *tx, &audit).await?;
    }
    let d = day(now);
    // Unknown tools are not metered: there is nothing to bill them to.
    if !matches!(o.result, Err(ToolError::NotFound { .. })) {
        let mut meters = vec![(Meter::ToolCall, 1), (Meter::ToolCallMs, o.duration_ms as i64)];
        if o.egress_bytes > 0 {
            meters.push((Meter::EgressBytes, o.egress_bytes as i64));
        }
        store::usage::add_many(&mut *tx, &who.project_id, &key, &o.tool, &d, &meters).await?;
    }
    tx.commit().await?;
    Ok(())
}

/// A call of `who`'s project: a member sees their own calls only (as on the Audit page), an
/// admin every call; anything else is not found.
pub(super) async fn get(db: &Db, who: &Principal, id: &str) -> Result<Option<ToolCallView>> {
    let Some(row) = store::tool_calls::get(db.pool(), &who.project_id, id).await? else {
        return Ok(None);
    };
    if !who.is_admin() && row.user_id != who.user_id {
        return Ok(None);
    }
    let parse = |s: Option<String>| s.and_then(|s| serde_json::from_str::<Value>(&s).ok());
    Ok(Some(ToolCallView {
        id: row.id,
        tool: row.tool,
        status: row.status,
        result: parse(row.result),
        error: parse(row.error),
        duration_ms: row.duration_ms,
        end_user_id: row.end_user_id,
        created_at: rfc3339(row.created_at),
    }))
}
