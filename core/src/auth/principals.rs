//! Credential → principal in memory, so a call with an API key or an MCP OAuth access token
//! reads no database row in the steady state. An entry is good only while the database's
//! change epoch it was read under stands (`store/changes.rs`): revoking a key, editing a
//! policy, setting a secret or a credential
//! makes every entry stale before the write returns, and on PostgreSQL another instance's
//! entries go stale when its notice arrives, or all at once while notices are down (then
//! nothing is cached at all). Unknown keys are never cached (they would let anyone fill the
//! memory); revoked ones are, as a refusal. `X` is what else a credential's check needs (an
//! access token's expiry and resource).

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, RwLock};

use super::Principal;

/// Entries at most; a full cache starts over (each live key costs one read to come back).
const MAX_ENTRIES: usize = 100_000;

pub struct Entry<X> {
    /// None: the credential is revoked.
    pub principal: Option<Principal>,
    pub extra: X,
    epoch: u64,
    /// When the key's use was last recorded (ms), to record it again at most once a minute.
    touched: AtomicI64,
}

impl<X> Entry<X> {
    /// True (once per `every` ms) when the key's last use should be written again.
    pub fn touch_due(&self, now: i64, every: i64) -> bool {
        let last = self.touched.load(Ordering::Relaxed);
        last < now - every
            && self
                .touched
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }
}

/// For a credential whose use was last recorded at `last_used`: whether to record it again at
/// `now` (at most once per `every` ms), and the time its entry's touch starts from.
pub fn touch_from(last_used: Option<i64>, now: i64, every: i64) -> (bool, i64) {
    match last_used {
        Some(t) if t >= now - every => (false, t),
        _ => (true, now),
    }
}

pub struct Principals<X = ()> {
    by_hash: RwLock<HashMap<String, Arc<Entry<X>>>>,
}

impl<X> Default for Principals<X> {
    fn default() -> Self {
        Principals {
            by_hash: RwLock::default(),
        }
    }
}

impl<X> Principals<X> {
    /// The entry for a credential's hash read under `epoch`, if there is one.
    pub fn get(&self, hash: &str, epoch: u64) -> Option<Arc<Entry<X>>> {
        let map = self.by_hash.read().unwrap_or_else(|e| e.into_inner());
        map.get(hash).filter(|e| e.epoch == epoch).cloned()
    }

    pub fn put(
        &self,
        hash: String,
        epoch: u64,
        principal: Option<Principal>,
        extra: X,
        touched: i64,
    ) {
        let mut map = self.by_hash.write().unwrap_or_else(|e| e.into_inner());
        if map.len() >= MAX_ENTRIES {
            map.clear();
        }
        // Stale entries of other keys go when they are next looked up and replaced.
        map.insert(
            hash,
            Arc::new(Entry {
                principal,
                extra,
                epoch,
                touched: AtomicI64::new(touched),
            }),
        );
    }
}
