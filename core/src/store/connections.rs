//! Connections (sealed credentials per user and integration), pending connections and proxy
//! tokens.

use sqlx::FromRow;

use super::Exec;
use crate::Result;

#[derive(Debug, Clone, FromRow)]
pub struct ConnectionRow {
    pub id: String,
    pub project_id: String,
    pub user_id: String,
    pub integration: String,
    pub status: String,
    pub ciphertext: Option<String>,
    pub nonce: Option<String>,
    pub key_version: Option<i64>,
    pub expires_at: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
}

const CONN_COLUMNS: &str =
    "id, project_id, user_id, integration, status, ciphertext, nonce, key_version, expires_at, created_at, updated_at";

/// Stores a fresh credential (connected), replacing whatever the user had for the integration.
pub async fn upsert<'e>(ex: impl Exec<'e>, r: &ConnectionRow) -> Result<()> {
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
    .bind(&r.status)
    .bind(&r.ciphertext)
    .bind(&r.nonce)
    .bind(r.key_version)
    .bind(r.expires_at)
    .bind(r.created_at)
    .bind(r.updated_at)
    .execute(ex)
    .await?;
    Ok(())
}

pub async fn get<'e>(ex: impl Exec<'e>, project_id: &str, user_id: &str, integration: &str) -> Result<Option<ConnectionRow>> {
    Ok(sqlx::query_as(&format!(
        "SELECT {CONN_COLUMNS} FROM connections WHERE project_id = $1 AND user_id = $2 AND integration = $3"
    ))
    .bind(project_id)
    .bind(user_id)
    .bind(integration)
    .fetch_optional(ex)
    .await?)
}

pub async fn list_for_user<'e>(ex: impl Exec<'e>, project_id: &str, user_id: &str) -> Result<Vec<ConnectionRow>> {
    Ok(sqlx::query_as(&format!(
        "SELECT {CONN_COLUMNS} FROM connections WHERE project_id = $1 AND user_id = $2 ORDER BY integration"
    ))
    .bind(project_id)
    .bind(user_id)
    .fetch_all(ex)
    .await?)
}

/// Sets the status, dropping the credential unless it stays connected.
pub async fn set_status<'e>(ex: impl Exec<'e>, id: &str, status: &str, now: i64) -> Result<()> {
    sqlx::query(
        "UPDATE connections SET status = $1, updated_at = $2, \
         ciphertext = CASE WHEN $1 = 'connected' THEN ciphertext ELSE NULL END, \
         nonce = CASE WHEN $1 = 'connected' THEN nonce ELSE NULL END \
         WHERE id = $3",
    )
    .bind(status)
    .bind(now)
    .bind(id)
    .execute(ex)
    .await?;
    Ok(())
}

/// Connections sealed with another key version than `version` (rotation work list), a batch
/// at a time.
pub async fn not_on_version<'e>(ex: impl Exec<'e>, version: i64, limit: i64) -> Result<Vec<ConnectionRow>> {
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
pub async fn reseal<'e>(ex: impl Exec<'e>, id: &str, old_ciphertext: &str, ciphertext: &str, nonce: &str, version: i64) -> Result<bool> {
    let r = sqlx::query("UPDATE connections SET ciphertext = $1, nonce = $2, key_version = $3 WHERE id = $4 AND ciphertext = $5")
        .bind(ciphertext)
        .bind(nonce)
        .bind(version)
        .bind(id)
        .bind(old_ciphertext)
        .execute(ex)
        .await?;
    Ok(r.rows_affected() == 1)
}

/// Replaces the sealed credential of a connection only if it is still the one the caller read
/// (two instances refreshing at once: one wins, the other re-reads).
pub async fn replace_credential<'e>(
    ex: impl Exec<'e>,
    id: &str,
    old_ciphertext: &str,
    r: &ConnectionRow,
) -> Result<bool> {
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
    .execute(ex)
    .await?;
    Ok(done.rows_affected() == 1)
}

#[derive(Debug, Clone, FromRow)]
pub struct PendingRow {
    pub id: String,
    pub project_id: String,
    pub user_id: String,
    pub integration: String,
    pub status: String,
    pub oauth_state: Option<String>,
    pub pkce_verifier: Option<String>,
    pub state_expires_at: Option<i64>,
    pub created_at: i64,
    pub expires_at: i64,
}

