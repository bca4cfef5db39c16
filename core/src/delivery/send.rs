//! One attempt of one claimed delivery: open the sealed target, check the URL again (the
//! address rules for every delivery, the project's egress allowlist for callbacks; a refusal is
//! final), scrub the payload of every live secret of the project, wrap it in its kind's
//! envelope, sign, send, classify the answer and record the attempt with the next state.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::retry::{backoff_ms, classify_status, Verdict, MAX_ATTEMPTS};
use super::sign::{legacy_signature, signature, LEGACY_SIGNATURE_HEADER, SIGNATURE_HEADER};
use super::{seal_context, Deliveries, ATTEMPT_TIMEOUT};
use crate::clock::rfc3339;
use crate::egress::{blocked_cause, FetchError};
use crate::ids::new_id;
use crate::store;
use crate::store::deliveries::{AttemptRow, DeliveryRow, Finished};
use crate::store::delivery_status::{DeliveryKind, DeliveryStatus};
use crate::vault::Sealed;
use crate::Result;

/// What one attempt came to. Messages never hold the URL, the body or a secret.
enum Outcome {
    Delivered(u16),
    Retry { status: Option<u16>, error: String },
    Permanent { status: Option<u16>, error: String },
}

fn retry(error: impl Into<String>) -> Outcome {
    Outcome::Retry {
        status: None,
        error: error.into(),
    }
}

fn permanent(error: impl Into<String>) -> Outcome {
    Outcome::Permanent {
        status: None,
        error: error.into(),
    }
}

impl Deliveries {
    /// Attempts a claimed delivery and records how it went.
    pub(super) async fn deliver(&self, row: DeliveryRow) -> Result<()> {
        let started_at = self.clock.now_ms();
        let clock = Instant::now();
        let outcome = self.attempt(&row).await;
        let duration_ms = clock.elapsed().as_millis() as i64;
        let now = self.clock.now_ms();
        let (status, response, error, next) = match outcome {
            Outcome::Delivered(code) => (
                DeliveryStatus::Delivered,
                Some(code),
                None,
                row.next_attempt_at,
            ),
            Outcome::Permanent { status, error } => (
                DeliveryStatus::Failed,
                status,
                Some(error),
                row.next_attempt_at,
            ),
            Outcome::Retry { status, error } if row.attempts >= MAX_ATTEMPTS => (
                DeliveryStatus::Failed,
                status,
                Some(format!("{error}; gave up after {} attempts", row.attempts)),
                row.next_attempt_at,
            ),
            Outcome::Retry { status, error } => (
                DeliveryStatus::Pending,
                status,
                Some(error),
                now + backoff_ms(row.attempts),
            ),
        };
        let attempt = AttemptRow {
            id: new_id("dla"),
            delivery_id: row.id.clone(),
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
            delivered_at: (status == DeliveryStatus::Delivered).then_some(now),
        };
        store::deliveries::finish(&self.db, &attempt, &finished, now).await?;
        if status == DeliveryStatus::Delivered {
            tracing::info!(delivery = %row.id, kind = ?row.kind, attempt = row.attempts, status = ?response, "delivered");
        } else {
            tracing::warn!(delivery = %row.id, kind = ?row.kind, attempt = row.attempts, outcome = ?status, status = ?response, error = ?error, "not delivered");
        }
        Ok(())
    }

