//! Tool call records: what an execution was asked, how it ended, and its (capped, scrubbed)
//! result, so `GET /v1/tools/calls/{id}` can answer later and from any instance.

use sqlx::FromRow;

use super::{script::Script, Exec, INSERT_ROWS_MAX};
use crate::Result;

pub use workbench_model::calls::CallStatus;

#[derive(Debug, Clone, FromRow)]
pub struct ToolCallRow {
    pub id: String,
    pub project_id: String,
    pub user_id: String,
    pub api_key_id: Option<String>,
    pub tool: String,
    #[sqlx(try_from = "String")]
    pub status: CallStatus,
    pub arguments: String,
    pub result: Option<String>,
    pub error: Option<String>,
    pub duration_ms: i64,
    pub end_user_id: Option<String>,
    pub surface: String,
    pub created_at: i64,
    /// Bytes of the result's JSON as the caller got it (before the stored copy is capped).
    pub result_bytes: Option<i64>,
    /// The `Idempotency-Key` the request came with (REST invoke).
    pub idempotency_key: Option<String>,
}

const COLUMNS: &str =
    "id, project_id, user_id, api_key_id, tool, status, arguments, result, error, duration_ms, \
     end_user_id, surface, created_at, result_bytes, idempotency_key";

pub async fn insert<'e>(ex: impl Exec<'e>, r: &ToolCallRow) -> Result<()> {
    insert_many(ex, &[r]).await
}

/// Inserts up to `INSERT_ROWS_MAX` rows in one statement (the record writer's batches).
pub async fn insert_many<'e>(ex: impl Exec<'e>, rows: &[&ToolCallRow]) -> Result<()> {
    let mut s = Script::separate();
    push_insert(&mut s, rows);
    s.execute(ex).await
}

/// Adds to `s` the INSERT of up to `INSERT_ROWS_MAX` rows (none when `rows` is empty).
pub fn push_insert<'q>(s: &mut Script<'q>, rows: &[&'q ToolCallRow]) {
    assert!(
        rows.len() <= INSERT_ROWS_MAX,
        "at most INSERT_ROWS_MAX rows"
    );
    if rows.is_empty() {
        return;
    }
    s.statement("INSERT INTO tool_calls (");
    s.sql(COLUMNS);
    s.sql(") VALUES ");
    s.values(rows.len(), 15);
    for r in rows {
        s.bind(&r.id);
        s.bind(&r.project_id);
        s.bind(&r.user_id);
        s.bind(&r.api_key_id);
        s.bind(&r.tool);
        s.bind(r.status.as_str());
        s.bind(&r.arguments);
        s.bind(&r.result);
        s.bind(&r.error);
        s.bind(r.duration_ms);
        s.bind(&r.end_user_id);
        s.bind(&r.surface);
        s.bind(r.created_at);
        s.bind(r.result_bytes);
        s.bind(&r.idempotency_key);
    }
}

/// Finishes a call recorded as `running` before its handler ran.
pub async fn finish<'e>(ex: impl Exec<'e>, r: &ToolCallRow) -> Result<()> {
    sqlx::query("UPDATE tool_calls SET status = $1, result = $2, error = $3, duration_ms = $4, result_bytes = $5 WHERE id = $6")
        .bind(r.status.as_str())
        .bind(&r.result)
        .bind(&r.error)
        .bind(r.duration_ms)
        .bind(r.result_bytes)
        .bind(&r.id)
        .execute(ex)
        .await?;
    Ok(())
}

/// Finishes up to `INSERT_ROWS_MAX` calls in one statement (the record writer's batches;
/// `finish` stays a plain UPDATE for the one row the pipeline writes synchronously).
pub async fn finish_many<'e>(ex: impl Exec<'e>, rows: &[&ToolCallRow]) -> Result<()> {
    let mut s = Script::separate();
    push_finish(&mut s, rows);
    s.execute(ex).await
}

/// Adds to `s` the UPDATE finishing up to `INSERT_ROWS_MAX` calls (none when `rows` is empty).
pub fn push_finish<'q>(s: &mut Script<'q>, rows: &[&'q ToolCallRow]) {
    assert!(
        rows.len() <= INSERT_ROWS_MAX,
        "at most INSERT_ROWS_MAX rows"
    );
    if rows.is_empty() {
        return;
    }
    // A VALUES list's columns are column1, column2, … on both engines.
    s.statement(
        "UPDATE tool_calls SET status = v.column2, result = v.column3, error = v.column4, duration_ms = v.column5, \
         result_bytes = v.column6 FROM (VALUES ",
    );
    s.values(rows.len(), 6);
    s.sql(") AS v WHERE tool_calls.id = v.column1");
    for r in rows {
        s.bind(&r.id);
        s.bind(r.status.as_str());
        s.bind(&r.result);
        s.bind(&r.error);
        s.bind(r.duration_ms);
        s.bind(r.result_bytes);
    }
}

pub async fn get<'e>(ex: impl Exec<'e>, project_id: &str, id: &str) -> Result<Option<ToolCallRow>> {
    Ok(sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM tool_calls WHERE project_id = $1 AND id = $2"
    ))
    .bind(project_id)
    .bind(id)
    .fetch_optional(ex)
    .await?)
}

/// Deletes at most `limit` calls of the project created before `before`; how many. A call still
/// held by a live confirmation (pending, not expired at `now`) stays.
pub async fn delete_older<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    before: i64,
    now: i64,
    limit: i64,
) -> Result<u64> {
    let r = sqlx::query(
        "DELETE FROM tool_calls WHERE id IN (SELECT t.id FROM tool_calls t WHERE t.project_id = $1 AND t.created_at < $2 \
         AND NOT EXISTS (SELECT 1 FROM confirmations c WHERE c.tool_call_id = t.id AND c.status = 'pending' AND c.expires_at > $3) \
         ORDER BY t.created_at LIMIT $4)",
    )
    .bind(project_id)
    .bind(before)
    .bind(now)
    .bind(limit)
    .execute(ex)
    .await?;
    Ok(r.rows_affected())
}
