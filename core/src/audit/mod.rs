//! Reading the audit log: admins see the whole project, members their own rows; newest first,
//! filtered by tool, status and key, paged with an opaque cursor. Rows are written through the
//! record writer (writer.rs); one row in full is detail.rs, deleting old rows retention.rs.

mod detail;
mod retention;
mod writer;

pub use detail::{AuditDetail, CallDetail, ConfirmationDetail};
pub use retention::{check_retention_days, RetentionReport, MAX_RETENTION_DAYS, RETENTION_BATCH};
pub use writer::{Record, Recorder, UsageAdd, Write, AUDIT_WRITE_FAILURES};

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::auth::Principal;
use crate::clock::{rfc3339, Clock};
use crate::store::{
    self,
    audit::{AuditFilter, AuditStatus},
    Db,
};
use crate::vault::Vault;
use crate::{Error, Result};

pub const PAGE_SIZE: i64 = 50;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditQuery {
    pub tool: Option<String>,
    /// Only calls that came through this tool set (its slug).
    #[serde(default)]
    pub tool_set: Option<String>,
    pub status: Option<String>,
    pub api_key_id: Option<String>,
    /// The `next` cursor of the previous page.
    pub cursor: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEntry {
    pub id: String,
    pub at: String,
    pub at_ms: i64,
    pub user_id: Option<String>,
    pub api_key_id: Option<String>,
    pub action: String,
    pub tool: Option<String>,
    pub tool_call_id: Option<String>,
    pub status: AuditStatus,
    pub error_code: Option<String>,
    pub duration_ms: Option<i64>,
    pub surface: String,
    /// The tool set (slug) the call came through.
    #[serde(default)]
    pub tool_set: Option<String>,
}

/// Tool calls since a moment, by how they ended (the portal's Overview).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallCounts {
    pub by_status: Vec<(AuditStatus, i64)>,
    /// Calls a rate limit refused (counted under `failed` too).
    pub rate_limited: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditPage {
    pub entries: Vec<AuditEntry>,
    pub next: Option<String>,
}

#[derive(Clone)]
pub struct AuditLog {
    db: Db,
    recorder: Recorder,
    vault: Vault,
    clock: Arc<dyn Clock>,
}

/// A page cursor `<created_at>.<id>` (audit rows, scheduled callbacks) back into its parts.
pub(crate) fn parse_cursor(c: &str) -> Result<(i64, String)> {
    let bad = || Error::invalid("invalid cursor; start again from the first page");
    let (at, id) = c.split_once('.').ok_or_else(bad)?;
    Ok((at.parse().map_err(|_| bad())?, id.to_owned()))
}

/// A status filter: one of the audit statuses, or a clear error naming them.
fn parse_status(s: &str) -> Result<AuditStatus> {
    AuditStatus::parse(s).ok_or_else(|| {
        let words: Vec<&str> = AuditStatus::ALL.iter().map(|s| s.as_str()).collect();
        Error::invalid(format!("status must be one of {}", words.join(", ")))
    })
}

impl AuditLog {
    pub fn new(db: Db, recorder: Recorder, vault: Vault, clock: Arc<dyn Clock>) -> Self {
        AuditLog {
            db,
            recorder,
            vault,
            clock,
        }
    }

    /// Returns once every record queued so far is written (readers of the log call it first).
    pub async fn flush(&self) {
        self.recorder.flush().await;
    }

    /// Tool calls since `since` (ms) by status: the project's for whoever sees every member's
    /// records, else the caller's own.
    pub async fn calls_since(&self, who: &Principal, since: i64) -> Result<CallCounts> {
        let user = (!who.sees_project_records()).then_some(who.user_id.as_str());
        let (rows, rate_limited) =
            store::audit::calls_since(self.db.pool(), &who.project_id, user, since).await?;
        Ok(CallCounts {
            by_status: rows
                .into_iter()
                .filter_map(|(s, n)| Some((s.parse().ok()?, n)))
                .collect(),
            rate_limited,
        })
    }

    pub async fn page(&self, who: &Principal, q: &AuditQuery) -> Result<AuditPage> {
        let filter = AuditFilter {
            tool: q.tool.clone().filter(|s| !s.is_empty()),
            tool_set: q.tool_set.clone().filter(|s| !s.is_empty()),
            status: q
                .status
                .as_deref()
                .filter(|s| !s.is_empty())
                .map(parse_status)
                .transpose()?,
            api_key_id: q.api_key_id.clone().filter(|s| !s.is_empty()),
            before: q
                .cursor
                .as_deref()
                .filter(|s| !s.is_empty())
                .map(parse_cursor)
                .transpose()?,
            user_id: (!who.sees_project_records()).then(|| who.user_id.clone()),
        };
        self.recorder.flush().await;
        let mut rows =
            store::audit::list(self.db.pool(), &who.project_id, &filter, PAGE_SIZE + 1).await?;
        let next = if rows.len() as i64 > PAGE_SIZE {
            rows.truncate(PAGE_SIZE as usize);
            rows.last().map(|r| format!("{}.{}", r.created_at, r.id))
        } else {
            None
        };
        Ok(AuditPage {
            entries: rows
                .into_iter()
                .map(|r| AuditEntry {
                    id: r.id,
                    at: rfc3339(r.created_at),
                    at_ms: r.created_at,
                    user_id: r.user_id,
                    api_key_id: r.api_key_id,
                    action: r.action,
                    tool: r.tool,
                    tool_call_id: r.tool_call_id,
                    status: r.status,
                    error_code: r.error_code,
                    duration_ms: r.duration_ms,
                    surface: r.surface,
                    tool_set: r.tool_set,
                })
                .collect(),
            next,
        })
    }
}

/// One proxied request, as the audit log and the meters see it.
#[derive(Debug, Clone)]
pub struct ProxyEvent<'a> {
    pub who: &'a Principal,
    pub integration: &'a str,
    pub method: &'a str,
    pub path: &'a str,
    pub status: u16,
    pub egress_bytes: u64,
    pub duration_ms: u64,
    pub at_ms: i64,
}

