//! Scheduled callbacks (`schedule.callback`): an agent asks to be called back at a URL later,
//! with a payload. A callback is a row of its own (who asked, the agent's templates) and a
//! delivery in the outbox (`delivery`) due at the time asked, so it survives restarts, any
//! instance may deliver it, and it is signed, retried and recorded like every delivery. Delivery
//! is at least once: a process that dies mid-delivery leaves a lease that runs out, and the
//! callback goes again under the same event id.
//!
//! What is delivered (the URL and payload after `{{vault:…}}` substitution) is sealed with the
//! vault's master key; what people are shown is the agent's template, scrubbed.

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;
use zeroize::Zeroizing;

use crate::auth::Principal;
use crate::clock::{rfc3339, Clock};
use crate::delivery::{Deliveries, DeliveryKind, NewDelivery};
use crate::egress::{FetchError, GuardedClient};
use crate::ids::new_id;
use crate::store::deliveries::AttemptRow;
use crate::store::schedules::{CallbackRow, NewCallbackRow};
use crate::store::{self, Db};
use crate::vault::Vault;
use crate::{Error, Result};

pub use workbench_model::delivery::CallbackStatus;

/// The furthest ahead a callback may be scheduled.
pub const MAX_AHEAD_MS: i64 = 30 * 24 * 3600 * 1000;
/// Callbacks a project may have waiting at once.
pub const MAX_SCHEDULED_PER_PROJECT: i64 = 10_000;
/// Largest payload, as JSON.
pub const MAX_PAYLOAD_BYTES: usize = 64 * 1024;
/// Callbacks one listing returns.
pub const PAGE: i64 = 50;

/// A callback to schedule, after substitution (`url`, `payload`) and as the agent wrote it
/// (`url_shown`, `payload_shown`).
pub struct NewCallback {
    pub url: String,
    pub url_shown: String,
    pub method: String,
    pub payload: Value,
    pub payload_shown: Value,
    pub scheduled_for: i64,
}

/// Why a callback was not scheduled.
#[derive(Debug)]
pub enum ScheduleError {
    /// The URL is refused (not allowlisted, a blocked address, not http(s)).
    Url(FetchError),
    TooMany,
    Store(Error),
}

/// A callback as the API and the portal show it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CallbackView {
    pub id: String,
    pub object: &'static str,
    pub url: String,
    pub method: String,
    pub payload: Value,
    pub scheduled_for: String,
    pub status: CallbackStatus,
    pub attempts: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_attempt_at: Option<String>,
    pub last_response_status: Option<i64>,
    pub last_error: Option<String>,
    pub delivered_at: Option<String>,
    pub created_at: String,
    pub created_by: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deliveries: Option<Vec<AttemptView>>,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct AttemptView {
    pub attempt: i64,
    pub started_at: String,
    pub duration_ms: i64,
    pub response_status: Option<i64>,
    pub error: Option<String>,
}

impl From<AttemptRow> for AttemptView {
    fn from(a: AttemptRow) -> Self {
        AttemptView {
            attempt: a.attempt,
            started_at: rfc3339(a.started_at),
            duration_ms: a.duration_ms,
            response_status: a.response_status,
            error: a.error,
        }
    }
}

/// One page of callbacks.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CallbackPage {
    pub data: Vec<CallbackView>,
    pub next_cursor: Option<String>,
}

/// What cancelling found.
#[derive(Debug, PartialEq, Eq)]
pub enum Cancelled {
    Done,
    NotFound,
    /// Already delivered, failed or cancelled.
    Finished(CallbackStatus),
}

#[derive(Clone)]
pub struct Schedules {
    db: Db,
    clock: Arc<dyn Clock>,
    vault: Vault,
    http: GuardedClient,
    deliveries: Deliveries,
}

impl Schedules {
    pub fn new(
        db: Db,
        clock: Arc<dyn Clock>,
        vault: Vault,
        http: GuardedClient,
        deliveries: Deliveries,
    ) -> Schedules {
        Schedules {
            db,
            clock,
            vault,
            http,
            deliveries,
        }
    }

