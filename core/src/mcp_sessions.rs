//! Where each MCP session lives (issue 33). `/mcp` and set endpoints keep a session only for a
//! client that can be asked things (elicitation, sampling), in the memory of the instance that
//! opened it; that instance records its advertised address here so that every other instance
//! can forward the session's requests to it, whichever instance a load balancer picks.

use std::sync::Arc;

use crate::clock::Clock;
use crate::store::{self, Db};
use crate::Result;

/// How long a session's address is kept (rmcp ends idle sessions long before).
pub const KEEP_MS: i64 = 24 * 3_600_000;

#[derive(Clone)]
pub struct McpSessions {
    db: Db,
    clock: Arc<dyn Clock>,
}

impl McpSessions {
    pub fn new(db: Db, clock: Arc<dyn Clock>) -> McpSessions {
        McpSessions { db, clock }
    }

    /// The session `id` lives on the instance at `instance_url`.
    pub async fn record(&self, id: &str, instance_url: &str) -> Result<()> {
        store::mcp_sessions::insert(self.db.pool(), id, instance_url, self.clock.now_ms()).await
    }

    /// The address of the instance holding session `id`, if any instance recorded it.
    pub async fn locate(&self, id: &str) -> Result<Option<String>> {
        store::mcp_sessions::instance_of(self.db.pool(), id).await
    }

    pub async fn forget(&self, id: &str) -> Result<()> {
        store::mcp_sessions::delete(self.db.pool(), id).await
    }

    /// Forgets addresses older than `KEEP_MS`; how many.
    pub async fn purge(&self) -> Result<u64> {
        store::mcp_sessions::purge(self.db.pool(), self.clock.now_ms() - KEEP_MS).await
    }
}
