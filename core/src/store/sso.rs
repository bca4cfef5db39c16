//! Single sign-on rows: a project's OpenID Connect providers (settings as JSON, validated before
//! they are stored), the identities people signed in with and the memberships a provider gives
//! (role and policy cap).

use sqlx::FromRow;

use super::Exec;
use crate::Result;

/// A sealed value as stored: ciphertext, nonce, master key version.
pub type SealedParts<'a> = (&'a str, &'a str, i64);

#[derive(Debug, Clone, FromRow)]
pub struct ProviderRow {
    pub id: String,
    pub project_id: String,
    pub slug: String,
    /// JSON of the provider's settings (`model::sso::ProviderInput`).
    pub config: String,
    pub created_at: i64,
    pub updated_at: i64,
}

const COLUMNS: &str = "id, project_id, slug, config, created_at, updated_at";

/// Inserts a provider, or replaces the settings of the project's provider with that slug; false
/// when the slug is taken by another project.
pub async fn upsert_provider<'e>(ex: impl Exec<'e>, r: &ProviderRow) -> Result<bool> {
    let done = sqlx::query(&format!(
        "INSERT INTO sso_providers ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6) \
         ON CONFLICT (slug) DO UPDATE SET config = excluded.config, updated_at = excluded.updated_at \
         WHERE sso_providers.project_id = excluded.project_id"
    ))
    .bind(&r.id)
    .bind(&r.project_id)
    .bind(&r.slug)
    .bind(&r.config)
    .bind(r.created_at)
    .bind(r.updated_at)
    .execute(ex)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// The provider with this id.
pub async fn provider_by_id<'e>(ex: impl Exec<'e>, id: &str) -> Result<Option<ProviderRow>> {
    Ok(sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM sso_providers WHERE id = $1"
    ))
    .bind(id)
    .fetch_optional(ex)
    .await?)
}

pub async fn provider_by_slug<'e>(ex: impl Exec<'e>, slug: &str) -> Result<Option<ProviderRow>> {
    Ok(sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM sso_providers WHERE slug = $1"
    ))
    .bind(slug)
    .fetch_optional(ex)
    .await?)
}

/// The project's providers, by slug.
pub async fn providers<'e>(ex: impl Exec<'e>, project_id: &str) -> Result<Vec<ProviderRow>> {
    Ok(sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM sso_providers WHERE project_id = $1 ORDER BY slug"
    ))
    .bind(project_id)
    .fetch_all(ex)
    .await?)
}

/// Every provider of the instance (the sign-in page), by slug.
pub async fn all_providers<'e>(ex: impl Exec<'e>) -> Result<Vec<ProviderRow>> {
    Ok(sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM sso_providers ORDER BY slug"
    ))
    .fetch_all(ex)
    .await?)
}

pub async fn delete_provider<'e>(ex: impl Exec<'e>, project_id: &str, slug: &str) -> Result<bool> {
    let done = sqlx::query("DELETE FROM sso_providers WHERE project_id = $1 AND slug = $2")
        .bind(project_id)
        .bind(slug)
        .execute(ex)
        .await?;
    Ok(done.rows_affected() == 1)
}

/// The user an identity of the provider is linked to.
pub async fn identity_user<'e>(
    ex: impl Exec<'e>,
    provider_id: &str,
    subject: &str,
) -> Result<Option<String>> {
    Ok(sqlx::query_scalar(
        "SELECT user_id FROM sso_identities WHERE provider_id = $1 AND subject = $2",
    )
    .bind(provider_id)
    .bind(subject)
    .fetch_optional(ex)
    .await?)
}

/// Links an identity to a user, or records another sign-in of a linked one: checked now, next
/// at `next_check_at`, with the provider's refresh token (sealed) if it sent one.
#[allow(clippy::too_many_arguments)]
pub async fn link_identity<'e>(
    ex: impl Exec<'e>,
    provider_id: &str,
    subject: &str,
    user_id: &str,
    now: i64,
    next_check_at: i64,
    refresh: Option<SealedParts<'_>>,
) -> Result<()> {
    sqlx::query(
        "INSERT INTO sso_identities (provider_id, subject, user_id, created_at, signed_in_at, checked_at, \
         next_check_at, refresh_ciphertext, refresh_nonce, refresh_key_version) \
         VALUES ($1, $2, $3, $4, $4, $4, $8, $5, $6, $7) \
         ON CONFLICT (provider_id, subject) DO UPDATE SET signed_in_at = excluded.signed_in_at, \
         checked_at = excluded.checked_at, next_check_at = excluded.next_check_at, \
         refresh_ciphertext = excluded.refresh_ciphertext, \
         refresh_nonce = excluded.refresh_nonce, refresh_key_version = excluded.refresh_key_version",
    )
    .bind(provider_id)
    .bind(subject)
    .bind(user_id)
    .bind(now)
    .bind(refresh.map(|s| s.0))
    .bind(refresh.map(|s| s.1))
    .bind(refresh.map(|s| s.2))
    .bind(next_check_at)
    .execute(ex)
    .await?;
    Ok(())
}

/// An identity the background re-check may ask its provider about.
#[derive(Debug, Clone, FromRow)]
pub struct DueRow {
    pub provider_id: String,
    pub subject: String,
    pub user_id: String,
    pub next_check_at: i64,
    pub refresh_ciphertext: String,
    pub refresh_nonce: String,
    pub refresh_key_version: i64,
}