const PENDING_COLUMNS: &str =
    "id, project_id, user_id, integration, status, oauth_state, pkce_verifier, state_expires_at, created_at, expires_at";

pub async fn insert_pending<'e>(ex: impl Exec<'e>, r: &PendingRow) -> Result<()> {
    sqlx::query(&format!("INSERT INTO pending_connections ({PENDING_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"))
        .bind(&r.id)
        .bind(&r.project_id)
        .bind(&r.user_id)
        .bind(&r.integration)
        .bind(&r.status)
        .bind(&r.oauth_state)
        .bind(&r.pkce_verifier)
        .bind(r.state_expires_at)
        .bind(r.created_at)
        .bind(r.expires_at)
        .execute(ex)
        .await?;
    Ok(())
}

pub async fn get_pending<'e>(ex: impl Exec<'e>, id: &str) -> Result<Option<PendingRow>> {
    Ok(sqlx::query_as(&format!("SELECT {PENDING_COLUMNS} FROM pending_connections WHERE id = $1"))
        .bind(id)
        .fetch_optional(ex)
        .await?)
}

/// Records a fresh OAuth state and PKCE verifier for a pending connection.
pub async fn set_oauth_state<'e>(ex: impl Exec<'e>, id: &str, state: &str, verifier: &str, state_expires_at: i64) -> Result<()> {
    sqlx::query("UPDATE pending_connections SET oauth_state = $1, pkce_verifier = $2, state_expires_at = $3 WHERE id = $4")
        .bind(state)
        .bind(verifier)
        .bind(state_expires_at)
        .bind(id)
        .execute(ex)
        .await?;
    Ok(())
}

/// Consumes an OAuth state: returns the pending row and clears the state so it cannot be used
/// twice (the conditional update decides between racing callbacks).
pub async fn take_by_state<'e>(ex: impl Exec<'e> + Copy, state: &str) -> Result<Option<PendingRow>> {
    let Some(row) = sqlx::query_as::<_, PendingRow>(&format!("SELECT {PENDING_COLUMNS} FROM pending_connections WHERE oauth_state = $1"))
        .bind(state)
        .fetch_optional(ex)
        .await?
    else {
        return Ok(None);
    };
    let cleared = sqlx::query("UPDATE pending_connections SET oauth_state = NULL WHERE id = $1 AND oauth_state = $2")
        .bind(&row.id)
        .bind(state)
        .execute(ex)
        .await?;
    Ok((cleared.rows_affected() == 1).then_some(row))
}

pub async fn mark_pending_connected<'e>(ex: impl Exec<'e>, id: &str) -> Result<()> {
    sqlx::query("UPDATE pending_connections SET status = 'connected', oauth_state = NULL, pkce_verifier = NULL WHERE id = $1")
        .bind(id)
        .execute(ex)
        .await?;
    Ok(())
}

pub async fn delete_pending<'e>(ex: impl Exec<'e>, id: &str) -> Result<()> {
    sqlx::query("DELETE FROM pending_connections WHERE id = $1").bind(id).execute(ex).await?;
    Ok(())
}

pub async fn delete_pending_before<'e>(ex: impl Exec<'e>, cutoff: i64) -> Result<u64> {
    let r = sqlx::query("DELETE FROM pending_connections WHERE expires_at < $1").bind(cutoff).execute(ex).await?;
    Ok(r.rows_affected())
}

#[derive(Debug, Clone, FromRow)]
pub struct ProxyTokenRow {
    pub jti: String,
    pub project_id: String,
    pub user_id: String,
    pub integrations: String,
    pub expires_at: i64,
    pub revoked_at: Option<i64>,
    pub created_at: i64,
}

pub async fn insert_proxy_token<'e>(ex: impl Exec<'e>, r: &ProxyTokenRow) -> Result<()> {
    sqlx::query(
        "INSERT INTO proxy_tokens (jti, project_id, user_id, integrations, expires_at, revoked_at, created_at) \
         VALUES ($1, $2, $3, $4, $5, NULL, $6)",
    )
    .bind(&r.jti)
    .bind(&r.project_id)
    .bind(&r.user_id)
    .bind(&r.integrations)
    .bind(r.expires_at)
    .bind(r.created_at)
    .execute(ex)
    .await?;
    Ok(())
}

