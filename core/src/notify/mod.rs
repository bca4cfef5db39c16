//! The project webhook (D15): when a call is held for confirmation, workbench POSTs the
//! confirmation (its arguments as the agent's template, scrubbed) to a URL an admin set, so
//! approvers can be told in their chat tool. Whatever the caller passed, the event's data is
//! scrubbed again of every secret of the project before it is stored and again when it is sent.
//! The URL passes the same SSRF rules as every outbound request, checked when set and again at
//! every connection. Sending is the delivery service's (`delivery`): an outbox row, signed
//! `Workbench-Signature: t=…,v1=…` under the vault secret the admin names, retried and
//! recorded like every delivery; the call is never held up by it.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::auth::Principal;
use crate::clock::{rfc3339, Clock};
use crate::delivery::{Deliveries, DeliveryKind, DeliveryStatus, NewDelivery};
use crate::egress::PrivateAllowance;
use crate::ids::new_id;
use crate::store::{self, Db};
use crate::vault::Vault;
use crate::{Error, Result};

/// The event sent when a call is held.
pub const CONFIRMATION_CREATED: &str = "confirmation.created";
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
    /// pending, delivered or failed: a delivery under way shows as pending.
    pub status: DeliveryStatus,
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
    deliveries: Deliveries,
    allowance: PrivateAllowance,
}

impl Webhooks {
    pub fn new(
        db: Db,
        clock: Arc<dyn Clock>,
        vault: Vault,
        deliveries: Deliveries,
        allowance: PrivateAllowance,
    ) -> Self {
        Webhooks {
            db,
            clock,
            vault,
            deliveries,
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
        let checked = self.check(admin, &c).await?;
        store::project_settings::set_webhook(
            self.db.pool(),
            &admin.project_id,
            Some((checked.url.as_str(), checked.secret_ref.as_str())),
            now,
        )
        .await?;
        Ok(Some(checked))
    }

    /// The webhook as it would be stored (the secret by its vault name), or why it cannot be:
    /// the URL against the SSRF rules, the secret in the project's vault.
    pub async fn check(&self, admin: &Principal, c: &WebhookConfig) -> Result<WebhookConfig> {
        admin.require(crate::auth::Operation::SettingsManage)?;
        let url = self.check_url(&c.url)?;
        let name = self
            .vault
            .name_of(&admin.project_id, c.secret_ref.trim())
            .await?
            .ok_or_else(|| Error::invalid(format!("secret_ref {:?} names no secret in this project's vault; add the signing secret on the Vault page first", c.secret_ref)))?;
        Ok(WebhookConfig {
            url: url.to_string(),
            secret_ref: name,
        })
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
        let rows = store::deliveries::recent(
            self.db.pool(),
            &admin.project_id,
            DeliveryKind::Webhook,
            RECENT_DELIVERIES,
        )
        .await?;
        Ok(rows
            .into_iter()
            .map(|r| DeliveryView {
                // This view's words are pending, delivered and failed: an attempt under way is
                // still pending.
                status: match r.status {
                    DeliveryStatus::Delivering => DeliveryStatus::Pending,
                    s => s,
                },
                id: r.id,
                event: r.event,
                subject_id: r.subject_id,
                url: r.url,
                attempts: r.attempts,
                response_status: r.response_status,
                error: r.error,
                created_at: rfc3339(r.created_at),
                updated_at: rfc3339(r.updated_at),
            })
            .collect())
    }

    /// Sends `data` as `event` to the project's webhook, if one is set: the delivery is in the
    /// outbox before this returns (so it survives a restart), and its first attempt starts at
    /// once in the background. `data` should already be scrubbed; it is scrubbed again here and
    /// when sent.
    pub async fn notify(
        &self,
        project_id: &str,
        event: &'static str,
        subject_id: &str,
        data: Value,
    ) {
        match self.enqueue(project_id, event, subject_id, data).await {
            Ok(Some(id)) => self.deliveries.deliver_soon(&id),
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(error = %e, project_id, event, "the webhook delivery could not be stored")
            }
        }
    }

    /// Puts `event` for the project's webhook in the outbox; its id, or None without a webhook.
    pub async fn enqueue(
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
        let id = self
            .deliveries
            .enqueue(NewDelivery {
                id: new_id("whd"),
                project_id: project_id.to_owned(),
                kind: DeliveryKind::Webhook,
                event: event.to_owned(),
                subject_id: subject_id.to_owned(),
                url_shown: url.clone(),
                url,
                method: "POST".into(),
                secret_ref: Some(secret_ref),
                payload: data,
                due_at: self.clock.now_ms(),
            })
            .await?;
        Ok(Some(id))
    }
}
