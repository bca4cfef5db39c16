//! Calls held for a person's confirmation (D15): what was asked, by which key, how it was
//! decided and the outcome identical repeats get.

use sqlx::FromRow;

use super::Exec;
use crate::Result;

pub use workbench_model::calls::ConfirmationStatus;

#[derive(Debug, Clone, FromRow)]
pub struct ConfirmationRow {
    pub id: String,
    pub project_id: String,
    pub tool_call_id: String,
    pub tool: String,
    pub arguments: String,
    pub fingerprint: String,
    pub api_key_id: Option<String>,
    pub user_id: String,
    pub end_user_id: Option<String>,
    pub surface: String,
    pub timeout_ms: i64,
    pub policy_id: Option<String>,
    #[sqlx(try_from = "String")]
    pub status: ConfirmationStatus,
    pub reason: Option<String>,
    pub decided_by: Option<String>,
    pub decided_at: Option<i64>,
    /// JSON of the execute_tools entry the approved run ended with.
    pub outcome: Option<String>,
    pub expires_at: i64,
    pub created_at: i64,
    /// The MCP OAuth grant the call came through (None: an API key or a person).
    pub oauth_grant_id: Option<String>,
}

const COLUMNS: &str = "id, project_id, tool_call_id, tool, arguments, fingerprint, api_key_id, user_id, end_user_id, surface, \
     timeout_ms, policy_id, status, reason, decided_by, decided_at, outcome, expires_at, created_at, oauth_grant_id";

pub async fn insert<'e>(ex: impl Exec<'e>, r: &ConfirmationRow) -> Result<()> {
    sqlx::query(&format!(
        "INSERT INTO confirmations ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20)"
    ))
    .bind(&r.id)
    .bind(&r.project_id)
    .bind(&r.tool_call_id)
    .bind(&r.tool)
    .bind(&r.arguments)
    .bind(&r.fingerprint)
    .bind(&r.api_key_id)
    .bind(&r.user_id)
    .bind(&r.end_user_id)
    .bind(&r.surface)
    .bind(r.timeout_ms)
    .bind(&r.policy_id)
    .bind(r.status.as_str())
    .bind(&r.reason)
    .bind(&r.decided_by)
    .bind(r.decided_at)
    .bind(&r.outcome)
    .bind(r.expires_at)
    .bind(r.created_at)
    .bind(&r.oauth_grant_id)
    .execute(ex)
    .await?;
    Ok(())
}

pub async fn get<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    id: &str,
) -> Result<Option<ConfirmationRow>> {
    Ok(sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM confirmations WHERE project_id = $1 AND id = $2"
    ))
    .bind(project_id)
    .bind(id)
    .fetch_optional(ex)
    .await?)
}

/// The newest unexpired confirmation of an identical call.
pub async fn live_by_fingerprint<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    fingerprint: &str,
    now: i64,
) -> Result<Option<ConfirmationRow>> {
    Ok(sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM confirmations WHERE project_id = $1 AND fingerprint = $2 AND expires_at > $3 \
         ORDER BY created_at DESC, id DESC LIMIT 1"
    ))
    .bind(project_id)
    .bind(fingerprint)
    .bind(now)
    .fetch_optional(ex)
    .await?)
}

/// Confirmations of a project, newest first; `status` narrows (pending ones past their expiry
/// count as expired, whatever the row still says).
pub async fn list<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    status: Option<ConfirmationStatus>,
    now: i64,
    limit: i64,
) -> Result<Vec<ConfirmationRow>> {
    // $1 project, $2 now, $3 limit.
    let filter = match status {
        None => "",
        Some(ConfirmationStatus::Pending) => " AND status = 'pending' AND expires_at > $2",
        Some(ConfirmationStatus::Expired) => {
            " AND (status = 'expired' OR (status = 'pending' AND expires_at <= $2))"
        }
        Some(ConfirmationStatus::Approved) => " AND status = 'approved'",
        Some(ConfirmationStatus::Denied) => " AND status = 'denied'",
    };
    let uses_now = filter.contains("$2");
    let limit_param = if uses_now { "$3" } else { "$2" };
    let sql = format!("SELECT {COLUMNS} FROM confirmations WHERE project_id = $1{filter} ORDER BY created_at DESC, id DESC LIMIT {limit_param}");
    let q = sqlx::query_as(&sql).bind(project_id);
    let q = if uses_now { q.bind(now) } else { q };
    Ok(q.bind(limit).fetch_all(ex).await?)
}

