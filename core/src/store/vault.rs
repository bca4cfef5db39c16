//! Sealed vault secrets. Only ciphertext, nonce and key version are stored; names are not
//! secret.

use sqlx::FromRow;

use super::Exec;
use crate::Result;

#[derive(Debug, Clone, FromRow)]
pub struct SecretRow {
    pub id: String,
    pub project_id: String,
    pub name: String,
    pub ciphertext: String,
    pub nonce: String,
    pub key_version: i64,
    pub created_at: i64,
    pub updated_at: i64,
}

const COLUMNS: &str =
    "id, project_id, name, ciphertext, nonce, key_version, created_at, updated_at";

/// Inserts or replaces the value of `name`; the id and creation time of an existing secret stay.
pub async fn upsert<'e>(ex: impl Exec<'e>, r: &SecretRow) -> Result<SecretRow> {
    Ok(sqlx::query_as(&format!(
        "INSERT INTO vault_secrets ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
         ON CONFLICT (project_id, name) DO UPDATE SET ciphertext = excluded.ciphertext, nonce = excluded.nonce, \
         key_version = excluded.key_version, updated_at = excluded.updated_at RETURNING {COLUMNS}"
    ))
    .bind(&r.id)
    .bind(&r.project_id)
    .bind(&r.name)
    .bind(&r.ciphertext)
    .bind(&r.nonce)
    .bind(r.key_version)
    .bind(r.created_at)
    .bind(r.updated_at)
    .fetch_one(ex)
    .await?)
}

pub async fn get<'e>(ex: impl Exec<'e>, project_id: &str, name: &str) -> Result<Option<SecretRow>> {
    Ok(sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM vault_secrets WHERE project_id = $1 AND name = $2"
    ))
    .bind(project_id)
    .bind(name)
    .fetch_optional(ex)
    .await?)
}

pub async fn list<'e>(ex: impl Exec<'e>, project_id: &str) -> Result<Vec<SecretRow>> {
    Ok(sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM vault_secrets WHERE project_id = $1 ORDER BY name"
    ))
    .bind(project_id)
    .fetch_all(ex)
    .await?)
}

pub async fn delete<'e>(ex: impl Exec<'e>, project_id: &str, name: &str) -> Result<bool> {
    let r = sqlx::query("DELETE FROM vault_secrets WHERE project_id = $1 AND name = $2")
        .bind(project_id)
        .bind(name)
        .execute(ex)
        .await?;
    Ok(r.rows_affected() == 1)
}

/// Secrets sealed with another key version than `version` (rotation work list), a batch at a time.
pub async fn not_on_version<'e>(
    ex: impl Exec<'e>,
    version: i64,
    limit: i64,
) -> Result<Vec<SecretRow>> {
    Ok(sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM vault_secrets WHERE key_version <> $1 ORDER BY id LIMIT $2"
    ))
    .bind(version)
    .bind(limit)
    .fetch_all(ex)
    .await?)
}

/// Replaces a row's sealing only if it is still what the caller read (no lost update).
pub async fn reseal<'e>(
    ex: impl Exec<'e>,
    id: &str,
    old_ciphertext: &str,
    ciphertext: &str,
    nonce: &str,
    version: i64,
) -> Result<bool> {
    super::reseal_row(
        ex,
        "vault_secrets",
        "id",
        id,
        &super::Resealed {
            old_ciphertext,
            ciphertext,
            nonce,
            key_version: version,
        },
    )
    .await
}

/// Marks a change of the project's vault values (set or delete), in the caller's transaction.
pub async fn bump_generation<'e>(ex: impl Exec<'e>, project_id: &str) -> Result<()> {
    sqlx::query(
        "INSERT INTO vault_generations (project_id, generation) VALUES ($1, 1) \
         ON CONFLICT (project_id) DO UPDATE SET generation = vault_generations.generation + 1",
    )
    .bind(project_id)
    .execute(ex)
    .await?;
    Ok(())
}

/// How many times the project's vault values changed (0: never).
pub async fn generation<'e>(ex: impl Exec<'e>, project_id: &str) -> Result<i64> {
    let row: Option<(i64,)> =
        sqlx::query_as("SELECT generation FROM vault_generations WHERE project_id = $1")
            .bind(project_id)
            .fetch_optional(ex)
            .await?;
    Ok(row.map(|r| r.0).unwrap_or(0))
}