/// Identities with a refresh token whose re-check is due at `now`, longest due first.
pub async fn due<'e>(ex: impl Exec<'e>, now: i64, limit: i64) -> Result<Vec<DueRow>> {
    Ok(sqlx::query_as(
        "SELECT provider_id, subject, user_id, next_check_at, refresh_ciphertext, refresh_nonce, \
         refresh_key_version FROM sso_identities WHERE refresh_ciphertext IS NOT NULL \
         AND refresh_nonce IS NOT NULL AND refresh_key_version IS NOT NULL AND next_check_at <= $1 \
         ORDER BY next_check_at LIMIT $2",
    )
    .bind(now)
    .bind(limit)
    .fetch_all(ex)
    .await?)
}

/// Records a background check of an identity: when, when the next is due, and the refresh
/// token to use next (None: keep the one it has); `forget` drops the refresh token (the provider
/// refused it).
#[allow(clippy::too_many_arguments)]
pub async fn checked<'e>(
    ex: impl Exec<'e>,
    provider_id: &str,
    subject: &str,
    now: i64,
    next_check_at: i64,
    refresh: Option<SealedParts<'_>>,
    forget: bool,
) -> Result<()> {
    sqlx::query(
        "UPDATE sso_identities SET checked_at = $1, next_check_at = $8, \
         refresh_ciphertext = CASE WHEN $2 = 1 THEN NULL ELSE COALESCE($3, refresh_ciphertext) END, \
         refresh_nonce = CASE WHEN $2 = 1 THEN NULL ELSE COALESCE($4, refresh_nonce) END, \
         refresh_key_version = CASE WHEN $2 = 1 THEN NULL ELSE COALESCE($5, refresh_key_version) END \
         WHERE provider_id = $6 AND subject = $7",
    )
    .bind(now)
    .bind(i64::from(forget))
    .bind(refresh.map(|s| s.0))
    .bind(refresh.map(|s| s.1))
    .bind(refresh.map(|s| s.2))
    .bind(provider_id)
    .bind(subject)
    .bind(next_check_at)
    .execute(ex)
    .await?;
    Ok(())
}

/// Gives the user `role` in the project, capped by `policy_id`, as the provider decided. An
/// existing membership keeps its age (its place as the user's home project).
pub async fn set_membership<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    user_id: &str,
    role: &str,
    policy_id: Option<&str>,
    provider_id: &str,
    now: i64,
) -> Result<()> {
    sqlx::query(
        "INSERT INTO memberships (project_id, user_id, role, created_at, policy_id, sso_provider_id) \
         VALUES ($1, $2, $3, $4, $5, $6) \
         ON CONFLICT (project_id, user_id) DO UPDATE SET role = excluded.role, \
         policy_id = excluded.policy_id, sso_provider_id = excluded.sso_provider_id",
    )
    .bind(project_id)
    .bind(user_id)
    .bind(role)
    .bind(now)
    .bind(policy_id)
    .bind(provider_id)
    .execute(ex)
    .await?;
    Ok(())
}

/// Ends the user's membership in the project if this provider gave it; true when it did.
pub async fn drop_membership<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    user_id: &str,
    provider_id: &str,
) -> Result<bool> {
    let done = sqlx::query(
        "DELETE FROM memberships WHERE project_id = $1 AND user_id = $2 AND sso_provider_id = $3",
    )
    .bind(project_id)
    .bind(user_id)
    .bind(provider_id)
    .execute(ex)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Whether a policy caps a member of the project.
pub async fn policy_caps_someone<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    policy_id: &str,
) -> Result<bool> {
    let n: i64 = sqlx::query_scalar(
        "SELECT CAST(COUNT(*) AS BIGINT) FROM memberships WHERE project_id = $1 AND policy_id = $2",
    )
    .bind(project_id)
    .bind(policy_id)
    .fetch_one(ex)
    .await?;
    Ok(n > 0)
}

/// Moves an identity's next re-check from `seen` to `to`; false when another instance (or a
/// sign-in) moved it first. The re-check claims an identity so (a refresh token used twice at
/// once would be refused the second time), and, when the provider could not be asked, moves it
/// to now: due again at the next round, behind those waiting longer.
pub async fn move_check<'e>(
    ex: impl Exec<'e>,
    provider_id: &str,
    subject: &str,
    seen: i64,
    to: i64,
) -> Result<bool> {
    let done = sqlx::query(
        "UPDATE sso_identities SET next_check_at = $1 \
         WHERE provider_id = $2 AND subject = $3 AND next_check_at = $4",
    )
    .bind(to)
    .bind(provider_id)
    .bind(subject)
    .bind(seen)
    .execute(ex)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Whether the user is linked to an identity of another provider than `provider_id`.
pub async fn linked_elsewhere<'e>(
    ex: impl Exec<'e>,
    user_id: &str,
    provider_id: &str,
) -> Result<bool> {
    let n: i64 = sqlx::query_scalar(
        "SELECT CAST(COUNT(*) AS BIGINT) FROM sso_identities WHERE user_id = $1 AND provider_id <> $2",
    )
    .bind(user_id)
    .bind(provider_id)
    .fetch_one(ex)
    .await?;
    Ok(n > 0)
}

/// Forgets every identity of a provider (its issuer or client changed: they name other people).
pub async fn forget_identities<'e>(ex: impl Exec<'e>, provider_id: &str) -> Result<u64> {
    let done = sqlx::query("DELETE FROM sso_identities WHERE provider_id = $1")
        .bind(provider_id)
        .execute(ex)
        .await?;
    Ok(done.rows_affected())
}
