//! API keys: only a SHA-256 of the secret is stored (keys carry 238 random bits, so a slow hash
//! buys nothing and would cost every request).

use sqlx::FromRow;

use super::Exec;
use crate::Result;

#[derive(Debug, Clone, FromRow)]
pub struct ApiKeyRow {
    pub id: String,
    pub project_id: String,
    pub user_id: String,
    pub name: String,
    pub key_prefix: String,
    pub created_at: i64,
    pub last_used_at: Option<i64>,
    pub revoked_at: Option<i64>,
    /// Email of the owning user (joined in for listings).
    pub owner_email: Option<String>,
    /// The policy attached to the key (None: the project's default applies).
    pub policy_id: Option<String>,
    /// Calls per minute the key may make (None: no limit).
    pub rate_limit_per_minute: Option<i64>,
    /// JSON list of the tool sets the key is limited to (None: not limited).
    pub tool_sets: Option<String>,
}

const COLUMNS: &str = "id, project_id, user_id, name, key_prefix, created_at, last_used_at, \
     revoked_at, (SELECT email FROM users WHERE users.id = api_keys.user_id) AS owner_email, policy_id, rate_limit_per_minute, tool_sets";

pub async fn insert<'e>(ex: impl Exec<'e>, row: &ApiKeyRow, key_hash: &str) -> Result<()> {
    sqlx::query(
        "INSERT INTO api_keys (id, project_id, user_id, name, key_hash, key_prefix, created_at, policy_id, rate_limit_per_minute) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    )
    .bind(&row.id)
    .bind(&row.project_id)
    .bind(&row.user_id)
    .bind(&row.name)
    .bind(key_hash)
    .bind(&row.key_prefix)
    .bind(row.created_at)
    .bind(&row.policy_id)
    .bind(row.rate_limit_per_minute)
    .execute(ex)
    .await?;
    Ok(())
}

/// The key with this hash, revoked or not.
pub async fn by_hash<'e>(ex: impl Exec<'e>, key_hash: &str) -> Result<Option<ApiKeyRow>> {
    Ok(sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM api_keys WHERE key_hash = $1"
    ))
    .bind(key_hash)
    .fetch_optional(ex)
    .await?)
}

pub async fn by_id<'e>(ex: impl Exec<'e>, project_id: &str, id: &str) -> Result<Option<ApiKeyRow>> {
    Ok(sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM api_keys WHERE project_id = $1 AND id = $2"
    ))
    .bind(project_id)
    .bind(id)
    .fetch_optional(ex)
    .await?)
}

/// Keys of a project, newest first; `user_id` narrows to one owner.
pub async fn list<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    user_id: Option<&str>,
) -> Result<Vec<ApiKeyRow>> {
    let rows = match user_id {
        Some(user_id) => {
            sqlx::query_as(&format!(
                "SELECT {COLUMNS} FROM api_keys WHERE project_id = $1 AND user_id = $2 \
                 ORDER BY created_at DESC, id"
            ))
            .bind(project_id)
            .bind(user_id)
            .fetch_all(ex)
            .await?
        }
        None => {
            sqlx::query_as(&format!(
                "SELECT {COLUMNS} FROM api_keys WHERE project_id = $1 ORDER BY created_at DESC, id"
            ))
            .bind(project_id)
            .fetch_all(ex)
            .await?
        }
    };
    Ok(rows)
}

/// Revokes a live key; false when it does not exist or was already revoked.
pub async fn revoke<'e>(ex: impl Exec<'e>, project_id: &str, id: &str, now: i64) -> Result<bool> {
    let r = sqlx::query(
        "UPDATE api_keys SET revoked_at = $1 WHERE project_id = $2 AND id = $3 AND revoked_at IS NULL",
    )
    .bind(now)
    .bind(project_id)
    .bind(id)
    .execute(ex)
    .await?;
    Ok(r.rows_affected() == 1)
}

