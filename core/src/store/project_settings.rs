//! Project settings an admin changes (audit retention, the confirmation webhook, the email
//! hourly limit); one row per
//! project, absent until something is set.

use sqlx::FromRow;

use super::Exec;
use crate::Result;

#[derive(Debug, Clone, Default, FromRow, PartialEq, Eq)]
pub struct SettingsRow {
    pub project_id: String,
    /// Days audit rows are kept; None: forever.
    pub audit_retention_days: Option<i64>,
    pub webhook_url: Option<String>,
    /// Vault secret (by name) the webhook's signature is made with.
    pub webhook_secret_ref: Option<String>,
    /// Messages email.send may send per hour, below the operator's limit; None: that limit.
    pub email_hourly_limit: Option<i64>,
    pub updated_at: i64,
}

const COLUMNS: &str = "project_id, audit_retention_days, webhook_url, webhook_secret_ref, email_hourly_limit, updated_at";

pub async fn get<'e>(ex: impl Exec<'e>, project_id: &str) -> Result<Option<SettingsRow>> {
    Ok(sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM project_settings WHERE project_id = $1"
    ))
    .bind(project_id)
    .fetch_optional(ex)
    .await?)
}

/// Sets one number-or-nothing setting, leaving the others.
async fn set_number<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    column: &'static str,
    value: Option<i64>,
    now: i64,
) -> Result<()> {
    sqlx::query(&format!(
        "INSERT INTO project_settings (project_id, {column}, updated_at) VALUES ($1, $2, $3) \
         ON CONFLICT (project_id) DO UPDATE SET {column} = excluded.{column}, updated_at = excluded.updated_at"
    ))
    .bind(project_id)
    .bind(value)
    .bind(now)
    .execute(ex)
    .await?;
    Ok(())
}

/// Sets how many days audit rows are kept (None: forever), leaving the other settings.
pub async fn set_retention<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    days: Option<i64>,
    now: i64,
) -> Result<()> {
    set_number(ex, project_id, "audit_retention_days", days, now).await
}

/// Sets the project's email hourly limit (None: the operator's), leaving the other settings.
pub async fn set_email_limit<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    limit: Option<i64>,
    now: i64,
) -> Result<()> {
    set_number(ex, project_id, "email_hourly_limit", limit, now).await
}

/// Sets (or, with None, removes) the webhook, leaving the other settings.
pub async fn set_webhook<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    webhook: Option<(&str, &str)>,
    now: i64,
) -> Result<()> {
    let (url, secret_ref) = webhook.unzip();
    sqlx::query(
        "INSERT INTO project_settings (project_id, webhook_url, webhook_secret_ref, updated_at) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (project_id) DO UPDATE SET webhook_url = excluded.webhook_url, \
         webhook_secret_ref = excluded.webhook_secret_ref, updated_at = excluded.updated_at",
    )
    .bind(project_id)
    .bind(url)
    .bind(secret_ref)
    .bind(now)
    .execute(ex)
    .await?;
    Ok(())
}

/// Projects that keep audit rows for a limited number of days, with that number.
pub async fn with_retention<'e>(ex: impl Exec<'e>) -> Result<Vec<(String, i64)>> {
    Ok(sqlx::query_as("SELECT project_id, audit_retention_days FROM project_settings WHERE audit_retention_days IS NOT NULL ORDER BY project_id")
        .fetch_all(ex)
        .await?)
}