    async fn attempt(&self, row: &DeliveryRow) -> Outcome {
        let (Some(ciphertext), Some(nonce), Some(key_version)) =
            (&row.ciphertext, &row.nonce, row.key_version)
        else {
            return permanent("nothing was stored to send");
        };
        let sealed = Sealed {
            ciphertext: ciphertext.clone(),
            nonce: nonce.clone(),
            key_version,
        };
        let Some(target) = self
            .vault
            .open(&row.project_id, &seal_context(row.kind, &row.id), &sealed)
            .ok()
            .and_then(|plain| serde_json::from_slice::<Value>(&plain).ok())
        else {
            return permanent(
                "the stored delivery cannot be opened with this instance's master key",
            );
        };
        let Some(url) = target["url"].as_str().and_then(|u| url::Url::parse(u).ok()) else {
            return permanent("the stored url does not parse");
        };
        if let Some(refused) = self.check_url(row, &url).await {
            return refused;
        }
        let mut payload = target["payload"].clone();
        match self.vault.scrubber(&row.project_id).await {
            Ok(scrubber) => scrubber.scrub(&mut payload),
            Err(_) => return retry("the vault could not be read to scrub the payload"),
        }
        let body = match row.kind {
            DeliveryKind::Webhook => serde_json::json!({
                "id": row.id, "type": row.event, "created_at": rfc3339(row.created_at), "data": payload,
            }),
            DeliveryKind::Callback => serde_json::json!({
                "id": row.id, "scheduled_for": rfc3339(row.due_at), "payload": payload,
            }),
        }
        .to_string();
        let secret = match &row.secret_ref {
            Some(name) => match self
                .vault
                .reveal(&row.project_id, std::slice::from_ref(name))
                .await
            {
                Ok(mut values) => match values.remove(name) {
                    Some(s) => s,
                    None => {
                        return permanent(format!(
                        "the signing secret {name} is no longer in the vault; set the webhook again"
                    ))
                    }
                },
                Err(_) => return retry("the signing secret could not be read"),
            },
            None => match self.project_secret(&row.project_id).await {
                Ok(s) => s,
                Err(_) => return retry("the signing secret could not be read"),
            },
        };
        let t = self.clock.now_ms() / 1000;
        let sig = signature(secret.as_bytes(), t, body.as_bytes());
        let legacy = (row.kind == DeliveryKind::Webhook)
            .then(|| legacy_signature(secret.as_bytes(), body.as_bytes()));
        drop(secret);
        let method =
            reqwest::Method::from_bytes(row.method.as_bytes()).unwrap_or(reqwest::Method::POST);
        let mut request = self
            .http
            .reqwest()
            .request(method, url)
            .timeout(ATTEMPT_TIMEOUT)
            .header("content-type", "application/json")
            .header("workbench-event", &row.event)
            .header("workbench-delivery", &row.id)
            .header("workbench-event-id", &row.id)
            .header(SIGNATURE_HEADER, sig);
        if let Some(legacy) = legacy {
            request = request.header(LEGACY_SIGNATURE_HEADER, legacy);
        }
        match request.body(body).send().await {
            Ok(res) => {
                let code = res.status().as_u16();
                // The answer's body is not kept; reading a little lets the connection be reused.
                let _ = tokio::time::timeout(Duration::from_secs(2), res.bytes()).await;
                let error = format!("the receiver answered HTTP {code}");
                match classify_status(code) {
                    Verdict::Delivered => Outcome::Delivered(code),
                    Verdict::Retry => Outcome::Retry {
                        status: Some(code),
                        error,
                    },
                    Verdict::Permanent => Outcome::Permanent {
                        status: Some(code),
                        error,
                    },
                }
            }
            Err(e) => match blocked_cause(&e) {
                // The address rules will not change between attempts.
                Some((_, reason)) => permanent(format!(
                    "refusing to connect: the url's host resolves to a {reason}, which outbound requests may not reach"
                )),
                None if e.is_timeout() => retry(format!(
                    "no answer within {} s",
                    ATTEMPT_TIMEOUT.as_secs()
                )),
                None if e.is_connect() => retry("cannot connect to the receiver"),
                None => retry("the request to the receiver failed"),
            },
        }
    }

    /// A refusal of `url` now, if any: a callback's host must still be in the project's egress
    /// allowlist (it may have changed since it was scheduled); every delivery's IP literal must
    /// pass the address rules (names are checked by the resolver at the connection).
    async fn check_url(&self, row: &DeliveryRow, url: &url::Url) -> Option<Outcome> {
        match row.kind {
            DeliveryKind::Callback => {
                let patterns = match store::egress::list(self.db.pool(), &row.project_id).await {
                    Ok(p) => p,
                    Err(_) => return Some(retry("the egress allowlist could not be read")),
                };
                self.http
                    .check_url(url, &patterns)
                    .err()
                    .map(|e| permanent(refusal(&e)))
            }
            DeliveryKind::Webhook => {
                if !matches!(url.scheme(), "http" | "https") {
                    return Some(permanent("only http and https urls are allowed"));
                }
                self.allowance.check_url_host(url).map(|reason| {
                    permanent(format!(
                        "refusing to connect: the url points at a {reason}, which outbound requests may not reach"
                    ))
                })
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
