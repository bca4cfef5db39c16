//! Which instance holds each MCP session (issue 33), so any instance can forward a session's
//! request to it.

use super::Exec;
use crate::Result;

pub async fn insert<'e>(ex: impl Exec<'e>, id: &str, instance_url: &str, at: i64) -> Result<()> {
    sqlx::query(
        "INSERT INTO mcp_sessions (id, instance_url, created_at) VALUES ($1, $2, $3) \
         ON CONFLICT (id) DO UPDATE SET instance_url = excluded.instance_url",
    )
    .bind(id)
    .bind(instance_url)
    .bind(at)
    .execute(ex)
    .await?;
    Ok(())
}

pub async fn instance_of<'e>(ex: impl Exec<'e>, id: &str) -> Result<Option<String>> {
    Ok(
        sqlx::query_scalar("SELECT instance_url FROM mcp_sessions WHERE id = $1")
            .bind(id)
            .fetch_optional(ex)
            .await?,
    )
}

pub async fn delete<'e>(ex: impl Exec<'e>, id: &str) -> Result<()> {
    sqlx::query("DELETE FROM mcp_sessions WHERE id = $1")
        .bind(id)
        .execute(ex)
        .await?;
    Ok(())
}

/// Forgets sessions opened before `before` (rmcp ends idle sessions long before).
pub async fn purge<'e>(ex: impl Exec<'e>, before: i64) -> Result<u64> {
    Ok(
        sqlx::query("DELETE FROM mcp_sessions WHERE created_at < $1")
            .bind(before)
            .execute(ex)
            .await?
            .rows_affected(),
    )
}
