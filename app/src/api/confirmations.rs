//! Server functions of the Confirmations pages: the pending list and history, one held call,
//! and a signed-in member's decision (D15). The engine decides who may decide; this only
//! translates shapes.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::AppError;
pub use workbench_model::calls::{
    CallStatus, ConfirmationItem, ConfirmationStatus, ConfirmationsData,
};

#[cfg(feature = "ssr")]
use crate::ssr;

#[cfg(feature = "ssr")]
async fn items(
    wb: &workbench_core::Workbench,
    who: &workbench_core::auth::Principal,
    views: Vec<workbench_core::engine::ConfirmationView>,
) -> Result<Vec<ConfirmationItem>, AppError> {
    let emails = ssr::Emails::of(wb, who).await;
    let keys = wb.accounts().list_api_keys(who).await.unwrap_or_default();
    let email = |user_id: &str| emails.of_user(user_id);
    let snapshot = wb.engine().snapshot(who);
    views
        .into_iter()
        .map(|c| {
            Ok(ConfirmationItem {
                side_effects: snapshot.get(&c.tool).map(|t| t.spec.side_effects),
                arguments: serde_json::to_string_pretty(&c.arguments).unwrap_or_default(),
                api_key: match &c.api_key_id {
                    Some(id) => keys
                        .iter()
                        .find(|k| &k.id == id)
                        .map(|k| format!("{} ({})", k.name, k.prefix))
                        .unwrap_or_else(|| id.clone()),
                    None => "portal".into(),
                },
                requested_by: email(&c.user_id),
                decided_by: c.decided_by.as_deref().map(email),
                id: c.id,
                tool: c.tool,
                status: c.status,
                end_user_id: c.end_user_id,
                surface: c.surface,
                created_at: c.created_at,
                expires_at: c.expires_at,
                expires_at_ms: c.expires_at_ms,
                decided_at: c.decided_at,
                reason: c.reason,
                tool_call_id: c.tool_call_id,
            })
        })
        .collect()
}

#[server(endpoint = "confirmations_page")]
pub async fn confirmations_page() -> Result<ConfirmationsData, AppError> {
    let p = ssr::principal().await?;
    let wb = ssr::wb()?;
    let all = wb.engine().confirmations(&p, None).await?;
    let (pending, history): (Vec<_>, Vec<_>) = items(&wb, &p, all)
        .await?
        .into_iter()
        .partition(|c| c.status == ConfirmationStatus::Pending);
    Ok(ConfirmationsData {
        pending,
        history,
        now_ms: wb.clock().now_ms(),
    })
}

#[server(endpoint = "confirmation_page")]
pub async fn confirmation_page(id: String) -> Result<(ConfirmationItem, i64), AppError> {
    let p = ssr::principal().await?;
    let wb = ssr::wb()?;
    let view = wb.engine().confirmation(&p, &id).await?;
    let item = items(&wb, &p, vec![view]).await?.remove(0);
    Ok((item, wb.clock().now_ms()))
}

/// Held calls waiting for a decision (the navigation's count).
#[server(endpoint = "pending_confirmations")]
pub async fn pending_confirmations() -> Result<i64, AppError> {
    let p = ssr::principal().await?;
    Ok(ssr::wb()?.engine().pending_confirmations(&p).await?)
}

/// Approves (runs the held call) or denies; answers the call's final status.
#[server(endpoint = "decide_confirmation")]
pub async fn decide_confirmation(
    id: String,
    decision: String,
    reason: Option<String>,
) -> Result<CallStatus, AppError> {
    use workbench_core::engine::DecideError;
    let p = ssr::principal().await?;
    let approve = match decision.as_str() {
        "approve" => true,
        "deny" => false,
        _ => return Err(AppError::Message("choose approve or deny".into())),
    };
    match ssr::wb()?.engine().decide(&p, &id, approve, reason).await {
        Ok(call) => Ok(call.status),
        Err(DecideError::NotFound) => Err(workbench_core::Error::NotFound.into()),
        Err(DecideError::Forbidden(m)) => Err(workbench_core::Error::Forbidden(m).into()),
        Err(DecideError::Invalid(m)) => Err(workbench_core::Error::Invalid(m).into()),
        Err(e @ DecideError::Closed { .. }) => {
            Err(workbench_core::Error::Conflict(e.to_string()).into())
        }
        Err(DecideError::Failed(e)) => Err(e.into()),
    }
}

/// One webhook delivery, for the Confirmations page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryItem {
    pub id: String,
    pub subject_id: String,
    pub status: workbench_model::delivery::DeliveryStatus,
    pub attempts: i64,
    pub response_status: Option<i64>,
    pub error: Option<String>,
    pub at: String,
}

/// The project webhook as admins see it: where it points, the secret it signs with, the
/// vault's secret names to choose from, and the newest deliveries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebhookData {
    pub url: String,
    pub secret_ref: String,
    pub secrets: Vec<String>,
    pub deliveries: Vec<DeliveryItem>,
    pub can_manage: bool,
}

/// The webhook settings (None for members, who do not see them).
#[server(endpoint = "webhook_settings")]
pub async fn webhook_settings() -> Result<Option<WebhookData>, AppError> {
    let p = ssr::principal().await?;
    if !p.allows(workbench_core::auth::Operation::SettingsManage) {
        return Ok(None);
    }
    let wb = ssr::wb()?;
    let current = wb.webhooks().get(&p).await?;
    let deliveries = wb
        .webhooks()
        .deliveries(&p)
        .await?
        .into_iter()
        .map(|d| DeliveryItem {
            id: d.id,
            subject_id: d.subject_id,
            status: d.status,
            attempts: d.attempts,
            response_status: d.response_status,
            error: d.error,
            at: d.updated_at,
        })
        .collect();
    Ok(Some(WebhookData {
        url: current.as_ref().map(|c| c.url.clone()).unwrap_or_default(),
        secret_ref: current.map(|c| c.secret_ref).unwrap_or_default(),
        secrets: wb
            .vault()
            .list(&p)
            .await?
            .into_iter()
            .map(|s| s.name)
            .collect(),
        deliveries,
        can_manage: p.allows(workbench_core::auth::Operation::SettingsManage),
    }))
}

/// Sets the webhook (an empty URL removes it).
#[server(endpoint = "save_webhook")]
pub async fn save_webhook(url: String, secret_ref: String) -> Result<(), AppError> {
    use workbench_core::notify::WebhookConfig;
    let p = ssr::principal().await?;
    let config = (!url.trim().is_empty()).then_some(WebhookConfig { url, secret_ref });
    ssr::wb()?.webhooks().set(&p, config).await?;
    Ok(())
}
