//! MCP authorization server records: OAuth clients, the grants people gave them, single-use
//! authorization codes and access/refresh tokens. Client secrets, codes and tokens are stored
//! as SHA-256 digests (they carry at least 190 random bits, so a slow hash buys nothing).

use sqlx::FromRow;

use super::Exec;
use crate::Result;

#[derive(Debug, Clone, FromRow)]
pub struct ClientRow {
    pub client_id: String,
    pub kind: String,
    pub client_name: String,
    pub redirect_uris: String,
    pub token_endpoint_auth_method: String,
    pub client_secret_hash: Option<String>,
    pub client_uri: Option<String>,
    pub registered_from: Option<String>,
    pub created_at: i64,
    pub fetched_at: Option<i64>,
}

const CLIENT_COLUMNS: &str = "client_id, kind, client_name, redirect_uris, token_endpoint_auth_method, client_secret_hash, client_uri, registered_from, created_at, fetched_at";

pub async fn insert_client<'e>(ex: impl Exec<'e>, c: &ClientRow) -> Result<()> {
    sqlx::query(
        "INSERT INTO oauth_clients (client_id, kind, client_name, redirect_uris, token_endpoint_auth_method, client_secret_hash, client_uri, registered_from, created_at, fetched_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
    )
    .bind(&c.client_id)
    .bind(&c.kind)
    .bind(&c.client_name)
    .bind(&c.redirect_uris)
    .bind(&c.token_endpoint_auth_method)
    .bind(&c.client_secret_hash)
    .bind(&c.client_uri)
    .bind(&c.registered_from)
    .bind(c.created_at)
    .bind(c.fetched_at)
    .execute(ex)
    .await?;
    Ok(())
}

/// Stores a freshly fetched metadata document's client (replacing an older fetch).
pub async fn upsert_metadata_client<'e>(ex: impl Exec<'e>, c: &ClientRow) -> Result<()> {
    sqlx::query(
        "INSERT INTO oauth_clients (client_id, kind, client_name, redirect_uris, token_endpoint_auth_method, client_uri, created_at, fetched_at) \
         VALUES ($1, 'metadata', $2, $3, $4, $5, $6, $7) \
         ON CONFLICT (client_id) DO UPDATE SET client_name = excluded.client_name, redirect_uris = excluded.redirect_uris, \
         token_endpoint_auth_method = excluded.token_endpoint_auth_method, client_uri = excluded.client_uri, fetched_at = excluded.fetched_at",
    )
    .bind(&c.client_id)
    .bind(&c.client_name)
    .bind(&c.redirect_uris)
    .bind(&c.token_endpoint_auth_method)
    .bind(&c.client_uri)
    .bind(c.created_at)
    .bind(c.fetched_at)
    .execute(ex)
    .await?;
    Ok(())
}

pub async fn get_client<'e>(ex: impl Exec<'e>, client_id: &str) -> Result<Option<ClientRow>> {
    Ok(sqlx::query_as(&format!(
        "SELECT {CLIENT_COLUMNS} FROM oauth_clients WHERE client_id = $1"
    ))
    .bind(client_id)
    .fetch_optional(ex)
    .await?)
}

/// Clients registered from one address since `since` (the registration rate limit).
pub async fn count_registered_from<'e>(ex: impl Exec<'e>, from: &str, since: i64) -> Result<i64> {
    let (n,): (i64,) = sqlx::query_as(
        "SELECT COUNT(*) FROM oauth_clients WHERE registered_from = $1 AND created_at >= $2",
    )
    .bind(from)
    .bind(since)
    .fetch_one(ex)
    .await?;
    Ok(n)
}

#[derive(Debug, Clone, FromRow)]
pub struct GrantRow {
    pub id: String,
    pub client_id: String,
    pub user_id: String,
    pub project_id: String,
    pub policy_id: Option<String>,
    pub resource: String,
    pub created_at: i64,
    pub last_used_at: Option<i64>,
    pub revoked_at: Option<i64>,
    /// Calls per minute the grant may make (None: no limit), like an API key's.
    pub rate_limit_per_minute: Option<i64>,
}

const GRANT_COLUMNS: &str = "id, client_id, user_id, project_id, policy_id, resource, created_at, last_used_at, revoked_at, rate_limit_per_minute";

pub async fn insert_grant<'e>(ex: impl Exec<'e>, g: &GrantRow) -> Result<()> {
    sqlx::query(
        "INSERT INTO oauth_grants (id, client_id, user_id, project_id, policy_id, resource, created_at, rate_limit_per_minute) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
    )
    .bind(&g.id)
    .bind(&g.client_id)
    .bind(&g.user_id)
    .bind(&g.project_id)
    .bind(&g.policy_id)
    .bind(&g.resource)
    .bind(g.created_at)
    .bind(g.rate_limit_per_minute)
    .execute(ex)
    .await?;
    Ok(())
}

