//! Delivering due callbacks: claim a batch under a lease, open each sealed target, check the
//! URL again (allowlist and address rules; a refusal is final), scrub the payload of every live
//! secret of the project (it was written with `{{vault:…}}` substituted; the URL, where the agent
//! sent the call, keeps its values), POST `{id, scheduled_for, payload}` signed
//! `t=<unix>,v1=<hex HMAC-SHA256 of "<t>.<body>">`, and record the attempt.
//! A failure or non-2xx answer is retried with exponential backoff (10 s doubling to at most
//! 1 h, with jitter) until 24 hours after the callback was due.

use std::time::{Duration, Instant};

use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;

use super::{Schedules, PAYLOAD_CONTEXT};
use crate::clock::rfc3339;
use crate::egress::{blocked_cause, FetchError};
use crate::ids::new_id;
use crate::store;
use crate::store::schedules::{AttemptRow, CallbackRow, CallbackStatus, Finished};
use crate::vault::Sealed;
use crate::Result;

/// How long one delivery attempt may take.
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a claim keeps other instances off a callback: past it, the delivering process is
/// taken to have died and the callback is claimed again.
pub const LEASE_MS: i64 = 20_000;
/// Retries stop this long after the callback was due.
pub const GIVE_UP_AFTER_MS: i64 = 24 * 3600 * 1000;
/// Callbacks claimed per pass.
const BATCH: i64 = 16;
const FIRST_RETRY_MS: i64 = 10_000;
const MAX_RETRY_MS: i64 = 3600 * 1000;

