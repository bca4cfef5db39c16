//! The project webhook (D15): when a call is held for confirmation, workbench POSTs the
//! confirmation (its arguments as the agent's template, scrubbed) to a URL an admin set, so
//! approvers can be told in their chat tool. Whatever the caller passed, the event's data is
//! scrubbed again of every secret of the project before it is signed and sent. The body is
//! signed with HMAC-SHA256 under a vault secret the admin names (`Workbench-Signature:
//! sha256=<hex>`); the URL passes the same SSRF rules as every outbound request, checked when
//! set and again at every connection. Delivery runs in the background with retries and never
//! holds up the call; each delivery's outcome is kept for the portal (never the body or the
//! secret).

mod sign;

pub use sign::{signature, SIGNATURE_HEADER};

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::auth::Principal;
use crate::clock::{rfc3339, Clock};
use crate::egress::{blocked_cause, PrivateAllowance};
use crate::ids::new_id;
use crate::store::{self, webhook_deliveries::DeliveryRow, Db};
use crate::vault::Vault;
use crate::{Error, Result};

/// The event sent when a call is held.
pub const CONFIRMATION_CREATED: &str = "confirmation.created";
/// Waits before each retry of a failed delivery (the first attempt is immediate).
pub const RETRY_DELAYS: [Duration; 3] = [
    Duration::from_secs(1),
    Duration::from_secs(5),
    Duration::from_secs(25),
];
/// How long one attempt may take.
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// Deliveries the portal lists.
pub const RECENT_DELIVERIES: i64 = 20;
const MAX_URL_CHARS: usize = 2048;

/// The webhook as an admin sets it: where to send, and the vault secret (name or `sec_` id)
/// to sign with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookConfig {
    pub url: String,
    pub secret_ref: String,
}

/// One delivery as the portal and the API show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryView {
    pub id: String,
    pub event: String,
    pub subject_id: String,
    pub url: String,
    pub status: String,
    pub attempts: i64,
    pub response_status: Option<i64>,
    pub error: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

#[derive(Clone)]
pub struct Webhooks {
    db: Db,
    clock: Arc<dyn Clock>,
    vault: Vault,
    http: reqwest::Client,
    allowance: PrivateAllowance,
}

impl Webhooks {
    /// `http` is the guarded client (checked resolver, no redirects).
    pub fn new(
        db: Db,
        clock: Arc<dyn Clock>,
        vault: Vault,
        http: reqwest::Client,
        allowance: PrivateAllowance,
    ) -> Self {
        Webhooks {
            db,
            clock,
            vault,
            http,
            allowance,
        }
    }

    /// The project's webhook, if one is set (admins).
    pub async fn get(&self, admin: &Principal) -> Result<Option<WebhookConfig>> {
        admin.require(crate::auth::Operation::SettingsManage)?;
        let row = store::project_settings::get(self.db.pool(), &admin.project_id).await?;
        Ok(row.and_then(|r| {
            Some(WebhookConfig {
                url: r.webhook_url?,
                secret_ref: r.webhook_secret_ref?,
            })
        }))
    }

    /// Sets the webhook after checking it completely (the URL against the SSRF rules, the
    /// secret in the project's vault), or removes it with `None`.
    pub async fn set(
        &self,
        admin: &Principal,
        config: Option<WebhookConfig>,
    ) -> Result<Option<WebhookConfig>> {
        admin.require(crate::auth::Operation::SettingsManage)?;
        let now = self.clock.now_ms();
        let Some(c) = config else {
            store::project_settings::set_webhook(self.db.pool(), &admin.project_id, None, now)
                .await?;
            return Ok(None);
        };
        let url = self.check_url(&c.url)?;
        let name = self
            .vault
            .name_of(&admin.project_id, c.secret_ref.trim())
            .await?
            .ok_or_else(|| Error::invalid(format!("secret_ref {:?} names no secret in this project's vault; add the signing secret on the Vault page first", c.secret_ref)))?;
        store::project_settings::set_webhook(
            self.db.pool(),
            &admin.project_id,
            Some((url.as_str(), name.as_str())),
            now,
        )
        .await?;
        Ok(Some(WebhookConfig {
            url: url.to_string(),
            secret_ref: name,
        }))
    }

    fn check_url(&self, raw: &str) -> Result<url::Url> {
        let raw = raw.trim();
        if raw.len() > MAX_URL_CHARS {
            return Err(Error::invalid(format!(
                "url is longer than {MAX_URL_CHARS} characters"
            )));
        }
        self.allowance.check_registered_url(raw, "an http(s) URL")
    }

    /// The project's newest deliveries (admins).
    pub async fn deliveries(&self, admin: &Principal) -> Result<Vec<DeliveryView>> {
        admin.require(crate::auth::Operation::SettingsManage)?;
        let rows =
            store::webhook_deliveries::recent(self.db.pool(), &admin.project_id, RECENT_DELIVERIES)
                .await?;
        Ok(rows
            .into_iter()
            .map(|r| DeliveryView {
                id: r.id,
                event: r.event,
                subject_id: r.subject_id,
                url: r.url,
                status: r.status,
                attempts: r.attempts,
                response_status: r.response_status,
                error: r.error,
                created_at: rfc3339(r.created_at),
                updated_at: rfc3339(r.updated_at),
            })
            .collect())
    }

