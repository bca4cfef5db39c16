//! curl_session proxy tokens: their ids, owners and integrations, and revocation.

use sqlx::FromRow;

use super::Exec;
use crate::Result;

#[derive(Debug, Clone, FromRow)]
pub struct ProxyTokenRow {
    pub jti: String,
    pub project_id: String,
    pub user_id: String,
    pub integrations: String,
    pub expires_at: i64,
    pub revoked_at: Option<i64>,
    pub created_at: i64,
    /// The API key that minted the token, or
    pub api_key_id: Option<String>,
    /// the MCP OAuth grant that did.
    pub oauth_grant_id: Option<String>,
}

pub async fn insert<'e>(ex: impl Exec<'e>, r: &ProxyTokenRow) -> Result<()> {
    sqlx::query(
        "INSERT INTO proxy_tokens (jti, project_id, user_id, integrations, expires_at, revoked_at, created_at, api_key_id, oauth_grant_id) \
         VALUES ($1, $2, $3, $4, $5, NULL, $6, $7, $8)",
    )
    .bind(&r.jti)
    .bind(&r.project_id)
    .bind(&r.user_id)
    .bind(&r.integrations)
    .bind(r.expires_at)
    .bind(r.created_at)
    .bind(&r.api_key_id)
    .bind(&r.oauth_grant_id)
    .execute(ex)
    .await?;
    Ok(())
}

pub async fn get<'e>(ex: impl Exec<'e>, jti: &str) -> Result<Option<ProxyTokenRow>> {
    Ok(sqlx::query_as(
        "SELECT jti, project_id, user_id, integrations, expires_at, revoked_at, created_at, api_key_id, oauth_grant_id FROM proxy_tokens WHERE jti = $1",
    )
    .bind(jti)
    .fetch_optional(ex)
    .await?)
}

/// Revokes the user's live proxy tokens (all, or those listing `integration`).
pub async fn revoke_for_user<'e>(
    ex: impl Exec<'e>,
    user_id: &str,
    integration: Option<&str>,
    now: i64,
) -> Result<u64> {
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

/// Revokes the live proxy tokens a user holds in a project (they left it).
pub async fn revoke_of_member<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    user_id: &str,
    now: i64,
) -> Result<u64> {
    Ok(sqlx::query(
        "UPDATE proxy_tokens SET revoked_at = $1 WHERE project_id = $2 AND user_id = $3 AND revoked_at IS NULL AND expires_at > $1",
    )
    .bind(now)
    .bind(project_id)
    .bind(user_id)
    .execute(ex)
    .await?
    .rows_affected())
}

/// Whose live proxy tokens a revocation covers.
pub(super) enum Owner {
    User,
    Project,
}

/// Revokes live proxy tokens of a user or a project whose comma-separated list names `integration`.
pub(super) async fn revoke_tokens_naming<'e>(
    ex: impl Exec<'e>,
    owner: Owner,
    owner_id: &str,
    integration: &str,
    now: i64,
) -> Result<u64> {
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
