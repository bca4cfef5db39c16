//! wait_for_connection: polling the database (so another instance may finish the flow), and
//! reaping pending connections long past their expiry.

use std::time::Duration;

use super::{Connections, WaitOutcome};
use crate::auth::Principal;
use crate::store::{self, pending_connections::PendingStatus};
use crate::Result;

impl Connections {
    /// wait_for_connection: polls the database once a second (so another instance may finish
    /// the flow). A timeout reaps the pending record. When the process shuts down the wait
    /// answers TIMEOUT at once and keeps the record, so the agent can wait again elsewhere.
    pub async fn wait(&self, who: &Principal, id: &str, timeout: Duration) -> Result<WaitOutcome> {
        let started = std::time::Instant::now();
        let mut stopping = self.stopping.subscribe();
        loop {
            if *stopping.borrow_and_update() {
                return Ok(WaitOutcome::Timeout);
            }
            let Some(row) = store::pending_connections::get(self.db.pool(), id).await? else {
                return Ok(WaitOutcome::Unknown);
            };
            if row.user_id != who.user_id || row.project_id != who.project_id {
                return Ok(WaitOutcome::Unknown);
            }
            if row.status == PendingStatus::Connected {
                return Ok(WaitOutcome::Connected);
            }
            if row.expires_at <= self.now() {
                store::pending_connections::delete(self.db.pool(), id).await?;
                return Ok(WaitOutcome::Expired);
            }
            if started.elapsed() >= timeout {
                store::pending_connections::delete(self.db.pool(), id).await?;
                return Ok(WaitOutcome::Timeout);
            }
            let pause = Duration::from_secs(1)
                .min(timeout.saturating_sub(started.elapsed()))
                .max(Duration::from_millis(10));
            tokio::select! {
                _ = tokio::time::sleep(pause) => {}
                _ = stopping.changed() => {}
            }
        }
    }

    /// Removes pending connections long past their expiry.
    pub async fn purge_expired(&self) -> Result<u64> {
        store::pending_connections::delete_before(self.db.pool(), self.now() - 24 * 3600 * 1000)
            .await
    }
}