/// The live grant a user gave a client in a project, if any (approving again reuses it).
pub async fn live_grant_for<'e>(
    ex: impl Exec<'e>,
    client_id: &str,
    user_id: &str,
    project_id: &str,
) -> Result<Option<GrantRow>> {
    Ok(sqlx::query_as(&format!("SELECT {GRANT_COLUMNS} FROM oauth_grants WHERE client_id = $1 AND user_id = $2 AND project_id = $3 AND revoked_at IS NULL ORDER BY created_at DESC LIMIT 1"))
        .bind(client_id)
        .bind(user_id)
        .bind(project_id)
        .fetch_optional(ex)
        .await?)
}

/// Sets what a grant acts under: its policy and rate limit.
pub async fn set_grant_terms<'e>(
    ex: impl Exec<'e>,
    id: &str,
    policy_id: Option<&str>,
    rate_limit_per_minute: Option<i64>,
) -> Result<()> {
    sqlx::query("UPDATE oauth_grants SET policy_id = $1, rate_limit_per_minute = $2 WHERE id = $3")
        .bind(policy_id)
        .bind(rate_limit_per_minute)
        .bind(id)
        .execute(ex)
        .await?;
    Ok(())
}

pub async fn get_grant<'e>(ex: impl Exec<'e>, id: &str) -> Result<Option<GrantRow>> {
    Ok(sqlx::query_as(&format!(
        "SELECT {GRANT_COLUMNS} FROM oauth_grants WHERE id = $1"
    ))
    .bind(id)
    .fetch_optional(ex)
    .await?)
}

/// A user's grants that are not revoked, newest first, with each client's name.
pub async fn live_grants_of_user<'e>(
    ex: impl Exec<'e>,
    user_id: &str,
) -> Result<Vec<(GrantRow, String, String)>> {
    #[derive(FromRow)]
    struct Joined {
        #[sqlx(flatten)]
        grant: GrantRow,
        client_name: String,
        redirect_uris: String,
    }
    let rows: Vec<Joined> = sqlx::query_as(
        "SELECT g.id, g.client_id, g.user_id, g.project_id, g.policy_id, g.resource, g.created_at, g.last_used_at, g.revoked_at, g.rate_limit_per_minute, \
         c.client_name, c.redirect_uris FROM oauth_grants g JOIN oauth_clients c ON c.client_id = g.client_id \
         WHERE g.user_id = $1 AND g.revoked_at IS NULL ORDER BY g.created_at DESC, g.id DESC",
    )
    .bind(user_id)
    .fetch_all(ex)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| (r.grant, r.client_name, r.redirect_uris))
        .collect())
}

/// Revokes a grant of `user_id`; false when there is no such live grant.
pub async fn revoke_grant<'e>(
    ex: impl Exec<'e>,
    id: &str,
    user_id: &str,
    now: i64,
) -> Result<bool> {
    let r = sqlx::query("UPDATE oauth_grants SET revoked_at = $1 WHERE id = $2 AND user_id = $3 AND revoked_at IS NULL")
        .bind(now)
        .bind(id)
        .bind(user_id)
        .execute(ex)
        .await?;
    Ok(r.rows_affected() == 1)
}

/// Revokes every grant a user gave in a project (they left it), and every token those grants
/// issued; the number of grants.
pub async fn revoke_grants_of_member(
    tx: &mut super::Tx,
    project_id: &str,
    user_id: &str,
    now: i64,
) -> Result<u64> {
    sqlx::query(
        "UPDATE oauth_tokens SET revoked_at = $1 WHERE revoked_at IS NULL AND grant_id IN \
         (SELECT id FROM oauth_grants WHERE project_id = $2 AND user_id = $3)",
    )
    .bind(now)
    .bind(project_id)
    .bind(user_id)
    .execute(&mut **tx)
    .await?;
    let r = sqlx::query(
        "UPDATE oauth_grants SET revoked_at = $1 WHERE project_id = $2 AND user_id = $3 AND revoked_at IS NULL",
    )
    .bind(now)
    .bind(project_id)
    .bind(user_id)
    .execute(&mut **tx)
    .await?;
    Ok(r.rows_affected())
}

pub async fn touch_grant<'e>(ex: impl Exec<'e>, id: &str, now: i64) -> Result<()> {
    sqlx::query("UPDATE oauth_grants SET last_used_at = $1 WHERE id = $2")
        .bind(now)
        .bind(id)
        .execute(ex)
        .await?;
    Ok(())
}

#[derive(Debug, Clone, FromRow)]
pub struct CodeRow {
    pub code_hash: String,
    pub grant_id: String,
    pub redirect_uri: String,
    pub code_challenge: String,
    pub resource: String,
    pub expires_at: i64,
    pub used_at: Option<i64>,
}

pub async fn insert_code<'e>(ex: impl Exec<'e>, c: &CodeRow) -> Result<()> {
    sqlx::query("INSERT INTO oauth_codes (code_hash, grant_id, redirect_uri, code_challenge, resource, expires_at) VALUES ($1, $2, $3, $4, $5, $6)")
        .bind(&c.code_hash)
        .bind(&c.grant_id)
        .bind(&c.redirect_uri)
        .bind(&c.code_challenge)
        .bind(&c.resource)
        .bind(c.expires_at)
        .execute(ex)
        .await?;
    Ok(())
}

