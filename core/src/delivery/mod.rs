//! One outbound delivery service for everything workbench sends by itself to a receiver's URL:
//! the project webhook (`notify`) and scheduled callbacks (`schedule`). A delivery is a row of
//! the outbox (`store::deliveries`) holding what to send, sealed with the vault's master key;
//! any instance claims due rows under a lease, so a process that stops mid-delivery or with
//! deliveries waiting loses none: after a restart (or on another instance) they go once their
//! lease or wait has run out, under the same id (at least once). Every delivery is signed the
//! same way (`sign.rs`), retried by one policy (`retry.rs`) and each attempt is recorded in one
//! history (never the body, a secret or the URL a secret was substituted into).

pub mod retry;
mod send;
pub mod sign;

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use zeroize::Zeroizing;

use crate::clock::Clock;
use crate::egress::{GuardedClient, PrivateAllowance};
use crate::store::deliveries::{DeliveryRow, SigningSecretRow};
use crate::store::{self, Db};
use crate::vault::{Sealed, Vault};
use crate::{Error, Result};

pub use crate::store::delivery_status::{DeliveryKind, DeliveryStatus};
pub use retry::{classify_status, Verdict, MAX_ATTEMPTS};
pub use sign::{
    legacy_signature, signature, verify, LEGACY_SIGNATURE_HEADER, LEGACY_SIGNATURE_UNTIL,
    SIGNATURE_HEADER, TOLERANCE_SECS,
};

/// How long one attempt may take.
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a claim keeps other instances off a delivery: past it, the delivering process is
/// taken to have stopped and the delivery is claimed again.
pub const LEASE_MS: i64 = 20_000;
/// Deliveries claimed per pass.
const BATCH: i64 = 16;
const SECRET_CONTEXT: &str = "callback-signing-secret";

/// A delivery to make: where to (`url`, after substitution; `url_shown` is what people see),
/// what (`payload`, scrubbed again when sent) and when (`due_at`).
pub struct NewDelivery {
    pub id: String,
    pub project_id: String,
    pub kind: DeliveryKind,
    pub event: String,
    pub subject_id: String,
    pub url: String,
    pub url_shown: String,
    pub method: String,
    /// The vault secret that signs it (webhooks); None: the project's signing secret.
    pub secret_ref: Option<String>,
    pub payload: Value,
    pub due_at: i64,
}

#[derive(Clone)]
pub struct Deliveries {
    db: Db,
    clock: Arc<dyn Clock>,
    vault: Vault,
    http: GuardedClient,
    allowance: PrivateAllowance,
}

/// What a delivery's target is sealed under: bound to its kind and id.
fn seal_context(kind: DeliveryKind, id: &str) -> String {
    match kind {
        DeliveryKind::Callback => format!("callback:{id}"),
        DeliveryKind::Webhook => format!("webhook:{id}"),
    }
}

impl Deliveries {
    pub fn new(
        db: Db,
        clock: Arc<dyn Clock>,
        vault: Vault,
        http: GuardedClient,
        allowance: PrivateAllowance,
    ) -> Deliveries {
        Deliveries {
            db,
            clock,
            vault,
            http,
            allowance,
        }
    }

    /// The outbox row for `d`, its target sealed; the caller inserts it (with whatever must be
    /// written in the same transaction).
    pub fn row(&self, d: NewDelivery) -> Result<DeliveryRow> {
        let target =
            Zeroizing::new(serde_json::json!({ "url": d.url, "payload": d.payload }).to_string());
        let sealed = self.vault.seal(
            &d.project_id,
            &seal_context(d.kind, &d.id),
            target.as_bytes(),
        )?;
        let now = self.clock.now_ms();
        Ok(DeliveryRow {
            id: d.id,
            project_id: d.project_id,
            kind: d.kind,
            event: d.event,
            subject_id: d.subject_id,
            url: d.url_shown,
            method: d.method,
            secret_ref: d.secret_ref,
            ciphertext: Some(sealed.ciphertext),
            nonce: Some(sealed.nonce),
            key_version: Some(sealed.key_version),
            due_at: d.due_at,
            status: DeliveryStatus::Pending,
            attempts: 0,
            next_attempt_at: d.due_at,
            lease_until: None,
            response_status: None,
            error: None,
            delivered_at: None,
            created_at: now,
            updated_at: now,
        })
    }

    /// Puts `d` in the outbox; it goes when due.
    pub async fn enqueue(&self, d: NewDelivery) -> Result<String> {
        let row = self.row(d)?;
        store::deliveries::insert(self.db.pool(), &row).await?;
        Ok(row.id)
    }

    /// Makes the first attempt of delivery `id` now, in the background, if it is due and no
    /// instance has claimed it; retries go through the outbox like any other.
    pub fn deliver_soon(&self, id: &str) {
        let this = self.clone();
        let id = id.to_owned();
        tokio::spawn(async move {
            let now = this.clock.now_ms();
            match store::deliveries::claim_one(&this.db, &id, now, now + LEASE_MS).await {
                Ok(Some(row)) => {
                    if let Err(e) = this.deliver(row).await {
                        tracing::warn!(error = %e, delivery = %id, "a delivery attempt could not be recorded");
                    }
                }
                Ok(None) => {}
                // The row stays pending: a worker delivers it.
                Err(e) => tracing::warn!(error = %e, delivery = %id, "claiming a delivery failed"),
            }
        });
    }

