//! The project's egress allowlist as people manage it: everyone in the project can read it,
//! admins change it.

use std::sync::Arc;

use super::allowlist::validate_pattern;
use crate::auth::{Operation, Principal};
use crate::clock::Clock;
use crate::store::{self, Db};
use crate::Result;

#[derive(Clone)]
pub struct EgressRules {
    db: Db,
    clock: Arc<dyn Clock>,
}

impl EgressRules {
    pub fn new(db: Db, clock: Arc<dyn Clock>) -> Self {
        EgressRules { db, clock }
    }

    pub async fn list(&self, who: &Principal) -> Result<Vec<String>> {
        store::egress::list(self.db.pool(), &who.project_id).await
    }

    /// Adds a host pattern (normalised); adding one that exists is not an error.
    pub async fn add(&self, admin: &Principal, pattern: &str) -> Result<String> {
        admin.require(Operation::EgressManage)?;
        let pattern = validate_pattern(pattern)?;
        store::egress::add(
            self.db.pool(),
            &admin.project_id,
            &pattern,
            self.clock.now_ms(),
        )
        .await?;
        tracing::info!(project_id = %admin.project_id, %pattern, by = %admin.user_id, "egress rule added");
        Ok(pattern)
    }

    pub async fn remove(&self, admin: &Principal, pattern: &str) -> Result<()> {
        admin.require(Operation::EgressManage)?;
        if !store::egress::remove(self.db.pool(), &admin.project_id, pattern.trim()).await? {
            return Err(crate::Error::NotFound);
        }
        Ok(())
    }
}