    /// Sends `data` as `event` to the project's webhook in the background, if one is set.
    /// `data` should already be scrubbed; `deliver` scrubs it again with the project's secrets.
    pub fn notify(&self, project_id: &str, event: &'static str, subject_id: &str, data: Value) {
        let this = self.clone();
        let (project_id, subject_id) = (project_id.to_owned(), subject_id.to_owned());
        tokio::spawn(async move {
            if let Err(e) = this.deliver(&project_id, event, &subject_id, data).await {
                tracing::warn!(error = %e, project_id, event, "webhook delivery could not be recorded");
            }
        });
    }

    /// Delivers one event with retries, recording each attempt; returns when done. No live
    /// secret of the project leaves in `data`, in any form the scrubber knows.
    pub async fn deliver(
        &self,
        project_id: &str,
        event: &str,
        subject_id: &str,
        mut data: Value,
    ) -> Result<Option<String>> {
        let Some(settings) = store::project_settings::get(self.db.pool(), project_id).await? else {
            return Ok(None);
        };
        let (Some(url), Some(secret_ref)) = (settings.webhook_url, settings.webhook_secret_ref)
        else {
            return Ok(None);
        };
        self.vault.scrubber(project_id).await?.scrub(&mut data);
        let now = self.clock.now_ms();
        let id = new_id("whd");
        let body = serde_json::json!({ "id": id, "type": event, "created_at": rfc3339(now), "data": data }).to_string();
        let mut row = DeliveryRow {
            id: id.clone(),
            project_id: project_id.to_owned(),
            event: event.to_owned(),
            subject_id: subject_id.to_owned(),
            url: url.clone(),
            status: "pending".into(),
            attempts: 0,
            response_status: None,
            error: None,
            created_at: now,
            updated_at: now,
        };
        store::webhook_deliveries::insert(self.db.pool(), &row).await?;
        let secret = self
            .vault
            .reveal(project_id, std::slice::from_ref(&secret_ref))
            .await?
            .remove(&secret_ref);
        let Some(secret) = secret else {
            let error = format!(
                "the signing secret {secret_ref} is no longer in the vault; set the webhook again"
            );
            store::webhook_deliveries::update(
                self.db.pool(),
                &id,
                "failed",
                0,
                None,
                Some(&error),
                self.clock.now_ms(),
            )
            .await?;
            return Ok(Some(id));
        };
        let sig = signature(secret.as_bytes(), body.as_bytes());
        drop(secret);
        let mut delays = RETRY_DELAYS.iter();
        loop {
            row.attempts += 1;
            let (status, error, retry) = match self.attempt(&url, event, &id, &sig, &body).await {
                Ok(code) if (200..300).contains(&code) => (Some(code), None, false),
                Ok(code) => (
                    Some(code),
                    Some(format!("the webhook answered {code}")),
                    true,
                ),
                Err(Failure { message, retry }) => (None, Some(message), retry),
            };
            let delivered = error.is_none();
            let next = if retry { delays.next() } else { None };
            let state = if delivered {
                "delivered"
            } else if next.is_some() {
                "pending"
            } else {
                "failed"
            };
            store::webhook_deliveries::update(
                self.db.pool(),
                &id,
                state,
                row.attempts,
                status.map(i64::from),
                error.as_deref(),
                self.clock.now_ms(),
            )
            .await?;
            match next {
                Some(d) => tokio::time::sleep(*d).await,
                None => return Ok(Some(id)),
            }
        }
    }

    /// One POST; the status code, or why there was none (the URL only, never the body).
    async fn attempt(
        &self,
        url: &str,
        event: &str,
        id: &str,
        sig: &str,
        body: &str,
    ) -> std::result::Result<u16, Failure> {
        let final_failure = |message: String| Failure {
            message,
            retry: false,
        };
        let parsed = url::Url::parse(url).map_err(|e| final_failure(format!("url: {e}")))?;
        // IP literals skip the resolver: check them here, every time.
        if let Some(reason) = self.allowance.check_url_host(&parsed) {
            return Err(final_failure(format!(
                "the url points at a {reason}, which outbound requests may not reach"
            )));
        }
        let res = self
            .http
            .post(parsed)
            .timeout(ATTEMPT_TIMEOUT)
            .header("content-type", "application/json")
            .header("workbench-event", event)
            .header("workbench-delivery", id)
            .header(SIGNATURE_HEADER, sig)
            .body(body.to_owned())
            .send()
            .await;
        let retry = |message: String| Failure {
            message,
            retry: true,
        };
        match res {
            Ok(r) => Ok(r.status().as_u16()),
            // The address rules will not change between attempts: no retry.
            Err(e) => Err(match blocked_cause(&e) {
                Some((host, reason)) => final_failure(format!(
                    "{host} resolves to a {reason}, which outbound requests may not reach"
                )),
                None if e.is_timeout() => {
                    retry(format!("no answer within {} s", ATTEMPT_TIMEOUT.as_secs()))
                }
                None if e.is_connect() => {
                    retry("the connection was refused or could not be made".to_owned())
                }
                None => retry("the request failed".to_owned()),
            }),
        }
    }
}

/// Why an attempt got no answer, and whether trying again may help.
struct Failure {
    message: String,
    retry: bool,
}