/// Revokes every live key a user holds in a project (they left it).
pub async fn revoke_of_member<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    user_id: &str,
    now: i64,
) -> Result<u64> {
    let r = sqlx::query(
        "UPDATE api_keys SET revoked_at = $1 WHERE project_id = $2 AND user_id = $3 AND revoked_at IS NULL",
    )
    .bind(now)
    .bind(project_id)
    .bind(user_id)
    .execute(ex)
    .await?;
    Ok(r.rows_affected())
}

/// Records use, at most once per `granularity_ms` per key, so a busy key is not a write per call.
pub async fn touch<'e>(ex: impl Exec<'e>, id: &str, now: i64, granularity_ms: i64) -> Result<()> {
    sqlx::query(
        "UPDATE api_keys SET last_used_at = $1 WHERE id = $2 \
         AND (last_used_at IS NULL OR last_used_at < $3)",
    )
    .bind(now)
    .bind(id)
    .bind(now - granularity_ms)
    .execute(ex)
    .await?;
    Ok(())
}

/// Everything authentication needs about a key, in one query: the key, its owner and the
/// owner's membership in the key's project (None when any of them is gone).
#[derive(Debug, Clone, FromRow)]
pub struct KeyPrincipalRow {
    pub id: String,
    pub project_id: String,
    pub project_name: String,
    pub user_id: String,
    pub email: String,
    pub role: String,
    pub last_used_at: Option<i64>,
    pub revoked_at: Option<i64>,
    pub policy_id: Option<String>,
    pub policy_generation: i64,
    pub rate_limit_per_minute: Option<i64>,
    /// JSON list of the tool sets the key is limited to (None: not limited).
    pub tool_sets: Option<String>,
    /// The project's vault generation (0 before any secret was set).
    pub vault_generation: i64,
    /// The owner's credentials generation in the project.
    pub credentials_generation: i64,
    /// The policy the owner's groups cap them with (single sign-on).
    pub user_policy_id: Option<String>,
}

const PRINCIPAL: &str = "SELECT k.id, k.project_id, p.name AS project_name, k.user_id, u.email, m.role, k.last_used_at, k.revoked_at, \
     k.policy_id, p.policy_generation, k.rate_limit_per_minute, k.tool_sets, \
     COALESCE((SELECT g.generation FROM vault_generations g WHERE g.project_id = k.project_id), 0) AS vault_generation, \
     m.credentials_generation, m.policy_id AS user_policy_id \
     FROM api_keys k \
     JOIN users u ON u.id = k.user_id \
     JOIN memberships m ON m.project_id = k.project_id AND m.user_id = k.user_id \
     JOIN projects p ON p.id = k.project_id";

pub async fn principal_by_hash<'e>(
    ex: impl Exec<'e>,
    key_hash: &str,
) -> Result<Option<KeyPrincipalRow>> {
    Ok(
        sqlx::query_as(&format!("{PRINCIPAL} WHERE k.key_hash = $1"))
            .bind(key_hash)
            .fetch_optional(ex)
            .await?,
    )
}

/// The same by the key's id, within a project.
pub async fn principal_by_id<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    id: &str,
) -> Result<Option<KeyPrincipalRow>> {
    Ok(sqlx::query_as(&format!(
        "{PRINCIPAL} WHERE k.project_id = $1 AND k.id = $2"
    ))
    .bind(project_id)
    .bind(id)
    .fetch_optional(ex)
    .await?)
}

/// Sets a key's rate limit (`None`: no limit); false when the key is not the project's.
pub async fn set_rate_limit<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    id: &str,
    per_minute: Option<i64>,
) -> Result<bool> {
    let done = sqlx::query(
        "UPDATE api_keys SET rate_limit_per_minute = $1 WHERE project_id = $2 AND id = $3",
    )
    .bind(per_minute)
    .bind(project_id)
    .bind(id)
    .execute(ex)
    .await?;
    Ok(done.rows_affected() == 1)
}
