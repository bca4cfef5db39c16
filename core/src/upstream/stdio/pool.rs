//! The processes of one stdio server on this instance (`pool`, one by default): calls are
//! spread over them round-robin, each supervised on its own (started on use, restarted with
//! backoff, stopped when idle or removed); a call goes to the next process when one cannot
//! take it, and fails only when none can.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::session::StdioSession;
use super::supervisor::{Context, ProcessView, Supervisor};
use super::StdioConfig;
use crate::upstream::client::RpcError;

pub struct Pool {
    members: Vec<Arc<Supervisor>>,
    next: AtomicUsize,
}

impl Pool {
    /// `config.pool` processes, each supervised on its own.
    pub fn new(config: StdioConfig, cx: Context<'_>) -> Arc<Pool> {
        let members = (0..config.pool.max(1))
            .map(|_| Supervisor::new(config.clone(), cx.clone()))
            .collect();
        Arc::new(Pool {
            members,
            next: AtomicUsize::new(0),
        })
    }

    /// A running session of the next process that can take a call.
    pub async fn session(&self) -> Result<Arc<StdioSession>, RpcError> {
        let n = self.members.len();
        let first = self.next.fetch_add(1, Ordering::Relaxed) % n;
        let mut last = None;
        for i in 0..n {
            match self.members[(first + i) % n].session().await {
                Ok(s) => return Ok(s),
                Err(e) => last = Some(e),
            }
        }
        Err(last.expect("a pool has a process"))
    }

    /// The last stderr line of any of its processes (scrubbed), for admins.
    pub fn last_stderr(&self) -> Option<String> {
        self.members.iter().find_map(|m| m.last_stderr())
    }

    /// Stops every process and starts none again: the server was removed or replaced.
    pub fn retire(&self) {
        for m in &self.members {
            m.retire();
        }
    }

    /// Stops every process now (each waits, bounded, until it is gone).
    pub async fn stop(&self) {
        for m in &self.members {
            m.stop().await;
        }
    }

    /// Each process, as the registry view and /metrics show it.
    pub async fn view(&self) -> Vec<ProcessView> {
        let mut all = Vec::with_capacity(self.members.len());
        for m in &self.members {
            all.push(m.view().await);
        }
        all
    }
}
