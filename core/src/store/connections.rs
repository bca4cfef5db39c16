//! Connections: one sealed credential per user and integration, with its status.

use sqlx::FromRow;

use super::Exec;
use crate::Result;

pub use workbench_model::connections::ConnectionStatus;

#[derive(Debug, Clone, FromRow)]
pub struct ConnectionRow {
    pub id: String,
    pub project_id: String,
    pub user_id: String,
    pub integration: String,
    #[sqlx(try_from = "String")]
    pub status: ConnectionStatus,
    pub ciphertext: Option<String>,
    pub nonce: Option<String>,
    pub key_version: Option<i64>,
    pub expires_at: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
}

const CONN_COLUMNS: &str =
    "id, project_id, user_id, integration, status, ciphertext, nonce, key_version, expires_at, created_at, updated_at";

/// The user's credentials in the project changed: instances holding a copy for scrubbing
/// re-read them. Runs in the transaction of the change.
async fn bump_generation(tx: &mut super::Tx, project_id: &str, user_id: &str) -> Result<()> {
    sqlx::query("UPDATE memberships SET credentials_generation = credentials_generation + 1 WHERE project_id = $1 AND user_id = $2")
        .bind(project_id)
        .bind(user_id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Stores a fresh credential (connected), replacing whatever the user had for the integration,
/// and bumps the user's credentials generation in the same transaction.
pub async fn upsert(db: &super::Db, r: &ConnectionRow) -> Result<()> {
    let mut tx = db.begin_write().await?;
    sqlx::query(&format!(
        "INSERT INTO connections ({CONN_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
         ON CONFLICT (project_id, user_id, integration) DO UPDATE SET status = excluded.status, \
         ciphertext = excluded.ciphertext, nonce = excluded.nonce, key_version = excluded.key_version, \
         expires_at = excluded.expires_at, updated_at = excluded.updated_at"
    ))
    .bind(&r.id)
    .bind(&r.project_id)
    .bind(&r.user_id)
    .bind(&r.integration)
    .bind(r.status.as_str())
    .bind(&r.ciphertext)
    .bind(&r.nonce)
    .bind(r.key_version)
    .bind(r.expires_at)
    .bind(r.created_at)
    .bind(r.updated_at)
    .execute(&mut *tx)
    .await?;
    bump_generation(&mut tx, &r.project_id, &r.user_id).await?;
    tx.commit().await?;
    db.changed();
    Ok(())
}

pub async fn get<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    user_id: &str,
    integration: &str,
) -> Result<Option<ConnectionRow>> {
    Ok(sqlx::query_as(&format!(
        "SELECT {CONN_COLUMNS} FROM connections WHERE project_id = $1 AND user_id = $2 AND integration = $3"
    ))
    .bind(project_id)
    .bind(user_id)
    .bind(integration)
    .fetch_optional(ex)
    .await?)
}

pub async fn list_for_user<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    user_id: &str,
) -> Result<Vec<ConnectionRow>> {
    Ok(sqlx::query_as(&format!(
        "SELECT {CONN_COLUMNS} FROM connections WHERE project_id = $1 AND user_id = $2 ORDER BY integration"
    ))
    .bind(project_id)
    .bind(user_id)
    .fetch_all(ex)
    .await?)
}

/// Sets the status, dropping the credential unless it stays connected.
pub async fn set_status<'e>(
    ex: impl Exec<'e>,
    id: &str,
    status: ConnectionStatus,
    now: i64,
) -> Result<()> {
    sqlx::query(
        "UPDATE connections SET status = $1, updated_at = $2, \
         ciphertext = CASE WHEN $1 = 'connected' THEN ciphertext ELSE NULL END, \
         nonce = CASE WHEN $1 = 'connected' THEN nonce ELSE NULL END \
         WHERE id = $3",
    )
    .bind(status.as_str())
    .bind(now)
    .bind(id)
    .execute(ex)
    .await?;
    Ok(())
}

/// Connections sealed with another key version than `version` (rotation work list), a batch
/// at a time.
pub async fn not_on_version<'e>(
    ex: impl Exec<'e>,
    version: i64,
    limit: i64,
) -> Result<Vec<ConnectionRow>> {
    Ok(sqlx::query_as(&format!(
        "SELECT {CONN_COLUMNS} FROM connections WHERE ciphertext IS NOT NULL AND key_version <> $1 ORDER BY id LIMIT $2"
    ))
    .bind(version)
    .bind(limit)
    .fetch_all(ex)
    .await?)
}

