//! Users: email (normalised to lowercase), argon2id password hash, and whether the account is
//! break-glass (keeps password sign-in when it is turned off).

use sqlx::FromRow;

use super::Exec;
use crate::Result;

#[derive(Debug, Clone, FromRow)]
pub struct UserRow {
    pub id: String,
    pub email: String,
    pub password_hash: String,
    pub created_at: i64,
}

pub async fn insert<'e>(ex: impl Exec<'e>, row: &UserRow) -> Result<()> {
    sqlx::query("INSERT INTO users (id, email, password_hash, created_at) VALUES ($1, $2, $3, $4)")
        .bind(&row.id)
        .bind(&row.email)
        .bind(&row.password_hash)
        .bind(row.created_at)
        .execute(ex)
        .await?;
    Ok(())
}

pub async fn by_email<'e>(ex: impl Exec<'e>, email: &str) -> Result<Option<UserRow>> {
    Ok(
        sqlx::query_as("SELECT id, email, password_hash, created_at FROM users WHERE email = $1")
            .bind(email)
            .fetch_optional(ex)
            .await?,
    )
}

pub async fn by_id<'e>(ex: impl Exec<'e>, id: &str) -> Result<Option<UserRow>> {
    Ok(
        sqlx::query_as("SELECT id, email, password_hash, created_at FROM users WHERE id = $1")
            .bind(id)
            .fetch_optional(ex)
            .await?,
    )
}

pub async fn set_password_hash<'e>(ex: impl Exec<'e>, id: &str, hash: &str) -> Result<bool> {
    let r = sqlx::query("UPDATE users SET password_hash = $1 WHERE id = $2")
        .bind(hash)
        .bind(id)
        .execute(ex)
        .await?;
    Ok(r.rows_affected() == 1)
}

#[derive(Debug, Clone, FromRow)]
pub struct ProjectUserRow {
    pub id: String,
    pub email: String,
    pub role: String,
    pub created_at: i64,
}

/// Members of a project with their role, oldest first.
pub async fn of_project<'e>(ex: impl Exec<'e>, project_id: &str) -> Result<Vec<ProjectUserRow>> {
    Ok(sqlx::query_as(
        "SELECT u.id, u.email, m.role, m.created_at FROM memberships m \
         JOIN users u ON u.id = m.user_id WHERE m.project_id = $1 ORDER BY m.created_at, u.email",
    )
    .bind(project_id)
    .fetch_all(ex)
    .await?)
}

/// Marks an account break-glass (it keeps password sign-in when that is turned off), or not.
pub async fn set_break_glass<'e>(ex: impl Exec<'e>, user_id: &str, on: bool) -> Result<bool> {
    let done = sqlx::query("UPDATE users SET break_glass = $1 WHERE id = $2")
        .bind(i64::from(on))
        .bind(user_id)
        .execute(ex)
        .await?;
    Ok(done.rows_affected() == 1)
}

pub async fn is_break_glass<'e>(ex: impl Exec<'e>, user_id: &str) -> Result<bool> {
    let n: Option<i64> = sqlx::query_scalar("SELECT break_glass FROM users WHERE id = $1")
        .bind(user_id)
        .fetch_optional(ex)
        .await?;
    Ok(n.unwrap_or(0) != 0)
}
