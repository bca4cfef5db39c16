//! The record of an execution: one tool_calls row, one audit row and the usage counters,
//! queued together on the record writer (audit/writer.rs) when the call ends. A tool that
//! changes things (`write`, `destructive`) is first recorded as `running`, synchronously, before
//! its handler runs, and does not run when that fails (the audit log fails closed); a read-only
//! tool still answers when its record cannot be written, and the failure is counted.

use serde::Serialize;
use serde_json::Value;

use super::{CallOptions, CallOutcome, ToolError};
use crate::audit::{Record, Recorder, UsageAdd, Write};
use crate::auth::Principal;
use crate::clock::rfc3339;
use crate::ids::new_id;
use crate::store::{
    self,
    audit::AuditRow,
    tool_calls::{CallStatus, ToolCallRow},
    usage::Meter,
    Db,
};
use crate::Result;

/// A recorded call as the REST API shows it.
#[derive(Debug, Clone, Serialize)]
pub struct ToolCallView {
    pub id: String,
    pub tool: String,
    pub status: CallStatus,
    pub result: Option<Value>,
    pub error: Option<Value>,
    pub duration_ms: i64,
    pub end_user_id: Option<String>,
    pub created_at: String,
}

pub use crate::audit::AUDIT_WRITE_FAILURES;

/// The meters' name for calls to tools that do not exist.
pub const UNKNOWN_TOOL: &str = "(unknown tool)";

fn day(ms: i64) -> String {
    rfc3339(ms)[..10].to_owned()
}

/// Which rows an execution's record writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Rows {
    /// A new tool_calls row and audit row.
    New,
    /// The rows exist (written as `running` before the handler, or when the call was held
    /// for confirmation): they are finished.
    Existing,
    /// An identical repeat of a held call: it answers that call's state, so only an audit row
    /// (`tool.replay`) and the meters; the held call's rows stay as they are.
    Replay,
}

/// The call a record is written for: who made it and how, the arguments to keep (the agent's
/// template, scrubbed) and when it started.
pub(super) struct Call<'a> {
    pub who: &'a Principal,
    pub opts: &'a CallOptions,
    pub args: &'a Value,
    pub at: i64,
}

/// The rows of `c` with call id `id` as `status`, finished with `o` when it has ended.
fn rows(
    c: &Call<'_>,
    id: &str,
    tool: &str,
    status: CallStatus,
    o: Option<&CallOutcome>,
) -> (ToolCallRow, AuditRow) {
    let Call {
        who,
        opts,
        args,
        at: now,
    } = *c;
    let (result, error) = match o.map(|o| &o.result) {
        Some(Ok(v)) => (Some(v.to_string()), None),
        Some(Err(e)) => (None, Some(e.to_mcp().to_string())),
        None => (None, None),
    };
    let error_code = o
        .and_then(|o| o.result.as_ref().err())
        .map(|e| e.code().to_owned());
    let duration_ms = o.map(|o| o.duration_ms as i64).unwrap_or(0);
    let result_bytes = result.as_ref().map(|r| r.len() as i64);
    let call = ToolCallRow {
        id: id.to_owned(),
        project_id: who.project_id.clone(),
        user_id: who.user_id.clone(),
        api_key_id: who.api_key_id.clone(),
        tool: tool.to_owned(),
        status,
        arguments: args.to_string(),
        result,
        error,
        duration_ms,
        end_user_id: opts.end_user_id.clone(),
        surface: opts.surface.as_str().to_owned(),
        created_at: now,
        result_bytes,
        idempotency_key: opts.idempotency_key.clone(),
    };
    let audit = AuditRow {
        id: new_id("aud"),
        project_id: who.project_id.clone(),
        user_id: Some(who.user_id.clone()),
        api_key_id: who.api_key_id.clone(),
        action: if o.is_some_and(|o| o.rows == Rows::Replay) {
            "tool.replay".into()
        } else {
            "tool.execute".into()
        },
        tool: Some(tool.to_owned()),
        tool_call_id: Some(id.to_owned()),
        status: status.into(),
        error_code,
        duration_ms: Some(duration_ms),
        end_user_id: opts.end_user_id.clone(),
        surface: opts.surface.as_str().to_owned(),
        detail: o
            .and_then(|o| o.confirmation_id.as_ref())
            .map(|c| format!("confirmation {c}")),
        tool_set: opts.tool_set.clone(),
        created_at: now,
    };
    (call, audit)
}

