//! Tool sets of a project (issue 33): a curated list of tools published at its own MCP
//! endpoint, and which sets an API key is limited to.

use sqlx::FromRow;

use super::Exec;
use crate::Result;

/// Characters of a set's slug, at most.
pub const MAX_SLUG_CHARS: usize = 48;

/// What a set's slug may be (lowercase letters, digits and inner hyphens, 1 to 48 characters: a
/// URL path segment as is). Here, below everything that names sets (the set endpoints' OAuth
/// resources among them).
pub fn valid_slug(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_SLUG_CHARS
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

#[derive(Debug, Clone, FromRow)]
pub struct ToolSetRow {
    pub id: String,
    pub project_id: String,
    pub slug: String,
    pub name: String,
    pub description: String,
    /// JSON of the set's entries.
    pub tools: String,
    pub created_at: i64,
    pub updated_at: i64,
    /// 1: the set also publishes the prompts and resources of its tools' MCP servers.
    pub upstream_items: i64,
}

const COLUMNS: &str =
    "id, project_id, slug, name, description, tools, created_at, updated_at, upstream_items";

pub async fn insert<'e>(ex: impl Exec<'e>, r: &ToolSetRow) -> Result<()> {
    sqlx::query(&format!(
        "INSERT INTO tool_sets ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
    ))
    .bind(&r.id)
    .bind(&r.project_id)
    .bind(&r.slug)
    .bind(&r.name)
    .bind(&r.description)
    .bind(&r.tools)
    .bind(r.created_at)
    .bind(r.updated_at)
    .bind(r.upstream_items)
    .execute(ex)
    .await?;
    Ok(())
}

/// Replaces a set's slug, name, description and entries; false when there is no such set.
pub async fn update<'e>(ex: impl Exec<'e>, r: &ToolSetRow) -> Result<bool> {
    let done = sqlx::query(
        "UPDATE tool_sets SET slug = $1, name = $2, description = $3, tools = $4, updated_at = $5, \
         upstream_items = $8 WHERE project_id = $6 AND id = $7",
    )
    .bind(&r.slug)
    .bind(&r.name)
    .bind(&r.description)
    .bind(&r.tools)
    .bind(r.updated_at)
    .bind(&r.project_id)
    .bind(&r.id)
    .bind(r.upstream_items)
    .execute(ex)
    .await?;
    Ok(done.rows_affected() == 1)
}

pub async fn get<'e>(ex: impl Exec<'e>, project_id: &str, id: &str) -> Result<Option<ToolSetRow>> {
    Ok(sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM tool_sets WHERE project_id = $1 AND id = $2"
    ))
    .bind(project_id)
    .bind(id)
    .fetch_optional(ex)
    .await?)
}

/// A project's sets, by slug.
pub async fn list<'e>(ex: impl Exec<'e>, project_id: &str) -> Result<Vec<ToolSetRow>> {
    Ok(sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM tool_sets WHERE project_id = $1 ORDER BY slug"
    ))
    .bind(project_id)
    .fetch_all(ex)
    .await?)
}

pub async fn delete<'e>(ex: impl Exec<'e>, project_id: &str, id: &str) -> Result<bool> {
    let done = sqlx::query("DELETE FROM tool_sets WHERE project_id = $1 AND id = $2")
        .bind(project_id)
        .bind(id)
        .execute(ex)
        .await?;
    Ok(done.rows_affected() == 1)
}

/// The project's live keys limited to the set `slug`: `(id, name)`.
pub async fn keys_limited_to<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    slug: &str,
) -> Result<Vec<(String, String)>> {
    let keys: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT id, name, tool_sets FROM api_keys WHERE project_id = $1 AND revoked_at IS NULL \
         AND tool_sets IS NOT NULL ORDER BY created_at, id",
    )
    .bind(project_id)
    .fetch_all(ex)
    .await?;
    Ok(keys
        .into_iter()
        .filter(|(_, _, slugs)| parse_slugs(slugs).iter().any(|s| s == slug))
        .map(|(id, name, _)| (id, name))
        .collect())
}

/// Limits a key to the sets in `slugs` (a JSON list; `None`: not limited); false when the key
/// is not the project's.
pub async fn limit_key<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    key_id: &str,
    slugs: Option<&str>,
) -> Result<bool> {
    let done = sqlx::query("UPDATE api_keys SET tool_sets = $1 WHERE project_id = $2 AND id = $3")
        .bind(slugs)
        .bind(project_id)
        .bind(key_id)
        .execute(ex)
        .await?;
    Ok(done.rows_affected() == 1)
}

/// A key's stored `tool_sets` column as slugs; unreadable reads as no set at all (fail closed).
pub fn parse_slugs(json: &str) -> Vec<String> {
    serde_json::from_str(json).unwrap_or_default()
}