/// Marks a code used and returns it, once: a second redemption (or a racing one) gets None
/// and `get_code` tells the caller it was already used.
pub async fn redeem_code<'e>(ex: impl Exec<'e>, code_hash: &str, now: i64) -> Result<bool> {
    let r =
        sqlx::query("UPDATE oauth_codes SET used_at = $1 WHERE code_hash = $2 AND used_at IS NULL")
            .bind(now)
            .bind(code_hash)
            .execute(ex)
            .await?;
    Ok(r.rows_affected() == 1)
}

pub async fn get_code<'e>(ex: impl Exec<'e>, code_hash: &str) -> Result<Option<CodeRow>> {
    Ok(sqlx::query_as("SELECT code_hash, grant_id, redirect_uri, code_challenge, resource, expires_at, used_at FROM oauth_codes WHERE code_hash = $1")
        .bind(code_hash)
        .fetch_optional(ex)
        .await?)
}

#[derive(Debug, Clone, FromRow)]
pub struct TokenRow {
    pub token_hash: String,
    pub kind: String,
    pub grant_id: String,
    pub family_id: String,
    pub resource: String,
    pub created_at: i64,
    pub expires_at: i64,
    pub used_at: Option<i64>,
    pub revoked_at: Option<i64>,
}

pub async fn insert_token<'e>(ex: impl Exec<'e>, t: &TokenRow) -> Result<()> {
    sqlx::query(
        "INSERT INTO oauth_tokens (token_hash, kind, grant_id, family_id, resource, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(&t.token_hash)
    .bind(&t.kind)
    .bind(&t.grant_id)
    .bind(&t.family_id)
    .bind(&t.resource)
    .bind(t.created_at)
    .bind(t.expires_at)
    .execute(ex)
    .await?;
    Ok(())
}

pub async fn get_token<'e>(ex: impl Exec<'e>, token_hash: &str) -> Result<Option<TokenRow>> {
    Ok(sqlx::query_as("SELECT token_hash, kind, grant_id, family_id, resource, created_at, expires_at, used_at, revoked_at FROM oauth_tokens WHERE token_hash = $1")
        .bind(token_hash)
        .fetch_optional(ex)
        .await?)
}

/// Marks a refresh token used (rotated), once; false when it already was (a reuse).
pub async fn use_refresh_token<'e>(ex: impl Exec<'e>, token_hash: &str, now: i64) -> Result<bool> {
    let r = sqlx::query("UPDATE oauth_tokens SET used_at = $1 WHERE token_hash = $2 AND kind = 'refresh' AND used_at IS NULL AND revoked_at IS NULL")
        .bind(now)
        .bind(token_hash)
        .execute(ex)
        .await?;
    Ok(r.rows_affected() == 1)
}

pub async fn revoke_token<'e>(ex: impl Exec<'e>, token_hash: &str, now: i64) -> Result<()> {
    sqlx::query(
        "UPDATE oauth_tokens SET revoked_at = $1 WHERE token_hash = $2 AND revoked_at IS NULL",
    )
    .bind(now)
    .bind(token_hash)
    .execute(ex)
    .await?;
    Ok(())
}

/// Revokes every token of a family (a reused refresh token, a revoked refresh token).
pub async fn revoke_family<'e>(ex: impl Exec<'e>, family_id: &str, now: i64) -> Result<u64> {
    let r = sqlx::query(
        "UPDATE oauth_tokens SET revoked_at = $1 WHERE family_id = $2 AND revoked_at IS NULL",
    )
    .bind(now)
    .bind(family_id)
    .execute(ex)
    .await?;
    Ok(r.rows_affected())
}

/// Deletes codes and tokens that expired before `before`, and clients registered (or whose
/// metadata document was cached) before it that nobody ever approved: anyone may register, so
/// abandoned registrations must not pile up (upkeep).
pub async fn delete_expired(pool: &sqlx::AnyPool, before: i64) -> Result<u64> {
    let a = sqlx::query("DELETE FROM oauth_codes WHERE expires_at < $1")
        .bind(before)
        .execute(pool)
        .await?
        .rows_affected();
    let b = sqlx::query("DELETE FROM oauth_tokens WHERE expires_at < $1")
        .bind(before)
        .execute(pool)
        .await?
        .rows_affected();
    let c = sqlx::query("DELETE FROM oauth_clients WHERE created_at < $1 AND NOT EXISTS (SELECT 1 FROM oauth_grants g WHERE g.client_id = oauth_clients.client_id)")
        .bind(before)
        .execute(pool)
        .await?
        .rows_affected();
    Ok(a + b + c)
}

/// Revokes every token a grant issued (the grant was revoked, or one of its codes replayed).
pub async fn revoke_grant_tokens<'e>(ex: impl Exec<'e>, grant_id: &str, now: i64) -> Result<u64> {
    let r = sqlx::query(
        "UPDATE oauth_tokens SET revoked_at = $1 WHERE grant_id = $2 AND revoked_at IS NULL",
    )
    .bind(now)
    .bind(grant_id)
    .execute(ex)
    .await?;
    Ok(r.rows_affected())
}
