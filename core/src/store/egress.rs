//! The per-project egress allowlist that http.fetch obeys.

use super::Exec;
use crate::Result;

pub async fn list<'e>(ex: impl Exec<'e>, project_id: &str) -> Result<Vec<String>> {
    let rows: Vec<(String,)> =
        sqlx::query_as("SELECT pattern FROM egress_rules WHERE project_id = $1 ORDER BY pattern")
            .bind(project_id)
            .fetch_all(ex)
            .await?;
    Ok(rows.into_iter().map(|(p,)| p).collect())
}

/// Adds a pattern; false when it was already there.
pub async fn add<'e>(ex: impl Exec<'e>, project_id: &str, pattern: &str, now: i64) -> Result<bool> {
    let r = sqlx::query(
        "INSERT INTO egress_rules (project_id, pattern, created_at) VALUES ($1, $2, $3) \
         ON CONFLICT (project_id, pattern) DO NOTHING",
    )
    .bind(project_id)
    .bind(pattern)
    .bind(now)
    .execute(ex)
    .await?;
    Ok(r.rows_affected() == 1)
}

pub async fn remove<'e>(ex: impl Exec<'e>, project_id: &str, pattern: &str) -> Result<bool> {
    let r = sqlx::query("DELETE FROM egress_rules WHERE project_id = $1 AND pattern = $2")
        .bind(project_id)
        .bind(pattern)
        .execute(ex)
        .await?;
    Ok(r.rows_affected() == 1)
}