    pub fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    /// Checks the URL against the project's egress allowlist and the address rules, then
    /// stores the callback; nothing is stored when anything is refused.
    pub async fn schedule(
        &self,
        who: &Principal,
        c: NewCallback,
    ) -> std::result::Result<(String, i64), ScheduleError> {
        let url = url::Url::parse(&c.url)
            .map_err(|e| ScheduleError::Url(FetchError::InvalidUrl(e.to_string())))?;
        let patterns = store::egress::list(self.db.pool(), &who.project_id)
            .await
            .map_err(ScheduleError::Store)?;
        self.http
            .check_url(&url, &patterns)
            .map_err(ScheduleError::Url)?;
        if store::deliveries::count_unfinished(
            self.db.pool(),
            &who.project_id,
            DeliveryKind::Callback,
        )
        .await
        .map_err(ScheduleError::Store)?
            >= MAX_SCHEDULED_PER_PROJECT
        {
            return Err(ScheduleError::TooMany);
        }
        let id = new_id("sched");
        let delivery = self
            .deliveries
            .row(NewDelivery {
                id: id.clone(),
                project_id: who.project_id.clone(),
                kind: DeliveryKind::Callback,
                event: "callback".into(),
                subject_id: id.clone(),
                url: c.url,
                url_shown: c.url_shown.clone(),
                method: c.method.clone(),
                secret_ref: None,
                payload: c.payload,
                due_at: c.scheduled_for,
            })
            .map_err(ScheduleError::Store)?;
        let row = NewCallbackRow {
            id: id.clone(),
            project_id: who.project_id.clone(),
            user_id: who.user_id.clone(),
            api_key_id: who.api_key_id.clone(),
            url: c.url_shown,
            method: c.method,
            payload_shown: Some(c.payload_shown.to_string()),
            scheduled_for: c.scheduled_for,
            created_at: delivery.created_at,
        };
        let stored = async {
            let mut tx = self.db.begin_write().await?;
            store::deliveries::insert(&mut *tx, &delivery).await?;
            store::schedules::insert(&mut *tx, &row).await?;
            tx.commit().await?;
            Ok::<_, Error>(())
        };
        stored.await.map_err(ScheduleError::Store)?;
        tracing::info!(callback = %id, project = %who.project_id, scheduled_for = %rfc3339(c.scheduled_for), "callback scheduled");
        Ok((id, c.scheduled_for))
    }

    /// A page of the caller's callbacks (an admin's: the whole project's), newest first,
    /// scrubbed; `status` narrows it, `cursor` is the previous page's `next_cursor`.
    pub async fn page(
        &self,
        who: &Principal,
        status: Option<&str>,
        cursor: Option<&str>,
    ) -> Result<CallbackPage> {
        self.page_with(who, status, cursor, false).await
    }

    /// `page` with each callback's delivery attempts (the portal shows them).
    pub async fn page_with_deliveries(
        &self,
        who: &Principal,
        status: Option<&str>,
        cursor: Option<&str>,
    ) -> Result<CallbackPage> {
        self.page_with(who, status, cursor, true).await
    }

    async fn page_with(
        &self,
        who: &Principal,
        status: Option<&str>,
        cursor: Option<&str>,
        deliveries: bool,
    ) -> Result<CallbackPage> {
        let status = match status.filter(|s| !s.is_empty()) {
            Some(s) => Some(
                CallbackStatus::parse(s)
                    .ok_or_else(|| {
                        Error::invalid(format!(
                            "unknown status {s:?}; use scheduled, delivered, failed or cancelled"
                        ))
                    })?
                    .deliveries(),
            ),
            None => None,
        };
        let before = cursor
            .filter(|c| !c.is_empty())
            .map(crate::audit::parse_cursor)
            .transpose()?;
        let user = (!who.sees_project_records()).then_some(who.user_id.as_str());
        let rows = store::schedules::list(
            self.db.pool(),
            &who.project_id,
            user,
            status,
            before.as_ref().map(|(t, i)| (*t, i.as_str())),
            PAGE + 1,
        )
        .await?;
        let scrubber = self.vault.scrubber_for(who).await?;
        let more = rows.len() as i64 > PAGE;
        let rows: Vec<CallbackRow> = rows.into_iter().take(PAGE as usize).collect();
        let mut attempts = if deliveries {
            let ids: Vec<String> = rows.iter().map(|r| r.id.clone()).collect();
            store::deliveries::attempts_of(self.db.pool(), &ids).await?
        } else {
            Vec::new()
        };
        let mut data = Vec::with_capacity(rows.len());
        let mut next = None;
        for r in rows {
            next = Some(format!("{}.{}", r.created_at, r.id));
            let mine = deliveries.then(|| {
                let (of, rest): (Vec<AttemptRow>, Vec<AttemptRow>) = std::mem::take(&mut attempts)
                    .into_iter()
                    .partition(|a| a.delivery_id == r.id);
                attempts = rest;
                of.into_iter().map(AttemptView::from).collect()
            });
            let mut v = view(r, mine);
            scrub_view(&scrubber, &mut v);
            data.push(v);
        }
        Ok(CallbackPage {
            data,
            next_cursor: if more { next } else { None },
        })
    }

