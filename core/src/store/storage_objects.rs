//! Metadata of project storage objects (content type, size, digest); the bytes live in the
//! configured object store.

use sqlx::FromRow;

use super::Exec;
use crate::Result;

#[derive(Debug, Clone, FromRow, PartialEq, Eq)]
pub struct StorageObjectRow {
    pub project_id: String,
    pub object_key: String,
    pub content_type: String,
    pub size: i64,
    pub sha256: String,
    pub updated_at: i64,
}

pub async fn upsert<'e>(ex: impl Exec<'e>, r: &StorageObjectRow) -> Result<()> {
    sqlx::query(
        "INSERT INTO storage_objects (project_id, object_key, content_type, size, sha256, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (project_id, object_key) DO UPDATE SET \
         content_type = excluded.content_type, size = excluded.size, sha256 = excluded.sha256, \
         updated_at = excluded.updated_at",
    )
    .bind(&r.project_id)
    .bind(&r.object_key)
    .bind(&r.content_type)
    .bind(r.size)
    .bind(&r.sha256)
    .bind(r.updated_at)
    .execute(ex)
    .await?;
    Ok(())
}

pub async fn get<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    key: &str,
) -> Result<Option<StorageObjectRow>> {
    Ok(sqlx::query_as(
        "SELECT project_id, object_key, content_type, size, sha256, updated_at FROM storage_objects \
         WHERE project_id = $1 AND object_key = $2",
    )
    .bind(project_id)
    .bind(key)
    .fetch_optional(ex)
    .await?)
}
