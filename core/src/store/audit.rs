//! The audit log: one row per execution attempt (tool calls, proxy requests, connections),
//! whatever its outcome. Rows never hold secrets: callers scrub before writing.

use sqlx::FromRow;

use super::{script::Script, Exec, INSERT_ROWS_MAX};
use crate::Result;

pub use workbench_model::audit::AuditStatus;

#[derive(Debug, Clone, FromRow, PartialEq, Eq)]
pub struct AuditRow {
    pub id: String,
    pub project_id: String,
    pub user_id: Option<String>,
    pub api_key_id: Option<String>,
    pub action: String,
    pub tool: Option<String>,
    pub tool_call_id: Option<String>,
    #[sqlx(try_from = "String")]
    pub status: AuditStatus,
    pub error_code: Option<String>,
    pub duration_ms: Option<i64>,
    pub end_user_id: Option<String>,
    pub surface: String,
    pub detail: Option<String>,
    pub created_at: i64,
    /// The tool set (slug) the call came through.
    pub tool_set: Option<String>,
}

const COLUMNS: &str =
    "id, project_id, user_id, api_key_id, action, tool, tool_call_id, status, error_code, \
     duration_ms, end_user_id, surface, detail, created_at, tool_set";

pub async fn insert<'e>(ex: impl Exec<'e>, r: &AuditRow) -> Result<()> {
    insert_many(ex, &[r]).await
}

/// Inserts up to `INSERT_ROWS_MAX` rows in one statement (the record writer's batches).
pub async fn insert_many<'e>(ex: impl Exec<'e>, rows: &[&AuditRow]) -> Result<()> {
    let mut s = Script::separate();
    push_insert(&mut s, rows);
    s.execute(ex).await
}

/// Adds to `s` the INSERT of up to `INSERT_ROWS_MAX` rows (none when `rows` is empty).
pub fn push_insert<'q>(s: &mut Script<'q>, rows: &[&'q AuditRow]) {
    assert!(
        rows.len() <= INSERT_ROWS_MAX,
        "at most INSERT_ROWS_MAX rows"
    );
    if rows.is_empty() {
        return;
    }
    s.statement("INSERT INTO audit_events (");
    s.sql(COLUMNS);
    s.sql(") VALUES ");
    s.values(rows.len(), 15);
    for r in rows {
        s.bind(&r.id);
        s.bind(&r.project_id);
        s.bind(&r.user_id);
        s.bind(&r.api_key_id);
        s.bind(&r.action);
        s.bind(&r.tool);
        s.bind(&r.tool_call_id);
        s.bind(r.status.as_str());
        s.bind(&r.error_code);
        s.bind(r.duration_ms);
        s.bind(&r.end_user_id);
        s.bind(&r.surface);
        s.bind(&r.detail);
        s.bind(r.created_at);
        s.bind(&r.tool_set);
    }
}

/// Finishes the audit row of a call recorded as `running` before its handler ran.
pub async fn finish_for_call<'e>(ex: impl Exec<'e>, r: &AuditRow) -> Result<()> {
    sqlx::query("UPDATE audit_events SET status = $1, error_code = $2, duration_ms = $3 WHERE tool_call_id = $4 AND project_id = $5 AND action = 'tool.execute'")
        .bind(r.status.as_str())
        .bind(&r.error_code)
        .bind(r.duration_ms)
        .bind(&r.tool_call_id)
        .bind(&r.project_id)
        .execute(ex)
        .await?;
    Ok(())
}

/// Finishes the audit rows of up to `INSERT_ROWS_MAX` calls in one statement (the record
/// writer's batches).
pub async fn finish_for_calls<'e>(ex: impl Exec<'e>, rows: &[&AuditRow]) -> Result<()> {
    let mut s = Script::separate();
    push_finish_for_calls(&mut s, rows);
    s.execute(ex).await
}

/// Adds to `s` the UPDATE finishing the audit rows of up to `INSERT_ROWS_MAX` calls (none when
/// `rows` is empty).
pub fn push_finish_for_calls<'q>(s: &mut Script<'q>, rows: &[&'q AuditRow]) {
    assert!(
        rows.len() <= INSERT_ROWS_MAX,
        "at most INSERT_ROWS_MAX rows"
    );
    if rows.is_empty() {
        return;
    }
    // A VALUES list's columns are column1, column2, … on both engines.
    s.statement(
        "UPDATE audit_events SET status = v.column1, error_code = v.column2, duration_ms = v.column3 FROM (VALUES ",
    );
    s.values(rows.len(), 5);
    s.sql(
        ") AS v WHERE audit_events.tool_call_id = v.column4 AND audit_events.project_id = v.column5 \
         AND audit_events.action = 'tool.execute'",
    );
    for r in rows {
        s.bind(r.status.as_str());
        s.bind(&r.error_code);
        s.bind(r.duration_ms);
        s.bind(&r.tool_call_id);
        s.bind(&r.project_id);
    }
}