/// Records a call as `running` before its handler runs (tools that change things: no record,
/// no call); `existing` when its rows exist already (a held call, now approved). The rows are
/// committed with those of calls starting at the same moment (`Recorder::begin`) and finished
/// by `write`.
pub(super) async fn begin(
    recorder: &Recorder,
    c: &Call<'_>,
    id: &str,
    tool: &str,
    existing: bool,
) -> Result<()> {
    let (call, audit) = rows(c, id, tool, CallStatus::Running, None);
    let how = if existing {
        Write::Finish
    } else {
        Write::Insert
    };
    recorder
        .begin(Record {
            call: Some((call, how)),
            audit: Some((audit, how)),
            usage: None,
        })
        .await
}

/// The tool as meters and traces name it: calls to unknown tools (D17) come under one name no
/// tool can have, so made-up names cannot grow the counters without bound.
pub(super) fn metered_tool(o: &CallOutcome) -> &str {
    if matches!(o.result, Err(ToolError::NotFound { .. })) {
        UNKNOWN_TOOL
    } else {
        &o.tool
    }
}

/// How a call ended for meters and traces: `ok` or the error code.
pub(super) fn outcome_label(o: &CallOutcome) -> &'static str {
    match &o.result {
        Ok(_) => "ok",
        Err(e) => e.code(),
    }
}

/// Queues the tool_calls row, the audit row and the usage counters of an execution (one
/// transaction when written), as `o.rows` says.
pub(super) async fn write(recorder: &Recorder, c: &Call<'_>, o: &CallOutcome) {
    let (call, audit) = rows(c, &o.id, &o.tool, o.status(), Some(o));
    let Call {
        who, opts, at: now, ..
    } = *c;
    // Calls to unknown tools count too (D17), under one name.
    let metered_tool = metered_tool(o).to_owned();
    let usage = Some(()).map(|()| {
        let mut meters = vec![
            (Meter::ToolCall, 1),
            (Meter::ToolCallMs, o.duration_ms as i64),
        ];
        if o.egress_bytes > 0 {
            meters.push((Meter::EgressBytes, o.egress_bytes as i64));
        }
        UsageAdd {
            project_id: who.project_id.clone(),
            api_key_id: who.api_key_id.clone().unwrap_or_default(),
            tool: metered_tool.clone(),
            day: day(now),
            meters,
        }
    });
    recorder.metrics().observe(
        &metered_tool,
        opts.surface.as_str(),
        outcome_label(o),
        o.duration_us,
    );
    let (call, audit) = match o.rows {
        Rows::New => (Some((call, Write::Insert)), (audit, Write::Insert)),
        Rows::Existing => (Some((call, Write::Finish)), (audit, Write::Finish)),
        Rows::Replay => (None, (audit, Write::Insert)),
    };
    recorder
        .write(Record {
            call,
            audit: Some(audit),
            usage,
        })
        .await;
}

/// A call of `who`'s project: a member sees their own calls only (as on the Audit page), an
/// admin every call; anything else is not found.
pub(super) async fn get(
    db: &Db,
    recorder: &Recorder,
    who: &Principal,
    id: &str,
) -> Result<Option<ToolCallView>> {
    recorder.flush().await;
    let Some(row) = store::tool_calls::get(db.pool(), &who.project_id, id).await? else {
        return Ok(None);
    };
    if !who.sees_project_records() && row.user_id != who.user_id {
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
