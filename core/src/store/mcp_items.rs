//! The prompts, resources and resource templates of upstream MCP servers (issue 33): what each
//! server last listed, what an admin last approved, and each item's review status.

use sqlx::FromRow;

use super::Exec;
use crate::Result;

pub use workbench_model::upstream::{ItemKind, ToolState};

#[derive(Debug, Clone, PartialEq, Eq, FromRow)]
pub struct ItemRow {
    pub server_id: String,
    #[sqlx(try_from = "String")]
    pub kind: ItemKind,
    /// The prompt's name, the resource's URI or the template's URI template.
    pub item_key: String,
    /// The reviewed fields as the upstream listed them (JSON, scrubbed).
    pub body: String,
    #[sqlx(try_from = "String")]
    pub status: ToolState,
    pub fingerprint: String,
    pub approved_fingerprint: Option<String>,
    pub approved_body: Option<String>,
    pub updated_at: i64,
}

const COLUMNS: &str = "server_id, kind, item_key, body, status, fingerprint, \
    approved_fingerprint, approved_body, updated_at";

/// A server's items, by kind then key.
pub async fn list<'e>(ex: impl Exec<'e>, server_id: &str) -> Result<Vec<ItemRow>> {
    Ok(sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM mcp_server_items WHERE server_id = $1 ORDER BY kind, item_key"
    ))
    .bind(server_id)
    .fetch_all(ex)
    .await?)
}

/// The available items of a project's servers, by server, kind and key.
pub async fn available_in_project<'e>(ex: impl Exec<'e>, project_id: &str) -> Result<Vec<ItemRow>> {
    Ok(sqlx::query_as(
        "SELECT i.server_id, i.kind, i.item_key, i.body, i.status, i.fingerprint, \
         i.approved_fingerprint, i.approved_body, i.updated_at \
         FROM mcp_server_items i JOIN mcp_servers s ON s.id = i.server_id \
         WHERE s.project_id = $1 AND i.status = $2 ORDER BY i.server_id, i.kind, i.item_key",
    )
    .bind(project_id)
    .bind(ToolState::Available.as_str())
    .fetch_all(ex)
    .await?)
}

/// Inserts or replaces one item.
pub async fn upsert<'e>(ex: impl Exec<'e>, r: &ItemRow) -> Result<()> {
    sqlx::query(&format!(
        "INSERT INTO mcp_server_items ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
         ON CONFLICT (server_id, kind, item_key) DO UPDATE SET body = excluded.body, \
         status = excluded.status, fingerprint = excluded.fingerprint, \
         approved_fingerprint = excluded.approved_fingerprint, \
         approved_body = excluded.approved_body, updated_at = excluded.updated_at"
    ))
    .bind(&r.server_id)
    .bind(r.kind.as_str())
    .bind(&r.item_key)
    .bind(&r.body)
    .bind(r.status.as_str())
    .bind(&r.fingerprint)
    .bind(&r.approved_fingerprint)
    .bind(&r.approved_body)
    .bind(r.updated_at)
    .execute(ex)
    .await?;
    Ok(())
}