pub async fn get_proxy_token<'e>(ex: impl Exec<'e>, jti: &str) -> Result<Option<ProxyTokenRow>> {
    Ok(sqlx::query_as(
        "SELECT jti, project_id, user_id, integrations, expires_at, revoked_at, created_at FROM proxy_tokens WHERE jti = $1",
    )
    .bind(jti)
    .fetch_optional(ex)
    .await?)
}

/// Revokes the user's live proxy tokens (all, or those listing `integration`).
pub async fn revoke_proxy_tokens<'e>(ex: impl Exec<'e>, user_id: &str, integration: Option<&str>, now: i64) -> Result<u64> {
    match integration {
        Some(i) => revoke_tokens_naming(ex, Owner::User, user_id, i, now).await,
        None => Ok(sqlx::query("UPDATE proxy_tokens SET revoked_at = $1 WHERE user_id = $2 AND revoked_at IS NULL AND expires_at > $1")
            .bind(now)
            .bind(user_id)
            .execute(ex)
            .await?
            .rows_affected()),
    }
}

/// Whose live proxy tokens a revocation covers.
enum Owner {
    User,
    Project,
}

/// Revokes live proxy tokens of a user or a project whose comma-separated list names `integration`.
async fn revoke_tokens_naming<'e>(ex: impl Exec<'e>, owner: Owner, owner_id: &str, integration: &str, now: i64) -> Result<u64> {
    let column = match owner {
        Owner::User => "user_id",
        Owner::Project => "project_id",
    };
    let sql = format!(
        "UPDATE proxy_tokens SET revoked_at = $1 WHERE {column} = $2 AND revoked_at IS NULL AND expires_at > $1 \
         AND (integrations = $3 OR integrations LIKE $4 OR integrations LIKE $5 OR integrations LIKE $6)"
    );
    let r = sqlx::query(&sql)
        .bind(now)
        .bind(owner_id)
        .bind(integration)
        .bind(format!("{integration},%"))
        .bind(format!("%,{integration}"))
        .bind(format!("%,{integration},%"))
        .execute(ex)
        .await?;
    Ok(r.rows_affected())
}

/// Forgets an integration in a project (its custom app was deleted): every user's stored
/// credential and pending connection go, and live proxy tokens naming it are revoked.
pub async fn forget_integration(tx: &mut super::Tx, project_id: &str, integration: &str, now: i64) -> Result<u64> {
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
    revoke_tokens_naming(&mut **tx, Owner::Project, project_id, integration, now).await?;
    Ok(gone)
}

#[derive(Debug, Clone, FromRow)]
pub struct AppRow {
    pub id: String,
    pub project_id: String,
    pub name: String,
    pub definition: String,
    pub created_at: i64,
}

pub async fn insert_app<'e>(ex: impl Exec<'e>, r: &AppRow) -> Result<()> {
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

pub async fn list_apps<'e>(ex: impl Exec<'e>, project_id: &str) -> Result<Vec<AppRow>> {
    Ok(sqlx::query_as("SELECT id, project_id, name, definition, created_at FROM apps WHERE project_id = $1 ORDER BY name")
        .bind(project_id)
        .fetch_all(ex)
        .await?)
}

/// Deletes a project's app; returns its name, or None when there was no such app.
pub async fn delete_app(tx: &mut super::Tx, project_id: &str, id: &str) -> Result<Option<String>> {
    let name: Option<(String,)> = sqlx::query_as("SELECT name FROM apps WHERE project_id = $1 AND id = $2")
        .bind(project_id)
        .bind(id)
        .fetch_optional(&mut **tx)
        .await?;
    if name.is_some() {
        sqlx::query("DELETE FROM apps WHERE project_id = $1 AND id = $2").bind(project_id).bind(id).execute(&mut **tx).await?;
    }
    Ok(name.map(|(n,)| n))
}

/// Every app's (project id, app id), ordered: what each instance compares with what it loaded.
pub async fn app_ids<'e>(ex: impl Exec<'e>) -> Result<Vec<(String, String)>> {
    Ok(sqlx::query_as("SELECT project_id, id FROM apps ORDER BY project_id, id").fetch_all(ex).await?)
}
