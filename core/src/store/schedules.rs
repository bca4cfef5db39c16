//! Scheduled callbacks: what is particular to one (who asked, the agent's templates, when it
//! is due). Its delivery is the `deliveries` row with the same id (`store::deliveries`), which
//! carries its state; deleting that row deletes the callback.

use sqlx::FromRow;

use super::delivery_status::DeliveryStatus;
use super::Exec;
use crate::{Error, Result};

/// The callback's own row.
#[derive(Debug, Clone, FromRow, PartialEq, Eq)]
pub struct NewCallbackRow {
    pub id: String,
    pub project_id: String,
    pub user_id: String,
    pub api_key_id: Option<String>,
    /// The URL as the agent wrote it (references, not values).
    pub url: String,
    pub method: String,
    /// The agent's template of the payload (references, not values), JSON text.
    pub payload_shown: Option<String>,
    pub scheduled_for: i64,
    pub created_at: i64,
}

/// A callback with its delivery's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallbackRow {
    pub id: String,
    pub project_id: String,
    pub user_id: String,
    pub api_key_id: Option<String>,
    pub url: String,
    pub method: String,
    pub payload_shown: Option<String>,
    pub scheduled_for: i64,
    pub created_at: i64,
    pub status: DeliveryStatus,
    pub attempts: i64,
    pub next_attempt_at: i64,
    pub response_status: Option<i64>,
    pub error: Option<String>,
    pub delivered_at: Option<i64>,
}

#[derive(FromRow)]
struct RawRow {
    id: String,
    project_id: String,
    user_id: String,
    api_key_id: Option<String>,
    url: String,
    method: String,
    payload_shown: Option<String>,
    scheduled_for: i64,
    created_at: i64,
    status: String,
    attempts: i64,
    next_attempt_at: i64,
    response_status: Option<i64>,
    error: Option<String>,
    delivered_at: Option<i64>,
}

impl TryFrom<RawRow> for CallbackRow {
    type Error = Error;
    fn try_from(r: RawRow) -> Result<CallbackRow> {
        Ok(CallbackRow {
            status: DeliveryStatus::parse(&r.status).ok_or_else(|| {
                Error::internal(format!(
                    "unknown delivery status {:?} in the database",
                    r.status
                ))
            })?,
            id: r.id,
            project_id: r.project_id,
            user_id: r.user_id,
            api_key_id: r.api_key_id,
            url: r.url,
            method: r.method,
            payload_shown: r.payload_shown,
            scheduled_for: r.scheduled_for,
            created_at: r.created_at,
            attempts: r.attempts,
            next_attempt_at: r.next_attempt_at,
            response_status: r.response_status,
            error: r.error,
            delivered_at: r.delivered_at,
        })
    }
}

const SELECT: &str = "SELECT c.id, c.project_id, c.user_id, c.api_key_id, c.url, c.method, c.payload_shown, c.scheduled_for, \
     c.created_at, d.status, d.attempts, d.next_attempt_at, d.response_status, d.error, d.delivered_at \
     FROM callbacks c JOIN deliveries d ON d.id = c.id";

/// Inserts the callback's row; its delivery row must exist (same transaction).
pub async fn insert<'e>(ex: impl Exec<'e>, r: &NewCallbackRow) -> Result<()> {
    sqlx::query(
        "INSERT INTO callbacks (id, project_id, user_id, api_key_id, url, method, payload_shown, scheduled_for, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    )
    .bind(&r.id)
    .bind(&r.project_id)
    .bind(&r.user_id)
    .bind(&r.api_key_id)
    .bind(&r.url)
    .bind(&r.method)
    .bind(&r.payload_shown)
    .bind(r.scheduled_for)
    .bind(r.created_at)
    .execute(ex)
    .await?;
    Ok(())
}

pub async fn get<'e>(ex: impl Exec<'e>, project_id: &str, id: &str) -> Result<Option<CallbackRow>> {
    let row: Option<RawRow> =
        sqlx::query_as(&format!("{SELECT} WHERE c.project_id = $1 AND c.id = $2"))
            .bind(project_id)
            .bind(id)
            .fetch_optional(ex)
            .await?;
    row.map(CallbackRow::try_from).transpose()
}

/// A project's callbacks, newest first: all of them, or one user's; optionally only those whose
/// delivery is in one of `statuses`; older than the `before` cursor (created_at, id).
pub async fn list<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    user_id: Option<&str>,
    statuses: Option<&[DeliveryStatus]>,
    before: Option<(i64, &str)>,
    limit: i64,
) -> Result<Vec<CallbackRow>> {
    let mut sql = format!("{SELECT} WHERE c.project_id = $1");
    let mut n = 1;
    if user_id.is_some() {
        n += 1;
        sql.push_str(&format!(" AND c.user_id = ${n}"));
    }
    if let Some(s) = statuses {
        let marks: Vec<String> = (0..s.len()).map(|i| format!("${}", n + 1 + i)).collect();
        n += s.len();
        sql.push_str(&format!(" AND d.status IN ({})", marks.join(", ")));
    }
    if before.is_some() {
        sql.push_str(&format!(
            " AND (c.created_at < ${a} OR (c.created_at = ${a} AND c.id < ${b}))",
            a = n + 1,
            b = n + 2
        ));
        n += 2;
    }
    sql.push_str(&format!(
        " ORDER BY c.created_at DESC, c.id DESC LIMIT ${}",
        n + 1
    ));
    let mut q = sqlx::query_as::<_, RawRow>(&sql).bind(project_id);
    if let Some(u) = user_id {
        q = q.bind(u);
    }
    for s in statuses.unwrap_or_default() {
        q = q.bind(s.as_str());
    }
    if let Some((t, i)) = before {
        q = q.bind(t).bind(i);
    }
    q.bind(limit)
        .fetch_all(ex)
        .await?
        .into_iter()
        .map(CallbackRow::try_from)
        .collect()
}