impl AuditLog {
    /// Records a curl proxy request: one audit row (method, path and status, never headers or
    /// bodies) and its egress bytes under the meter of `curl:<integration>`, queued on the
    /// record writer.
    pub async fn record_proxy(&self, e: &ProxyEvent<'_>) {
        let status = if (200..400).contains(&e.status) {
            AuditStatus::Succeeded
        } else {
            AuditStatus::Failed
        };
        let tool = format!("curl:{}", e.integration);
        let audit = store::audit::AuditRow {
            id: crate::ids::new_id("aud"),
            project_id: e.who.project_id.clone(),
            user_id: Some(e.who.user_id.clone()),
            api_key_id: None,
            action: "proxy.request".into(),
            tool: Some(tool.clone()),
            tool_call_id: None,
            status,
            error_code: (status == AuditStatus::Failed).then(|| format!("HTTP_{}", e.status)),
            duration_ms: Some(e.duration_ms as i64),
            end_user_id: None,
            surface: "proxy".into(),
            detail: Some(format!(
                "{} {} → {}",
                e.method,
                e.path.chars().take(300).collect::<String>(),
                e.status
            )),
            created_at: e.at_ms,
            tool_set: None,
        };
        let usage = egress(
            &e.who.project_id,
            String::new(),
            tool,
            e.at_ms,
            e.egress_bytes,
        );
        self.record_event(audit, Some(usage)).await;
    }

    /// Queues one audit row, and a meter count with it, on the record writer.
    async fn record_event(&self, audit: store::audit::AuditRow, usage: Option<UsageAdd>) {
        self.recorder
            .write(Record {
                call: None,
                audit: Some((audit, Write::Insert)),
                usage,
            })
            .await;
    }
}

/// `bytes` of egress under `tool`'s meter, on the day of `at_ms`.
fn egress(project_id: &str, api_key_id: String, tool: String, at_ms: i64, bytes: u64) -> UsageAdd {
    UsageAdd {
        project_id: project_id.to_owned(),
        api_key_id,
        tool,
        day: rfc3339(at_ms)[..10].to_owned(),
        meters: vec![(store::usage::Meter::EgressBytes, bytes as i64)],
    }
}

/// One prompt fetched or resource read of an upstream MCP server through a tool set.
#[derive(Debug, Clone)]
pub struct ItemEvent<'a> {
    pub who: &'a Principal,
    /// `prompt.get` or `resource.read`.
    pub action: &'a str,
    /// The policy subject (`prompt:<name>`, `resource:<uri>`).
    pub subject: &'a str,
    pub tool_set: &'a str,
    /// `succeeded`, `failed` or `denied`.
    pub status: AuditStatus,
    pub error_code: Option<&'a str>,
    /// The argument names or the URI asked for (scrubbed by the caller); never values.
    pub detail: &'a str,
    pub egress_bytes: u64,
    pub duration_ms: u64,
    pub at_ms: i64,
}

impl AuditLog {
    /// Records a prompt or resource of an upstream server as used through a tool set: one
    /// audit row (what was asked, never what came back) and its egress bytes under the
    /// subject's meter, queued on the record writer.
    pub async fn record_item(&self, e: &ItemEvent<'_>) {
        let audit = store::audit::AuditRow {
            id: crate::ids::new_id("aud"),
            project_id: e.who.project_id.clone(),
            user_id: Some(e.who.user_id.clone()),
            api_key_id: e.who.api_key_id.clone(),
            action: e.action.to_owned(),
            tool: Some(e.subject.chars().take(300).collect()),
            tool_call_id: None,
            status: e.status,
            error_code: e.error_code.map(str::to_owned),
            duration_ms: Some(e.duration_ms as i64),
            end_user_id: None,
            surface: "mcp".into(),
            detail: Some(e.detail.chars().take(300).collect()),
            created_at: e.at_ms,
            tool_set: Some(e.tool_set.to_owned()),
        };
        let usage = (e.egress_bytes > 0).then(|| {
            egress(
                &e.who.project_id,
                e.who.api_key_id.clone().unwrap_or_default(),
                e.subject.chars().take(300).collect(),
                e.at_ms,
                e.egress_bytes,
            )
        });
        self.record_event(audit, usage).await;
    }
}
