//! Audit retention: a project keeps its audit rows, call records, confirmations and finished
//! deliveries (webhook events and callbacks, with their attempts) for a number of days an admin
//! sets (none: forever); deliveries still waiting are kept whatever their age. The upkeep loop of every
//! instance deletes older rows in small batches, so a large backlog never holds the database's
//! write lock for long; deleting is idempotent, so instances sharing a database may overlap.
//! Usage counters are not touched: they are the meters, kept whatever the retention.

use serde::Serialize;

use super::AuditLog;
use crate::auth::Principal;
use crate::store;
use crate::store::delivery_status::DeliveryKind;
use crate::{Error, Result};

/// Rows one DELETE removes at most.
pub const RETENTION_BATCH: i64 = 500;
/// The longest retention an admin may set (ten years).
pub const MAX_RETENTION_DAYS: i64 = 3650;
const DAY_MS: i64 = 24 * 60 * 60 * 1000;

/// What one retention pass deleted, over all projects.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RetentionReport {
    pub projects: usize,
    pub audit_rows: u64,
    pub tool_calls: u64,
    pub confirmations: u64,
    pub webhook_deliveries: u64,
    pub callbacks: u64,
}

/// A retention an admin may set: 1 to `MAX_RETENTION_DAYS` days, or None (forever).
pub fn check_retention_days(days: Option<i64>) -> Result<()> {
    match days {
        Some(d) if !(1..=MAX_RETENTION_DAYS).contains(&d) => {
            Err(Error::invalid(format!("audit_retention_days must be from 1 to {MAX_RETENTION_DAYS}, or null to keep everything")))
        }
        _ => Ok(()),
    }
}

impl AuditLog {
    /// Days the project keeps its audit rows; None: forever.
    pub async fn retention_days(&self, who: &Principal) -> Result<Option<i64>> {
        Ok(
            store::project_settings::get(self.db.pool(), &who.project_id)
                .await?
                .and_then(|s| s.audit_retention_days),
        )
    }

    /// Sets the project's retention (None keeps everything). Only an admin whose key has no
    /// policy may: a limited agent key must not be able to shorten the log of what it did.
    pub async fn set_retention_days(&self, admin: &Principal, days: Option<i64>) -> Result<()> {
        admin.require(crate::auth::Operation::AuditManage)?;
        check_retention_days(days)?;
        store::project_settings::set_retention(
            self.db.pool(),
            &admin.project_id,
            days,
            self.clock.now_ms(),
        )
        .await
    }

    /// Deletes, in batches of `RETENTION_BATCH`, every project's rows older than its retention.
    pub async fn apply_retention(&self) -> Result<RetentionReport> {
        self.recorder.flush().await;
        let pool = self.db.pool();
        let mut report = RetentionReport::default();
        for (project_id, days) in store::project_settings::with_retention(pool).await? {
            let now = self.clock.now_ms();
            let before = now.saturating_sub(days.saturating_mul(DAY_MS));
            report.projects += 1;
            report.audit_rows += drain(|| {
                store::audit::delete_older(pool, &project_id, before, now, RETENTION_BATCH)
            })
            .await?;
            report.tool_calls += drain(|| {
                store::tool_calls::delete_older(pool, &project_id, before, now, RETENTION_BATCH)
            })
            .await?;
            report.confirmations += drain(|| {
                store::confirmations::delete_older(pool, &project_id, before, now, RETENTION_BATCH)
            })
            .await?;
            report.webhook_deliveries += drain(|| {
                store::deliveries::delete_finished_older(
                    pool,
                    &project_id,
                    DeliveryKind::Webhook,
                    before,
                    RETENTION_BATCH,
                )
            })
            .await?;
            report.callbacks += drain(|| {
                store::deliveries::delete_finished_older(
                    pool,
                    &project_id,
                    DeliveryKind::Callback,
                    before,
                    RETENTION_BATCH,
                )
            })
            .await?;
        }
        Ok(report)
    }
}

/// Repeats a batch delete until a batch comes back short; the total. Yields between batches so
/// other work on this instance gets its turn.
async fn drain<F, Fut>(mut batch: F) -> Result<u64>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<u64>>,
{
    let mut total = 0;
    loop {
        let n = batch().await?;
        total += n;
        if n < RETENTION_BATCH as u64 {
            return Ok(total);
        }
        tokio::task::yield_now().await;
    }
}
