//! The last step of the pipeline: one tool_calls row, one audit row and the usage counters of
//! an execution, written in one transaction.

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

pub(super) async fn write(db: &Db, who: &Principal, args: &Value, opts: &CallOptions, o: &CallOutcome, now: i64) {
    if let Err(e) = try_write(db, who, args, opts, o, now).await {
        tracing::error!(error = %e, call_id = %o.id, tool = %o.tool, "could not record a tool call");
    }
}

fn day(ms: i64) -> String {
    rfc3339(ms)[..10].to_owned()
}

async fn try_write(db: &Db, who: &Principal, args: &Value, opts: &CallOptions, o: &CallOutcome, now: i64) -> Result<()> {
    let status = o.status();
    let (result, error) = match &o.result {
        Ok(v) => (Some(v.to_string()), None),
        Err(e) => (None, Some(e.to_mcp().to_string())),
    };
    let error_code = o.result.as_ref().err().map(|e| e.code().to_owned());
    let key = who.api_key_id.clone().unwrap_or_default();
    // Write-only: a deferred transaction takes the write lock at its first insert.
    let mut tx = db.pool().begin().await?;
    store::tool_calls::insert(
        &mut *tx,
        &ToolCallRow {
            id: o.id.clone(),
            project_id: who.project_id.clone(),
            user_id: who.user_id.clone(),
            api_key_id: who.api_key_id.clone(),
            tool: o.tool.clone(),
            status: status.to_owned(),
            arguments: args.to_string(),
            result,
            error,
            duration_ms: o.duration_ms as i64,
            end_user_id: opts.end_user_id.clone(),
            surface: opts.surface.as_str().to_owned(),
            created_at: now,
        },
    )
    .await?;
    store::audit::insert(
        &mut *tx,
        &AuditRow {
            id: new_id("aud"),
            project_id: who.project_id.clone(),
            user_id: Some(who.user_id.clone()),
            api_key_id: who.api_key_id.clone(),
            action: "tool.execute".into(),
            tool: Some(o.tool.clone()),
            tool_call_id: Some(o.id.clone()),
            status: status.to_owned(),
            error_code,
            duration_ms: Some(o.duration_ms as i64),
            end_user_id: opts.end_user_id.clone(),
            surface: opts.surface.as_str().to_owned(),
            detail: None,
            created_at: now,
        },
    )
    .await?;
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
