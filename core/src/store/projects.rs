//! Projects (tenants), memberships and the one-time "instance set up" marker.

use sqlx::FromRow;

use super::Exec;
use crate::Result;

#[derive(Debug, Clone, FromRow, PartialEq, Eq)]
pub struct ProjectRow {
    pub id: String,
    pub name: String,
    pub created_at: i64,
}

pub async fn insert<'e>(ex: impl Exec<'e>, row: &ProjectRow) -> Result<()> {
    sqlx::query("INSERT INTO projects (id, name, created_at) VALUES ($1, $2, $3)")
        .bind(&row.id)
        .bind(&row.name)
        .bind(row.created_at)
        .execute(ex)
        .await?;
    Ok(())
}

pub async fn by_name<'e>(ex: impl Exec<'e>, name: &str) -> Result<Option<ProjectRow>> {
    Ok(
        sqlx::query_as("SELECT id, name, created_at FROM projects WHERE name = $1")
            .bind(name)
            .fetch_optional(ex)
            .await?,
    )
}

pub async fn by_id<'e>(ex: impl Exec<'e>, id: &str) -> Result<Option<ProjectRow>> {
    Ok(
        sqlx::query_as("SELECT id, name, created_at FROM projects WHERE id = $1")
            .bind(id)
            .fetch_optional(ex)
            .await?,
    )
}

/// The oldest project, which CLI commands use when no project is named.
pub async fn first<'e>(ex: impl Exec<'e>) -> Result<Option<ProjectRow>> {
    Ok(
        sqlx::query_as("SELECT id, name, created_at FROM projects ORDER BY created_at, id LIMIT 1")
            .fetch_optional(ex)
            .await?,
    )
}

#[derive(Debug, Clone, FromRow, PartialEq, Eq)]
pub struct MembershipRow {
    pub project_id: String,
    pub project_name: String,
    pub user_id: String,
    pub role: String,
    pub created_at: i64,
    /// The policy the member's groups cap them with (single sign-on).
    pub policy_id: Option<String>,
}

pub async fn upsert_membership<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    user_id: &str,
    role: &str,
    now: i64,
) -> Result<()> {
    sqlx::query(
        "INSERT INTO memberships (project_id, user_id, role, created_at) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (project_id, user_id) DO UPDATE SET role = excluded.role",
    )
    .bind(project_id)
    .bind(user_id)
    .bind(role)
    .bind(now)
    .execute(ex)
    .await?;
    Ok(())
}

/// Ends a membership; false when there was none.
pub async fn delete_membership<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    user_id: &str,
) -> Result<bool> {
    let r = sqlx::query("DELETE FROM memberships WHERE project_id = $1 AND user_id = $2")
        .bind(project_id)
        .bind(user_id)
        .execute(ex)
        .await?;
    Ok(r.rows_affected() == 1)
}

const MEMBERSHIP_SELECT: &str = "SELECT m.project_id, p.name AS project_name, m.user_id, m.role, \
     m.created_at, m.policy_id FROM memberships m JOIN projects p ON p.id = m.project_id";

/// The user's memberships, oldest first (the first is the user's home project).
pub async fn memberships_of_user<'e>(
    ex: impl Exec<'e>,
    user_id: &str,
) -> Result<Vec<MembershipRow>> {
    Ok(sqlx::query_as(&format!(
        "{MEMBERSHIP_SELECT} WHERE m.user_id = $1 ORDER BY m.created_at, m.project_id"
    ))
    .bind(user_id)
    .fetch_all(ex)
    .await?)
}

pub async fn membership<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    user_id: &str,
) -> Result<Option<MembershipRow>> {
    Ok(sqlx::query_as(&format!(
        "{MEMBERSHIP_SELECT} WHERE m.project_id = $1 AND m.user_id = $2"
    ))
    .bind(project_id)
    .bind(user_id)
    .fetch_optional(ex)
    .await?)
}

/// Marks the instance as set up. Returns false when it already was, which is how two racing
/// "create the first admin" requests are told apart on either engine.
pub async fn mark_set_up<'e>(ex: impl Exec<'e>, now: i64) -> Result<bool> {
    let done = sqlx::query(
        "INSERT INTO instance_setup (id, set_up_at) VALUES (1, $1) ON CONFLICT (id) DO NOTHING",
    )
    .bind(now)
    .execute(ex)
    .await?;
    Ok(done.rows_affected() == 1)
}

pub async fn is_set_up<'e>(ex: impl Exec<'e>) -> Result<bool> {
    let n: i64 = sqlx::query_scalar("SELECT CAST(COUNT(*) AS BIGINT) FROM instance_setup")
        .fetch_one(ex)
        .await?;
    Ok(n > 0)
}