/// Filters of the audit page; `None` means any.
#[derive(Debug, Clone, Default)]
pub struct AuditFilter {
    pub tool: Option<String>,
    /// Only calls that came through this tool set.
    pub tool_set: Option<String>,
    pub status: Option<AuditStatus>,
    pub api_key_id: Option<String>,
    /// Only this user's rows.
    pub user_id: Option<String>,
    /// Rows strictly older than this `(created_at, id)` cursor (newest-first paging).
    pub before: Option<(i64, String)>,
}

/// Newest first, at most `limit` rows.
pub async fn list<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    f: &AuditFilter,
    limit: i64,
) -> Result<Vec<AuditRow>> {
    let mut sql = format!("SELECT {COLUMNS} FROM audit_events WHERE project_id = $1");
    let mut n = 1;
    let mut next = |sql: &mut String, clause: &str| {
        n += 1;
        sql.push_str(&clause.replace('?', &format!("${n}")));
    };
    if f.tool.is_some() {
        next(&mut sql, " AND tool = ?");
    }
    if f.tool_set.is_some() {
        next(&mut sql, " AND tool_set = ?");
    }
    if f.status.is_some() {
        next(&mut sql, " AND status = ?");
    }
    if f.api_key_id.is_some() {
        next(&mut sql, " AND api_key_id = ?");
    }
    if f.user_id.is_some() {
        next(&mut sql, " AND user_id = ?");
    }
    if f.before.is_some() {
        n += 1;
        let a = n;
        n += 1;
        let b = n;
        sql.push_str(&format!(
            " AND (created_at < ${a} OR (created_at = ${a} AND id < ${b}))"
        ));
    }
    n += 1;
    sql.push_str(&format!(" ORDER BY created_at DESC, id DESC LIMIT ${n}"));
    let mut q = sqlx::query_as::<_, AuditRow>(&sql).bind(project_id);
    if let Some(t) = &f.tool {
        q = q.bind(t);
    }
    if let Some(t) = &f.tool_set {
        q = q.bind(t);
    }
    if let Some(s) = f.status {
        q = q.bind(s.as_str());
    }
    if let Some(k) = &f.api_key_id {
        q = q.bind(k);
    }
    if let Some(u) = &f.user_id {
        q = q.bind(u);
    }
    if let Some((at, id)) = &f.before {
        q = q.bind(*at).bind(id);
    }
    Ok(q.bind(limit).fetch_all(ex).await?)
}

/// Audit rows of one tool call (normally exactly one).
pub async fn for_tool_call<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    tool_call_id: &str,
) -> Result<Vec<AuditRow>> {
    Ok(sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM audit_events WHERE project_id = $1 AND tool_call_id = $2 ORDER BY created_at"
    ))
    .bind(project_id)
    .bind(tool_call_id)
    .fetch_all(ex)
    .await?)
}

/// One audit row of the project.
pub async fn get<'e>(ex: impl Exec<'e>, project_id: &str, id: &str) -> Result<Option<AuditRow>> {
    Ok(sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM audit_events WHERE project_id = $1 AND id = $2"
    ))
    .bind(project_id)
    .bind(id)
    .fetch_optional(ex)
    .await?)
}

/// Deletes at most `limit` of the project's audit rows created before `before`, oldest first;
/// how many (retention deletes in small batches so writers are never held up for long). The row
/// of a call a live confirmation still holds stays: approving it finishes that row.
pub async fn delete_older<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    before: i64,
    now: i64,
    limit: i64,
) -> Result<u64> {
    let r = sqlx::query(
        "DELETE FROM audit_events WHERE id IN (SELECT a.id FROM audit_events a WHERE a.project_id = $1 AND a.created_at < $2 \
         AND NOT (a.tool_call_id IS NOT NULL AND EXISTS (SELECT 1 FROM confirmations c WHERE c.tool_call_id = a.tool_call_id \
         AND c.status = 'pending' AND c.expires_at > $3)) ORDER BY a.created_at LIMIT $4)",
    )
    .bind(project_id)
    .bind(before)
    .bind(now)
    .bind(limit)
    .execute(ex)
    .await?;
    Ok(r.rows_affected())
}

/// Tool executions since `since` by status, and how many of them a rate limit refused
/// (`user_id`: only that user's).
pub async fn calls_since<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    user_id: Option<&str>,
    since: i64,
) -> Result<(Vec<(String, i64)>, i64)> {
    let mine = if user_id.is_some() {
        " AND user_id = $3"
    } else {
        ""
    };
    let sql = format!(
        "SELECT status, COUNT(*), SUM(CASE WHEN error_code = 'RATE_LIMITED' THEN 1 ELSE 0 END) \
         FROM audit_events WHERE project_id = $1 AND created_at >= $2 AND action = 'tool.execute'{mine} \
         GROUP BY status ORDER BY status"
    );
    let mut q = sqlx::query_as::<_, (String, i64, i64)>(&sql)
        .bind(project_id)
        .bind(since);
    if let Some(u) = user_id {
        q = q.bind(u);
    }
    let rows = q.fetch_all(ex).await?;
    let limited = rows.iter().map(|r| r.2).sum();
    Ok((rows.into_iter().map(|(s, n, _)| (s, n)).collect(), limited))
}