/// Pending, unexpired confirmations of a project.
pub async fn count_pending<'e>(ex: impl Exec<'e>, project_id: &str, now: i64) -> Result<i64> {
    let (n,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM confirmations WHERE project_id = $1 AND status = 'pending' AND expires_at > $2")
        .bind(project_id)
        .bind(now)
        .fetch_one(ex)
        .await?;
    Ok(n)
}

/// Decides a pending, unexpired confirmation; false when it is not (anymore): the first
/// decision wins, whichever instance makes it.
pub async fn decide<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    id: &str,
    status: ConfirmationStatus,
    by: &str,
    reason: Option<&str>,
    now: i64,
) -> Result<bool> {
    let done = sqlx::query(
        "UPDATE confirmations SET status = $1, decided_by = $2, reason = $3, decided_at = $4 \
         WHERE project_id = $5 AND id = $6 AND status = 'pending' AND expires_at > $4",
    )
    .bind(status.as_str())
    .bind(by)
    .bind(reason)
    .bind(now)
    .bind(project_id)
    .bind(id)
    .execute(ex)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Marks an identical call's pending confirmations past their expiry as expired (before a new
/// one may be pending).
pub async fn expire_fingerprint<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    fingerprint: &str,
    now: i64,
) -> Result<()> {
    sqlx::query("UPDATE confirmations SET status = 'expired' WHERE project_id = $1 AND fingerprint = $2 AND status = 'pending' AND expires_at <= $3")
        .bind(project_id)
        .bind(fingerprint)
        .bind(now)
        .execute(ex)
        .await?;
    Ok(())
}

/// Marks pending confirmations past their expiry as expired.
pub async fn expire<'e>(ex: impl Exec<'e>, project_id: &str, id: &str, now: i64) -> Result<()> {
    sqlx::query("UPDATE confirmations SET status = 'expired' WHERE project_id = $1 AND id = $2 AND status = 'pending' AND expires_at <= $3")
        .bind(project_id)
        .bind(id)
        .bind(now)
        .execute(ex)
        .await?;
    Ok(())
}

/// Expires the pending confirmations a user's calls asked for in a project (they left it):
/// nobody can approve them into running as someone no longer there.
pub async fn expire_of_member<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    user_id: &str,
) -> Result<u64> {
    Ok(sqlx::query(
        "UPDATE confirmations SET status = 'expired' WHERE project_id = $1 AND user_id = $2 AND status = 'pending'",
    )
    .bind(project_id)
    .bind(user_id)
    .execute(ex)
    .await?
    .rows_affected())
}

/// Stores the outcome of an approved call's run.
pub async fn set_outcome<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    id: &str,
    outcome: &str,
) -> Result<()> {
    sqlx::query("UPDATE confirmations SET outcome = $1 WHERE project_id = $2 AND id = $3")
        .bind(outcome)
        .bind(project_id)
        .bind(id)
        .execute(ex)
        .await?;
    Ok(())
}

/// The confirmation a call was held under, if any.
pub async fn by_tool_call<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    tool_call_id: &str,
) -> Result<Option<ConfirmationRow>> {
    Ok(sqlx::query_as(&format!("SELECT {COLUMNS} FROM confirmations WHERE project_id = $1 AND tool_call_id = $2 ORDER BY created_at DESC LIMIT 1"))
        .bind(project_id)
        .bind(tool_call_id)
        .fetch_optional(ex)
        .await?)
}

/// Deletes at most `limit` confirmations of the project created before `before` that no longer
/// hold a call (decided, or expired at `now`); how many.
pub async fn delete_older<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    before: i64,
    now: i64,
    limit: i64,
) -> Result<u64> {
    let r = sqlx::query(
        "DELETE FROM confirmations WHERE id IN (SELECT id FROM confirmations WHERE project_id = $1 AND created_at < $2 \
         AND NOT (status = 'pending' AND expires_at > $3) ORDER BY created_at LIMIT $4)",
    )
    .bind(project_id)
    .bind(before)
    .bind(now)
    .bind(limit)
    .execute(ex)
    .await?;
    Ok(r.rows_affected())
}

/// Pending, unexpired confirmations of every project (for /metrics).
pub async fn count_all_pending<'e>(ex: impl Exec<'e>, now: i64) -> Result<i64> {
    let (n,): (i64,) = sqlx::query_as(
        "SELECT COUNT(*) FROM confirmations WHERE status = 'pending' AND expires_at > $1",
    )
    .bind(now)
    .fetch_one(ex)
    .await?;
    Ok(n)
}
