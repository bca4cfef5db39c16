//! Tool call records: what an execution was asked, how it ended, and its (capped, scrubbed)
//! result, so `GET /v1/tools/calls/{id}` can answer later and from any instance.

use sqlx::FromRow;

use super::Exec;
use crate::Result;

#[derive(Debug, Clone, FromRow)]
pub struct ToolCallRow {
    pub id: String,
    pub project_id: String,
    pub user_id: String,
    pub api_key_id: Option<String>,
    pub tool: String,
    pub status: String,
    pub arguments: String,
    pub result: Option<String>,
    pub error: Option<String>,
    pub duration_ms: i64,
    pub end_user_id: Option<String>,
    pub surface: String,
    pub created_at: i64,
}

pub async fn insert<'e>(ex: impl Exec<'e>, r: &ToolCallRow) -> Result<()> {
    sqlx::query(
        "INSERT INTO tool_calls (id, project_id, user_id, api_key_id, tool, status, arguments, result, \
         error, duration_ms, end_user_id, surface, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
    )
    .bind(&r.id)
    .bind(&r.project_id)
    .bind(&r.user_id)
    .bind(&r.api_key_id)
    .bind(&r.tool)
    .bind(&r.status)
    .bind(&r.arguments)
    .bind(&r.result)
    .bind(&r.error)
    .bind(r.duration_ms)
    .bind(&r.end_user_id)
    .bind(&r.surface)
    .bind(r.created_at)
    .execute(ex)
    .await?;
    Ok(())
}

/// Finishes a call recorded as `running` before its handler ran.
pub async fn finish<'e>(ex: impl Exec<'e>, r: &ToolCallRow) -> Result<()> {
    sqlx::query("UPDATE tool_calls SET status = $1, result = $2, error = $3, duration_ms = $4 WHERE id = $5")
        .bind(&r.status)
        .bind(&r.result)
        .bind(&r.error)
        .bind(r.duration_ms)
        .bind(&r.id)
        .execute(ex)
        .await?;
    Ok(())
}

pub async fn get<'e>(ex: impl Exec<'e>, project_id: &str, id: &str) -> Result<Option<ToolCallRow>> {
    Ok(sqlx::query_as(
        "SELECT id, project_id, user_id, api_key_id, tool, status, arguments, result, error, duration_ms, \
         end_user_id, surface, created_at FROM tool_calls WHERE project_id = $1 AND id = $2",
    )
    .bind(project_id)
    .bind(id)
    .fetch_optional(ex)
    .await?)
}
