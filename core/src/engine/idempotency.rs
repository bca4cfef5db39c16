//! Idempotency-Key (D13, Stripe semantics): per API key, for 24 hours, the first request with
//! a key claims it atomically in the database (so two instances cannot both run it); a repeat
//! with the same body replays the stored response, with another body is refused (422), and while
//! the first is still running is refused (409). The instance running a claim renews its lease
//! (`hold`); a claim whose lease runs out belongs to an instance that stopped mid-request, and
//! its repeats are told it was interrupted: it may or may not have taken effect, so it is never
//! run a second time.

use std::sync::Arc;

use crate::clock::Clock;
use crate::crypto::sha256_hex;
use crate::store::{self, Db};
use crate::{Error, Result};

pub const IDEMPOTENCY_TTL_MS: i64 = 24 * 60 * 60 * 1000;
/// How long a claim stays valid without renewal; `hold` renews it every third of this.
pub const LEASE_MS: i64 = 15_000;
/// Claims made before leases existed count as leased this long from their creation.
const LEGACY_LEASE_MS: i64 = 10 * 60 * 1000;
pub const MAX_KEY_CHARS: usize = 255;

/// What to do with a request that carries an Idempotency-Key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Begin {
    /// First use: run it, then `complete`.
    Proceed,
    /// Seen before with the same body: send this stored response again.
    Replay { status: u16, body: String },
    /// The first request with this key is still running.
    InFlight,
    /// The first request with this key was cut off when the instance running it stopped; it may
    /// have taken effect, so it is not run again.
    Interrupted,
    /// The key was used with a different request body.
    Reused,
}

#[derive(Clone)]
pub struct Idempotency {
    db: Db,
    clock: Arc<dyn Clock>,
}

impl Idempotency {
    pub fn new(db: Db, clock: Arc<dyn Clock>) -> Self {
        Idempotency { db, clock }
    }

    pub fn validate_key(key: &str) -> Result<()> {
        if key.is_empty()
            || key.len() > MAX_KEY_CHARS
            || !key.bytes().all(|b| (0x21..=0x7e).contains(&b))
        {
            return Err(Error::invalid(format!(
                "invalid Idempotency-Key; use 1 to {MAX_KEY_CHARS} visible ASCII characters"
            )));
        }
        Ok(())
    }

    /// A digest of what makes two requests "the same": route and exact body bytes.
    pub fn request_hash(route: &str, body: &[u8]) -> String {
        let mut buf = Vec::with_capacity(route.len() + 1 + body.len());
        buf.extend_from_slice(route.as_bytes());
        buf.push(0);
        buf.extend_from_slice(body);
        sha256_hex(&buf)
    }

    pub async fn begin(&self, api_key_id: &str, key: &str, request_hash: &str) -> Result<Begin> {
        Self::validate_key(key)?;
        for _ in 0..4 {
            let now = self.clock.now_ms();
            if store::idempotency::claim(
                self.db.pool(),
                api_key_id,
                key,
                request_hash,
                now,
                now + LEASE_MS,
            )
            .await?
            {
                return Ok(Begin::Proceed);
            }
            let Some(row) = store::idempotency::get(self.db.pool(), api_key_id, key).await? else {
                continue;
            };
            if row.created_at <= now - IDEMPOTENCY_TTL_MS {
                store::idempotency::remove_stale(self.db.pool(), api_key_id, key, row.created_at)
                    .await?;
                continue;
            }
            if row.request_hash != request_hash {
                return Ok(Begin::Reused);
            }
            let lease_until = row.lease_until.unwrap_or(row.created_at + LEGACY_LEASE_MS);
            if row.state == "in_flight" && lease_until < now {
                // Closed at most once; a racing repeat re-reads the closed row.
                store::idempotency::interrupt_expired(
                    self.db.pool(),
                    api_key_id,
                    key,
                    now,
                    LEGACY_LEASE_MS,
                )
                .await?;
                continue;
            }
            return Ok(
                match (row.state.as_str(), row.response_status, row.response_body) {
                    ("done", Some(status), Some(body)) => Begin::Replay {
                        status: status as u16,
                        body,
                    },
                    ("done", _, _) => Begin::Interrupted,
                    _ => Begin::InFlight,
                },
            );
        }
        Ok(Begin::InFlight)
    }

    /// Keeps the claim of a request that `begin` let proceed alive while it runs; dropping the
    /// guard (after `complete`) stops the renewals. An instance that dies stops renewing, and
    /// the claim's repeats are answered `Interrupted` once the lease runs out.
    pub fn hold(&self, api_key_id: &str, key: &str) -> LeaseGuard {
        let (this, api_key_id, key) = (self.clone(), api_key_id.to_owned(), key.to_owned());
        let task = tokio::spawn(async move {
            let every = std::time::Duration::from_millis((LEASE_MS / 3) as u64);
            loop {
                tokio::time::sleep(every).await;
                let until = this.clock.now_ms() + LEASE_MS;
                if let Err(e) =
                    store::idempotency::renew(this.db.pool(), &api_key_id, &key, until).await
                {
                    tracing::warn!(error = %e, "renewing an idempotency lease failed");
                }
            }
        });
        LeaseGuard(task)
    }

    /// Stores the response of a request that `begin` let proceed.
    pub async fn complete(
        &self,
        api_key_id: &str,
        key: &str,
        status: u16,
        body: &str,
    ) -> Result<()> {
        store::idempotency::complete(self.db.pool(), api_key_id, key, status as i64, body).await
    }

    pub async fn purge_expired(&self) -> Result<u64> {
        store::idempotency::delete_older_than(
            self.db.pool(),
            self.clock.now_ms() - IDEMPOTENCY_TTL_MS,
        )
        .await
    }
}

/// Renews an Idempotency-Key claim until dropped (see `Idempotency::hold`).
pub struct LeaseGuard(tokio::task::JoinHandle<()>);

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        self.0.abort();
    }
}
