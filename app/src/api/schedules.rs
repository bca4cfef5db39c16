//! Server functions of the Callbacks page: the project's scheduled callbacks with their
//! deliveries, cancelling one, and (admins) the signing secret receivers check.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::AppError;

#[cfg(feature = "ssr")]
use crate::ssr;

/// One delivery attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallbackAttempt {
    pub attempt: i64,
    pub started_at: String,
    pub duration_ms: i64,
    pub response_status: Option<i64>,
    pub error: Option<String>,
}

/// One callback as the page shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallbackItem {
    pub id: String,
    pub method: String,
    /// As the agent wrote it: vault references as references.
    pub url: String,
    /// Pretty JSON of the agent's payload, secrets redacted.
    pub payload: String,
    pub scheduled_for: String,
    pub status: workbench_model::delivery::CallbackStatus,
    pub attempts: i64,
    pub next_attempt_at: Option<String>,
    pub last_response_status: Option<i64>,
    pub last_error: Option<String>,
    pub delivered_at: Option<String>,
    pub created_by: String,
    pub deliveries: Vec<CallbackAttempt>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallbacksData {
    pub callbacks: Vec<CallbackItem>,
    pub is_admin: bool,
}

#[server(endpoint = "callbacks_page")]
pub async fn callbacks_page() -> Result<CallbacksData, AppError> {
    let p = ssr::principal().await?;
    let wb = ssr::wb()?;
    let page = wb.schedules().page_with_deliveries(&p, None, None).await?;
    let emails = ssr::Emails::of(&wb, &p).await;
    let callbacks = page
        .data
        .into_iter()
        .map(|c| CallbackItem {
            created_by: emails.of_user(&c.created_by),
            payload: serde_json::to_string_pretty(&c.payload).unwrap_or_default(),
            status: c.status,
            deliveries: c
                .deliveries
                .unwrap_or_default()
                .into_iter()
                .map(|a| CallbackAttempt {
                    attempt: a.attempt,
                    started_at: a.started_at,
                    duration_ms: a.duration_ms,
                    response_status: a.response_status,
                    error: a.error,
                })
                .collect(),
            id: c.id,
            method: c.method,
            url: c.url,
            scheduled_for: c.scheduled_for,
            attempts: c.attempts,
            next_attempt_at: c.next_attempt_at,
            last_response_status: c.last_response_status,
            last_error: c.last_error,
            delivered_at: c.delivered_at,
        })
        .collect();
    Ok(CallbacksData {
        callbacks,
        is_admin: p.sees_project_records(),
    })
}

#[server(endpoint = "cancel_callback")]
pub async fn cancel_callback(id: String) -> Result<(), AppError> {
    let p = ssr::principal().await?;
    match ssr::wb()?.schedules().cancel(&p, &id).await? {
        workbench_core::schedule::Cancelled::Done => Ok(()),
        workbench_core::schedule::Cancelled::NotFound => {
            Err(workbench_core::Error::NotFound.into())
        }
        workbench_core::schedule::Cancelled::Finished(s) => Err(workbench_core::Error::Conflict(
            format!("this callback is already {}", s.as_str()),
        )
        .into()),
    }
}

/// The project's callback signing secret (admins), shown on request.
#[server(endpoint = "callback_signing_secret")]
pub async fn callback_signing_secret() -> Result<String, AppError> {
    let p = ssr::principal().await?;
    Ok(ssr::wb()?.schedules().signing_secret(&p).await?.to_string())
}
