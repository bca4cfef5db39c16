//! Tool allowlist policies of a project, which API keys use them, and the project's policy
//! generation (bumped by every change, so cached policies are known to be stale).

use sqlx::FromRow;

use super::Exec;
use crate::Result;

#[derive(Debug, Clone, FromRow)]
pub struct PolicyRow {
    pub id: String,
    pub project_id: String,
    pub name: String,
    /// JSON of the tool allowlist.
    pub tool_allowlist: String,
    /// JSON of the rate limits and quotas.
    pub limits: String,
    pub is_default: i64,
    pub created_at: i64,
    pub updated_at: i64,
}

const COLUMNS: &str =
    "id, project_id, name, tool_allowlist, limits, is_default, created_at, updated_at";

pub async fn insert<'e>(ex: impl Exec<'e>, r: &PolicyRow) -> Result<()> {
    sqlx::query(&format!(
        "INSERT INTO policies ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
    ))
    .bind(&r.id)
    .bind(&r.project_id)
    .bind(&r.name)
    .bind(&r.tool_allowlist)
    .bind(&r.limits)
    .bind(r.is_default)
    .bind(r.created_at)
    .bind(r.updated_at)
    .execute(ex)
    .await?;
    Ok(())
}

/// Replaces a policy's name, rules and default flag; false when there is no such policy.
pub async fn update<'e>(ex: impl Exec<'e>, r: &PolicyRow) -> Result<bool> {
    let done = sqlx::query("UPDATE policies SET name = $1, tool_allowlist = $2, is_default = $3, updated_at = $4, limits = $7 WHERE project_id = $5 AND id = $6")
        .bind(&r.name)
        .bind(&r.tool_allowlist)
        .bind(r.is_default)
        .bind(r.updated_at)
        .bind(&r.project_id)
        .bind(&r.id)
        .bind(&r.limits)
        .execute(ex)
        .await?;
    Ok(done.rows_affected() == 1)
}

/// Makes no policy of the project the default (before another becomes it).
pub async fn clear_default<'e>(ex: impl Exec<'e>, project_id: &str) -> Result<()> {
    sqlx::query("UPDATE policies SET is_default = 0 WHERE project_id = $1 AND is_default = 1")
        .bind(project_id)
        .execute(ex)
        .await?;
    Ok(())
}

pub async fn get<'e>(ex: impl Exec<'e>, project_id: &str, id: &str) -> Result<Option<PolicyRow>> {
    Ok(sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM policies WHERE project_id = $1 AND id = $2"
    ))
    .bind(project_id)
    .bind(id)
    .fetch_optional(ex)
    .await?)
}

/// A project's policies, oldest first.
pub async fn list<'e>(ex: impl Exec<'e>, project_id: &str) -> Result<Vec<PolicyRow>> {
    Ok(sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM policies WHERE project_id = $1 ORDER BY created_at, id"
    ))
    .bind(project_id)
    .fetch_all(ex)
    .await?)
}

pub async fn delete<'e>(ex: impl Exec<'e>, project_id: &str, id: &str) -> Result<bool> {
    let done = sqlx::query("DELETE FROM policies WHERE project_id = $1 AND id = $2")
        .bind(project_id)
        .bind(id)
        .execute(ex)
        .await?;
    Ok(done.rows_affected() == 1)
}

/// Live (unrevoked) keys using a policy: `(id, name)`.
pub async fn live_keys_using<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    policy_id: &str,
) -> Result<Vec<(String, String)>> {
    Ok(sqlx::query_as("SELECT id, name FROM api_keys WHERE project_id = $1 AND policy_id = $2 AND revoked_at IS NULL ORDER BY created_at, id")
        .bind(project_id)
        .bind(policy_id)
        .fetch_all(ex)
        .await?)
}

/// Revoked keys keep no policy (so the policy can go).
pub async fn detach_from_revoked_keys<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    policy_id: &str,
) -> Result<()> {
    sqlx::query("UPDATE api_keys SET policy_id = NULL WHERE project_id = $1 AND policy_id = $2 AND revoked_at IS NOT NULL")
        .bind(project_id)
        .bind(policy_id)
        .execute(ex)
        .await?;
    Ok(())
}

/// Attaches a policy to a key (`None` detaches); false when the key is not the project's.
pub async fn attach<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    key_id: &str,
    policy_id: Option<&str>,
) -> Result<bool> {
    let done = sqlx::query("UPDATE api_keys SET policy_id = $1 WHERE project_id = $2 AND id = $3")
        .bind(policy_id)
        .bind(project_id)
        .bind(key_id)
        .execute(ex)
        .await?;
    Ok(done.rows_affected() == 1)
}

/// Marks the project's policies changed.
pub async fn bump_generation<'e>(ex: impl Exec<'e>, project_id: &str) -> Result<()> {
    sqlx::query("UPDATE projects SET policy_generation = policy_generation + 1 WHERE id = $1")
        .bind(project_id)
        .execute(ex)
        .await?;
    Ok(())
}

pub async fn generation<'e>(ex: impl Exec<'e>, project_id: &str) -> Result<i64> {
    let (g,): (i64,) = sqlx::query_as("SELECT policy_generation FROM projects WHERE id = $1")
        .bind(project_id)
        .fetch_one(ex)
        .await?;
    Ok(g)
}