    /// One callback with its deliveries, if the caller may see it.
    pub async fn get(&self, who: &Principal, id: &str) -> Result<Option<CallbackView>> {
        let Some(row) = store::schedules::get(self.db.pool(), &who.project_id, id).await? else {
            return Ok(None);
        };
        if !who.sees_project_records() && row.user_id != who.user_id {
            return Ok(None);
        }
        let attempts =
            store::deliveries::attempts_of(self.db.pool(), std::slice::from_ref(&row.id)).await?;
        let mut v = view(
            row,
            Some(attempts.into_iter().map(AttemptView::from).collect()),
        );
        scrub_view(&self.vault.scrubber_for(who).await?, &mut v);
        Ok(Some(v))
    }

    /// Cancels a callback that is still scheduled (its owner or an admin).
    pub async fn cancel(&self, who: &Principal, id: &str) -> Result<Cancelled> {
        let Some(row) = store::schedules::get(self.db.pool(), &who.project_id, id).await? else {
            return Ok(Cancelled::NotFound);
        };
        if !who.sees_project_records() && row.user_id != who.user_id {
            return Ok(Cancelled::NotFound);
        }
        if store::deliveries::cancel(self.db.pool(), &who.project_id, id, self.clock.now_ms())
            .await?
        {
            tracing::info!(callback = %id, by = %who.user_id, "callback cancelled");
            return Ok(Cancelled::Done);
        }
        let now = store::schedules::get(self.db.pool(), &who.project_id, id)
            .await?
            .map(|r| r.status)
            .unwrap_or(row.status);
        Ok(Cancelled::Finished(now.into()))
    }

    /// The project's signing secret (made on first use), for admins to configure receivers.
    pub async fn signing_secret(&self, admin: &Principal) -> Result<Zeroizing<String>> {
        admin.require(crate::auth::Operation::SigningSecretRead)?;
        self.deliveries.project_secret(&admin.project_id).await
    }
}

fn view(r: CallbackRow, deliveries: Option<Vec<AttemptView>>) -> CallbackView {
    let payload = r
        .payload_shown
        .as_deref()
        .and_then(|p| serde_json::from_str(p).ok())
        .unwrap_or(Value::Null);
    let status = CallbackStatus::from(r.status);
    CallbackView {
        next_attempt_at: (status == CallbackStatus::Scheduled).then(|| rfc3339(r.next_attempt_at)),
        id: r.id,
        object: "scheduled_callback",
        url: r.url,
        method: r.method,
        payload,
        scheduled_for: rfc3339(r.scheduled_for),
        status,
        attempts: r.attempts,
        last_response_status: r.response_status,
        last_error: r.error,
        delivered_at: r.delivered_at.map(rfc3339),
        created_at: rfc3339(r.created_at),
        created_by: r.user_id,
        deliveries,
    }
}

fn scrub_view(scrubber: &crate::vault::Scrubber, v: &mut CallbackView) {
    scrubber.scrub(&mut v.payload);
    if let Some(clean) = scrubber.scrub_str(&v.url) {
        v.url = clean;
    }
}
