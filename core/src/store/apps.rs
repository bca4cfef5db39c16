//! Custom apps: a project's own integration definitions, stored as JSON.

use sqlx::FromRow;

use super::Exec;
use crate::Result;

#[derive(Debug, Clone, FromRow)]
pub struct AppRow {
    pub id: String,
    pub project_id: String,
    pub name: String,
    pub definition: String,
    pub created_at: i64,
}

pub async fn insert<'e>(ex: impl Exec<'e>, r: &AppRow) -> Result<()> {
    sqlx::query("INSERT INTO apps (id, project_id, name, definition, created_at) VALUES ($1, $2, $3, $4, $5)")
        .bind(&r.id)
        .bind(&r.project_id)
        .bind(&r.name)
        .bind(&r.definition)
        .bind(r.created_at)
        .execute(ex)
        .await?;
    Ok(())
}

pub async fn list<'e>(ex: impl Exec<'e>, project_id: &str) -> Result<Vec<AppRow>> {
    Ok(sqlx::query_as("SELECT id, project_id, name, definition, created_at FROM apps WHERE project_id = $1 ORDER BY name")
        .bind(project_id)
        .fetch_all(ex)
        .await?)
}

/// The project's app called `name`, if any (names are unique in a project).
pub async fn named<'e>(ex: impl Exec<'e>, project_id: &str, name: &str) -> Result<Option<AppRow>> {
    Ok(sqlx::query_as("SELECT id, project_id, name, definition, created_at FROM apps WHERE project_id = $1 AND name = $2")
        .bind(project_id)
        .bind(name)
        .fetch_optional(ex)
        .await?)
}

/// Deletes a project's app; returns its name, or None when there was no such app.
pub async fn delete(tx: &mut super::Tx, project_id: &str, id: &str) -> Result<Option<String>> {
    let name: Option<(String,)> =
        sqlx::query_as("SELECT name FROM apps WHERE project_id = $1 AND id = $2")
            .bind(project_id)
            .bind(id)
            .fetch_optional(&mut **tx)
            .await?;
    if name.is_some() {
        sqlx::query("DELETE FROM apps WHERE project_id = $1 AND id = $2")
            .bind(project_id)
            .bind(id)
            .execute(&mut **tx)
            .await?;
    }
    Ok(name.map(|(n,)| n))
}

/// Every app's (project id, app id), ordered: what each instance compares with what it loaded.
pub async fn ids<'e>(ex: impl Exec<'e>) -> Result<Vec<(String, String)>> {
    Ok(
        sqlx::query_as("SELECT project_id, id FROM apps ORDER BY project_id, id")
            .fetch_all(ex)
            .await?,
    )
}