/// Re-seals a credential under a new key version, status untouched, only if it is still what
/// the caller read.
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
        "connections",
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

/// Replaces the sealed credential of a connection only if it is still the one the caller read
/// (two instances refreshing at once: one wins, the other re-reads); bumps the user's
/// credentials generation in the same transaction.
pub async fn replace_credential(
    db: &super::Db,
    id: &str,
    old_ciphertext: &str,
    r: &ConnectionRow,
) -> Result<bool> {
    let mut tx = db.begin_write().await?;
    let done = sqlx::query(
        "UPDATE connections SET ciphertext = $1, nonce = $2, key_version = $3, expires_at = $4, updated_at = $5, status = 'connected' \
         WHERE id = $6 AND ciphertext = $7",
    )
    .bind(&r.ciphertext)
    .bind(&r.nonce)
    .bind(r.key_version)
    .bind(r.expires_at)
    .bind(r.updated_at)
    .bind(id)
    .bind(old_ciphertext)
    .execute(&mut *tx)
    .await?;
    if done.rows_affected() != 1 {
        return Ok(false);
    }
    bump_generation(&mut tx, &r.project_id, &r.user_id).await?;
    tx.commit().await?;
    db.changed();
    Ok(true)
}

/// Forgets an integration in a project (its custom app was deleted): every user's stored
/// credential and pending connection go, and live proxy tokens naming it are revoked.
pub async fn forget_integration(
    tx: &mut super::Tx,
    project_id: &str,
    integration: &str,
    now: i64,
) -> Result<u64> {
    let gone = sqlx::query("DELETE FROM connections WHERE project_id = $1 AND integration = $2")
        .bind(project_id)
        .bind(integration)
        .execute(&mut **tx)
        .await?
        .rows_affected();
    sqlx::query("DELETE FROM pending_connections WHERE project_id = $1 AND integration = $2")
        .bind(project_id)
        .bind(integration)
        .execute(&mut **tx)
        .await?;
    super::proxy_tokens::revoke_tokens_naming(
        &mut **tx,
        super::proxy_tokens::Owner::Project,
        project_id,
        integration,
        now,
    )
    .await?;
    Ok(gone)
}

/// Adds `scopes` to what the user's connection asks for at its next authorization (an
/// upstream answered `insufficient_scope`); the stored set stays sorted and unique. Two
/// instances adding at once both land: the update only applies to the set it read.
pub async fn add_wanted_scopes(
    db: &super::Db,
    project_id: &str,
    user_id: &str,
    integration: &str,
    scopes: &[String],
) -> Result<()> {
    for _ in 0..5 {
        let Some(had) = wanted_of(db.pool(), project_id, user_id, integration).await? else {
            return Ok(()); // no connection: nothing to remember it on
        };
        let old = had.join(" ");
        let mut all: std::collections::BTreeSet<&str> = had.iter().map(String::as_str).collect();
        all.extend(scopes.iter().map(String::as_str));
        let new = all.into_iter().collect::<Vec<_>>().join(" ");
        if new == old {
            return Ok(());
        }
        let done = sqlx::query(
            "UPDATE connections SET wanted_scopes = $1 \
             WHERE project_id = $2 AND user_id = $3 AND integration = $4 AND COALESCE(wanted_scopes, '') = $5",
        )
        .bind(&new)
        .bind(project_id)
        .bind(user_id)
        .bind(integration)
        .bind(&old)
        .execute(db.pool())
        .await?;
        if done.rows_affected() == 1 {
            return Ok(());
        }
    }
    Err(crate::Error::Conflict(
        "the connection's scopes kept changing; try again".into(),
    ))
}

/// The scopes the user's connection asks for beyond the integration's own (see
/// `add_wanted_scopes`); none when there is no connection.
pub async fn wanted_scopes<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    user_id: &str,
    integration: &str,
) -> Result<Vec<String>> {
    Ok(wanted_of(ex, project_id, user_id, integration)
        .await?
        .unwrap_or_default())
}

async fn wanted_of<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    user_id: &str,
    integration: &str,
) -> Result<Option<Vec<String>>> {
    let row: Option<(Option<String>,)> = sqlx::query_as(
        "SELECT wanted_scopes FROM connections WHERE project_id = $1 AND user_id = $2 AND integration = $3",
    )
    .bind(project_id)
    .bind(user_id)
    .bind(integration)
    .fetch_optional(ex)
    .await?;
    Ok(row.map(|(s,)| {
        s.unwrap_or_default()
            .split_whitespace()
            .map(str::to_owned)
            .collect()
    }))
}