    /// One delivery pass: claims the deliveries due now (and those whose lease ran out) and
    /// attempts them concurrently; answers how many. Safe to run on every instance at once.
    pub async fn run_due(&self) -> Result<usize> {
        let now = self.clock.now_ms();
        let claimed = store::deliveries::claim_due(&self.db, now, now + LEASE_MS, BATCH).await?;
        let n = claimed.len();
        let results =
            futures::future::join_all(claimed.into_iter().map(|row| self.deliver(row))).await;
        for r in results {
            if let Err(e) = r {
                tracing::warn!(error = %e, "a delivery attempt could not be recorded");
            }
        }
        Ok(n)
    }

    /// Runs delivery passes until `stop` says so: at once again after a full batch, else every
    /// second. The pass under way when `stop` comes is finished first.
    pub async fn run_worker(&self, mut stop: tokio::sync::watch::Receiver<bool>) {
        loop {
            if *stop.borrow() {
                return;
            }
            let busy = match self.run_due().await {
                Ok(n) => n as i64 == BATCH,
                Err(e) => {
                    tracing::warn!(error = %e, "claiming due deliveries failed");
                    false
                }
            };
            if !busy {
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                    _ = stop.changed() => {}
                }
            }
        }
    }

    /// The project's signing secret (`wbcs_…`), made on first use. Callbacks are signed with it.
    pub async fn project_secret(&self, project_id: &str) -> Result<Zeroizing<String>> {
        if store::deliveries::signing_secret(self.db.pool(), project_id)
            .await?
            .is_none()
        {
            let fresh = Zeroizing::new(format!("wbcs_{}", crate::crypto::random_base62(40)));
            let sealed = self
                .vault
                .seal(project_id, SECRET_CONTEXT, fresh.as_bytes())?;
            let row = SigningSecretRow {
                project_id: project_id.to_owned(),
                ciphertext: sealed.ciphertext,
                nonce: sealed.nonce,
                key_version: sealed.key_version,
                created_at: self.clock.now_ms(),
            };
            store::deliveries::insert_signing_secret(self.db.pool(), &row).await?;
        }
        // Whichever instance's secret was stored first is the project's.
        let row = store::deliveries::signing_secret(self.db.pool(), project_id)
            .await?
            .ok_or_else(|| Error::internal("signing secret vanished"))?;
        let sealed = Sealed {
            ciphertext: row.ciphertext,
            nonce: row.nonce,
            key_version: row.key_version,
        };
        let plain = self.vault.open(project_id, SECRET_CONTEXT, &sealed)?;
        Ok(Zeroizing::new(String::from_utf8(plain.to_vec()).map_err(
            |_| Error::internal("signing secret is not UTF-8"),
        )?))
    }

    /// Re-seals delivery targets and signing secrets not under the vault's newest key version
    /// (part of `rotate-master-key`); re-runnable. Returns how many were re-sealed.
    pub async fn reseal_all(&self) -> Result<u64> {
        let version = self
            .vault
            .current_key_version()
            .ok_or_else(|| Error::internal("no master key configured"))?;
        let targets = crate::vault::reseal_in_batches(|| self.reseal_targets(version)).await?;
        let secrets = crate::vault::reseal_in_batches(|| self.reseal_secrets(version)).await?;
        Ok(targets + secrets)
    }

    async fn reseal_targets(&self, version: i64) -> Result<u64> {
        let mut done = 0;
        for r in
            store::deliveries::not_on_version(self.db.pool(), version, crate::vault::RESEAL_BATCH)
                .await?
        {
            let (Some(ciphertext), Some(nonce), Some(key_version)) =
                (r.ciphertext, r.nonce, r.key_version)
            else {
                continue;
            };
            let context = seal_context(r.kind, &r.id);
            let plain = self.vault.open(
                &r.project_id,
                &context,
                &Sealed {
                    ciphertext: ciphertext.clone(),
                    nonce,
                    key_version,
                },
            )?;
            let s = self.vault.seal(&r.project_id, &context, &plain)?;
            if store::deliveries::reseal(
                self.db.pool(),
                &r.id,
                &ciphertext,
                &s.ciphertext,
                &s.nonce,
                s.key_version,
            )
            .await?
            {
                done += 1;
            }
        }
        Ok(done)
    }

    async fn reseal_secrets(&self, version: i64) -> Result<u64> {
        let mut done = 0;
        for r in store::deliveries::signing_secrets_not_on_version(
            self.db.pool(),
            version,
            crate::vault::RESEAL_BATCH,
        )
        .await?
        {
            let plain = self.vault.open(
                &r.project_id,
                SECRET_CONTEXT,
                &Sealed {
                    ciphertext: r.ciphertext.clone(),
                    nonce: r.nonce.clone(),
                    key_version: r.key_version,
                },
            )?;
            let s = self.vault.seal(&r.project_id, SECRET_CONTEXT, &plain)?;
            if store::deliveries::reseal_signing_secret(
                self.db.pool(),
                &r.project_id,
                &r.ciphertext,
                &s.ciphertext,
                &s.nonce,
                s.key_version,
            )
            .await?
            {
                done += 1;
            }
        }
        Ok(done)
    }
}