/// `t=<unix seconds>,v1=<hex of HMAC-SHA256(secret, "<t>.<body>")>`: the timestamp is signed
/// with the body, so a receiver can refuse replays older than it tolerates.
pub fn signature(secret: &[u8], t: i64, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes a key of any length");
    mac.update(t.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("t={t},v1={}", hex::encode(mac.finalize().into_bytes()))
}

/// The wait before retry number `attempt` (1 = after the first failure), jittered by up to 10%.
fn backoff_ms(attempt: i64) -> i64 {
    let base = FIRST_RETRY_MS
        .saturating_mul(1i64 << (attempt - 1).clamp(0, 20))
        .min(MAX_RETRY_MS);
    let jitter = u16::from_le_bytes(crate::crypto::random_bytes::<2>()) as i64 * base / 10 / 65_536;
    base + jitter
}

/// What one attempt came to.
enum Outcome {
    Delivered(u16),
    /// Worth trying again (non-2xx, transport error, timeout).
    Retry {
        status: Option<u16>,
        error: String,
    },
    /// Never worth trying again (the URL is refused now).
    Refused(String),
}

impl Schedules {
    /// One delivery pass: claims the callbacks due now and delivers them concurrently; answers
    /// how many were attempted. Safe to run on every instance at once.
    pub async fn run_due(&self) -> Result<usize> {
        let now = self.clock.now_ms();
        let claimed = store::schedules::claim_due(&self.db, now, now + LEASE_MS, BATCH).await?;
        let n = claimed.len();
        let results =
            futures::future::join_all(claimed.into_iter().map(|row| self.deliver(row))).await;
        for r in results {
            if let Err(e) = r {
                tracing::warn!(error = %e, "a callback attempt could not be recorded");
            }
        }
        Ok(n)
    }

    async fn deliver(&self, row: CallbackRow) -> Result<()> {
        let started_at = self.clock.now_ms();
        let clock = Instant::now();
        let outcome = self.attempt(&row).await;
        let duration_ms = clock.elapsed().as_millis() as i64;
        let now = self.clock.now_ms();
        let (status, response, error, next) = match &outcome {
            Outcome::Delivered(code) => (
                CallbackStatus::Delivered,
                Some(*code),
                None,
                row.next_attempt_at,
            ),
            Outcome::Refused(e) => (
                CallbackStatus::Failed,
                None,
                Some(e.clone()),
                row.next_attempt_at,
            ),
            Outcome::Retry { status, error } => {
                let next = now + backoff_ms(row.attempts);
                if next > row.scheduled_for + GIVE_UP_AFTER_MS {
                    let e = format!(
                        "{error}; gave up after {} attempts over 24 hours",
                        row.attempts
                    );
                    (
                        CallbackStatus::Failed,
                        *status,
                        Some(e),
                        row.next_attempt_at,
                    )
                } else {
                    (
                        CallbackStatus::Scheduled,
                        *status,
                        Some(error.clone()),
                        next,
                    )
                }
            }
        };
        let attempt = AttemptRow {
            id: new_id("cba"),
            callback_id: row.id.clone(),
            attempt: row.attempts,
            started_at,
            duration_ms,
            response_status: response.map(i64::from),
            error: error.clone(),
        };
        let finished = Finished {
            status,
            next_attempt_at: next,
            response_status: response.map(i64::from),
            error: error.as_deref(),
            delivered_at: (status == CallbackStatus::Delivered).then_some(now),
        };
        store::schedules::finish(&self.db, &attempt, &finished, now).await?;
        match &outcome {
            Outcome::Delivered(code) => {
                tracing::info!(callback = %row.id, attempt = row.attempts, status = code, "callback delivered")
            }
            _ => {
                tracing::warn!(callback = %row.id, attempt = row.attempts, outcome = ?status, error = ?error, "callback not delivered")
            }
        }
        Ok(())
    }

    async fn attempt(&self, row: &CallbackRow) -> Outcome {
        let sealed = Sealed {
            ciphertext: row.ciphertext.clone(),
            nonce: row.nonce.clone(),
            key_version: row.key_version,
        };
        let target: Value = match self
            .vault
            .open(
                &row.project_id,
                &format!("{PAYLOAD_CONTEXT}:{}", row.id),
                &sealed,
            )
            .ok()
            .and_then(|plain| serde_json::from_slice(&plain).ok())
        {
            Some(v) => v,
            None => {
                return Outcome::Refused(
                    "the stored callback cannot be opened with this instance's master key".into(),
                )
            }
        };
        let Some(url) = target["url"].as_str().and_then(|u| url::Url::parse(u).ok()) else {
            return Outcome::Refused("the stored callback url does not parse".into());
        };
        // The allowlist may have changed since the callback was scheduled.
        let patterns = match store::egress::list(self.db.pool(), &row.project_id).await {
            Ok(p) => p,
            Err(_) => {
                return Outcome::Retry {
                    status: None,
                    error: "the egress allowlist could not be read".into(),
                }
            }
        };
        if let Err(e) = self.http.check_url(&url, &patterns) {
            return Outcome::Refused(refusal(&e));
        }
        let mut payload = target["payload"].clone();
        match self.vault.scrubber(&row.project_id).await {
            Ok(scrubber) => scrubber.scrub(&mut payload),
            Err(_) => {
                return Outcome::Retry {
                    status: None,
                    error: "the vault could not be read to scrub the payload".into(),
                }
            }
        }
        let secret = match self.secret_of(&row.project_id).await {
            Ok(s) => s,
            Err(_) => {
                return Outcome::Retry {
                    status: None,
                    error: "the signing secret could not be read".into(),
                }
            }
        };
        let body = serde_json::json!({ "id": row.id, "scheduled_for": rfc3339(row.scheduled_for), "payload": payload }).to_string();
        let t = self.clock.now_ms() / 1000;
        let sig = signature(secret.as_bytes(), t, body.as_bytes());
        drop(secret);
        let method =
            reqwest::Method::from_bytes(row.method.as_bytes()).unwrap_or(reqwest::Method::POST);
        let request = self
            .http
            .reqwest()
            .request(method, url)
            .timeout(ATTEMPT_TIMEOUT)
            .header("content-type", "application/json")
            .header("workbench-event-id", &row.id)
            .header("workbench-signature", sig)
            .body(body);
        match request.send().await {
            Ok(res) => {
                let code = res.status().as_u16();
                // The answer's body is not kept; reading a little lets the connection be reused.
                let _ = tokio::time::timeout(Duration::from_secs(2), res.bytes()).await;
                if (200..300).contains(&code) {
                    Outcome::Delivered(code)
                } else {
                    Outcome::Retry {
                        status: Some(code),
                        error: format!("the receiver answered HTTP {code}"),
                    }
                }
            }
            Err(e) => {
                if let Some((_, reason)) = blocked_cause(&e) {
                    Outcome::Refused(format!("refusing to connect: {reason}"))
                } else if e.is_timeout() {
                    Outcome::Retry {
                        status: None,
                        error: format!("no answer within {} s", ATTEMPT_TIMEOUT.as_secs()),
                    }
                } else if e.is_connect() {
                    Outcome::Retry {
                        status: None,
                        error: "cannot connect to the receiver".into(),
                    }
                } else {
                    Outcome::Retry {
                        status: None,
                        error: "the request to the receiver failed".into(),
                    }
                }
            }
        }
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
                    tracing::warn!(error = %e, "claiming due callbacks failed");
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
}

/// Why a URL is refused at delivery, without the URL itself (it may hold a substituted secret).
fn refusal(e: &FetchError) -> String {
    match e {
        FetchError::NotAllowlisted(_) => {
            "the url's host is no longer in this project's egress allowlist".into()
        }
        FetchError::Blocked { reason, .. } => format!("refusing to connect: {reason}"),
        FetchError::InvalidUrl(m) => format!("invalid url: {m}"),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_covers_the_timestamp_and_the_body() {
        // HMAC-SHA256("key", "1700000000.{}") computed independently (Python hmac).
        assert_eq!(
            signature(b"key", 1_700_000_000, b"{}"),
            "t=1700000000,v1=9d713ed406bb7076d4123f0dc2c39d2df5c654ed4b0cd56b52c8b4c940bd63ae"
        );
    }

    #[test]
    fn backoff_doubles_from_ten_seconds_to_an_hour() {
        for (attempt, base) in [
            (1, 10_000),
            (2, 20_000),
            (3, 40_000),
            (9, 2_560_000),
            (10, 3_600_000),
            (40, 3_600_000),
        ] {
            let d = backoff_ms(attempt);
            assert!(d >= base && d <= base + base / 10, "attempt {attempt}: {d}");
        }
    }
}
